//! Qwen Code's token store, read for parity and never written: a token Qwen
//! Code stored for a server (after `/mcp` authentication) is used while it
//! is valid, so one sign-in in Qwen Code serves Steward too.
//!
//! - **Store.** `HOME_DIR/mcp-oauth-tokens.json`: a JSON array of
//!   `{serverName, token: {accessToken, tokenType, refreshToken?, scope?,
//!   expiresAt?}, clientId?, tokenUrl?, mcpServerUrl?, updatedAt}` (times in
//!   ms since the epoch). (Qwen Code's encrypted store, chosen by
//!   `QWEN_CODE_FORCE_ENCRYPTED_FILE_STORAGE`, is not read.)
//! - **Expiry.** A token is expired 5 minutes before its `expiresAt`, as
//!   Qwen Code counts it. An expired one is not refreshed here: a rotating
//!   refresh token used by Steward would leave Qwen Code's copy dead, and
//!   writing Qwen Code's file is not Steward's to do. `steward auth login`
//!   signs in for Steward's own store instead.
//! - **Never logged.** Tokens appear in no message, log line or `Debug` output.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Number, Value};

/// The token store's file name under HOME_DIR.
pub const TOKENS_FILE: &str = "mcp-oauth-tokens.json";
/// A token this close to its expiry counts as expired (Qwen Code: 5 min).
const EXPIRY_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The token store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum QwenStoreError {
    #[error("read Qwen Code's OAuth token store {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("parse Qwen Code's OAuth token store {}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// One entry of the store (the fields Steward reads).
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    pub server_name: String,
    pub token: Token,
}

/// A stored token (Qwen Code's `OAuthToken`).
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    pub access_token: String,
    /// Milliseconds since the epoch.
    #[serde(default)]
    pub expires_at: Option<Number>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("server_name", &self.server_name)
            .field("expires_at", &self.token.expires_at)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// Whether the token is expired (or about to be) at `now_ms`. A token
    /// without an expiry never expires.
    pub fn expired(&self, now_ms: u64) -> bool {
        let margin = EXPIRY_MARGIN.as_millis() as f64;
        self.expires_at
            .as_ref()
            .and_then(Number::as_f64)
            .is_some_and(|at| now_ms as f64 + margin >= at)
    }
}

/// The credential Qwen Code stored for `server` in `HOME_DIR` (the last
/// one, as Qwen Code's map keeps the last). Entries that are not
/// credentials are skipped.
pub fn credential(home_dir: &Path, server: &str) -> Result<Option<Credential>, QwenStoreError> {
    let path = home_dir.join(TOKENS_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(QwenStoreError::Read { path, source }),
    };
    let entries: Vec<Value> =
        serde_json::from_str(&text).map_err(|source| QwenStoreError::Parse { path, source })?;
    Ok(entries
        .into_iter()
        .rev()
        .filter_map(|entry| serde_json::from_value::<Credential>(entry).ok())
        .find(|credential| credential.server_name == server))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const HOUR_MS: u64 = 3_600_000;

    #[test]
    fn expiry_counts_five_minutes_early_and_no_expiry_never_expires() {
        let now = 1_000 * HOUR_MS;
        let token = |expires_at: Option<u64>| Token {
            access_token: String::new(),
            expires_at: expires_at.map(Number::from),
        };
        assert!(token(Some(now - 1)).expired(now));
        assert!(token(Some(now + 4 * 60_000)).expired(now));
        assert!(!token(Some(now + 6 * 60_000)).expired(now));
        assert!(!token(None).expired(now));
    }

    #[test]
    fn the_last_entry_of_a_server_is_read_and_others_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let entries = json!([
            {"serverName": "mine", "token": {"accessToken": "old"}},
            {"not": "a credential"},
            {"serverName": "mine", "token": {"accessToken": "new", "expiresAt": 5}},
            {"serverName": "other", "token": {"accessToken": "o"}},
        ]);
        fs::write(dir.path().join(TOKENS_FILE), entries.to_string()).unwrap();
        let found = credential(dir.path(), "mine").unwrap().unwrap();
        assert_eq!(found.token.access_token, "new");
        assert!(!format!("{found:?}").contains("new"));
        assert!(credential(dir.path(), "absent").unwrap().is_none());
        let empty = tempfile::tempdir().unwrap();
        assert!(credential(empty.path(), "mine").unwrap().is_none());
    }
}
