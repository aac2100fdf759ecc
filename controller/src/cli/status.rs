//! `steward status --offline`: the `WorkspaceStatus` computed from the files
//! alone ([`crate::desired::offline::offline_status`]), rendered as a table, JSON or
//! YAML, secrets redacted unless `--show-secrets`. The live view is in
//! [`super::live`].

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::SystemTime;

use steward_schema::redact;
use steward_schema::resource::WorkspaceStatus;

use super::{CommandError, Io};
use crate::cli::output::Format;
use crate::desired::offline::{Inputs, offline_status};
use crate::support::paths::Paths;

pub fn run(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    show_secrets: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let status = document(paths, inputs, show_secrets, env, now);
    super::live::print_status(&status, format, now, io)
}

/// The offline `WorkspaceStatus`, without secrets unless `show_secrets`.
pub fn document(
    paths: &Paths,
    inputs: &Inputs,
    show_secrets: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
) -> WorkspaceStatus {
    let mut status = offline_status(paths, inputs, env, now);
    if !show_secrets {
        redact::redact_status(&mut status);
    }
    status
}
