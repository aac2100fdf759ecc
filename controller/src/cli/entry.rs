//! The `steward` binary's entry point, in the library so that the envtest
//! crate can build the very same program as its own binary target (cargo
//! then rebuilds it before the integration tests run). Errors print as
//! `steward: failed to <what>` on stderr; exit codes 0 ok, 1 error or invalid
//! input, 2 usage.
//!
//! The same executable is also the exec shim every server is started through
//! (`steward __steward-exec <controller pid> <program> <args>...`, see
//! [`crate::runtime::process`]); that mode is dispatched before anything else.

use std::io::{self, Write as _};
use std::process::ExitCode;

use crate::cli::args::Cli;
use crate::cli::{self, CommandError, Io};
use crate::support::paths;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

/// The whole `steward` command line: parse, run, map the outcome to an exit code.
pub fn main() -> ExitCode {
    // Never returns in shim mode. First, before logging, clap or tokio: the
    // shim is on the path of every server start.
    crate::runtime::process::run_exec_shim_if_requested();
    // clap prints help/version (exit 0) and usage errors (exit 2) itself.
    let cli = Cli::parse();
    let env = paths::process_env();
    // Unlocked handles: `run` logs to stderr from other threads for hours.
    let (mut out, mut err) = (io::stdout(), io::stderr());
    let result = cli::run(
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
            let mut cmd = Cli::command();
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
