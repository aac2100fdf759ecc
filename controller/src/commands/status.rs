//! `steward status --offline`: the `WorkspaceStatus` computed from the files
//! alone ([`crate::offline::offline_status`]), rendered as a table, JSON or
//! YAML. The live view is in [`super::live`].

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::SystemTime;

use super::{CommandError, Io};
use crate::offline::{Inputs, offline_status};
use crate::output::Format;
use crate::paths::Paths;

pub fn run(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let status = offline_status(paths, inputs, env, now);
    super::live::print_status(&status, format, now, io)
}
