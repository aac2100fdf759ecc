//! `steward doctor`: what a user runs when something is off. One list of
//! checks — this binary, HOME_DIR, the workspace's sources, the controller,
//! the kernel's sandbox support, each configured server's command, each
//! agent and whether `steward mcp` is registered with it — each `ok`,
//! `info`, `warning` or `error`, the last two with what to do. Exit 1 when
//! any check is an `error` (something needs the user), else 0.
//!
//! Doctor only reads: the files Steward reads, the agents' configuration
//! files (never written), the control socket. [`system`] owns the checks
//! of the machine, [`agents`] those of the agents.

mod agents;
mod system;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use steward_schema::resource::{Item, Phase, Reason, SourceState, WorkspaceStatus};

use super::{CommandError, Io};
use crate::cli::editor;
use crate::cli::install_args::DoctorArgs;
use crate::cli::output::Format;
use crate::control::client;
use crate::desired::offline::{Inputs, offline_status};
use crate::runtime::process::resolve_command;
use crate::support::paths::Paths;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Worth knowing; nothing to do.
    Info,
    /// Something to do, not blocking.
    Warning,
    /// Something that needs the user: doctor exits 1.
    Error,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warning => "warning",
            Status::Error => "error",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// What kind of check: steward, homeDir, source, controller, sandbox,
    /// server, agent, editorSchemas.
    pub check: &'static str,
    /// What it looked at: a path, a server, an agent.
    pub subject: String,
    pub status: Status,
    pub message: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn new(
        check: &'static str,
        subject: impl Into<String>,
        status: Status,
        message: String,
    ) -> Self {
        Check {
            check,
            subject: subject.into(),
            status,
            message,
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

/// `steward doctor -o json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub workspace: String,
    /// No check is an error.
    pub healthy: bool,
    pub checks: Vec<Check>,
}

/// How long doctor waits for a controller's answer.
const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(5);

/// `steward doctor`.
pub fn run(
    paths: &Paths,
    args: &DoctorArgs,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let search_path = env.get("PATH").map(String::as_str).unwrap_or_default();
    let status = offline_status(paths, &Inputs::default(), env, now);
    let mut checks = system::binary(paths, OsStr::new(search_path));
    checks.push(system::home_dir(paths));
    checks.extend(sources(&status));
    checks.push(controller(paths));
    checks.extend(system::sandbox());
    checks.extend(system::keyring(&paths.home_dir));
    checks.extend(servers(&status, &paths.workspace, OsStr::new(search_path)));
    checks.extend(agents::checks(paths, env, OsStr::new(search_path)));
    checks.extend(editor_schemas(paths));
    let report = DoctorReport {
        api_version: steward_schema::resource::API_VERSION,
        kind: "DoctorReport",
        workspace: paths.workspace.display().to_string(),
        healthy: !checks.iter().any(|c| c.status == Status::Error),
        checks,
    };
    match args.output {
        Format::Table | Format::Wide => render_text(&report, io)?,
        Format::Json => {
            let text = serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?;
            writeln!(io.out, "{text}")?;
        }
        Format::Yaml => {
            let text = yaml_serde::to_string(&report).map_err(std::io::Error::other)?;
            io.out.write_all(text.as_bytes())?;
        }
    }
    Ok(if report.healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn render_text(report: &DoctorReport, io: &mut Io<'_>) -> std::io::Result<()> {
    let width = report
        .checks
        .iter()
        .map(|c| c.check.len())
        .max()
        .unwrap_or(0);
    for c in &report.checks {
        let status = c.status.as_str();
        writeln!(
            io.out,
            "{status:<7} {:<width$}  {}: {}",
            c.check, c.subject, c.message
        )?;
        if let Some(fix) = &c.fix {
            writeln!(io.out, "{:<7} {:<width$}  → {fix}", "", "")?;
        }
    }
    let count = |s| report.checks.iter().filter(|c| c.status == s).count();
    let (errors, warnings) = (count(Status::Error), count(Status::Warning));
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match (errors, warnings) {
        (0, 0) => writeln!(io.out, "\nNothing needs you."),
        (0, w) => writeln!(
            io.out,
            "\nNothing needs you; {}.",
            plural(w, "warning", "warnings")
        ),
        (e, w) => writeln!(
            io.out,
            "\n{} {} you; {}.",
            plural(e, "error", "errors"),
            if e == 1 { "needs" } else { "need" },
            plural(w, "warning", "warnings")
        ),
    }
}

/// Every present source: valid (`ok`, or `warning` with what Steward
/// ignored), or invalid (`error`: the last valid content stays in force);
/// the absent ones in one `info` line.
fn sources(status: &WorkspaceStatus) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut absent = Vec::new();
    for source in &status.sources {
        let kind = source.kind.as_str().to_owned();
        let subject = format!("{} ({kind})", source.path);
        match source.state {
            SourceState::Absent => absent.push(kind),
            SourceState::Invalid => {
                let error = source.error.as_deref().unwrap_or("invalid");
                checks.push(
                    Check::new(
                        "source",
                        subject,
                        Status::Error,
                        format!("invalid: {error}"),
                    )
                    .fix(format!(
                        "correct the file; `steward validate {}` lists every problem",
                        source.path
                    )),
                );
            }
            SourceState::Valid if !source.warnings.is_empty() => {
                let first = &source.warnings[0];
                let more = match source.warnings.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                };
                checks.push(
                    Check::new(
                        "source",
                        subject,
                        Status::Warning,
                        format!("valid, with warnings: {first}{more}"),
                    )
                    .fix(format!("`steward validate {}` shows them all", source.path)),
                );
            }
            SourceState::Valid => {
                checks.push(Check::new("source", subject, Status::Ok, "valid".into()));
            }
        }
    }
    if !absent.is_empty() {
        checks.push(Check::new(
            "source",
            "absent",
            Status::Info,
            absent.join(", "),
        ));
    }
    checks
}

/// Whether a controller runs for the workspace: its pid and socket.
fn controller(paths: &Paths) -> Check {
    let socket = paths.socket_path();
    let subject = socket.display().to_string();
    let answer = super::client::runtime()
        .ok()
        .map(|rt| rt.block_on(client::status(&socket, false, CONTROLLER_TIMEOUT)));
    match answer {
        Some(Ok(status)) => {
            let pid = status
                .controller
                .pid
                .map_or_else(|| "?".to_owned(), |p| p.to_string());
            Check::new(
                "controller",
                subject,
                Status::Ok,
                format!("running, pid {pid}"),
            )
        }
        Some(Err(crate::control::ControlError::Connect { .. })) | None => Check::new(
            "controller",
            subject,
            Status::Info,
            "not running (an agent's `steward mcp` starts one while it is attached)".into(),
        )
        .fix(format!(
            "to keep one running: `steward run`, or `systemctl --user enable --now steward@$(systemd-escape --path {})`",
            paths.workspace.display()
        )),
        Some(Err(e)) => Check::new(
            "controller",
            subject,
            Status::Warning,
            format!("did not answer: {e}"),
        )
        .fix("restart it: stop `steward run` (or its service) and start it again"),
    }
}

/// Whether a server is meant to run: admitted, or waiting only for the
/// user's approval. An excluded, disabled or stopped one needs no command.
fn would_run(item: &Item) -> bool {
    let (phase, reason) = match item {
        Item::McpServer(s) => (s.status.phase, s.status.reason),
        Item::LspServer(s) => (s.status.phase, s.status.reason),
    };
    phase != Phase::Blocked || reason == Some(Reason::PendingApproval)
}

/// Each stdio server's command, resolved as a start would resolve it: a
/// bare name on PATH, a path from the server's working directory.
fn servers(status: &WorkspaceStatus, workspace: &Path, search_path: &OsStr) -> Vec<Check> {
    let mut checks = Vec::new();
    for item in &status.items {
        let (kind, command, cwd, source) = match item {
            Item::McpServer(s) => (
                "mcp",
                s.spec.command.as_deref(),
                s.spec
                    .cwd
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .map_or_else(|| workspace.to_path_buf(), |c| workspace.join(c)),
                &s.metadata.source,
            ),
            Item::LspServer(s) => (
                "lsp",
                s.spec.command.as_deref(),
                std::path::PathBuf::from(&s.spec.workspace_folder),
                &s.metadata.source,
            ),
        };
        let Some(command) = command else { continue };
        let subject = format!("{kind}/{}", item.name());
        let check = match resolve_command(command, &cwd, search_path) {
            Ok(path) => Check::new(
                "server",
                subject,
                Status::Ok,
                format!("{command} is {}", path.display()),
            ),
            Err(e) if would_run(item) => {
                let fix = if command.contains('/') {
                    format!(
                        "correct \"command\" in its {} entry (a relative path starts at the server's working directory, {})",
                        source.as_str(),
                        cwd.display()
                    )
                } else {
                    format!(
                        "install {command} on the PATH steward runs with, or give its absolute path as \"command\" in its {} entry",
                        source.as_str()
                    )
                };
                Check::new("server", subject, Status::Error, e.to_string()).fix(fix)
            }
            Err(e) => Check::new(
                "server",
                subject,
                Status::Info,
                format!("{e} (it does not run here: {})", blocked_reason(item)),
            ),
        };
        checks.push(check);
    }
    checks
}

fn blocked_reason(item: &Item) -> &'static str {
    let reason = match item {
        Item::McpServer(s) => s.status.reason,
        Item::LspServer(s) => s.status.reason,
    };
    reason.map_or("blocked", Reason::as_str)
}

/// The editor schemas, when the user installed them: written by another
/// build of steward means the editor checks against stale schemas.
fn editor_schemas(paths: &Paths) -> Option<Check> {
    let dir = editor::schemas_dir(paths);
    if !dir.exists() {
        return None;
    }
    let subject = dir.display().to_string();
    Some(if editor::is_current(&dir) {
        Check::new(
            "editorSchemas",
            subject,
            Status::Ok,
            "written by this build".into(),
        )
    } else {
        Check::new(
            "editorSchemas",
            subject,
            Status::Warning,
            "written by another build of steward (or incomplete)".into(),
        )
        .fix("`steward schema --editor vscode` writes them again")
    })
}
