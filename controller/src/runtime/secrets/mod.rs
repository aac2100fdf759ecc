//! Secrets: where the values of `${secret:NAME}` references live, and the
//! spec a server is started with once its references are replaced.
//!
//! - **Backends** ([`SecretBackend`]): the desktop keyring through the
//!   freedesktop Secret Service ([`service`]: items with the attributes
//!   `service=steward`, `name=NAME`, so `secret-tool store … service steward
//!   name NAME` stores one), or, only when no Secret Service is on the
//!   session bus at all (no bus, or nobody owns or can activate
//!   `org.freedesktop.secrets`), Steward's own store
//!   `HOME_DIR/steward/secrets.json` ([`file`]). A keyring that is there but
//!   locked or failing is an error ([`SecretError::Unavailable`]), never a
//!   reason to read the file store instead. [`open`] decides, each time.
//! - **The book** ([`book::SecretBook`]): what the controller last looked
//!   up for each name its desired state references. Reconcile reads it (never
//!   waits on a keyring); it is refreshed at start, on `steward reload`, when
//!   `steward secret set|rm` says a name changed, and for names a config edit
//!   newly references.
//! - **Resolution** ([`resolve`]): the spec as the server gets it, and the
//!   fingerprint of that effective spec, which decides whether a running
//!   instance is outdated — so a rotated value restarts exactly the servers
//!   that use it, and moving a literal into a secret (same effective value)
//!   restarts nothing. The desired spec, its hashes, status and everything
//!   persisted keep the reference; values live in memory only, and
//!   [`crate::support::scrub`] takes them back out of any message.

pub mod book;
pub mod file;
pub mod service;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use steward_schema::desired::hash_in_force;

use steward_schema::resource::{LspServerSpec, McpServerSpec};
use steward_schema::secrets as refs;

use self::book::{Lookup, SecretBook};

/// How long one look-up (or the choice of backend) may take.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// A secret's value: never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: String) -> Self {
        SecretValue(value)
    }

    /// The value, for the one place that needs it (the server's spec).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// Which store answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// The desktop keyring (freedesktop Secret Service).
    SecretService,
    /// `HOME_DIR/steward/secrets.json`.
    File,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::SecretService => "secret-service",
            BackendKind::File => "file",
        }
    }
}

/// Why a secret could not be read, stored or removed. Messages read after
/// "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The keyring is there but locked: nothing can be read until unlocked.
    #[error(
        "read the keyring: it is locked; unlock it (log in to the desktop session, or run `secret-tool search --unlock service steward`), then run `steward reload`"
    )]
    Locked,
    /// The Secret Service (or the file store) failed.
    #[error("{0}")]
    Unavailable(String),
    /// A name that is not `[A-Za-z0-9_.-]+`.
    #[error("use the secret name {0:?}: a name is letters, digits, '_', '.' or '-'")]
    BadName(String),
}

/// A store of secrets by name.
#[async_trait::async_trait]
pub trait SecretBackend: Send + Sync {
    fn kind(&self) -> BackendKind;
    /// The value of `name`, `None` when it is not set.
    async fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError>;
    async fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError>;
    /// Whether there was one to remove.
    async fn remove(&self, name: &str) -> Result<bool, SecretError>;
    /// The names stored.
    async fn names(&self) -> Result<Vec<String>, SecretError>;
}

/// Which collection of items a store holds: the user's secrets
/// (`${secret:NAME}`), or the OAuth tokens and client registrations of
/// remote servers (`runtime::mcp::remote::oauth`). Both live in the same
/// backends, each on its own shelf, so neither lists the other's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shelf {
    Secrets,
    OAuth,
}

impl Shelf {
    /// The Secret Service `service` attribute of the shelf's items.
    pub fn service(self) -> &'static str {
        match self {
            Shelf::Secrets => "steward",
            Shelf::OAuth => "steward-oauth",
        }
    }

    /// The label a keyring shows for item `name`.
    fn label(self, name: &str) -> String {
        match self {
            Shelf::Secrets => format!("Steward secret {name}"),
            Shelf::OAuth => format!("Steward sign-in {name}"),
        }
    }

    /// The file store's name under `HOME_DIR/steward/`.
    fn file_name(self) -> &'static str {
        match self {
            Shelf::Secrets => "secrets.json",
            Shelf::OAuth => "oauth.json",
        }
    }
}

/// The store of secrets for `home_dir`: the Secret Service when one is on
/// the session bus, else the file store (see the module docs).
pub async fn open(home_dir: &Path) -> Box<dyn SecretBackend> {
    open_shelf(home_dir, Shelf::Secrets).await
}

/// The store of `shelf` for `home_dir`, chosen as [`open`] chooses.
pub async fn open_shelf(home_dir: &Path, shelf: Shelf) -> Box<dyn SecretBackend> {
    match tokio::time::timeout(LOOKUP_TIMEOUT, service::SecretService::find(shelf)).await {
        Ok(Some(found)) => Box::new(found),
        _ => Box::new(file::FileStore::new(shelf_file_path(home_dir, shelf))),
    }
}

/// `HOME_DIR/steward/secrets.json`.
pub fn file_store_path(home_dir: &Path) -> PathBuf {
    shelf_file_path(home_dir, Shelf::Secrets)
}

/// The file store of `shelf`: `HOME_DIR/steward/secrets.json` or
/// `HOME_DIR/steward/oauth.json` (0600 in the 0700 directory).
pub fn shelf_file_path(home_dir: &Path, shelf: Shelf) -> PathBuf {
    home_dir.join("steward").join(shelf.file_name())
}

/// Why a server's secrets cannot be given to it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// Not looked up yet (a reference a config edit just added).
    Pending,
    /// These names are not set.
    Missing(Vec<String>),
    /// The store could not be read (the message says what to do).
    Unavailable(String),
}

/// A spec ready to run: the resolved spec (the desired one when it has no
/// reference) and the fingerprint of what the server gets.
#[derive(Debug, Clone)]
pub struct Resolved<T> {
    pub spec: std::sync::Arc<T>,
    /// The `configHash` of the resolved spec: equal for equal effective
    /// values, whether written literally or as references.
    pub effective_hash: String,
}

/// What `book` knows of `names`: every value, or why not.
fn values_of(
    book: &SecretBook,
    names: &std::collections::BTreeSet<String>,
) -> Result<BTreeMap<String, SecretValue>, Unresolved> {
    let mut values = BTreeMap::new();
    let mut missing = Vec::new();
    let mut pending = false;
    for name in names {
        match book.get(name) {
            Some(Lookup::Found(v)) => {
                values.insert(name.clone(), v);
            }
            Some(Lookup::Missing) => missing.push(name.clone()),
            Some(Lookup::Unavailable(message)) => return Err(Unresolved::Unavailable(message)),
            None => pending = true,
        }
    }
    if !missing.is_empty() {
        Err(Unresolved::Missing(missing))
    } else if pending {
        Err(Unresolved::Pending)
    } else {
        Ok(values)
    }
}

/// The MCP spec `spec` as the server gets it, from what `book` knows.
pub fn resolve_mcp(
    book: &SecretBook,
    spec: &std::sync::Arc<McpServerSpec>,
    workspace: &Path,
) -> Result<Resolved<McpServerSpec>, Unresolved> {
    let names = refs::mcp_names(spec);
    if names.is_empty() {
        return Ok(Resolved {
            spec: spec.clone(),
            effective_hash: spec.config_hash.clone(),
        });
    }
    let values = values_of(book, &names)?;
    let value_of = |n: &str| values.get(n).map(|v| v.expose().to_owned());
    let resolved = refs::resolve_mcp(spec, &value_of).map_err(|n| Unresolved::Missing(vec![n]))?;
    Ok(Resolved {
        effective_hash: hash_in_force(
            &steward_schema::load::mcp_config_hash(&resolved, workspace),
            resolved.resolved_sandbox.as_ref(),
        ),
        spec: std::sync::Arc::new(resolved),
    })
}

/// The language server spec `spec` of `name` as the server gets it.
pub fn resolve_lsp(
    book: &SecretBook,
    name: &str,
    spec: &std::sync::Arc<LspServerSpec>,
) -> Result<Resolved<LspServerSpec>, Unresolved> {
    let names = refs::lsp_names(spec);
    if names.is_empty() {
        return Ok(Resolved {
            spec: spec.clone(),
            effective_hash: spec.config_hash.clone(),
        });
    }
    let values = values_of(book, &names)?;
    let value_of = |n: &str| values.get(n).map(|v| v.expose().to_owned());
    let resolved = refs::resolve_lsp(spec, &value_of).map_err(|n| Unresolved::Missing(vec![n]))?;
    Ok(Resolved {
        effective_hash: hash_in_force(
            &steward_schema::load::lsp_config_hash(name, &resolved),
            resolved.resolved_sandbox.as_ref(),
        ),
        spec: std::sync::Arc::new(resolved),
    })
}

/// The `Blocked` message of a server whose secrets are missing: the
/// command that sets each.
pub fn missing_message(names: &[String]) -> String {
    let commands: Vec<String> = names
        .iter()
        .map(|n| format!("`steward secret set {n}`"))
        .collect();
    let (what, verb) = if names.len() == 1 {
        ("secret", "is")
    } else {
        ("secrets", "are")
    };
    format!(
        "{what} {} {verb} not set: run {}",
        names.join(", "),
        commands.join(", then ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_never_debug_printed() {
        let v = SecretValue::new("s3cr3t".to_owned());
        assert!(!format!("{v:?}").contains("s3cr3t"));
        assert_eq!(v.expose(), "s3cr3t");
    }

    #[test]
    fn the_missing_message_names_the_command() {
        assert_eq!(
            missing_message(&["github-token".to_owned()]),
            "secret github-token is not set: run `steward secret set github-token`"
        );
    }
}
