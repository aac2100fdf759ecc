//! `steward sandbox prune`: removes the private homes (product.md §9) of
//! servers that no longer exist — in this workspace, the homes of names no
//! source configures any more; anywhere, the homes of workspaces that are
//! gone from disk. A running server's home is never removed: its name is
//! configured.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use steward_schema::load::LoadMode;
use steward_schema::resource::sandbox_in_force;
use steward_schema::sandbox::{Resolved, Sandbox};

use super::{CommandError, Io};
use crate::cli::output::{self, Format};
use crate::desired::offline::{Inputs, load_desired};
use crate::runtime::sandbox::home;
use crate::support::paths::Paths;

/// `steward sandbox --help`.
pub const ABOUT: &str = "\
Every local server runs in a sandbox under a permission profile (README \"Sandbox\"). Under every \
profile but off, a server's caches, data and state go to a private home of its own, \
HOME_DIR/steward/sandbox/<workspace>/<server>/ (XDG_CACHE_HOME, XDG_DATA_HOME, XDG_STATE_HOME, \
npm_config_cache, UV_CACHE_DIR and the other package runners' variables point there), kept across \
restarts so that its downloads are reused. `steward status` shows it as status.sandbox.home.

`prune` removes the homes of servers no source of this workspace configures any more, and the \
folders of workspaces that no longer exist on disk.

Examples:
  steward sandbox prune --dry-run
  steward sandbox prune -o json";

/// `steward sandbox`.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    #[command(subcommand)]
    pub action: SandboxAction,
}

#[derive(Debug, Subcommand)]
pub enum SandboxAction {
    /// Remove the private homes of servers and workspaces that no longer exist
    Prune {
        /// Say what would be removed, remove nothing
        #[arg(long)]
        dry_run: bool,
        /// Output format
        #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
        output: Format,
    },
}

pub fn run(
    paths: &Paths,
    args: SandboxArgs,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let SandboxAction::Prune { dry_run, output } = args.action;
    let (_, state) = load_desired(paths, &Inputs::default(), env, LoadMode::Lenient);
    // Each configured server's home under the profile it runs under now.
    let mcp = state
        .mcp
        .iter()
        .map(|(n, d)| (home::mcp_owner(n), &d.spec.resolved_sandbox));
    let lsp = state
        .lsp
        .iter()
        .map(|(n, d)| (home::lsp_owner(n), &d.spec.resolved_sandbox));
    let owners: Vec<(String, Sandbox)> = mcp
        .chain(lsp)
        .filter_map(|(owner, resolved)| match sandbox_in_force(resolved) {
            Resolved::Profile { sandbox, .. } => Some((owner, sandbox)),
            Resolved::Unknown(_) => None,
        })
        .collect();
    let pruned = home::prune(&paths.home_dir, &paths.workspace, &owners, dry_run).map_err(|e| {
        CommandError::Controller(format!(
            "prune the private homes under {}: {e}",
            paths.home_dir.join("steward/sandbox").display()
        ))
    })?;
    match output {
        Format::Json => {
            let mut text =
                serde_json::to_string_pretty(&pruned).map_err(output::OutputError::from)?;
            text.push('\n');
            io.out.write_all(text.as_bytes())?;
        }
        Format::Yaml => {
            let text = yaml_serde::to_string(&pruned).map_err(output::OutputError::from)?;
            io.out.write_all(text.as_bytes())?;
        }
        Format::Table | Format::Wide => {
            let verb = if dry_run { "would remove" } else { "removed" };
            for dir in pruned.servers.iter().chain(&pruned.workspaces) {
                writeln!(io.out, "{verb} {}", dir.display())?;
            }
            writeln!(
                io.out,
                "{verb} {} server home{} and {} workspace folder{} ({} KiB)",
                pruned.servers.len(),
                if pruned.servers.len() == 1 { "" } else { "s" },
                pruned.workspaces.len(),
                if pruned.workspaces.len() == 1 {
                    ""
                } else {
                    "s"
                },
                pruned.bytes.div_ceil(1024)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
