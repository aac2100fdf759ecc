//! `steward status`: the `WorkspaceStatus` of the workspace, rendered as a
//! table, JSON or YAML. No controller exists yet in this version, so every
//! status is the offline view ([`crate::offline::offline_status`]); without
//! `--offline` a note on stderr says so.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::SystemTime;

use super::{CommandError, Io};
use crate::offline::{Inputs, offline_status};
use crate::output::{self, Format};
use crate::paths::Paths;

pub fn run(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    offline: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    if !offline {
        writeln!(
            io.err,
            "no controller is running for {}; showing the offline view",
            paths.workspace.display()
        )?;
    }
    let status = offline_status(paths, inputs, env, now);
    let text = output::render(&status, format, now)?;
    io.out.write_all(text.as_bytes())?;
    if format == Format::Table {
        if status.items.is_empty() {
            writeln!(
                io.err,
                "no servers are configured for {}",
                paths.workspace.display()
            )?;
        }
        for warning in output::source_warnings(&status) {
            writeln!(io.err, "{warning}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
