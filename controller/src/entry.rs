//! The `steward` binary's entry point, in the library so that the envtest
//! crate can build the very same program as its own binary target (cargo
//! then rebuilds it before the integration tests run). Errors print as
//! `steward: failed to <what>` on stderr; exit codes 0 ok, 1 error or invalid
//! input, 2 usage.

use std::io;
use std::process::ExitCode;

use crate::cli::Cli;
use crate::commands::{self, CommandError, Io};
use crate::paths;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

/// The whole `steward` command line: parse, run, map the outcome to an exit code.
pub fn main() -> ExitCode {
    // clap prints help/version (exit 0) and usage errors (exit 2) itself.
    let cli = Cli::parse();
    let env = paths::process_env();
    // Unlocked handles: `run` logs to stderr from other threads for hours.
    let (mut out, mut err) = (io::stdout(), io::stderr());
    let result = commands::run(
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
            eprintln!("steward: failed to {e}");
            ExitCode::from(1)
        }
    }
}
