//! `steward restart`: restart each named server once and say how it came
//! back.

use std::collections::BTreeMap;
use std::process::ExitCode;

use steward_schema::resource::WorkspaceStatus;

use super::args::RestartArgs;
use super::client::{REQUEST_TIMEOUT, need_controller, runtime};
use super::{CommandError, Io};
use crate::control::client;
use crate::support::paths::Paths;
/// `steward restart`: restart each server once and say how it came back.
pub fn run(paths: &Paths, args: &RestartArgs, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let names = &args.names;
    let rt = runtime()?;
    let socket = paths.socket_path();
    let status = || {
        rt.block_on(client::status(&socket, false, REQUEST_TIMEOUT))
            .map_err(|e| need_controller(paths, e))
    };
    let pids = |status: WorkspaceStatus| -> BTreeMap<(String, String), Option<u32>> {
        status
            .items
            .iter()
            .map(|i| ((i.kind().to_string(), i.name().to_owned()), i.status().pid))
            .collect()
    };
    let before = pids(status()?);
    rt.block_on(client::restart(&socket, names, args.now, REQUEST_TIMEOUT))
        .map_err(|e| need_controller(paths, e))?;
    let after = status()?;
    let mut failed = false;
    for item in &after.items {
        if !names.iter().any(|n| n == item.name()) {
            continue;
        }
        let key = (item.kind().to_string(), item.name().to_owned());
        let status = item.status();
        let was = before.get(&key).copied().flatten();
        let pid = |p: Option<u32>| p.map_or_else(|| "-".to_owned(), |p| p.to_string());
        match status.phase {
            steward_schema::resource::Phase::Ready => writeln!(
                io.out,
                "restarted {} {} (pid {} -> {})",
                item.kind(),
                item.name(),
                pid(was),
                pid(status.pid)
            )?,
            phase => {
                failed = true;
                let reason = status
                    .reason
                    .map_or_else(String::new, |r| format!(" ({r})"));
                let message = status
                    .message
                    .as_deref()
                    .and_then(|m| m.lines().next())
                    .map_or_else(String::new, |m| format!(": {m}"));
                writeln!(
                    io.err,
                    "restart {} {}: it is {phase:?}{reason}{message}",
                    item.kind(),
                    item.name()
                )?;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
