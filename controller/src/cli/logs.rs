//! `steward logs NAME [-f] [--previous] [--tail N]`: the stderr lines the
//! running controller kept for a server's process; with `-f`, every new
//! line as it comes, across restarts (a new process is announced on
//! stderr).

use std::process::ExitCode;

use super::client::{REQUEST_TIMEOUT, answer, need_controller, runtime};
use super::{CommandError, Io};
use crate::cli::args::LogsArgs;
use crate::control::{self, LogsQuery, Request, Response};
use crate::observe::logs::LogChunk;
use crate::support::paths::Paths;

pub fn run(paths: &Paths, args: &LogsArgs, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let request = Request::Logs(LogsQuery {
        name: args.name.clone(),
        kind: args.kind.map(|k| k.kind()),
        previous: args.previous,
        follow: args.follow,
        tail: args.tail,
    });
    let no_controller = |e| need_controller(paths, e);
    if !args.follow {
        let response = rt
            .block_on(control::request(&socket, &request, REQUEST_TIMEOUT))
            .map_err(no_controller)?;
        let response = answer(response)?;
        print(&response, &mut None, io)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut stream = rt
        .block_on(control::stream(&socket, &request))
        .map_err(no_controller)?;
    let mut pid = None;
    // The stream ends after a notice when the server leaves the configuration.
    let mut last_was_notice = false;
    loop {
        match rt.block_on(stream.recv()) {
            None | Some(Err(control::ControlError::Closed)) => {
                if !last_was_notice {
                    writeln!(io.err, "the controller stopped")?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(response)) => {
                let response = answer(response)?;
                last_was_notice = response.logs.is_none() && response.message.is_some();
                print(&response, &mut pid, io)?;
                io.out.flush()?;
            }
        }
    }
}

/// Print the lines of a response; a message (no process yet, the server
/// left) goes to stderr, and so does the start of a new process while
/// following (`pid` is the one printed last).
fn print(response: &Response, pid: &mut Option<u32>, io: &mut Io<'_>) -> Result<(), CommandError> {
    if let Some(message) = &response.message {
        writeln!(io.err, "{message}")?;
    }
    if let Some(LogChunk {
        pid: this,
        lines,
        dropped,
        ..
    }) = &response.logs
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
