//! `steward secret set|list|rm|move`: the user's secrets, which
//! `${secret:NAME}` references in any config file resolve to when a server
//! starts. A value is read from stdin or a prompt without echo — never from
//! the command line — and is never printed. After `set` and `rm` every
//! running controller of this HOME_DIR is told, and restarts exactly the
//! servers whose values changed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead as _, IsTerminal as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;
use steward_schema::load::LoadMode;
use steward_schema::secret_move::{self, Field};
use steward_schema::secrets as refs;

use super::client::runtime;
use super::prompt::{EchoOff, trim_line};
use super::{CommandError, Io};
use crate::cli::output::{self, Format, Table};
use crate::control::{Request, client};
use crate::desired::offline::{Inputs, load_desired};
use crate::desired::secret_move as file_move;
use crate::runtime::secrets::{self, BackendKind, SecretBackend, SecretValue};
use crate::support::paths::Paths;

/// The long help of `steward secret`.
pub const SECRET_ABOUT: &str = "\
Secrets are the values of ${secret:NAME} references, which any string field Steward expands \
(command, args, env, cwd, url, httpUrl, headers) may hold, in every config file and .lsp.json. \
A reference is resolved only when the server starts: the files, status, logs and events keep \
${secret:NAME}, and each server gets only its own values.

Secrets belong to the user: every workspace sees the same names. They live in the desktop \
keyring through the Secret Service (items with attributes service=steward name=NAME, so \
`secret-tool store --label=X service steward name NAME` stores one too), or, when no Secret \
Service is on the session bus, in HOME_DIR/steward/secrets.json (mode 0600). `set` and `rm` \
tell every running controller, which restarts exactly the servers whose values changed; a \
change made with another tool is seen at `steward reload` and at start.

`move` takes a credential written literally out of a config file: it stores it, then rewrites \
that one value to ${secret:NAME} (the rest of the file byte for byte as it was); the server \
keeps running (its values are the same) and an approved entry stays approved.

Examples:
  steward secret set github-token            (prompts without echo)
  printf %s \"$TOKEN\" | steward secret set github-token
  steward secret list -o json
  steward secret move .mcp.json github env.GITHUB_TOKEN --name github-token
  steward secret rm github-token";

/// `steward secret`.
#[derive(Debug, Args)]
pub struct SecretArgs {
    #[command(subcommand)]
    pub action: SecretAction,
}

#[derive(Debug, Subcommand)]
pub enum SecretAction {
    /// Store a secret: the value from stdin, or a prompt that does not echo
    Set {
        /// The secret's name ([A-Za-z0-9_.-]+), as in ${secret:NAME}
        name: String,
    },
    /// List secrets: name, whether set, the servers of this workspace that use it (never a value)
    List {
        /// Output format
        #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Remove a secret
    Rm {
        /// The secret's name
        name: String,
    },
    /// Move a credential written literally in a config file into a secret
    Move {
        /// The config file (settings.json, .mcp.json, .lsp.json)
        file: PathBuf,
        /// The server whose entry holds it
        server: String,
        /// Where in the entry: env.NAME, headers.NAME, args.N, url, httpUrl
        field: String,
        /// The secret's name (default: SERVER.FIELD)
        #[arg(long)]
        name: Option<String>,
    },
}

fn failed(message: impl Into<String>) -> CommandError {
    CommandError::Controller(message.into())
}

fn check_name(name: &str) -> Result<(), CommandError> {
    if refs::is_valid_name(name) {
        Ok(())
    } else {
        Err(failed(
            secrets::SecretError::BadName(name.to_owned()).to_string(),
        ))
    }
}

/// Where a backend keeps secrets, for the user.
pub(crate) fn backend_words(kind: BackendKind, paths: &Paths) -> String {
    match kind {
        BackendKind::SecretService => "the Secret Service (the desktop keyring)".to_owned(),
        BackendKind::File => format!(
            "{} (no Secret Service on the session bus)",
            secrets::file_store_path(&paths.home_dir).display()
        ),
    }
}

pub fn run(
    paths: &Paths,
    args: SecretArgs,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let backend = rt.block_on(secrets::open(&paths.home_dir));
    match args.action {
        SecretAction::Set { name } => {
            check_name(&name)?;
            let value = read_value(&name)?;
            rt.block_on(backend.set(&name, &value))
                .map_err(|e| failed(e.to_string()))?;
            writeln!(
                io.out,
                "stored {name} in {}",
                backend_words(backend.kind(), paths)
            )?;
            tell_controllers(&rt, paths, &name, io)?;
            Ok(ExitCode::SUCCESS)
        }
        SecretAction::Rm { name } => {
            check_name(&name)?;
            let removed = rt
                .block_on(backend.remove(&name))
                .map_err(|e| failed(e.to_string()))?;
            if !removed {
                return Err(failed(format!(
                    "remove the secret {name}: it is not set in {}",
                    backend_words(backend.kind(), paths)
                )));
            }
            writeln!(
                io.out,
                "removed {name} from {}",
                backend_words(backend.kind(), paths)
            )?;
            tell_controllers(&rt, paths, &name, io)?;
            Ok(ExitCode::SUCCESS)
        }
        SecretAction::List { output } => list(&rt, paths, &*backend, env, output, io),
        SecretAction::Move {
            file,
            server,
            field,
            name,
        } => move_literal(
            &rt,
            paths,
            &*backend,
            (&file, &server, &field, name),
            env,
            io,
        ),
    }
}

/// A value from stdin (one trailing newline dropped), or from a prompt on
/// the terminal that does not echo.
fn read_value(name: &str) -> Result<SecretValue, CommandError> {
    let stdin = io::stdin();
    let mut value = String::new();
    if stdin.is_terminal() {
        eprint!("value of {name} (not echoed): ");
        let _ = io::stderr().flush();
        let echo = EchoOff::new(libc::STDIN_FILENO);
        let read = stdin.lock().read_line(&mut value);
        drop(echo);
        eprintln!();
        read?;
    } else {
        stdin.lock().read_to_string(&mut value)?;
    }
    let value = trim_line(&value).to_owned();
    if value.is_empty() {
        return Err(failed(format!(
            "store the secret {name}: the value is empty (give it on stdin or at the prompt)"
        )));
    }
    Ok(SecretValue::new(value))
}

/// Tells every running controller of the user that `name` changed; says
/// what each answered.
fn tell_controllers(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    name: &str,
    io: &mut Io<'_>,
) -> Result<(), CommandError> {
    let asked = Request::SecretsChanged {
        names: vec![name.to_owned()],
    };
    for (socket, answer) in rt.block_on(client::tell_every_controller(paths, &asked)) {
        writeln!(io.out, "controller {}: {answer}", controller_id(&socket))?;
    }
    Ok(())
}

/// The state directory's name, which identifies a controller.
pub(super) fn controller_id(socket: &Path) -> String {
    socket
        .parent()
        .and_then(Path::file_name)
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// One row of `steward secret list`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    name: String,
    /// Whether the store holds a value.
    set: bool,
    /// `McpServer/NAME`, `LspServer/NAME` of this workspace.
    used_by: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SecretList {
    /// `secret-service` or `file`.
    backend: &'static str,
    /// The file store's path (backend `file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    items: Vec<Row>,
}

fn list(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    backend: &dyn SecretBackend,
    env: &BTreeMap<String, String>,
    output: Format,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let stored: BTreeSet<String> = rt
        .block_on(backend.names())
        .map_err(|e| failed(e.to_string()))?
        .into_iter()
        .collect();
    let (_, state) = load_desired(paths, &Inputs::default(), env, LoadMode::Lenient);
    let mut used: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (server, d) in &state.mcp {
        for name in refs::mcp_names(&d.spec) {
            used.entry(name)
                .or_default()
                .push(format!("McpServer/{server}"));
        }
    }
    for (server, d) in &state.lsp {
        for name in refs::lsp_names(&d.spec) {
            used.entry(name)
                .or_default()
                .push(format!("LspServer/{server}"));
        }
    }
    let names: BTreeSet<&String> = stored.iter().chain(used.keys()).collect();
    let items: Vec<Row> = names
        .into_iter()
        .map(|name| Row {
            name: name.clone(),
            set: stored.contains(name),
            used_by: used.get(name).cloned().unwrap_or_default(),
        })
        .collect();
    let doc = SecretList {
        backend: backend.kind().as_str(),
        path: (backend.kind() == BackendKind::File).then(|| {
            secrets::file_store_path(&paths.home_dir)
                .display()
                .to_string()
        }),
        items,
    };
    match output {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&doc).map_err(output::OutputError::from)?;
            text.push('\n');
            io.out.write_all(text.as_bytes())?;
        }
        Format::Yaml => {
            let text = yaml_serde::to_string(&doc).map_err(output::OutputError::from)?;
            io.out.write_all(text.as_bytes())?;
        }
        Format::Table | Format::Wide => {
            let cells: Vec<Vec<String>> = doc
                .items
                .iter()
                .map(|r| {
                    let used_by = if r.used_by.is_empty() {
                        "-".to_owned()
                    } else {
                        r.used_by.join(",")
                    };
                    let set = if r.set { "yes" } else { "no" };
                    vec![r.name.clone(), set.to_owned(), used_by]
                })
                .collect();
            let mut table = Table::new(vec!["NAME".into(), "SET".into(), "USED BY".into()]);
            table.fit(&cells);
            let mut out = table.header_line();
            for r in &cells {
                out.push_str(&table.line(r));
            }
            io.out.write_all(out.as_bytes())?;
            writeln!(
                io.out,
                "\nbackend: {}",
                backend_words(backend.kind(), paths)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The workspace a config file belongs to: `.mcp.json` / `.lsp.json` in
/// it, or `.qwen/settings.json` under it; else the one of the command line.
fn workspace_of(file: &Path, paths: &Paths, env: &BTreeMap<String, String>) -> Paths {
    let name = file.file_name().and_then(|n| n.to_str());
    let dir = file.parent();
    let root = match name {
        Some(".mcp.json" | ".lsp.json") => dir,
        Some("settings.json") if dir.and_then(Path::file_name).is_some_and(|d| d == ".qwen") => {
            dir.and_then(Path::parent)
        }
        _ => None,
    };
    root.filter(|r| !r.as_os_str().is_empty())
        .and_then(|r| Paths::resolve(r, env).ok())
        .filter(|p| p.home_dir == paths.home_dir && p.user_settings != file)
        .unwrap_or_else(|| paths.clone())
}

fn move_literal(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    backend: &dyn SecretBackend,
    (file, server, field, name): (&Path, &str, &str, Option<String>),
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let file = std::path::absolute(file)?;
    let parsed = Field::parse(field).map_err(|e| failed(e.to_string()))?;
    let name = name.unwrap_or_else(|| secret_move::default_name(server, &parsed));
    check_name(&name)?;
    let edit = file_move::plan(&file, server, &parsed, &name).map_err(|e| failed(e.to_string()))?;
    let value = SecretValue::new(edit.value.clone());
    rt.block_on(backend.set(&name, &value))
        .map_err(|e| failed(e.to_string()))?;
    writeln!(
        io.out,
        "stored {name} in {}",
        backend_words(backend.kind(), paths)
    )?;
    // The controller of the file's workspace rewrites it itself, so the
    // file and the approval change in one step (no restart, no gap).
    let ws = workspace_of(&file, paths, env);
    let asked = Request::SecretMove {
        file: file.clone(),
        server: server.to_owned(),
        field: parsed.to_string(),
        name: name.clone(),
    };
    match rt.block_on(client::secret_move(
        &ws.socket_path(),
        asked,
        client::NOTIFY_TIMEOUT,
    )) {
        Ok(message) => writeln!(io.out, "{message}")?,
        Err(crate::control::ControlError::Connect { .. }) => {
            let moved = file_move::commit(&ws, &file, server, &parsed, &name, &edit.value, env)
                .map_err(|e| failed(e.to_string()))?;
            writeln!(
                io.out,
                "{parsed} of {server} in {} is now ${{secret:{name}}}{}",
                file.display(),
                if moved.approved {
                    "; its approval was renewed"
                } else {
                    ""
                }
            )?;
        }
        Err(other) => return Err(other.into()),
    }
    Ok(ExitCode::SUCCESS)
}
