//! What an export does with a `${secret:NAME}` reference: the value lives
//! in the user's keyring (or Steward's file store), never in a manifest, so
//! the reference becomes one Secret stub named after NAME, shared by every
//! server that uses it, and the `kubectl create secret` line reads the value
//! from the keyring (`secret-tool lookup`) without printing it.

use steward_schema::secrets;

/// The secret a value written as `${secret:NAME}` (alone, or after a
/// header scheme such as `Bearer `) refers to.
pub fn secret_of(written: &str) -> Option<&str> {
    match secrets::names_in(written)[..] {
        [name] if written.trim_end().ends_with(&secrets::reference(name)) => Some(name),
        _ => None,
    }
}

/// The shell expression that reads secret `name` from the keyring.
pub fn lookup(name: &str) -> String {
    format!("\"$(secret-tool lookup service steward name {name})\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_reference_names_its_secret() {
        assert_eq!(secret_of("${secret:gh}"), Some("gh"));
        assert_eq!(secret_of("Bearer ${secret:gh}"), Some("gh"));
        assert_eq!(secret_of("${secret:a}${secret:b}"), None);
        assert_eq!(secret_of("${GH}"), None);
    }
}
