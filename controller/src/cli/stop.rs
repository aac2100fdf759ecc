//! `steward stop` / `steward start`: persistently stop a server, or let it
//! run again.

use std::process::ExitCode;

use super::client::{REQUEST_TIMEOUT, answer, need_controller, runtime};
use super::{CommandError, Io};
use crate::control::{self, Request};
use crate::support::paths::Paths;
/// `steward stop` / `steward start`.
pub fn run(
    paths: &Paths,
    names: &[String],
    stop: bool,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let request = if stop {
        Request::Stop {
            names: names.to_vec(),
        }
    } else {
        Request::Start {
            names: names.to_vec(),
        }
    };
    let response = rt
        .block_on(control::request(
            &paths.socket_path(),
            &request,
            REQUEST_TIMEOUT,
        ))
        .map_err(|e| need_controller(paths, e))?;
    let response = answer(response)?;
    if let Some(m) = response.message {
        writeln!(io.out, "{m}")?;
    }
    Ok(ExitCode::SUCCESS)
}
