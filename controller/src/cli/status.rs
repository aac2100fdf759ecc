//! `steward status`: the live `WorkspaceStatus` from the running controller
//! (`--watch` for every change), or the one computed from the files alone
//! (`--offline`, or when no controller runs), rendered as a table, JSON or
//! YAML, secrets redacted unless `--show-secrets`.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::SystemTime;

use steward_schema::resource::{Item, WorkspaceStatus};

use super::{CommandError, Io};
use crate::cli::output::{self, Format, Table};
use crate::control::{ControlError, client};
use crate::desired::offline::{Inputs, offline_status};
use crate::support::paths::Paths;

use steward_schema::redact;

use super::client::{REQUEST_TIMEOUT, runtime};

/// `steward status --offline`.
pub fn run_offline(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    show_secrets: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let status = document(paths, inputs, show_secrets, env, now);
    print_status(&status, format, now, io)
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

/// `steward status` without `--offline`.
#[allow(clippy::too_many_arguments)]
pub fn run_live(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    watch: bool,
    show_secrets: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let offline = |io: &mut Io<'_>| offline(paths, inputs, format, show_secrets, env, now, io);
    if !watch && format == Format::Json {
        // Printed as the controller wrote it, only indented: reading ~1 MB
        // into a document to write it back was most of the command's time.
        return match rt.block_on(client::status_pretty_json(
            &socket,
            show_secrets,
            REQUEST_TIMEOUT,
        )) {
            Ok(mut text) => {
                text.push('\n');
                io.out.write_all(text.as_bytes())?;
                Ok(ExitCode::SUCCESS)
            }
            Err(ControlError::Connect { .. }) => offline(io),
            Err(e) => Err(e.into()),
        };
    }
    if !watch {
        return match rt.block_on(client::status(&socket, show_secrets, REQUEST_TIMEOUT)) {
            Ok(status) => print_status(&status, format, now, io),
            Err(ControlError::Connect { .. }) => offline(io),
            Err(e) => Err(e.into()),
        };
    }
    let mut stream = match rt.block_on(client::watch(&socket, show_secrets)) {
        Ok(s) => s,
        Err(ControlError::Connect { .. }) => {
            return offline(io);
        }
        Err(e) => return Err(e.into()),
    };
    let mut previous: Option<WorkspaceStatus> = None;
    let mut header_printed = false;
    let mut layout: Option<Table> = None;
    loop {
        let Some(item) = rt.block_on(stream.next()) else {
            return Ok(ExitCode::SUCCESS);
        };
        let status = match item {
            Ok(status) => status,
            // The controller went away: the watch ends.
            Err(ControlError::Closed) => {
                writeln!(io.err, "the controller stopped")?;
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => return Err(e.into()),
        };
        let now = SystemTime::now();
        match format {
            Format::Json => {
                writeln!(
                    io.out,
                    "{}",
                    serde_json::to_string(&status).map_err(std::io::Error::other)?
                )?;
            }
            Format::Yaml => {
                write!(
                    io.out,
                    "---\n{}",
                    output::render(&status, Format::Yaml, now)?
                )?;
            }
            Format::Table | Format::Wide => {
                let wide = format == Format::Wide;
                // One layout for the whole watch: rows printed later line
                // up under the header printed first.
                let table = layout.get_or_insert_with(|| Table::for_watch(output::header(wide)));
                let rows = output::rows(&status, wide, now);
                table.fit(&rows);
                // The first document prints every row; later ones only the
                // rows whose item changed (kubectl get -w).
                let changed_rows: Vec<&Vec<String>> = status
                    .items
                    .iter()
                    .zip(&rows)
                    .filter(|(item, _)| previous.as_ref().is_none_or(|p| changed(p, item)))
                    .map(|(_, row)| row)
                    .collect();
                if previous.is_none() && status.items.is_empty() {
                    writeln!(io.err, "no servers are configured for {}", status.workspace)?;
                }
                // The header once, before the first row (which may come
                // later than the first document on an empty workspace).
                if !header_printed && !changed_rows.is_empty() {
                    write!(io.out, "{}", table.header_line())?;
                    header_printed = true;
                }
                for row in changed_rows {
                    write!(io.out, "{}", table.line(row))?;
                }
            }
        }
        io.out.flush()?;
        previous = Some(status);
    }
}

fn changed(prev: &WorkspaceStatus, item: &Item) -> bool {
    let strip = |i: &Item| {
        let mut s = i.status().clone();
        for c in &mut s.conditions {
            c.last_transition_time.clear();
        }
        (
            i.kind(),
            i.name().to_owned(),
            serde_json::to_string(&s).unwrap_or_default(),
        )
    };
    let now = strip(item);
    !prev.items.iter().any(|p| strip(p) == now)
}

fn offline(
    paths: &Paths,
    inputs: &Inputs,
    format: Format,
    show_secrets: bool,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    writeln!(
        io.err,
        "no controller is running for {}; showing the offline view",
        paths.workspace.display()
    )?;
    let status = document(paths, inputs, show_secrets, env, now);
    print_status(&status, format, now, io)
}

/// Render a status document and its source warnings.
pub fn print_status(
    status: &WorkspaceStatus,
    format: Format,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let text = output::render(status, format, now)?;
    io.out.write_all(text.as_bytes())?;
    if format.is_table() {
        if status.items.is_empty() {
            writeln!(io.err, "no servers are configured for {}", status.workspace)?;
        }
        for warning in output::source_warnings(status) {
            writeln!(io.err, "{warning}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
