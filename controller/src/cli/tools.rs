//! `steward tools [-o table|json|yaml]`: every tool of the workspace, where
//! it stands with the agent endpoint (listed, filtered, quarantined, its
//! server not Ready) and what its definition costs an agent's context.

use std::process::ExitCode;

use serde::Serialize;
use steward_schema::resource::{ToolRow, ToolState};

use super::client::{REQUEST_TIMEOUT, need_controller, runtime};
use super::{CommandError, Io};
use crate::cli::args::ToolsArgs;
use crate::cli::output::{self, Format, Table};
use crate::control::client;
use crate::support::paths::Paths;

/// `-o json|yaml`: the rows with their totals.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolList<'a> {
    items: &'a [ToolRow],
    /// The listed tools' totals: what `--expose direct` puts in an agent's
    /// context.
    listed: Totals,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Totals {
    tools: u64,
    bytes: u64,
    estimated_tokens: u64,
}

fn state(state: ToolState) -> &'static str {
    match state {
        ToolState::Listed => "listed",
        ToolState::Filtered => "filtered",
        ToolState::Quarantined => "quarantined",
        ToolState::ServerNotReady => "server not Ready",
    }
}

pub fn run(paths: &Paths, args: &ToolsArgs, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let rows = rt
        .block_on(client::tools(&paths.socket_path(), REQUEST_TIMEOUT))
        .map_err(|e| need_controller(paths, e))?;
    let mut totals = Totals::default();
    for row in rows.iter().filter(|r| r.state == ToolState::Listed) {
        totals.tools += 1;
        totals.bytes += row.bytes;
        totals.estimated_tokens += row.estimated_tokens;
    }
    let list = ToolList {
        items: &rows,
        listed: totals,
    };
    match args.output {
        Format::Json => {
            let mut text =
                serde_json::to_string_pretty(&list).map_err(output::OutputError::from)?;
            text.push('\n');
            io.out.write_all(text.as_bytes())?;
        }
        Format::Yaml => {
            let text = yaml_serde::to_string(&list).map_err(output::OutputError::from)?;
            io.out.write_all(text.as_bytes())?;
        }
        Format::Table | Format::Wide => {
            let dash = || "-".to_owned();
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r.server.clone(),
                        r.tool.clone().unwrap_or_else(dash),
                        state(r.state).to_owned(),
                        r.bytes.to_string(),
                        r.estimated_tokens.to_string(),
                        r.exposed.clone().unwrap_or_else(dash),
                    ]
                })
                .collect();
            let header = ["SERVER", "TOOL", "STATE", "BYTES", "TOKENS~", "EXPOSED AS"];
            let mut table = Table::new(header.iter().map(|h| (*h).to_owned()).collect());
            table.fit(&cells);
            let mut out = table.header_line();
            for r in &cells {
                out.push_str(&table.line(r));
            }
            io.out.write_all(out.as_bytes())?;
            writeln!(
                io.out,
                "\n{} tools listed: {} bytes, about {} tokens (bytes / 4) in an agent's context with --expose direct; --expose search lists 2 tools instead",
                list.listed.tools, list.listed.bytes, list.listed.estimated_tokens
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
