//! The workspace's MCP servers as ToolHive operator resources: a pure
//! function from normalized specs (and known tool lists) to documents and
//! refusals.
//!
//! One `MCPGroup` holds every exported server; one `VirtualMCPServer` over
//! it prefixes tools with `{workload}__`, so agents keep the `server__tool`
//! names `steward mcp` gives them. Stdio servers become `MCPServer`s (they
//! need a container image: `docker run` gives one, `npx`/`uvx` need
//! `--image`), remote ones `MCPServerEntry`s (or `MCPRemoteProxy`s). Values
//! that are secret — a `${VAR}` reference, a credential-looking env name, any
//! header — go to `Secret` stubs without data, one per value (`secrets[]` is
//! a list-map keyed by the Secret's name, so one Secret cannot back two
//! variables of a server), with the `kubectl create secret` line to fill
//! them; the value itself is never written. What ToolHive cannot express is
//! either refused (the server is left out, with the reason and what to do)
//! or dropped with a comment saying so.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use steward_schema::admission::Blocked;

use super::keyring;

mod launch;
mod oauth;
mod profile;
mod remote;

use launch::*;
pub use oauth::{AuthServer, signs_in};
use profile::permission_profile;
use remote::*;
use steward_schema::redact;
use steward_schema::resource::{McpServerSpec, McpTransport};

/// The API version of every ToolHive document written.
pub const API_VERSION: &str = "toolhive.stacklok.dev/v1beta1";
/// The annotation that keeps a server's original name.
pub const SERVER_ANNOTATION: &str = "steward.dev/server";
/// ToolHive derives Service names (`mcp-<name>-proxy`) that must stay DNS
/// labels: resource names are kept to this length.
pub const MAX_NAME: usize = 46;
/// How `steward mcp` names a tool (`server__tool`), reproduced by the
/// VirtualMCPServer's prefix strategy.
const PREFIX_FORMAT: &str = "{workload}__";

/// What the export is asked to do, beyond the servers.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `metadata.namespace` of every document (none: the current one).
    pub namespace: Option<String>,
    /// The MCPGroup's and the VirtualMCPServer's name (already a DNS label).
    pub group: String,
    /// `--image NAME=REF`: the container image of a stdio server.
    pub images: BTreeMap<String, String>,
    /// Export blocked servers too.
    pub include_blocked: bool,
    /// `incomingAuth: anonymous` instead of OIDC.
    pub anonymous: bool,
    /// Remote servers as `MCPRemoteProxy` instead of `MCPServerEntry`.
    pub remote_proxy: bool,
    /// The source of tool lists that was asked (none: none could be), for
    /// the refusal of an `excludeTools` whose tool list is unknown.
    pub tools_asked: Option<ToolSource>,
}

/// Where a server's tool list was read, as the output says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSource {
    /// The running controller's connection to the server (`steward tools`).
    Controller,
    /// What the server offered the last time it ran with this
    /// configuration (`catalogCache.json`), when no controller runs.
    CatalogCache,
}

impl std::fmt::Display for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ToolSource::Controller => "the running controller",
            ToolSource::CatalogCache => "the catalog cache (the server's last run)",
        })
    }
}

/// A server's tool list, and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolList {
    pub tools: Vec<String>,
    pub source: ToolSource,
}

/// One MCP server of the desired state.
#[derive(Debug, Clone, Copy)]
pub struct Server<'a> {
    pub name: &'a str,
    pub spec: &'a McpServerSpec,
    /// Admission's verdict (`None`: admitted).
    pub blocked: Option<&'a Blocked>,
    /// Its tool list, when known.
    pub tools: Option<&'a ToolList>,
    /// Its authorization server as the user's last sign-in recorded it,
    /// for an entry that signs in with OAuth.
    pub auth_server: Option<&'a AuthServer>,
}

/// A server left out of the export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub server: String,
    pub reason: String,
    /// What to do about it.
    pub fix: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}; {}", self.server, self.reason, self.fix)
    }
}

/// One YAML document and the comments written above it.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub comments: Vec<String>,
    pub value: Value,
}

/// The result of an export: documents in apply order, refusals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Export {
    /// Comments at the top of the file.
    pub header: Vec<String>,
    pub documents: Vec<Document>,
    pub refusals: Vec<Refusal>,
}

/// Why the documents could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("render the manifest as YAML: {0}")]
pub struct RenderError(#[from] yaml_serde::Error);

impl Export {
    /// The multi-document YAML: the header comments, then each document
    /// after `---` and its own comments.
    pub fn render(&self) -> Result<String, RenderError> {
        let mut out = String::new();
        for line in &self.header {
            push_comment(&mut out, line);
        }
        for doc in &self.documents {
            out.push_str("---\n");
            for line in &doc.comments {
                push_comment(&mut out, line);
            }
            out.push_str(&yaml_serde::to_string(&doc.value)?);
        }
        Ok(out)
    }
}

fn push_comment(out: &mut String, line: &str) {
    if line.is_empty() {
        out.push_str("#\n");
    } else {
        for l in line.lines() {
            out.push_str("# ");
            out.push_str(l);
            out.push('\n');
        }
    }
}

/// `name` as a lowercase DNS label of at most `max` characters: other
/// characters become `-`, runs collapse, ends are trimmed.
pub fn dns_label(name: &str, max: usize) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out = out.trim_matches('-').to_owned();
    out.truncate(max);
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() {
        "server".to_owned()
    } else {
        out
    }
}

/// Six hex digits of `name`'s SHA-256: the same suffix every run.
fn stable_suffix(name: &str) -> String {
    let digest = Sha256::digest(name.as_bytes());
    digest[..3].iter().map(|b| format!("{b:02x}")).collect()
}

/// A resource name per server name: its DNS label when that is the name
/// itself, else when it is unique and whole; otherwise the label
/// shortened and suffixed with a hash of the original name.
pub fn workload_names<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let names: Vec<&str> = names.into_iter().collect();
    let mut by_label: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for name in &names {
        by_label
            .entry(dns_label(name, usize::MAX))
            .or_default()
            .push(name);
    }
    let mut out = BTreeMap::new();
    for (label, group) in by_label {
        for name in group.iter().copied() {
            let exact = label == name;
            let chosen = if label.len() <= MAX_NAME && (group.len() == 1 || exact) {
                label.clone()
            } else {
                let base = dns_label(&label, MAX_NAME - 7);
                format!("{base}-{}", stable_suffix(name))
            };
            out.insert(name.to_owned(), chosen);
        }
    }
    out
}

/// The export of `servers` (see the module docs).
pub fn export(servers: &[Server<'_>], options: &Options) -> Export {
    let mut out = Export::default();
    let group = &options.group;
    let exported: Vec<&Server<'_>> = servers
        .iter()
        .filter(|s| s.blocked.is_none() || options.include_blocked)
        .collect();
    let names = workload_names(exported.iter().map(|s| s.name));

    out.header.push(format!(
        "ToolHive operator resources ({API_VERSION}) written by `steward export --format toolhive`."
    ));
    out.header
        .push("Create the Secrets below first (the stubs carry no data), then `kubectl apply -f` this file.".to_owned());
    if !options.anonymous {
        out.header.push(format!(
            "It refers to the MCPOIDCConfig {}, which it does not hold: see the VirtualMCPServer.",
            oidc_config_name(group)
        ));
    }
    let blocked: Vec<&Server<'_>> = servers.iter().filter(|s| s.blocked.is_some()).collect();
    if !blocked.is_empty() {
        out.header.push(String::new());
        out.header.push(if options.include_blocked {
            "Blocked here, exported anyway (--include-blocked):".to_owned()
        } else {
            "Blocked here, not exported (--include-blocked exports them):".to_owned()
        });
        for s in &blocked {
            let b = s.blocked.expect("filtered on blocked");
            out.header.push(format!(
                "  {} ({}): {}",
                s.name,
                b.reason.as_str(),
                b.message
            ));
        }
    }

    let mut workloads = Vec::new();
    let mut secret_lines = Vec::new();
    let mut secret_names = BTreeSet::new();
    let mut timeouts = Map::new();
    let mut aggregation_tools = Vec::new();
    let mut upstreams = Vec::new();
    for server in &exported {
        let workload = &names[server.name];
        match convert(server, workload, options, &secret_names) {
            Ok(converted) => {
                secret_names.extend(converted.secret_names);
                secret_lines.extend(converted.secret_lines);
                if let Some(ms) = server.spec.timeout.filter(|ms| *ms > 0) {
                    timeouts.insert(workload.clone(), Value::String(duration(ms)));
                }
                if converted.entry_tool_config {
                    aggregation_tools.push(json!({
                        "workload": workload,
                        "toolConfigRef": { "name": tool_config_name(workload) },
                    }));
                }
                upstreams.extend(converted.upstream);
                workloads.extend(converted.documents);
            }
            Err(refusal) => out.refusals.push(refusal),
        }
    }
    if !out.refusals.is_empty() {
        out.header.push(String::new());
        out.header
            .push("Refused, not exported (also on stderr):".to_owned());
        for r in &out.refusals {
            out.header.push(format!("  {r}"));
        }
    }
    if !secret_lines.is_empty() {
        out.header.push(String::new());
        out.header
            .push("Secrets to fill (each replaces its stub):".to_owned());
        out.header
            .extend(secret_lines.into_iter().map(|l| format!("  {l}")));
    }

    out.documents.push(Document {
        comments: vec![format!(
            "Every exported server joins this group; the VirtualMCPServer {group} serves them together."
        )],
        value: resource(
            "MCPGroup",
            group,
            None,
            options,
            json!({ "description": "MCP servers exported by steward" }),
        ),
    });
    out.documents.extend(workloads);
    out.documents.push(virtual_server(
        group,
        options,
        timeouts,
        aggregation_tools,
        upstreams,
    ));
    out
}

fn duration(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn tool_config_name(workload: &str) -> String {
    format!("{workload}-tools")
}

fn oidc_config_name(group: &str) -> String {
    format!("{group}-oidc")
}

/// The comment that names the MCPOIDCConfig to create (this file does not
/// hold it: its issuer is the cluster's), with a sketch of it.
fn oidc_placeholder(oidc: &str, options: &Options) -> Vec<String> {
    let ns = options
        .namespace
        .as_ref()
        .map(|ns| format!(", namespace: {ns}"))
        .unwrap_or_default();
    vec![
        format!(
            "incomingAuth: oidc through the MCPOIDCConfig {oidc}, a PLACEHOLDER this file does not hold:"
        ),
        "create it for your identity provider before applying, for example".to_owned(),
        format!("  apiVersion: {API_VERSION}"),
        "  kind: MCPOIDCConfig".to_owned(),
        format!("  metadata: {{name: {oidc}{ns}}}"),
        "  spec: {type: inline, inline: {issuer: \"https://issuer.example.com\"}}".to_owned(),
        "or export with --anonymous.".to_owned(),
    ]
}

fn virtual_server(
    group: &str,
    options: &Options,
    timeouts: Map<String, Value>,
    tools: Vec<Value>,
    upstreams: Vec<Value>,
) -> Document {
    let mut comments = vec![format!(
        "Agents connect here: tools are named {PREFIX_FORMAT}tool, as `steward mcp` names them."
    )];
    let incoming = if options.anonymous {
        comments.push("incomingAuth: anonymous (--anonymous): anyone who reaches the Service may call every tool.".to_owned());
        json!({ "type": "anonymous" })
    } else {
        let oidc = oidc_config_name(group);
        comments.extend(oidc_placeholder(&oidc, options));
        if upstreams.is_empty() {
            json!({ "type": "oidc", "oidcConfigRef": { "name": oidc, "audience": group } })
        } else {
            // The embedded authorization server issues the tokens agents
            // bring: for its own URL, which the OIDC check must expect.
            let url = format!("{}/mcp", oauth::placeholder_issuer(group));
            json!({ "type": "oidc",
                    "oidcConfigRef": { "name": oidc, "audience": url, "resourceUrl": url } })
        }
    };
    let mut aggregation = json!({
        "conflictResolution": "prefix",
        "conflictResolutionConfig": { "prefixFormat": PREFIX_FORMAT },
    });
    if !tools.is_empty() {
        aggregation["tools"] = Value::Array(tools);
    }
    let mut config = json!({ "aggregation": aggregation });
    let mut spec = json!({
        "groupRef": { "name": group },
        "incomingAuth": incoming,
        "outgoingAuth": { "source": "discovered" },
    });
    if !upstreams.is_empty() {
        comments.push("authServerConfig: agents sign in here; each server that signs in with OAuth is an upstream provider, whose token its MCPExternalAuthConfig (upstreamInject) puts on its requests.".to_owned());
        comments.push(oauth::placeholder_note(group, &oidc_config_name(group)));
        spec["authServerConfig"] = json!({
            "issuer": oauth::placeholder_issuer(group),
            "upstreamProviders": upstreams,
        });
    }
    if !timeouts.is_empty() {
        comments.push("operational.timeouts.perWorkload: each server's `timeout`.".to_owned());
        config["operational"] = json!({ "timeouts": { "perWorkload": timeouts } });
    }
    spec["config"] = config;
    Document {
        comments,
        value: resource("VirtualMCPServer", group, None, options, spec),
    }
}

/// A document: `kind` named `name`, labelled as Steward's, annotated with
/// the server it came from.
fn resource(kind: &str, name: &str, server: Option<&str>, options: &Options, spec: Value) -> Value {
    let mut metadata = json!({
        "name": name,
        "labels": {
            "app.kubernetes.io/managed-by": "steward",
            "app.kubernetes.io/part-of": options.group,
        },
    });
    if let Some(ns) = &options.namespace {
        metadata["namespace"] = Value::String(ns.clone());
    }
    if let Some(server) = server {
        metadata["annotations"] = json!({ SERVER_ANNOTATION: server });
    }
    json!({ "apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec })
}

/// A Secret without data: the name the workload refers to.
fn secret_stub(name: &str, server: &str, key: &str, options: &Options) -> Document {
    let mut value = resource("Secret", name, Some(server), options, Value::Null);
    value["apiVersion"] = Value::String("v1".to_owned());
    let map = value.as_object_mut().expect("an object");
    map.remove("spec");
    map.insert("type".to_owned(), Value::String("Opaque".to_owned()));
    Document {
        comments: vec![format!(
            "Stub: holds no data. Fill key `{key}` with the command in the header."
        )],
        value,
    }
}

/// The `kubectl create secret` line for one value: the variable it came
/// from when it was a whole `${VAR}`, else a placeholder. Never the value.
fn secret_line(
    name: &str,
    key: &str,
    written: Option<&str>,
    placeholder: &str,
    options: &Options,
) -> String {
    let source = written
        .and_then(whole_reference)
        .map_or_else(|| format!("'{placeholder}'"), |var| format!("\"${var}\""));
    let ns = options
        .namespace
        .as_ref()
        .map(|ns| format!(" --namespace {ns}"))
        .unwrap_or_default();
    format!(
        "kubectl create secret generic {name}{ns} --from-literal={key}={source} --dry-run=client -o yaml | kubectl apply -f -"
    )
}

/// `VAR` when `s` is exactly `$VAR` or `${VAR}`.
fn whole_reference(s: &str) -> Option<&str> {
    let s = s.trim();
    let name = s
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| s.strip_prefix('$'))?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then_some(name)
}

/// One server's documents.
struct Converted {
    documents: Vec<Document>,
    secret_names: Vec<String>,
    secret_lines: Vec<String>,
    /// An MCPServerEntry's allow-list, applied by the VirtualMCPServer.
    entry_tool_config: bool,
    /// An MCPServerEntry's upstream provider, for the VirtualMCPServer's
    /// embedded authorization server.
    upstream: Option<Value>,
}

fn refuse(server: &Server<'_>, reason: impl Into<String>, fix: impl Into<String>) -> Refusal {
    Refusal {
        server: server.name.to_owned(),
        reason: reason.into(),
        fix: fix.into(),
    }
}

/// The allow-list ToolHive should apply, and where it came from.
fn allow_list(
    server: &Server<'_>,
    asked: Option<ToolSource>,
) -> Result<Option<(Vec<String>, String)>, Refusal> {
    let spec = server.spec;
    let list = match (&spec.include_tools, &spec.exclude_tools, server.tools) {
        (None, None, _) => return Ok(None),
        // Exact without the tool list: the include list minus the excluded.
        (Some(include), exclude, None) | (Some(include), exclude @ None, Some(_)) => {
            let excluded = exclude.clone().unwrap_or_default();
            let list: Vec<String> = include
                .iter()
                .filter(|t| !excluded.contains(t))
                .cloned()
                .collect();
            (list, "includeTools".to_owned())
        }
        (_, Some(_), Some(known)) => (
            spec.exposed_tools(known.tools.iter().map(String::as_str)),
            format!(
                "includeTools/excludeTools over the tool list of {}",
                known.source
            ),
        ),
        (None, Some(_), None) => {
            const WHY: &str =
                "excludeTools needs the server's tool list (ToolHive filters by allow-list only)";
            return Err(match asked {
                None => refuse(
                    server,
                    format!("{WHY}, and no controller runs for this workspace to give it"),
                    "start `steward run` in the workspace, wait until the server is Ready and export again; or replace excludeTools with includeTools",
                ),
                Some(source) => refuse(
                    server,
                    format!("{WHY}, and {source} has none (the server is not Ready)"),
                    "wait until `steward status` shows the server Ready and export again; or replace excludeTools with includeTools",
                ),
            });
        }
    };
    if list.0.is_empty() {
        return Err(refuse(
            server,
            "its tool filters allow no tool, and ToolHive reads an empty allow-list as every tool",
            "remove the server from the configuration, or allow at least one tool",
        ));
    }
    Ok(Some(list))
}

fn tool_config(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
    list: (Vec<String>, String),
) -> Document {
    Document {
        comments: vec![format!("Allow-list from {}.", list.1)],
        value: resource(
            "MCPToolConfig",
            &tool_config_name(workload),
            Some(server.name),
            options,
            json!({ "toolsFilter": list.0 }),
        ),
    }
}

/// The fields with no ToolHive equivalent that the spec sets.
fn dropped_fields(spec: &McpServerSpec) -> Vec<String> {
    let mut dropped = Vec::new();
    if spec.trust.is_some() {
        dropped.push(
            "`trust` (ToolHive has no per-server confirmation bypass; the agent decides)"
                .to_owned(),
        );
    }
    if spec.cwd.is_some() {
        dropped.push("`cwd` (the container's working directory is the image's)".to_owned());
    }
    if spec.qwen.auth_provider_type.is_some() {
        dropped.push("`authProviderType` (no equivalent)".to_owned());
    }
    dropped
}

fn convert(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
    taken: &BTreeSet<String>,
) -> Result<Converted, Refusal> {
    let allow = allow_list(server, options.tools_asked)?;
    let mut comments = Vec::new();
    if workload != server.name {
        comments.push(format!(
            "Server {:?} is named {workload} here: its tools become {workload}__TOOL.",
            server.name
        ));
    }
    if let Some(b) = server.blocked {
        comments.push(format!(
            "Blocked here ({}), exported by --include-blocked.",
            b.reason.as_str()
        ));
    }
    for d in dropped_fields(server.spec) {
        comments.push(format!("Dropped: {d}."));
    }
    match server.spec.transport {
        McpTransport::Stdio => stdio(server, workload, options, allow, comments, taken),
        McpTransport::Http | McpTransport::Sse => {
            remote(server, workload, options, allow, comments, taken)
        }
    }
}

/// What a Secret holds: one value of a server.
#[derive(Debug, Clone, Copy)]
enum Slot<'a> {
    /// The value of an environment variable.
    Env(&'a str),
    /// The value of a header.
    Header(&'a str),
    /// The token of an `Authorization: Bearer` header.
    Bearer,
    /// `oauth.clientSecret`.
    ClientSecret,
}

impl Slot<'_> {
    /// What the Secret's name says after the workload's.
    fn suffix(&self) -> String {
        match self {
            Slot::Env(name) => format!("env-{name}"),
            Slot::Header(name) => format!("header-{name}"),
            Slot::Bearer => "bearer".to_owned(),
            Slot::ClientSecret => "oauth-client-secret".to_owned(),
        }
    }

    /// The Secret's key.
    fn key(&self) -> &'static str {
        match self {
            Slot::Env(_) | Slot::Header(_) | Slot::ClientSecret => "value",
            Slot::Bearer => "token",
        }
    }

    /// What the `kubectl create secret` line asks for when no variable
    /// holds the value.
    fn placeholder(&self) -> String {
        match self {
            Slot::Env(name) => format!("<value of {name}>"),
            Slot::Header(name) => format!("<value of the {name} header>"),
            Slot::Bearer => "<bearer token>".to_owned(),
            Slot::ClientSecret => "<the OAuth client secret>".to_owned(),
        }
    }
}

/// Secrets gathered for one workload.
struct Secrets<'t> {
    /// Secret names other workloads took.
    taken: &'t BTreeSet<String>,
    names: Vec<String>,
    stubs: Vec<Document>,
    lines: Vec<String>,
}

impl<'t> Secrets<'t> {
    fn new(taken: &'t BTreeSet<String>) -> Self {
        Secrets {
            taken,
            names: Vec::new(),
            stubs: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// A Secret for `slot`, named after the workload and the slot (with a
    /// stable suffix when that name is taken).
    fn add(
        &mut self,
        server: &Server<'_>,
        workload: &str,
        slot: Slot<'_>,
        written: Option<&str>,
        options: &Options,
    ) -> String {
        let key = slot.key();
        // `${secret:NAME}`: one stub named after the secret, shared.
        if let Some(secret) = written.and_then(keyring::secret_of) {
            let name = dns_label(
                &format!("{secret}{}", if key == "token" { "-token" } else { "" }),
                63,
            );
            if !self.names.contains(&name) && !self.taken.contains(&name) {
                self.stubs
                    .push(secret_stub(&name, server.name, key, options));
                let line = secret_line(&name, key, None, "", options);
                self.lines
                    .push(line.replace("''", &keyring::lookup(secret)));
            }
            self.names.push(name.clone());
            return name;
        }
        let suffix = slot.suffix();
        let mut name = dns_label(&format!("{workload}-{suffix}"), 63);
        if self.taken.contains(&name) || self.names.contains(&name) {
            let base = dns_label(&name, 63 - 7);
            name = format!(
                "{base}-{}",
                stable_suffix(&format!("{}/{suffix}", server.name))
            );
        }
        self.stubs
            .push(secret_stub(&name, server.name, key, options));
        self.lines.push(secret_line(
            &name,
            key,
            written,
            &slot.placeholder(),
            options,
        ));
        self.names.push(name.clone());
        name
    }
}

/// Whether an env value (as written) must go to a Secret: a reference, or
/// what `status` would redact.
fn env_is_secret(name: &str, written: Option<&str>) -> bool {
    let Some(written) = written else {
        return true;
    };
    redact::has_reference(written)
        || redact::redact_env(&BTreeMap::from([(name.to_owned(), written.to_owned())]))
            .get(name)
            .is_some_and(|shown| shown != written)
}

fn stdio(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
    allow: Option<(Vec<String>, String)>,
    mut comments: Vec<String>,
    taken: &BTreeSet<String>,
) -> Result<Converted, Refusal> {
    let spec = server.spec;
    // As written: an expanded `${TOKEN}` is the token itself.
    let args: Vec<String> = match (&spec.args, &spec.as_written.args) {
        (None, _) => Vec::new(),
        (Some(_), Some(w)) => w.clone(),
        (Some(a), None) => vec![redact::REDACTED.to_owned(); a.len()],
    };
    let launch = launch(server, &args, options)?;
    if launch.args.iter().any(|a| redact::has_reference(a))
        || redact::redact_args(&launch.args) != launch.args
    {
        return Err(refuse(
            server,
            "an argument holds a ${VAR} reference or a credential, and ToolHive passes arguments as written",
            "pass the value through `env` instead (it becomes a Secret)",
        ));
    }
    if let Some(replaced) = &launch.replaced {
        comments.push(format!(
            "The image of --image stands for {replaced}: its entrypoint must run it; the entry's arguments after it follow."
        ));
    }
    if !launch.dropped_options.is_empty() {
        comments.push(format!(
            "Dropped docker options: {} (the operator runs the container).",
            launch.dropped_options.join(" ")
        ));
    }

    let mut secrets = Secrets::new(taken);
    let mut env = Vec::new();
    let mut secret_refs = Vec::new();
    let written_env = spec.as_written.env.clone();
    let mut vars: BTreeMap<String, Option<String>> = BTreeMap::new();
    for name in spec.env.iter().flat_map(|e| e.keys()) {
        let written = written_env.as_ref().and_then(|w| w.get(name)).cloned();
        vars.insert(name.clone(), written);
    }
    for (name, value) in launch.docker_env {
        match value {
            Some(v) => {
                vars.insert(name, Some(v));
            }
            // `-e NAME`: the host's value, unless `env` sets it.
            None => {
                vars.entry(name.clone())
                    .or_insert_with(|| Some(format!("${{{name}}}")));
            }
        }
    }
    for (name, written) in &vars {
        if env_is_secret(name, written.as_deref()) {
            let secret = secrets.add(
                server,
                workload,
                Slot::Env(name),
                written.as_deref(),
                options,
            );
            secret_refs.push(json!({ "name": secret, "key": "value", "targetEnvName": name }));
        } else {
            env.push(json!({ "name": name, "value": written.clone().unwrap_or_default() }));
        }
    }

    let mut body = json!({
        "image": launch.image,
        "transport": "stdio",
        "proxyMode": "streamable-http",
        "groupRef": { "name": options.group },
    });
    if !launch.args.is_empty() {
        body["args"] = json!(launch.args);
    }
    if !env.is_empty() {
        body["env"] = Value::Array(env);
    }
    if !secret_refs.is_empty() {
        body["secrets"] = Value::Array(secret_refs);
    }
    let mut documents = secrets.stubs;
    if let Some(list) = allow {
        body["toolConfigRef"] = json!({ "name": tool_config_name(workload) });
        documents.push(tool_config(server, workload, options, list));
    }
    let (profile, config_map, note) = permission_profile(server, workload, options);
    body["permissionProfile"] = profile;
    documents.extend(config_map);
    comments.extend(note);
    documents.push(Document {
        comments,
        value: resource("MCPServer", workload, Some(server.name), options, body),
    });
    Ok(Converted {
        documents,
        secret_names: secrets.names,
        secret_lines: secrets.lines,
        entry_tool_config: false,
        upstream: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_are_lowercase_and_bounded() {
        assert_eq!(dns_label("My_Server.v2", 46), "my-server-v2");
        assert_eq!(dns_label("__", 46), "server");
        assert_eq!(dns_label(&"a".repeat(80), 46).len(), 46);
    }

    #[test]
    fn colliding_and_long_names_get_a_stable_suffix() {
        let long = "x".repeat(60);
        let names = workload_names(["foo", "Foo", "f_o", "f-o", long.as_str()]);
        assert_eq!(names["foo"], "foo");
        assert_eq!(names["f-o"], "f-o");
        assert!(names["Foo"].starts_with("foo-") && names["Foo"].len() == 10);
        assert!(names["f_o"].starts_with("f-o-"));
        assert!(names[&long].len() <= MAX_NAME);
        assert_eq!(workload_names(["Foo", "foo"])["Foo"], names["Foo"]);
        let unique: BTreeSet<&String> = names.values().collect();
        assert_eq!(unique.len(), names.len());
    }

    #[test]
    fn package_versions() {
        assert_eq!(
            npm_version("@scope/pkg@1.2.3"),
            ("@scope/pkg", Some("1.2.3"))
        );
        assert_eq!(npm_version("@scope/pkg"), ("@scope/pkg", None));
        assert_eq!(npm_version("pkg"), ("pkg", None));
        assert_eq!(
            py_version("mcp-server-time==2025.1"),
            ("mcp-server-time", Some("2025.1"))
        );
        assert_eq!(py_version("mcp-server-time"), ("mcp-server-time", None));
    }

    #[test]
    fn private_urls_are_refused() {
        for url in [
            "http://localhost:3000/mcp",
            "http://127.0.0.1/mcp",
            "https://10.1.2.3/",
            "http://192.168.0.4/",
            "http://[::1]/",
            "http://svc.ns.svc.cluster.local/mcp",
        ] {
            assert!(unreachable_url(url).is_some(), "{url}");
        }
        assert!(unreachable_url("https://mcp.example.com/mcp").is_none());
    }

    #[test]
    fn modules_and_inline_code_are_not_scripts() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            program(&args(&["-u", "./server.py", "-v"])),
            Some((1, true))
        );
        assert_eq!(
            program(&args(&["-m", "pkg.server", "-v"])),
            Some((1, false))
        );
        assert_eq!(program(&args(&["-e", "require('x')"])), None);
        assert_eq!(program(&args(&["--version"])), None);
    }

    #[test]
    fn whole_references() {
        assert_eq!(whole_reference("${TOKEN}"), Some("TOKEN"));
        assert_eq!(whole_reference("$TOKEN"), Some("TOKEN"));
        assert_eq!(whole_reference("x${TOKEN}"), None);
    }
}
