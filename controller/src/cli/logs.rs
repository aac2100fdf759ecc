//! `steward logs NAME [-f] [--previous] [--tail N]`: the stderr lines the
//! running controller kept for a server's process; with `-f`, every new
//! line as it comes, across restarts (a new process is announced on
//! stderr).

use std::process::ExitCode;

use super::client::{REQUEST_TIMEOUT, need_controller, runtime};
use super::{CommandError, Io};
use crate::cli::args::LogsArgs;
use crate::control::client::{self, Logs};
use crate::control::{ControlError, LogsQuery};
use crate::observe::logs::LogChunk;
use crate::support::paths::Paths;

pub fn run(paths: &Paths, args: &LogsArgs, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let query = LogsQuery {
        name: args.name.clone(),
        kind: args.kind.map(|k| k.kind()),
        previous: args.previous,
        follow: args.follow,
        tail: args.tail,
    };
    let no_controller = |e| need_controller(paths, e);
    if !args.follow {
        let logs = rt
            .block_on(client::logs(&socket, &query, REQUEST_TIMEOUT))
            .map_err(no_controller)?;
        print(&logs, &mut None, io)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut stream = rt
        .block_on(client::follow_logs(&socket, &query))
        .map_err(no_controller)?;
    let mut pid = None;
    // The stream ends after a notice when the server leaves the configuration.
    let mut last_was_notice = false;
    loop {
        match rt.block_on(stream.next()) {
            None | Some(Err(ControlError::Closed)) => {
                if !last_was_notice {
                    writeln!(io.err, "the controller stopped")?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(logs)) => {
                last_was_notice = matches!(logs, Logs::Notice(_));
                print(&logs, &mut pid, io)?;
                io.out.flush()?;
            }
        }
    }
}

/// Print the lines of an answer; a notice (no process yet, the server
/// left) goes to stderr, and so does the start of a new process while
/// following (`pid` is the one printed last).
fn print(logs: &Logs, pid: &mut Option<u32>, io: &mut Io<'_>) -> Result<(), CommandError> {
    if let Logs::Notice(notice) = logs {
        writeln!(io.err, "{notice}")?;
    }
    if let Logs::Lines(LogChunk {
        pid: this,
        lines,
        dropped,
        ..
    }) = logs
    {
        match pid {
            None if *dropped > 0 => {
                writeln!(io.err, "({dropped} older lines were not kept)")?;
            }
            Some(p) if p != this => {
                writeln!(io.err, "--- a new process started (pid {this})")?;
            }
            _ => {}
        }
        *pid = Some(*this);
        for line in lines {
            writeln!(io.out, "{line}")?;
        }
    }
    Ok(())
}
