//! `steward export --format toolhive`: the workspace's MCP servers as
//! ToolHive operator resources ([`crate::export::toolhive`]), from the
//! desired state the files give (loaded and admitted as `status --offline`
//! does), with the tool lists of a running controller when an
//! `excludeTools` needs one; or, with `--check FILE`, a manifest validated
//! against the CRDs ([`crate::export::check`]). Refusals go to stderr, one
//! line each, and exit 1; the other servers are still written.

use std::collections::BTreeMap;
use std::io::Read;
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
use crate::export::check::{CheckError, Crds, TOOLHIVE_VERSION};
use crate::export::toolhive::{self, AuthServer, Options, Server, ToolList, ToolSource};
use crate::gateway::cache::CatalogCache;
use crate::runtime::mcp::remote::oauth::OAuthEntry;
use crate::runtime::mcp::remote::oauth::store::OAuthStore;
use crate::runtime::mcp::remote::url_of;
use crate::support::paths::Paths;

pub fn run(
    paths: &Paths,
    args: &ExportArgs,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    if let Some(file) = &args.check {
        return check(file, args.crds.as_deref(), io);
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

    // Only an `excludeTools` needs a tool list: ask for them then.
    let needs_lists = state.mcp.iter().any(|(name, d)| {
        d.spec.exclude_tools.is_some() && (blocked[name.as_str()].is_none() || args.include_blocked)
    });
    let (tools_asked, lists) = if needs_lists {
        let hashes = state
            .mcp
            .iter()
            .map(|(name, d)| (name.clone(), d.spec.config_hash.clone()))
            .collect();
        tool_lists(paths, &hashes)?
    } else {
        (None, BTreeMap::new())
    };

    let signed_in = auth_servers(paths, &state.mcp)?;
    let servers: Vec<Server<'_>> = state
        .mcp
        .iter()
        .map(|(name, d)| Server {
            name,
            spec: &d.spec,
            blocked: blocked[name.as_str()].as_ref(),
            tools: lists.get(name),
            auth_server: signed_in.get(name),
        })
        .collect();
    let group = args.group.clone().unwrap_or_else(|| {
        paths
            .workspace
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let options = Options {
        namespace: args.namespace.clone(),
        group: toolhive::dns_label(&group, toolhive::MAX_NAME),
        images: args.images.iter().cloned().collect(),
        include_blocked: args.include_blocked,
        anonymous: args.anonymous,
        remote_proxy: args.remote_proxy,
        tools_asked,
    };
    let export = toolhive::export(&servers, &options);
    let text = export.render()?;
    match args.out.as_deref() {
        None => io.out.write_all(text.as_bytes())?,
        Some(p) if p == Path::new("-") => io.out.write_all(text.as_bytes())?,
        Some(p) => crate::support::fs::write_atomically(p, text.as_bytes()).map_err(|source| {
            CommandError::WriteFile {
                path: p.to_owned(),
                source,
            }
        })?,
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

/// What the user's last sign-in recorded of the authorization server of
/// each entry that signs in with OAuth (the store `steward auth login`
/// writes): its issuer, endpoints, resource and granted scopes — never a
/// token or a client. The store is opened only when such an entry is there.
fn auth_servers(
    paths: &Paths,
    mcp: &BTreeMap<String, steward_schema::desired::DesiredMcp>,
) -> Result<BTreeMap<String, AuthServer>, CommandError> {
    let wanted: Vec<(&String, &str, String)> = mcp
        .iter()
        .filter(|(_, d)| toolhive::signs_in(&d.spec))
        .filter_map(|(name, d)| {
            let url = url_of(&d.spec).ok()?;
            Some((name, url, OAuthEntry::of(&d.spec).account))
        })
        .collect();
    let mut out = BTreeMap::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    let rt = runtime()?;
    let store = rt.block_on(OAuthStore::open(&paths.home_dir));
    for (name, url, account) in wanted {
        let record = rt
            .block_on(store.token_for(url, &account))
            .map_err(|e| CommandError::Controller(format!("read the sign-in of {name}: {e}")))?;
        if let Some(r) = record {
            out.insert(
                name.clone(),
                AuthServer {
                    issuer: r.issuer,
                    authorization_endpoint: r.authorization_endpoint,
                    token_endpoint: r.token_endpoint,
                    registration_endpoint: r.registration_endpoint,
                    resource: r.resource,
                    scopes: r.scopes,
                },
            );
        }
    }
    Ok(out)
}

/// Every server's tool list, from the first source that answers, and
/// which source that was (none when none could be asked). The sources, in
/// order, are the variants of [`ToolSource`]: the running controller
/// (`steward tools` asks it the same way; a server it has no list for, not
/// Ready, is absent), else the catalog cache.
fn tool_lists(
    paths: &Paths,
    hashes: &BTreeMap<String, String>,
) -> Result<(Option<ToolSource>, BTreeMap<String, ToolList>), CommandError> {
    let rt = runtime()?;
    let rows: Vec<ToolRow> = match rt.block_on(client::tools(&paths.socket_path(), REQUEST_TIMEOUT))
    {
        Ok(rows) => rows,
        Err(ControlError::Connect { .. }) => return Ok(cached_tool_lists(paths, hashes)),
        Err(e) => return Err(e.into()),
    };
    let mut lists: BTreeMap<String, ToolList> = BTreeMap::new();
    for row in rows {
        // Filtered and quarantined tools are the server's too: the
        // allow-list is computed from all of them.
        if let Some(tool) = row.tool {
            lists
                .entry(row.server)
                .or_insert_with(|| ToolList {
                    tools: Vec::new(),
                    source: ToolSource::Controller,
                })
                .tools
                .push(tool);
        }
    }
    Ok((Some(ToolSource::Controller), lists))
}

/// With no controller running: the tools each server offered the last time
/// it ran with the configuration it has now (the catalog cache, keyed by
/// `configHash`); none when no server has such an entry.
fn cached_tool_lists(
    paths: &Paths,
    hashes: &BTreeMap<String, String>,
) -> (Option<ToolSource>, BTreeMap<String, ToolList>) {
    if !paths.catalog_cache_file().exists() {
        return (None, BTreeMap::new());
    }
    let cache = CatalogCache::load(paths.catalog_cache_file(), &paths.workspace);
    let lists: BTreeMap<String, ToolList> = hashes
        .iter()
        .filter_map(|(server, hash)| {
            let catalog = cache.get(server, hash)?;
            Some((
                server.clone(),
                ToolList {
                    tools: catalog.tools.iter().map(|t| t.name.to_string()).collect(),
                    source: ToolSource::CatalogCache,
                },
            ))
        })
        .collect();
    (Some(ToolSource::CatalogCache), lists)
}

/// `--check FILE [--crds DIR]`: each problem on stdout, the summary on
/// stderr; exit 1 when there is a problem.
fn check(file: &Path, crds_dir: Option<&Path>, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let (crds, against) = match crds_dir {
        Some(dir) => (Crds::load(dir)?, format!("the CRDs in {}", dir.display())),
        None => (
            Crds::embedded()?,
            format!("the CRDs of ToolHive {TOOLHIVE_VERSION}"),
        ),
    };
    let stdin = file == Path::new("-");
    let text = if stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| CheckError::Read {
                path: file.to_owned(),
                source,
            })?;
        text
    } else {
        std::fs::read_to_string(file).map_err(|source| CheckError::Read {
            path: file.to_owned(),
            source,
        })?
    };
    let shown = if stdin {
        "(stdin)".to_owned()
    } else {
        file.display().to_string()
    };
    let report = crds.check(&text, file)?;
    for problem in &report.problems {
        writeln!(io.out, "{shown}: {problem}")?;
    }
    for doc in &report.unchecked {
        writeln!(
            io.err,
            "steward: warning: {shown}: {doc}: no CRD defines its kind; not checked"
        )?;
    }
    let n = report.problems.len();
    writeln!(
        io.err,
        "{shown}: {} document{}, {} problem{} (checked against {against})",
        report.documents,
        if report.documents == 1 { "" } else { "s" },
        n,
        if n == 1 { "" } else { "s" },
    )?;
    Ok(if n == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
