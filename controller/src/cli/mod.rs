//! What each `steward` subcommand does, given its parsed arguments, the
//! process environment and where to write. Every command returns the exit
//! code for a normal outcome (0, or 1 for invalid input) or a
//! [`CommandError`]; the binary turns errors into `steward: failed to …`
//! (exit 1) or a usage message (exit 2).

pub mod args;
pub mod entry;
pub mod output;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use crate::cli::args::{Cli, Command};
use crate::support::paths::{Paths, PathsError};

pub mod approve;
pub mod describe;
pub mod events;
pub mod live;
pub mod logs;
pub mod lsp;
pub mod schema;
pub mod status;
pub mod validate;

/// The variable that pins "now" (for tests and reproducible output).
pub const NOW_VAR: &str = "STEWARD_NOW";

/// Why a command could not do its job. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// Bad usage that clap could not catch; the binary exits 2.
    #[error("{message}")]
    Usage {
        /// The subcommand whose usage to show.
        subcommand: &'static str,
        message: String,
    },
    #[error(transparent)]
    Paths(#[from] PathsError),
    #[error(
        "read {NOW_VAR}={value:?}: {source} (expected an RFC 3339 time such as 2025-01-01T00:00:00Z)"
    )]
    Now {
        value: String,
        source: humantime::TimestampError,
    },
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    #[error(transparent)]
    Decision(#[from] approve::DecisionError),
    #[error(transparent)]
    Output(#[from] crate::cli::output::OutputError),
    #[error(transparent)]
    Control(#[from] crate::control::ControlError),
    #[error(transparent)]
    Run(#[from] crate::engine::RunError),
    /// The controller answered with an error (already phrased for "failed to").
    #[error("{0}")]
    Controller(String),
    /// Writing our own output failed (a closed pipe is not reported).
    #[error("write the output: {0}")]
    Io(#[from] io::Error),
}

impl CommandError {
    /// Whether this is only the reader of our output going away
    /// (`steward status | head`), which is not worth an error message.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, CommandError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// Where a command writes.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
}

/// "Now": `STEWARD_NOW` when set, else the system clock.
pub fn now(env: &BTreeMap<String, String>) -> Result<SystemTime, CommandError> {
    match env.get(NOW_VAR).filter(|v| !v.is_empty()) {
        None => Ok(SystemTime::now()),
        Some(value) => humantime::parse_rfc3339_weak(value).map_err(|source| CommandError::Now {
            value: value.clone(),
            source,
        }),
    }
}

/// Resolve the paths of the workspace `dir` under `env`.
pub fn resolve_paths(
    dir: &std::path::Path,
    env: &BTreeMap<String, String>,
) -> Result<Paths, CommandError> {
    Ok(Paths::resolve(dir, env)?)
}

/// Run the parsed command line.
pub fn run(
    cli: Cli,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let workspace: PathBuf = cli.workspace;
    match cli.command {
        Command::Schema(args) => schema::run(args.name.as_deref(), args.out.as_deref(), io),
        Command::Validate(args) => {
            let paths = resolve_paths(&workspace, env)?;
            validate::run(&paths, &args.desired.inputs(), &args.files, env, io)
        }
        Command::Status(args) => {
            let paths = resolve_paths(&workspace, env)?;
            let now = now(env)?;
            if args.offline {
                status::run(
                    &paths,
                    &args.desired.inputs(),
                    args.output,
                    args.show_secrets,
                    env,
                    now,
                    io,
                )
            } else {
                live::status(
                    &paths,
                    &args.desired.inputs(),
                    args.output,
                    args.watch,
                    args.show_secrets,
                    env,
                    now,
                    io,
                )
            }
        }
        Command::Approve(args) => {
            let paths = resolve_paths(&workspace, env)?;
            approve::run(
                &paths,
                approve::Verb::Approve,
                &args.names,
                args.all,
                env,
                io,
            )
        }
        Command::Reject(args) => {
            let paths = resolve_paths(&workspace, env)?;
            approve::run(
                &paths,
                approve::Verb::Reject,
                &args.names,
                args.all,
                env,
                io,
            )
        }
        Command::Run(args) => live::run(&workspace, args),
        Command::Mcp(args) => live::mcp(&workspace, args),
        Command::Reload => live::reload(&resolve_paths(&workspace, env)?, io),
        Command::Stop(args) => {
            live::stop_start(&resolve_paths(&workspace, env)?, &args.names, true, io)
        }
        Command::Lsp(args) => lsp::run(&resolve_paths(&workspace, env)?, args, io),
        Command::Describe(args) => {
            let paths = resolve_paths(&workspace, env)?;
            describe::run(&paths, &args, env, now(env)?, io)
        }
        Command::Logs(args) => logs::run(&resolve_paths(&workspace, env)?, &args, io),
        Command::Events(args) => {
            events::run(&resolve_paths(&workspace, env)?, &args, now(env)?, io)
        }
        Command::Restart(args) => live::restart(&resolve_paths(&workspace, env)?, &args.names, io),
        Command::Start(args) => {
            live::stop_start(&resolve_paths(&workspace, env)?, &args.names, false, io)
        }
    }
}
