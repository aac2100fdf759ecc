//! Signing in to remote servers (OAuth): the runtime's side of a remote
//! connection that needs authorization.
//!
//! - [`flow`] — the MCP authorization flow from a 401 to a stored token
//!   (rmcp's discovery, authorization request and code exchange, tightened
//!   where the spec is stricter); [`register`] chooses the client (entry >
//!   kept registration > Client ID Metadata Document > Dynamic Client
//!   Registration); [`device`] the device grant; [`callback`] the loopback
//!   redirect on a stable port.
//! - [`store`] — tokens per issuer + resource (+ account) and registrations
//!   per issuer, in the Secret Service or Steward's 0600 file store, shared
//!   by the user's workspaces; [`qwen`] reads Qwen Code's token file.
//! - [`source`] — what a connection sends: the current token, refreshed
//!   before it expires and once on a 401 (serialized across processes),
//!   with step-up scopes written down on a 403.
//! - [`http`] — the HTTP clients and token-endpoint requests.
//!
//! Who runs a sign-in: `steward auth login` (the CLI, in its own process;
//! the agent endpoint only names that command in a call's tool error). The
//! tokens land in the store and the controller is told, which reconnects
//! exactly the servers that waited.
//! Tokens and client secrets never appear in a message, a log line, a
//! status, an event, a metric or a trace.

pub mod callback;
pub mod device;
pub mod flow;
pub mod http;
pub mod qwen;
pub mod register;
pub mod source;
pub mod store;

use std::path::PathBuf;
use std::sync::LazyLock;

use serde_json::Value;
use steward_schema::resource::McpServerSpec;
use tokio::sync::broadcast;

/// The `oauth` settings of an entry that Steward reads (secrets resolved).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OAuthEntry {
    /// `oauth.enabled`: the server needs a token (no token: `AuthRequired`
    /// without trying).
    pub enabled: bool,
    /// `oauth.clientId`: a client registered by hand.
    pub client_id: Option<String>,
    /// `oauth.clientSecret` (written as `${secret:NAME}`).
    pub client_secret: Option<String>,
    /// `oauth.redirectUri`: the loopback redirect, pinned.
    pub redirect_uri: Option<String>,
    /// `oauth.account`: which of the user's accounts ("" for the default).
    pub account: String,
}

impl std::fmt::Debug for OAuthEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthEntry")
            .field("enabled", &self.enabled)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.is_some())
            .field("redirect_uri", &self.redirect_uri)
            .field("account", &self.account)
            .finish()
    }
}

impl OAuthEntry {
    /// The settings of `spec` (its `oauth` object, if any).
    pub fn of(spec: &McpServerSpec) -> OAuthEntry {
        let Some(oauth) = &spec.oauth else {
            return OAuthEntry::default();
        };
        let string = |key: &str| {
            oauth
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        OAuthEntry {
            enabled: oauth.get("enabled").and_then(Value::as_bool) == Some(true),
            client_id: string("clientId"),
            client_secret: string("clientSecret"),
            redirect_uri: string("redirectUri"),
            account: string("account").unwrap_or_default(),
        }
    }
}

/// HOME_DIR of this process (`$QWEN_HOME`, else `~/.qwen`), resolved the
/// way `steward run` resolves it. Unit tests get none: they must never
/// read the developer's real HOME_DIR.
pub fn home_dir() -> Option<PathBuf> {
    if cfg!(test) {
        return None;
    }
    let env = crate::support::paths::process_env();
    match env.get("QWEN_HOME").filter(|v| !v.is_empty()) {
        Some(home) => Some(PathBuf::from(home)),
        None => env
            .get("HOME")
            .map(|home| std::path::Path::new(home).join(".qwen")),
    }
}

/// The message of a server that needs a sign-in: what happened, and the
/// command that signs in.
pub fn auth_required_message(name: &str, what: &str) -> String {
    format!("{what}; sign in with `steward auth login {name}`")
}

/// What the runtime tells the controller about sign-ins, for events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A refresh failed; `needs_user`: only a new sign-in helps.
    RefreshFailed {
        server: String,
        message: String,
        needs_user: bool,
    },
}

static NOTICES: LazyLock<broadcast::Sender<Notice>> = LazyLock::new(|| broadcast::channel(64).0);

/// Sends `notice` to whoever listens (the controller's event loop).
pub fn notify(notice: Notice) {
    let _ = NOTICES.send(notice);
}

/// The sign-in notices of this process from now on.
pub fn notices() -> broadcast::Receiver<Notice> {
    NOTICES.subscribe()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use steward_schema::resource::McpTransport;

    use super::*;

    #[test]
    fn the_entry_is_read_and_its_secret_never_shown() {
        let spec = McpServerSpec {
            transport: McpTransport::Http,
            oauth: json!({"enabled": true, "clientId": "c", "clientSecret": "s3cr3t",
                          "redirectUri": "http://127.0.0.1:9/cb", "account": "work"})
            .as_object()
            .cloned(),
            ..Default::default()
        };
        let entry = OAuthEntry::of(&spec);
        assert!(entry.enabled);
        assert_eq!(entry.client_id.as_deref(), Some("c"));
        assert_eq!(entry.account, "work");
        assert!(!format!("{entry:?}").contains("s3cr3t"));
        assert_eq!(
            OAuthEntry::of(&McpServerSpec::default()),
            OAuthEntry::default()
        );
        assert_eq!(
            auth_required_message("gh", "the server asks for a sign-in (HTTP 401)"),
            "the server asks for a sign-in (HTTP 401); sign in with `steward auth login gh`"
        );
    }
}
