//! `steward describe NAME`: one server in detail — the item of the status
//! document (secrets redacted unless `--show-secrets`), the last stderr
//! lines of its process and its events, each asked of the running
//! controller; without one, what the files alone say.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::SystemTime;

use steward_schema::resource::{Item, WorkspaceStatus};

use super::client::{REQUEST_TIMEOUT, runtime};
use super::{CommandError, Io};
use crate::cli::args::DescribeArgs;
use crate::cli::output::{self, StderrView};
use crate::control::client::{self, Logs};
use crate::control::{ControlError, LogsQuery};
use crate::observe::events::Event;
use crate::support::paths::Paths;

/// Stderr lines shown (the full log is `steward logs NAME`).
pub const STDERR_LINES: usize = 10;

pub fn run(
    paths: &Paths,
    args: &DescribeArgs,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let live = match rt.block_on(client::status(&socket, args.show_secrets, REQUEST_TIMEOUT)) {
        Ok(status) => Some(status),
        Err(ControlError::Connect { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let (status, events) = match live {
        Some(status) => {
            let events = rt.block_on(client::events(&socket, REQUEST_TIMEOUT))?;
            (status, Some(events))
        }
        None => {
            writeln!(
                io.err,
                "no controller is running for {}; showing what the files say",
                paths.workspace.display()
            )?;
            let status =
                super::status::document(paths, &args.desired.inputs(), args.show_secrets, env, now);
            (status, None)
        }
    };
    let items = matching(&status, args)?;
    for (i, item) in items.iter().enumerate() {
        let stderr = match &events {
            None => StderrView::Note("no controller is running".to_owned()),
            Some(_) => {
                let query = LogsQuery {
                    name: item.name().to_owned(),
                    kind: Some(item.kind()),
                    previous: false,
                    follow: false,
                    tail: Some(STDERR_LINES),
                };
                match rt.block_on(client::logs(&socket, &query, REQUEST_TIMEOUT))? {
                    Logs::Lines(chunk) => StderrView::Lines(chunk),
                    Logs::Notice(note) => StderrView::Note(note),
                }
            }
        };
        let own: Option<Vec<Event>> = events.as_ref().map(|all| {
            all.iter()
                .filter(|e| {
                    e.involved_object.kind == item.kind().to_string()
                        && e.involved_object.name == item.name()
                })
                .cloned()
                .collect()
        });
        if i > 0 {
            writeln!(io.out)?;
        }
        let text = output::render_describe(item, own.as_deref(), &stderr, now)?;
        io.out.write_all(text.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The items named `args.name` (of `args.kind`, when given).
fn matching<'a>(
    status: &'a WorkspaceStatus,
    args: &DescribeArgs,
) -> Result<Vec<&'a Item>, CommandError> {
    let items: Vec<&Item> = status
        .items
        .iter()
        .filter(|i| i.name() == args.name && args.kind.is_none_or(|k| i.kind() == k.kind()))
        .collect();
    if items.is_empty() {
        let known: Vec<&str> = status.items.iter().map(Item::name).collect();
        return Err(CommandError::Controller(format!(
            "describe {}: no such server in this workspace (known: {})",
            args.name,
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    }
    Ok(items)
}
