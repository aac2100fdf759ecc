//! `steward export --format toolhive`: the workspace's MCP servers as
//! ToolHive operator resources ([`crate::export::toolhive`]), from the
//! desired state the files give (as `status --offline` loads it), with the
//! running controller's tool lists when an `excludeTools` needs one; or,
//! with `--check FILE`, a manifest validated against CRDs
//! ([`crate::export::check`]). Refusals go to stderr, one line each, and
//! exit 1; the other servers are still written.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use steward_schema::admission;
use steward_schema::load::LoadMode;
use steward_schema::resource::ToolRow;

use super::client::{REQUEST_TIMEOUT, runtime};
use super::{CommandError, Io};
use crate::cli::args::ExportArgs;
use crate::control::{ControlError, client};
use crate::desired::offline::load_desired;
use crate::export::check::Crds;
use crate::export::toolhive::{self, Options, Server, ToolList};
use crate::support::paths::Paths;

/// Where live tool lists come from, as the output says it.
const LIVE_SOURCE: &str = "the running controller";

pub fn run(
    paths: &Paths,
    args: &ExportArgs,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    if let (Some(file), Some(crds)) = (&args.check, &args.crds) {
        return check(file, crds, io);
    }
    let (_, state) = load_desired(paths, &args.desired.inputs(), env, LoadMode::Lenient);
    let blocked: BTreeMap<&str, Option<admission::Blocked>> = state
        .mcp
        .iter()
        .map(|(name, d)| (name.as_str(), admission::admit_mcp(name, &d.spec, &state)))
        .collect();
    for name in args.images.iter().map(|(n, _)| n) {
        if !state.mcp.contains_key(name) {
            return Err(CommandError::Usage {
                subcommand: "export",
                message: format!("--image {name}=…: no MCP server is named {name:?} here"),
            });
        }
    }

    // Only an `excludeTools` needs a tool list: ask the controller then.
    let needs_list = state.mcp.iter().any(|(name, d)| {
        d.spec.exclude_tools.is_some() && (blocked[name.as_str()].is_none() || args.include_blocked)
    });
    let lists = if needs_list {
        live_tool_lists(paths)?
    } else {
        BTreeMap::new()
    };

    let servers: Vec<Server<'_>> = state
        .mcp
        .iter()
        .map(|(name, d)| Server {
            name,
            spec: &d.spec,
            blocked: blocked[name.as_str()].as_ref(),
            tools: lists.get(name),
        })
        .collect();
    let group = match &args.group {
        Some(g) => toolhive::dns_label(g, toolhive::MAX_NAME),
        None => toolhive::dns_label(
            &paths
                .workspace
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            toolhive::MAX_NAME,
        ),
    };
    let options = Options {
        namespace: args.namespace.clone(),
        group,
        images: args.images.iter().cloned().collect(),
        include_blocked: args.include_blocked,
        anonymous: args.anonymous,
        remote_proxy: args.remote_proxy,
    };
    let export = toolhive::export(&servers, &options);
    let text = export.render()?;
    match args.out.as_deref() {
        None => io.out.write_all(text.as_bytes())?,
        Some(p) if p == Path::new("-") => io.out.write_all(text.as_bytes())?,
        Some(p) => crate::support::fs::write_atomically(p, text.as_bytes())?,
    }
    for refusal in &export.refusals {
        writeln!(io.err, "steward: refused {refusal}")?;
    }
    Ok(if export.refusals.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Every server's tool list from the running controller, or none when no
/// controller runs.
fn live_tool_lists(paths: &Paths) -> Result<BTreeMap<String, ToolList>, CommandError> {
    let rt = runtime()?;
    let rows: Vec<ToolRow> = match rt.block_on(client::tools(&paths.socket_path(), REQUEST_TIMEOUT))
    {
        Ok(rows) => rows,
        Err(ControlError::Connect { .. }) => return Ok(BTreeMap::new()),
        Err(e) => return Err(e.into()),
    };
    let mut lists: BTreeMap<String, ToolList> = BTreeMap::new();
    for row in rows {
        // Filtered and quarantined tools are the server's too.
        if let Some(tool) = row.tool {
            lists
                .entry(row.server)
                .or_insert_with(|| ToolList {
                    tools: Vec::new(),
                    source: LIVE_SOURCE.to_owned(),
                })
                .tools
                .push(tool);
        }
    }
    Ok(lists)
}

/// `--check FILE --crds DIR`: each problem on stdout, the summary on stderr.
fn check(file: &Path, crds: &Path, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let crds = Crds::load(crds)?;
    let text =
        std::fs::read_to_string(file).map_err(|source| crate::export::check::CheckError::Read {
            path: file.to_owned(),
            source,
        })?;
    let report = crds.check(&text, file)?;
    for problem in &report.problems {
        writeln!(io.out, "{}: {problem}", file.display())?;
    }
    for doc in &report.unchecked {
        writeln!(
            io.err,
            "steward: warning: {}: {doc}: no CRD defines its kind; not checked",
            file.display()
        )?;
    }
    let n = report.problems.len();
    writeln!(
        io.err,
        "{}: {} document{}, {} problem{}",
        file.display(),
        report.documents,
        if report.documents == 1 { "" } else { "s" },
        n,
        if n == 1 { "" } else { "s" }
    )?;
    Ok(if n == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
