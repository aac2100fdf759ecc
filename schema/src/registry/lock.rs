//! The lock file `steward add` writes beside the file it adds an entry to
//! (`.mcp.json` → `.mcp.lock.json`, `settings.json` → `settings.lock.json`):
//! for each server added from a registry, what it was resolved from and to,
//! so that `outdated` and `update` know what is pinned, and a reader can see
//! what runs without asking the registry again.
//!
//! ```json
//! {
//!   "lockfileVersion": 1,
//!   "servers": {
//!     "weather": {
//!       "registry": "https://registry.modelcontextprotocol.io",
//!       "name": "io.github.example/weather",
//!       "version": "1.2.3",
//!       "status": "active",
//!       "package": {"registryType": "npm", "registryBaseUrl": "https://registry.npmjs.org",
//!                   "identifier": "@example/weather", "version": "1.2.3",
//!                   "integrity": "sha512-…", "resolved": "https://registry.npmjs.org/…tgz"},
//!       "command": "npx", "args": ["--yes", "@example/weather@1.2.3"],
//!       "env": {"WEATHER_KEY": "${secret:weather.WEATHER_KEY}"},
//!       "secrets": {"WEATHER_KEY": "weather.WEATHER_KEY"},
//!       "given": {"units": ["metric"]},
//!       "sandbox": "none", "sandboxFrom": "default",
//!       "entrySha256": "…", "resolvedAt": "2026-01-01T00:00:00Z"
//!     }
//!   }
//! }
//! ```
//! `integrity` is the artefact's digest as its registry states it (npm's
//! `dist.integrity`, the index's sha256 of the wheel, NuGet's
//! `packageHash`, the image digest, the bundle's `fileSha256`);
//! `entrySha256` is the sha256 of the entry as written (canonical JSON),
//! so a hand edit of the entry is noticed; `given` holds the values the
//! user gave (`--set`, or at the prompt), reused by `update` — never a
//! secret's value, only its name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::canonical;

/// The format's version.
pub const LOCK_VERSION: u32 = 1;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockFile {
    pub lockfile_version: u32,
    #[serde(default)]
    pub servers: BTreeMap<String, Locked>,
}

impl Default for LockFile {
    fn default() -> Self {
        LockFile {
            lockfile_version: LOCK_VERSION,
            servers: BTreeMap::new(),
        }
    }
}

/// One server's resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Locked {
    /// The registry's base URL.
    pub registry: String,
    /// The server's name in the registry.
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<LockedPackage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<LockedRemote>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Key → secret name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
    /// Key → the values the user gave.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub given: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
    /// `publisher`, `default`, or `none` (no sandbox applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_from: Option<String>,
    pub entry_sha256: String,
    pub resolved_at: String,
}

/// The package a server was resolved from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockedPackage {
    pub registry_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_base_url: Option<String>,
    pub identifier: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<String>,
    /// The file the integrity is of (tarball, wheel, bundle), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// PyPI: the console script run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_point: Option<String>,
}

/// The remote a server was resolved to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockedRemote {
    #[serde(rename = "type")]
    pub kind: String,
    pub url: String,
}

/// Why a lock file cannot be read. Messages read after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error("read the lock file: {0}")]
    Syntax(String),
    #[error(
        "read the lock file: its lockfileVersion is {0}, and this steward reads version {LOCK_VERSION}"
    )]
    Version(u32),
}

/// Reads a lock file's text (empty text: no lock yet).
pub fn parse(text: &str) -> Result<LockFile, LockError> {
    if text.trim().is_empty() {
        return Ok(LockFile::default());
    }
    let file: LockFile =
        serde_json::from_str(text).map_err(|e| LockError::Syntax(e.to_string()))?;
    if file.lockfile_version != LOCK_VERSION {
        return Err(LockError::Version(file.lockfile_version));
    }
    Ok(file)
}

/// The text of a lock file.
pub fn render(file: &LockFile) -> String {
    let mut text = serde_json::to_string_pretty(file).expect("a lock file serializes");
    text.push('\n');
    text
}

/// The digest of an entry as written (`entrySha256`).
pub fn entry_sha256(entry: &Map<String, Value>) -> String {
    canonical::hash_value(&Value::Object(entry.clone()))
}

/// The lock file's name beside `file_name` (`.mcp.json` → `.mcp.lock.json`).
pub fn lock_name(file_name: &str) -> String {
    match file_name.strip_suffix(".json") {
        Some(stem) => format!("{stem}.lock.json"),
        None => format!("{file_name}.lock.json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_lock_file_round_trips_and_names_follow_their_file() {
        let mut file = LockFile::default();
        file.servers.insert(
            "w".into(),
            Locked {
                registry: "https://r".into(),
                name: "io.x/w".into(),
                version: "1.0.0".into(),
                status: Some("active".into()),
                package: Some(LockedPackage {
                    registry_type: "npm".into(),
                    registry_base_url: None,
                    identifier: "w".into(),
                    version: Some("1.0.0".into()),
                    integrity: Some("sha512-x".into()),
                    resolved: None,
                    entry_point: None,
                }),
                remote: None,
                command: Some("npx".into()),
                args: vec!["--yes".into(), "w@1.0.0".into()],
                url: None,
                env: BTreeMap::new(),
                headers: BTreeMap::new(),
                secrets: BTreeMap::from([("K".into(), "w.K".into())]),
                given: BTreeMap::new(),
                sandbox: Some(json!("none")),
                sandbox_from: Some("default".into()),
                entry_sha256: "abc".into(),
                resolved_at: "2026-01-01T00:00:00Z".into(),
            },
        );
        let text = render(&file);
        assert_eq!(parse(&text).unwrap(), file);
        assert_eq!(parse("").unwrap(), LockFile::default());
        assert!(matches!(
            parse("{\"lockfileVersion\": 9}"),
            Err(LockError::Version(9))
        ));
        assert!(matches!(parse("{"), Err(LockError::Syntax(_))));
        assert_eq!(lock_name(".mcp.json"), ".mcp.lock.json");
        assert_eq!(lock_name("settings.json"), "settings.lock.json");
    }

    #[test]
    fn the_entry_digest_ignores_key_order() {
        let a = json!({"command": "x", "args": ["1"]});
        let b = json!({"args": ["1"], "command": "x"});
        assert_eq!(
            entry_sha256(a.as_object().unwrap()),
            entry_sha256(b.as_object().unwrap())
        );
    }
}
