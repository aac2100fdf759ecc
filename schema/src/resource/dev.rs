//! The `dev` parts of the resources: an entry's `dev` normalized
//! ([`DevSpec`], in a server's `spec`) and what it does (`status.dev`,
//! [`DevStatus`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `dev` of a server, normalized: the source files whose change reloads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevSpec {
    /// Globs relative to `cwd` (validated), as written.
    pub watch: Vec<String>,
    /// Shell command run before the server is replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Absolute directory the globs are relative to and the build runs in.
    pub cwd: String,
}

/// What `dev` does for a server (`status.dev`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevStatus {
    /// The watched files are watched now.
    pub watching: bool,
    /// Why they are not, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many files the globs match now.
    pub files: u64,
    /// A build runs now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub building: bool,
    /// The last build that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_build: Option<LastBuild>,
    /// Times the server was replaced for a change of its source.
    pub reloads: u64,
}

/// How a build ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BuildResult {
    Succeeded,
    /// It exited with a code other than 0, was killed, or could not start.
    Failed,
    /// It ran longer than the entry's `timeout` and was stopped.
    TimedOut,
}

/// The last build of a `dev` server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastBuild {
    pub result: BuildResult,
    pub duration_ms: u64,
    /// RFC 3339 time it ended.
    pub at: String,
    /// Its last lines of output (stdout and stderr).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tail: Vec<String>,
}
