//! Doctor's checks of the agents: each of claude, qwen, gemini and codex,
//! found on PATH or not, and whether `steward mcp` is registered with it —
//! read from the files where that agent keeps its MCP servers (never
//! written). A registration is an entry Steward's admission would call a
//! self-reference: a command named `steward` whose subcommand is `mcp`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;
use steward_schema::admission::is_self_reference;
use steward_schema::resource::McpServerSpec;

use super::{Check, Status};
use crate::runtime::process::resolve_command;
use crate::support::paths::Paths;

/// How an agent's file holds its servers.
#[derive(Debug, Clone, Copy)]
enum Format {
    /// JSON (comments allowed), servers at this JSON pointer.
    Json(&'static str),
    /// Claude Code's `~/.claude.json`: servers of a project (local scope)
    /// under `projects.<path>.mcpServers`.
    ClaudeProjects,
    /// Codex's TOML, servers under `[mcp_servers.NAME]`.
    CodexToml,
}

/// One file an agent reads its servers from.
struct Source {
    scope: &'static str,
    path: PathBuf,
    format: Format,
}

/// An agent doctor knows.
struct Agent {
    command: &'static str,
    sources: Vec<Source>,
    /// How to register Steward with it (the README's recipe).
    register: String,
}

/// A `steward mcp` entry found in an agent's file.
#[derive(Debug)]
struct Registration {
    scope: &'static str,
    path: PathBuf,
    name: String,
    command: String,
    /// Its `--workspace`, when it gives one.
    workspace: Option<String>,
}

fn agents(paths: &Paths, env: &BTreeMap<String, String>) -> Vec<Agent> {
    let home = env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let under_home = |rel: &str| home.as_ref().map(|h| h.join(rel));
    let ws = &paths.workspace;
    let wsd = ws.display();
    let var_or_home = |var: &str, rel: &str, file: &str| {
        env.get(var)
            .filter(|v| !v.is_empty())
            .map(|dir| Path::new(dir).join(file))
            .or_else(|| under_home(&format!("{rel}{file}")))
    };
    let source = |scope, path: Option<PathBuf>, format| {
        path.map(|path| Source {
            scope,
            path,
            format,
        })
    };
    let claude_json = var_or_home("CLAUDE_CONFIG_DIR", "", ".claude.json");
    vec![
        Agent {
            command: "claude",
            sources: [
                source("user", claude_json.clone(), Format::Json("/mcpServers")),
                source("local", claude_json, Format::ClaudeProjects),
                source(
                    "project",
                    Some(paths.mcp_json.clone()),
                    Format::Json("/mcpServers"),
                ),
            ]
            .into_iter()
            .flatten()
            .collect(),
            register: format!(
                "claude mcp add --scope user steward -- steward mcp --workspace {wsd} --max-name-len 50"
            ),
        },
        Agent {
            command: "qwen",
            sources: vec![
                Source {
                    scope: "user",
                    path: paths.user_settings.clone(),
                    format: Format::Json("/mcpServers"),
                },
                Source {
                    scope: "project",
                    path: paths.workspace_settings.clone(),
                    format: Format::Json("/mcpServers"),
                },
            ],
            register: format!(
                "qwen mcp add steward steward mcp --workspace {wsd} --expose direct,search"
            ),
        },
        Agent {
            command: "gemini",
            sources: [
                source(
                    "user",
                    under_home(".gemini/settings.json"),
                    Format::Json("/mcpServers"),
                ),
                source(
                    "project",
                    Some(ws.join(".gemini/settings.json")),
                    Format::Json("/mcpServers"),
                ),
            ]
            .into_iter()
            .flatten()
            .collect(),
            register: format!("gemini mcp add -s user steward steward mcp --workspace {wsd}"),
        },
        Agent {
            command: "codex",
            sources: source(
                "user",
                var_or_home("CODEX_HOME", ".codex/", "config.toml"),
                Format::CodexToml,
            )
            .into_iter()
            .collect(),
            register: format!("codex mcp add steward -- steward mcp --workspace {wsd}"),
        },
    ]
}

/// The checks of every agent.
pub fn checks(paths: &Paths, env: &BTreeMap<String, String>, search_path: &OsStr) -> Vec<Check> {
    let mut checks = Vec::new();
    for agent in agents(paths, env) {
        let mut registrations = Vec::new();
        for source in &agent.sources {
            match entries(source, &paths.workspace) {
                Ok(found) => registrations.extend(found),
                Err(message) => checks.push(
                    Check::new(
                        "agent",
                        agent.command,
                        Status::Warning,
                        format!("could not read {}: {message}", source.path.display()),
                    )
                    .fix("correct the file (doctor only reads it)"),
                ),
            }
        }
        checks.extend(agent_checks(&agent, &registrations, paths, search_path));
    }
    checks
}

fn agent_checks(
    agent: &Agent,
    registrations: &[Registration],
    paths: &Paths,
    search_path: &OsStr,
) -> Vec<Check> {
    let found = resolve_command(agent.command, &paths.workspace, search_path).ok();
    let subject = agent.command;
    let mut checks = Vec::new();
    // A registered command the agent cannot start needs the user whatever
    // else is true.
    for r in registrations {
        if let Err(e) = resolve_command(&r.command, &paths.workspace, search_path) {
            checks.push(
                Check::new(
                    "agent",
                    subject,
                    Status::Error,
                    format!(
                        "`{}` ({} scope, {}) cannot start: {e}",
                        r.name,
                        r.scope,
                        r.path.display()
                    ),
                )
                .fix("put steward on PATH, or register its absolute path"),
            );
        }
    }
    let here: Vec<&Registration> = registrations
        .iter()
        .filter(|r| for_this_workspace(r, &paths.workspace))
        .collect();
    let describe = |r: &Registration| {
        let target = r
            .workspace
            .as_deref()
            .map_or("the agent's working directory".to_owned(), str::to_owned);
        format!(
            "`{}` in {} ({} scope), for {target}",
            r.name,
            r.path.display(),
            r.scope
        )
    };
    let check = match (&found, here.first(), registrations.first()) {
        (Some(path), Some(r), _) => Check::new(
            "agent",
            subject,
            Status::Ok,
            format!(
                "{} found; steward mcp registered as {}",
                path.display(),
                describe(r)
            ),
        ),
        (Some(path), None, Some(r)) => Check::new(
            "agent",
            subject,
            Status::Warning,
            format!(
                "{} found; steward mcp registered only for another workspace: {}",
                path.display(),
                describe(r)
            ),
        )
        .fix(agent.register.clone()),
        (Some(path), None, None) => Check::new(
            "agent",
            subject,
            Status::Warning,
            format!(
                "{} found; steward mcp is not registered with it",
                path.display()
            ),
        )
        .fix(agent.register.clone()),
        (None, _, Some(r)) => Check::new(
            "agent",
            subject,
            Status::Info,
            format!("not on PATH; steward mcp is registered as {}", describe(r)),
        ),
        (None, _, None) => Check::new("agent", subject, Status::Info, "not on PATH".into()),
    };
    checks.push(check);
    checks
}

/// Whether a registration serves this workspace: it names it, or names
/// none (`steward mcp` then serves the agent's working directory).
fn for_this_workspace(r: &Registration, workspace: &Path) -> bool {
    match &r.workspace {
        None => true,
        Some(dir) => Path::new(dir)
            .canonicalize()
            .is_ok_and(|dir| dir == workspace),
    }
}

/// The `steward mcp` entries of one file; absent is none.
fn entries(source: &Source, workspace: &Path) -> Result<Vec<Registration>, String> {
    let text = match std::fs::read_to_string(&source.path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    let servers: Vec<(String, Value)> = match source.format {
        Format::Json(pointer) => {
            let doc = steward_schema::jsonc::parse(&text).map_err(|e| e.to_string())?;
            servers_at(doc.value.pointer(pointer))
        }
        Format::ClaudeProjects => {
            let doc = steward_schema::jsonc::parse(&text).map_err(|e| e.to_string())?;
            let projects = doc.value.get("projects").and_then(Value::as_object);
            projects
                .into_iter()
                .flatten()
                .filter(|(dir, _)| {
                    Path::new(dir)
                        .canonicalize()
                        .is_ok_and(|dir| dir == workspace)
                })
                .flat_map(|(_, project)| servers_at(project.get("mcpServers")))
                .collect()
        }
        Format::CodexToml => codex_servers(&text)?,
    };
    Ok(servers
        .into_iter()
        .filter_map(|(name, entry)| registration(source, name, &entry))
        .collect())
}

fn servers_at(value: Option<&Value>) -> Vec<(String, Value)> {
    value
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, entry)| (name.clone(), entry.clone()))
        .collect()
}

/// Codex's `[mcp_servers.NAME]` tables, as `{command, args}` values.
fn codex_servers(text: &str) -> Result<Vec<(String, Value)>, String> {
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        e.to_string().lines().next().unwrap_or_default().to_owned()
    })?;
    let Some(servers) = doc.get("mcp_servers").and_then(|s| s.as_table_like()) else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .filter_map(|(name, item)| {
            let table = item.as_table_like()?;
            let command = table.get("command")?.as_str()?;
            let args: Vec<Value> = table
                .get("args")
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(|s| Value::String(s.to_owned())))
                .collect();
            Some((
                name.to_owned(),
                serde_json::json!({"command": command, "args": args}),
            ))
        })
        .collect())
}

/// The entry as a registration, if it runs `steward mcp`.
fn registration(source: &Source, name: String, entry: &Value) -> Option<Registration> {
    let command = entry.get("command")?.as_str()?.to_owned();
    let args: Vec<String> = entry
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let spec = McpServerSpec {
        command: Some(command.clone()),
        args: Some(args.clone()),
        ..Default::default()
    };
    if !is_self_reference(&spec) {
        return None;
    }
    let workspace = args
        .iter()
        .position(|a| a == "--workspace")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--workspace=").map(str::to_owned))
        });
    Some(Registration {
        scope: source.scope,
        path: source.path.clone(),
        name,
        command,
        workspace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(format: Format) -> Source {
        Source {
            scope: "user",
            path: PathBuf::from("/nonexistent"),
            format,
        }
    }

    #[test]
    fn a_steward_mcp_entry_is_a_registration_with_its_workspace() {
        let s = source(Format::Json("/mcpServers"));
        let entry = serde_json::json!({"command": "/usr/bin/steward", "args": ["mcp", "--workspace", "/w"]});
        let r = registration(&s, "st".into(), &entry).unwrap();
        assert_eq!(r.workspace.as_deref(), Some("/w"));
        let entry = serde_json::json!({"command": "steward", "args": ["--workspace=/v", "mcp"]});
        let r = registration(&s, "st".into(), &entry).unwrap();
        assert_eq!(r.workspace.as_deref(), Some("/v"));
        for other in [
            serde_json::json!({"command": "steward", "args": ["run"]}),
            serde_json::json!({"command": "npx", "args": ["mcp"]}),
            serde_json::json!({"url": "http://127.0.0.1:7331/mcp"}),
        ] {
            assert!(registration(&s, "x".into(), &other).is_none(), "{other}");
        }
    }

    #[test]
    fn codex_tables_are_read() {
        let text = "model = \"o3\"\n[mcp_servers.steward]\ncommand = \"steward\"\nargs = [\"mcp\", \"--workspace\", \"/w\"]\n[mcp_servers.other]\ncommand = \"npx\"\n";
        let servers = codex_servers(text).unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].1["args"][0], "mcp");
        assert!(codex_servers("[mcp_servers\n").is_err());
        assert!(codex_servers("").unwrap().is_empty());
    }
}
