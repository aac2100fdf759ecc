//! The edge: `steward`'s command line. [`main`] parses the arguments
//! ([`args`]), runs one command (one file each below) given the process
//! environment and where to write, and maps the outcome to an exit code:
//! 0 ok, 1 an error or invalid input (`steward: failed to …` on stderr),
//! 2 usage.
//!
//! The same executable is also the exec shim every server is started through
//! (`steward __steward-exec <controller pid> <program> <args>...`, see
//! [`crate::runtime::process`]); that mode is dispatched before anything else.

pub(crate) mod args;
pub(crate) mod output;

mod approve;
mod client;
mod completions;
mod describe;
mod doctor;
mod editor;
mod events;
mod export;
mod install_args;
mod logs;
mod lsp;
mod mcp;
mod reload;
mod restart;
mod run;
mod sandbox;
mod schema;
pub(crate) mod secret;
mod status;
mod stop;
mod tools;
mod validate;
pub mod version;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::FromArgMatches;
use clap::error::ErrorKind;

use crate::cli::args::{Cli, Command};
use crate::support::paths::process_env;
use crate::support::paths::{Paths, PathsError};

pub use crate::observe::clock::NOW_VAR;

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
    Editor(#[from] editor::EditorError),
    #[error(transparent)]
    Decision(#[from] approve::DecisionError),
    #[error(transparent)]
    Output(#[from] crate::cli::output::OutputError),
    #[error(transparent)]
    Control(#[from] crate::control::ControlError),
    #[error(transparent)]
    Run(#[from] crate::engine::RunError),
    #[error(transparent)]
    Check(#[from] crate::export::check::CheckError),
    #[error(transparent)]
    Render(#[from] crate::export::toolhive::RenderError),
    /// The controller answered with an error (already phrased for "failed to").
    #[error("{0}")]
    Controller(String),
    /// Writing the file the user named failed.
    #[error("write {}: {source}", path.display())]
    WriteFile { path: PathBuf, source: io::Error },
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
        Command::Schema(args) => match args.editor {
            Some(editor) => editor::run(&resolve_paths(&workspace, env)?, editor, args.write, io),
            None => schema::run(args.name.as_deref(), args.out.as_deref(), io),
        },
        Command::Validate(args) => {
            let paths = resolve_paths(&workspace, env)?;
            validate::run(&paths, &args.desired.inputs(), &args.files, env, io)
        }
        Command::Status(args) => {
            let paths = resolve_paths(&workspace, env)?;
            let now = now(env)?;
            if args.offline {
                status::run_offline(
                    &paths,
                    &args.desired.inputs(),
                    args.output,
                    args.show_secrets,
                    env,
                    now,
                    io,
                )
            } else {
                status::run_live(
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
        Command::Approve(args) if args.tools => {
            let paths = resolve_paths(&workspace, env)?;
            approve::accept_tools(&paths, &args.decision.names, args.decision.all, io)
        }
        Command::Approve(args) => {
            let paths = resolve_paths(&workspace, env)?;
            approve::run(
                &paths,
                approve::Verb::Approve,
                &args.decision.names,
                args.decision.all,
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
        Command::Run(args) => run::run(&workspace, args),
        Command::Mcp(args) => mcp::run(&workspace, args),
        Command::Reload => reload::run(&resolve_paths(&workspace, env)?, io),
        Command::Stop(args) => stop::run(&resolve_paths(&workspace, env)?, &args.names, true, io),
        Command::Lsp(args) => lsp::run(&resolve_paths(&workspace, env)?, args, io),
        Command::Describe(args) => {
            let paths = resolve_paths(&workspace, env)?;
            describe::run(&paths, &args, env, now(env)?, io)
        }
        Command::Logs(args) => logs::run(&resolve_paths(&workspace, env)?, &args, io),
        Command::Export(args) => {
            let paths = resolve_paths(&workspace, env)?;
            export::run(&paths, &args, env, io)
        }
        Command::Tools(args) => tools::run(&resolve_paths(&workspace, env)?, &args, io),
        Command::Events(args) => {
            events::run(&resolve_paths(&workspace, env)?, &args, now(env)?, io)
        }
        Command::Restart(args) => restart::run(&resolve_paths(&workspace, env)?, &args, io),
        Command::Start(args) => stop::run(&resolve_paths(&workspace, env)?, &args.names, false, io),
        Command::Secret(args) => secret::run(&resolve_paths(&workspace, env)?, args, env, io),
        Command::Sandbox(args) => sandbox::run(&resolve_paths(&workspace, env)?, args, env, io),
        Command::Doctor(args) => {
            doctor::run(&resolve_paths(&workspace, env)?, &args, env, now(env)?, io)
        }
        Command::Completions(args) => completions::completions(&args, io),
        Command::Man(args) => completions::man(&args, io),
    }
}

/// The whole `steward` command line: parse, run, map the outcome to an exit code.
pub fn main() -> ExitCode {
    // Never returns in shim mode. First, before logging, clap or tokio: the
    // shim is on the path of every server start.
    crate::runtime::process::run_exec_shim_if_requested();
    // clap prints help/version (exit 0) and usage errors (exit 2) itself.
    let cli = Cli::from_arg_matches(&version::command().get_matches()).unwrap_or_else(|e| e.exit());
    let env = process_env();
    // Unlocked handles: `run` logs to stderr from other threads for hours.
    let (mut out, mut err) = (io::stdout(), io::stderr());
    let result = run(
        cli,
        &env,
        &mut Io {
            out: &mut out,
            err: &mut err,
        },
    );
    match result {
        Ok(code) => code,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(CommandError::Usage {
            subcommand,
            message,
        }) => {
            let mut cmd = version::command();
            cmd.build();
            let cmd = cmd
                .find_subcommand_mut(subcommand)
                .expect("usage errors name a defined subcommand");
            cmd.error(ErrorKind::ValueValidation, message).exit()
        }
        Err(e) => {
            let e = anyhow::Error::from(e);
            // Messages already carry their cause; print the outermost only.
            // Not eprintln!: it panics when stderr is a closed pipe.
            let _ = writeln!(io::stderr(), "steward: failed to {e}");
            ExitCode::from(1)
        }
    }
}
