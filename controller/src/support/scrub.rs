//! The last line of defence for `${secret:NAME}` values: every secret value
//! the controller holds is remembered here (in memory only), and text that
//! leaves through a channel Steward writes — its log lines, the messages of
//! failed starts and exits — is passed through [`scrub`], which puts the
//! reference back in place of any value it finds.
//!
//! The values reach the servers that use them and nothing else; this only
//! guards against a message that quotes what a server was given (a command
//! not found, a URL in a transport error). Values shorter than
//! [`MIN_LEN`] are not searched for (they would match everywhere).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::RwLock;

/// Shorter values are not replaced.
pub const MIN_LEN: usize = 4;

/// Value → name, longest value first when scrubbing.
static KNOWN: RwLock<Vec<(String, String)>> = RwLock::new(Vec::new());

/// Remember the values of `secrets` (name → value) in place of what was
/// remembered before.
pub fn remember(secrets: &BTreeMap<String, String>) {
    let mut known: Vec<(String, String)> = secrets
        .iter()
        .filter(|(_, v)| v.len() >= MIN_LEN)
        .map(|(name, value)| (value.clone(), name.clone()))
        .collect();
    known.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
    if let Ok(mut slot) = KNOWN.write() {
        *slot = known;
    }
}

/// `text` with every remembered value replaced by its `${secret:NAME}`.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let Ok(known) = KNOWN.read() else {
        return Cow::Borrowed(text);
    };
    let mut out = Cow::Borrowed(text);
    for (value, name) in known.iter() {
        if out.contains(value.as_str()) {
            out =
                Cow::Owned(out.replace(value.as_str(), &steward_schema::secrets::reference(name)));
        }
    }
    out
}

/// [`scrub`] of bytes that are UTF-8 (a log line); other bytes as they are.
pub fn scrub_bytes(bytes: Vec<u8>) -> Vec<u8> {
    match std::str::from_utf8(&bytes) {
        Ok(text) => match scrub(text) {
            Cow::Borrowed(_) => bytes,
            Cow::Owned(text) => text.into_bytes(),
        },
        Err(_) => bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_values_are_replaced_by_their_reference() {
        remember(&BTreeMap::from([
            ("gh".to_owned(), "ghp_abcdef".to_owned()),
            ("short".to_owned(), "ab".to_owned()),
        ]));
        assert_eq!(
            scrub("token ghp_abcdef in https://h/ghp_abcdef, ab"),
            "token ${secret:gh} in https://h/${secret:gh}, ab"
        );
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
        remember(&BTreeMap::new());
        assert_eq!(scrub("ghp_abcdef"), "ghp_abcdef");
    }
}
