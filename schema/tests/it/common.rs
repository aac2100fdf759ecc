//! Shared helpers for the pure-core tests: build a `SourceSet` from named
//! JSON texts through the real loaders, merge it with `desired_state`, and
//! ask admission about one server.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use steward_schema::admission::{self, Blocked};
use steward_schema::desired::{self, CliOptions, DesiredState, SourceSet};
use steward_schema::load::{self, Content, FileText, LoadContext, LoadMode, ParsedSource};
use steward_schema::resource::{LspServerSpec, McpServerSpec, Reason, SourceKind};

/// The canonical workspace root every test uses.
pub const WS: &str = "/ws";
pub const HOME: &str = "/home/u/.qwen";

pub fn ws() -> &'static Path {
    Path::new(WS)
}

/// A small, fixed environment for `$VAR` expansion.
pub fn env() -> BTreeMap<String, String> {
    [
        ("HOME", "/home/u"),
        ("TOKEN", "s3cr3t"),
        ("PORT", "8080"),
        ("EMPTY", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

pub fn env_with(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut e = env();
    for (k, v) in pairs {
        e.insert((*k).to_owned(), (*v).to_owned());
    }
    e
}

pub fn text(s: &str) -> FileText {
    FileText::Text(s.to_owned())
}

pub fn opt_text(s: &Option<String>) -> FileText {
    match s {
        Some(s) => FileText::Text(s.clone()),
        None => FileText::Absent,
    }
}

/// A file reader over an in-memory map of absolute paths.
pub fn reader(files: &[(String, String)]) -> impl Fn(&Path) -> FileText + '_ {
    move |p: &Path| {
        files
            .iter()
            .find(|(path, _)| Path::new(path) == p)
            .map_or(FileText::Absent, |(_, t)| FileText::Text(t.clone()))
    }
}

/// One extension: directory name, manifest text, extra files (absolute path, text).
#[derive(Debug, Clone)]
pub struct Ext {
    pub dir: String,
    pub manifest: String,
    pub files: Vec<(String, String)>,
}

/// `manifest` with `"name": dir` when it has no name (Qwen Code requires one;
/// most tests are not about it).
pub fn named_manifest(dir: &str, manifest: &str) -> String {
    if manifest.contains("\"name\"") {
        return manifest.to_owned();
    }
    match manifest.trim_start().strip_prefix('{') {
        Some(rest) if rest.trim_start().starts_with('}') => format!("{{\"name\": \"{dir}\"{rest}"),
        Some(rest) => format!("{{\"name\": \"{dir}\", {rest}"),
        None => manifest.to_owned(),
    }
}

pub fn ext_dir(dir: &str) -> PathBuf {
    Path::new(HOME).join("extensions").join(dir)
}

/// Named JSON texts for every source of a workspace; `None` = absent.
#[derive(Debug, Clone)]
pub struct Srcs {
    pub system_defaults: Option<String>,
    pub user: Option<String>,
    pub workspace: Option<String>,
    pub system: Option<String>,
    pub mcp_json: Option<String>,
    pub lsp_json: Option<String>,
    pub extensions: Vec<Ext>,
    pub cli_mcp: Vec<String>,
    pub cli_files: Vec<(String, String)>,
    pub trusted: Option<String>,
    pub approvals: Option<String>,
    pub env: BTreeMap<String, String>,
    pub mode: LoadMode,
    pub cli: CliOptions,
}

impl Default for Srcs {
    fn default() -> Self {
        Srcs {
            system_defaults: None,
            user: None,
            workspace: None,
            system: None,
            mcp_json: None,
            lsp_json: None,
            extensions: Vec::new(),
            cli_mcp: Vec::new(),
            cli_files: Vec::new(),
            trusted: None,
            approvals: None,
            env: env(),
            mode: LoadMode::Strict,
            cli: CliOptions {
                home: None,
                allowed_mcp: None,
                allowed_lsp: None,
                lsp_enabled: true,
            },
        }
    }
}

pub fn srcs() -> Srcs {
    Srcs::default()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

impl Srcs {
    pub fn system_defaults(mut self, t: &str) -> Self {
        self.system_defaults = Some(t.to_owned());
        self
    }
    pub fn user(mut self, t: &str) -> Self {
        self.user = Some(t.to_owned());
        self
    }
    pub fn workspace(mut self, t: &str) -> Self {
        self.workspace = Some(t.to_owned());
        self
    }
    pub fn system(mut self, t: &str) -> Self {
        self.system = Some(t.to_owned());
        self
    }
    pub fn mcp_json(mut self, t: &str) -> Self {
        self.mcp_json = Some(t.to_owned());
        self
    }
    pub fn lsp_json(mut self, t: &str) -> Self {
        self.lsp_json = Some(t.to_owned());
        self
    }
    pub fn extension(mut self, dir: &str, manifest: &str) -> Self {
        self.extensions.push(Ext {
            dir: dir.to_owned(),
            manifest: manifest.to_owned(),
            files: Vec::new(),
        });
        self
    }
    pub fn extension_with_files(
        mut self,
        dir: &str,
        manifest: &str,
        files: &[(&str, &str)],
    ) -> Self {
        self.extensions.push(Ext {
            dir: dir.to_owned(),
            manifest: manifest.to_owned(),
            files: files
                .iter()
                .map(|(p, t)| {
                    (
                        ext_dir(dir).join(p).to_string_lossy().into_owned(),
                        (*t).to_owned(),
                    )
                })
                .collect(),
        });
        self
    }
    pub fn cli_mcp(mut self, arg: &str) -> Self {
        self.cli_mcp.push(arg.to_owned());
        self
    }
    pub fn trusted(mut self, t: &str) -> Self {
        self.trusted = Some(t.to_owned());
        self
    }
    pub fn approvals(mut self, t: &str) -> Self {
        self.approvals = Some(t.to_owned());
        self
    }
    pub fn env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = env;
        self
    }
    pub fn lenient(mut self) -> Self {
        self.mode = LoadMode::Lenient;
        self
    }
    pub fn allowed_mcp_flag(mut self, list: &[&str]) -> Self {
        self.cli.allowed_mcp = Some(names(list));
        self
    }
    pub fn allowed_lsp_flag(mut self, list: &[&str]) -> Self {
        self.cli.allowed_lsp = Some(names(list));
        self
    }
    pub fn cx(&self) -> LoadContext<'_> {
        LoadContext {
            workspace: ws(),
            env: &self.env,
            mode: self.mode,
            memo: None,
            realpath: load::as_written,
        }
    }

    /// Load every source through the real loaders.
    pub fn sources(&self) -> SourceSet {
        let cx = self.cx();
        let settings = |kind: SourceKind, path: &str, t: &Option<String>| {
            load::load_settings(kind, Path::new(path), &opt_text(t), &cx)
        };
        let mut extensions = self.extensions.clone();
        extensions.sort_by(|a, b| a.dir.cmp(&b.dir));
        let extensions = extensions
            .iter()
            .map(|e| {
                let read = reader(&e.files);
                let manifest = named_manifest(&e.dir, &e.manifest);
                load::load_extension(&ext_dir(&e.dir), &text(&manifest), &read, &cx)
            })
            .collect();
        let cli_read = reader(&self.cli_files);
        SourceSet {
            system_defaults: settings(
                SourceKind::SystemDefaults,
                "/etc/qwen-code/system-defaults.json",
                &self.system_defaults,
            ),
            user_settings: settings(
                SourceKind::UserSettings,
                "/home/u/.qwen/settings.json",
                &self.user,
            ),
            workspace_settings: settings(
                SourceKind::WorkspaceSettings,
                "/ws/.qwen/settings.json",
                &self.workspace,
            ),
            system_settings: settings(
                SourceKind::SystemSettings,
                "/etc/qwen-code/settings.json",
                &self.system,
            ),
            mcp_json: load::load_mcp_json(
                Path::new("/ws/.mcp.json"),
                &opt_text(&self.mcp_json),
                &cx,
            ),
            lsp_json: load::load_lsp_json(
                Path::new("/ws/.lsp.json"),
                &opt_text(&self.lsp_json),
                &cx,
            ),
            extensions,
            cli_mcp: self
                .cli_mcp
                .iter()
                .map(|a| load::load_cli_mcp_config(a, &cli_read, &cx))
                .collect(),
            trusted_folders: load::load_trusted_folders(
                Path::new("/home/u/.qwen/trustedFolders.json"),
                &opt_text(&self.trusted),
                &cx,
            ),
            approvals: load::load_approvals(
                Path::new("/home/u/.qwen/mcpApprovals.json"),
                &opt_text(&self.approvals),
                &cx,
            ),
            sandbox_approvals: load::load_sandbox_approvals(
                Path::new("/home/u/.qwen/steward/sandbox-approvals.json"),
                &FileText::Absent,
                &cx,
            ),
        }
    }

    /// Every source must have loaded without a problem.
    pub fn valid_sources(&self) -> SourceSet {
        let set = self.sources();
        for s in set.iter() {
            assert!(
                s.diagnostics.is_empty() && s.is_valid(),
                "{:?} {} is not valid: {:?}",
                s.kind,
                s.path.display(),
                s.diagnostics
            );
        }
        set
    }

    /// The merged desired state (every source must be valid).
    pub fn desired(&self) -> DesiredState {
        desired::desired_state(&self.valid_sources(), ws(), &self.cli, &|p: &Path| {
            p.to_path_buf()
        })
    }
}

/// Admission reason of MCP server `name` (`None` = admitted). Panics when
/// the server is not in the merged map.
pub fn mcp_reason(state: &DesiredState, name: &str) -> Option<Reason> {
    mcp_blocked(state, name).map(|b| b.reason)
}

pub fn mcp_blocked(state: &DesiredState, name: &str) -> Option<Blocked> {
    let d = state.mcp.get(name).unwrap_or_else(|| {
        panic!(
            "MCP server {name} is not configured: {:?}",
            state.mcp.keys()
        )
    });
    admission::admit_mcp(name, &d.spec, state)
}

pub fn lsp_reason(state: &DesiredState, name: &str) -> Option<Reason> {
    let d = state.lsp.get(name).unwrap_or_else(|| {
        panic!(
            "LSP server {name} is not configured: {:?}",
            state.lsp.keys()
        )
    });
    admission::admit_lsp(name, &d.spec, state).map(|b| b.reason)
}

pub fn mcp_spec<'a>(state: &'a DesiredState, name: &str) -> &'a McpServerSpec {
    &state
        .mcp
        .get(name)
        .unwrap_or_else(|| panic!("MCP server {name} is not configured"))
        .spec
}

pub fn lsp_spec<'a>(state: &'a DesiredState, name: &str) -> &'a LspServerSpec {
    &state
        .lsp
        .get(name)
        .unwrap_or_else(|| panic!("LSP server {name} is not configured"))
        .spec
}

/// An approvals file for the canonical workspace: (name, hash, status).
pub fn approvals_json(records: &[(&str, &str, &str)]) -> String {
    approvals_json_at(WS, records)
}

pub fn approvals_json_at(root: &str, records: &[(&str, &str, &str)]) -> String {
    let mut servers = serde_json::Map::new();
    for (name, hash, status) in records {
        servers.insert(
            (*name).to_owned(),
            serde_json::json!({"hash": hash, "status": status}),
        );
    }
    let mut file = serde_json::Map::new();
    file.insert(root.to_owned(), Value::Object(servers));
    Value::Object(file).to_string()
}

/// `.mcp.json` text with one server `name` whose entry is `entry` (JSON text).
pub fn mcp_json_one(name: &str, entry: &str) -> String {
    format!(r#"{{"mcpServers": {{"{name}": {entry}}}}}"#)
}

/// `settings.json` text with one server `name` whose entry is `entry`.
pub fn settings_one(name: &str, entry: &str) -> String {
    format!(r#"{{"mcpServers": {{"{name}": {entry}}}}}"#)
}

pub fn ctx(env: &BTreeMap<String, String>, mode: LoadMode) -> LoadContext<'_> {
    LoadContext {
        workspace: ws(),
        env,
        mode,
        memo: None,
        realpath: load::as_written,
    }
}

/// Load `.mcp.json` text strictly with the standard environment.
pub fn load_mcp(t: &str) -> ParsedSource {
    let env = env();
    load::load_mcp_json(
        Path::new("/ws/.mcp.json"),
        &text(t),
        &ctx(&env, LoadMode::Strict),
    )
}

pub fn load_mcp_mode(t: &str, mode: LoadMode) -> ParsedSource {
    let env = env();
    load::load_mcp_json(Path::new("/ws/.mcp.json"), &text(t), &ctx(&env, mode))
}

pub fn load_lsp(t: &str) -> ParsedSource {
    load_lsp_mode(t, LoadMode::Strict)
}

pub fn load_lsp_mode(t: &str, mode: LoadMode) -> ParsedSource {
    let env = env();
    load::load_lsp_json(Path::new("/ws/.lsp.json"), &text(t), &ctx(&env, mode))
}

pub fn load_settings_text(kind: SourceKind, t: &str, mode: LoadMode) -> ParsedSource {
    let env = env();
    load::load_settings(
        kind,
        Path::new("/ws/.qwen/settings.json"),
        &text(t),
        &ctx(&env, mode),
    )
}

/// The MCP servers a loaded `.mcp.json`/`--mcp-config` contributes.
pub fn mcp_servers(p: &ParsedSource) -> &BTreeMap<String, Arc<McpServerSpec>> {
    match &p.content {
        Content::McpServers(m) => m,
        other => panic!(
            "expected MCP servers, found {other:?} ({:?})",
            p.diagnostics
        ),
    }
}

pub fn lsp_servers(p: &ParsedSource) -> &BTreeMap<String, Arc<LspServerSpec>> {
    match &p.content {
        Content::LspServers(m) => m,
        other => panic!(
            "expected LSP servers, found {other:?} ({:?})",
            p.diagnostics
        ),
    }
}

/// The spec of the single MCP server `s` in `.mcp.json`, which must load cleanly.
pub fn one_mcp(entry: &str) -> McpServerSpec {
    let p = load_mcp(&mcp_json_one("s", entry));
    assert!(p.diagnostics.is_empty(), "{entry}: {:?}", p.diagnostics);
    McpServerSpec::clone(&mcp_servers(&p)["s"])
}

/// The spec of the single language server `name` in `.lsp.json`.
pub fn one_lsp(name: &str, entry: &str) -> LspServerSpec {
    let p = load_lsp(&format!(r#"{{"{name}": {entry}}}"#));
    assert!(p.diagnostics.is_empty(), "{entry}: {:?}", p.diagnostics);
    LspServerSpec::clone(&lsp_servers(&p)[name])
}

/// The spec of language server `name` declared inline by an extension.
pub fn ext_lsp(name: &str, entry: &str) -> LspServerSpec {
    let env = env();
    let manifest = format!(r#"{{"name": "e", "lspServers": {{"{name}": {entry}}}}}"#);
    let files: Vec<(String, String)> = Vec::new();
    let read = reader(&files);
    let p = load::load_extension(
        &ext_dir("e"),
        &text(&manifest),
        &read,
        &ctx(&env, LoadMode::Strict),
    );
    assert!(p.diagnostics.is_empty(), "{entry}: {:?}", p.diagnostics);
    match p.content {
        Content::Extension(e) => LspServerSpec::clone(&e.lsp_servers[name]),
        other => panic!("expected an extension, found {other:?}"),
    }
}
