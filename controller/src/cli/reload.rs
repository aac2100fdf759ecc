//! `steward reload`: re-read every source now and wait for the reload's
//! outcome.

use std::process::ExitCode;

use super::client::{REQUEST_TIMEOUT, need_controller, runtime};
use super::{CommandError, Io};
use crate::control::client::{self, Reloaded};
use crate::support::paths::Paths;
/// `steward reload`.
pub fn run(paths: &Paths, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let reloaded = rt
        .block_on(client::reload(&paths.socket_path(), REQUEST_TIMEOUT))
        .map_err(|e| need_controller(paths, e))?;
    match reloaded {
        Reloaded::Summary(s) => {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "-".to_owned()
                } else {
                    v.join(", ")
                }
            };
            writeln!(io.out, "added:     {}", list(&s.added))?;
            writeln!(io.out, "removed:   {}", list(&s.removed))?;
            writeln!(io.out, "restarted: {}", list(&s.restarted))?;
            writeln!(io.out, "failed:    {}", list(&s.failed))?;
            writeln!(io.out, "unchanged: {}", s.unchanged.len())?;
            for skip in &s.skipped {
                writeln!(io.out, "skipped:   {} ({})", skip.name, skip.reason)?;
            }
            Ok(if s.failed.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Reloaded::Note(note) => {
            writeln!(io.out, "{note}")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
