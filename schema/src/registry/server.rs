//! What an MCP Registry serves (`/v0.1`, `server.json` schema `2025-12-11`):
//! a server's versions, its packages and remotes, the inputs they take, and
//! the registry's own metadata (status, latest). Read leniently — unknown
//! fields are ignored and every list may be absent — because registries
//! other than the official one (ToolHive's, private mirrors) add and omit
//! fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The official registry's base URL (the default of `steward.registries`).
pub const OFFICIAL_REGISTRY: &str = "https://registry.modelcontextprotocol.io";

/// The `_meta` key of the registry's own metadata.
pub const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

/// The `_meta` key under which a publisher's metadata is kept.
pub const PUBLISHER_META: &str = "io.modelcontextprotocol.registry/publisher-provided";

/// `GET /v0.1/servers`: one page of servers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerList {
    #[serde(default)]
    pub servers: Vec<ServerResponse>,
    #[serde(default)]
    pub metadata: Option<ListMetadata>,
}

/// The page's metadata: the cursor of the next page, if any.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMetadata {
    #[serde(default)]
    pub next_cursor: Option<String>,
    #[serde(default)]
    pub count: Option<u64>,
}

/// One version of one server, as the registry serves it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerResponse {
    pub server: ServerDetail,
    #[serde(rename = "_meta", default)]
    pub meta: Map<String, Value>,
}

/// The registry's lifecycle status of a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Active,
    Deprecated,
    Deleted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Deprecated => "deprecated",
            Status::Deleted => "deleted",
        }
    }
}

/// `_meta["io.modelcontextprotocol.registry/official"]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfficialMeta {
    #[serde(default)]
    pub status: Option<Status>,
    #[serde(default)]
    pub status_message: Option<String>,
    #[serde(default)]
    pub published_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub is_latest: Option<bool>,
}

impl ServerResponse {
    /// The registry's metadata of this version (empty when it has none, or
    /// when what it has cannot be read: a status we do not know is "active").
    pub fn official(&self) -> OfficialMeta {
        self.meta
            .get(OFFICIAL_META)
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    /// The version's status (`active` when the registry says nothing).
    pub fn status(&self) -> Status {
        self.official().status.unwrap_or(Status::Active)
    }
}

/// `server.json`: a server's description, packages and remotes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerDetail {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub website_url: Option<String>,
    #[serde(default)]
    pub repository: Option<Value>,
    #[serde(default)]
    pub packages: Vec<Package>,
    #[serde(default)]
    pub remotes: Vec<Transport>,
    #[serde(rename = "_meta", default)]
    pub meta: Map<String, Value>,
}

/// A package the server can be run from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// `npm`, `pypi`, `nuget`, `oci`, `mcpb`, …
    pub registry_type: String,
    #[serde(default)]
    pub registry_base_url: Option<String>,
    /// A package name, an image reference, or (MCPB) a download URL.
    pub identifier: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub file_sha256: Option<String>,
    #[serde(default)]
    pub runtime_hint: Option<String>,
    #[serde(default)]
    pub transport: Transport,
    #[serde(default)]
    pub runtime_arguments: Vec<Argument>,
    #[serde(default)]
    pub package_arguments: Vec<Argument>,
    #[serde(default)]
    pub environment_variables: Vec<KeyValueInput>,
}

/// A transport (of a package) or a remote: `stdio`, `streamable-http`,
/// `sse`, with its URL template, headers and variables.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transport {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: Vec<KeyValueInput>,
    #[serde(default)]
    pub variables: BTreeMap<String, Input>,
}

/// A value the user provides or the publisher fixes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub is_required: bool,
    /// `string` (default), `number`, `boolean`, `filepath`.
    #[serde(default)]
    pub format: Option<String>,
    /// The publisher's value; `{name}` is replaced by the variable `name`.
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub is_secret: bool,
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub placeholder: Option<String>,
    #[serde(default)]
    pub choices: Option<Vec<String>>,
    #[serde(default)]
    pub variables: BTreeMap<String, Input>,
}

/// `positional` or `named`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgumentKind {
    #[default]
    Positional,
    Named,
}

/// A command-line argument of the runtime or the package.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Argument {
    #[serde(rename = "type", default)]
    pub kind: ArgumentKind,
    /// A named argument's flag, with its dashes (`--port`).
    #[serde(default)]
    pub name: Option<String>,
    /// A positional argument's label.
    #[serde(default)]
    pub value_hint: Option<String>,
    #[serde(default)]
    pub is_repeated: bool,
    #[serde(flatten)]
    pub input: Input,
}

/// An environment variable or a header.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KeyValueInput {
    pub name: String,
    #[serde(flatten)]
    pub input: Input,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_registry_page_reads_leniently() {
        let page: ServerList = serde_json::from_value(json!({
            "servers": [{
                "server": {
                    "name": "io.github.x/weather", "description": "d", "version": "1.2.3",
                    "unknownField": 1,
                    "packages": [{
                        "registryType": "npm", "identifier": "@x/weather", "version": "1.2.3",
                        "transport": {"type": "stdio"},
                        "packageArguments": [
                            {"type": "named", "name": "--mode", "default": "local", "choices": ["local", "proxy"]},
                            {"type": "positional", "valueHint": "dir", "isRepeated": true}
                        ],
                        "environmentVariables": [{"name": "KEY", "isSecret": true, "isRequired": true}]
                    }],
                    "remotes": [{"type": "streamable-http", "url": "https://x/{region}/mcp",
                                 "variables": {"region": {"default": "eu"}}}]
                },
                "_meta": {OFFICIAL_META: {"status": "deprecated", "statusMessage": "use v2", "isLatest": true}}
            }],
            "metadata": {"nextCursor": "abc", "count": 1}
        }))
        .unwrap();
        let first = &page.servers[0];
        assert_eq!(first.status(), Status::Deprecated);
        assert_eq!(first.official().status_message.as_deref(), Some("use v2"));
        let p = &first.server.packages[0];
        assert_eq!(p.package_arguments[0].kind, ArgumentKind::Named);
        assert_eq!(
            p.package_arguments[0].input.choices.as_ref().unwrap().len(),
            2
        );
        assert!(p.package_arguments[1].is_repeated);
        assert!(p.environment_variables[0].input.is_secret);
        assert_eq!(
            first.server.remotes[0].variables["region"]
                .default
                .as_deref(),
            Some("eu")
        );
        assert_eq!(page.metadata.unwrap().next_cursor.as_deref(), Some("abc"));
    }

    #[test]
    fn an_unknown_or_missing_status_is_active() {
        let r: ServerResponse =
            serde_json::from_value(json!({"server": {"name": "a/b", "version": "1"}})).unwrap();
        assert_eq!(r.status(), Status::Active);
        let r: ServerResponse = serde_json::from_value(
            json!({"server": {"name": "a/b", "version": "1"}, "_meta": {OFFICIAL_META: {"status": "weird"}}}),
        )
        .unwrap();
        assert_eq!(r.status(), Status::Active);
    }
}
