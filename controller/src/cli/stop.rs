//! `steward stop` / `steward start`: persistently stop a server, or let it
//! run again.

use std::process::ExitCode;

use super::client::{REQUEST_TIMEOUT, need_controller, runtime};
use super::{CommandError, Io};
use crate::control::client;
use crate::support::paths::Paths;
/// `steward stop` / `steward start`.
pub fn run(
    paths: &Paths,
    names: &[String],
    stop: bool,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let message = rt
        .block_on(async {
            if stop {
                client::stop(&socket, names, REQUEST_TIMEOUT).await
            } else {
                client::start(&socket, names, REQUEST_TIMEOUT).await
            }
        })
        .map_err(|e| need_controller(paths, e))?;
    writeln!(io.out, "{message}")?;
    Ok(ExitCode::SUCCESS)
}
