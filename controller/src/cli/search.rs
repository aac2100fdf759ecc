//! `steward search QUERY`: the latest version of each matching server in
//! the registries, as a table (or JSON/YAML): name, title, version, the
//! transports it offers, its package types, whether its publisher
//! publishes permissions. Notes (answers from the cache, and why) go to
//! stderr.

use std::process::ExitCode;
use std::time::SystemTime;

use serde::Serialize;
use steward_schema::registry::permissions::TOOLHIVE_META;
use steward_schema::registry::server::{PUBLISHER_META, ServerResponse, Status};

use super::client::runtime;
use super::registry_args::{RegistryOptions, SearchArgs};
use super::{CommandError, Io};
use crate::cli::output::{self, Format, Table};
use crate::registry::RegistryError;
use crate::registry::cache::Cache;
use crate::registry::client::{Client, Found};
use crate::registry::config::{self, Registries};
use crate::registry::http::Http;
use crate::support::paths::Paths;

/// One row of `steward search`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    name: String,
    title: Option<String>,
    version: String,
    description: Option<String>,
    /// `stdio` (packages), `streamable-http`, `sse` (remotes).
    transports: Vec<String>,
    /// `npm`, `pypi`, …
    packages: Vec<String>,
    /// Whether the publisher publishes a permission profile.
    permissions: bool,
    status: &'static str,
    registry: String,
}

#[derive(Debug, Serialize)]
struct SearchResult {
    query: String,
    registries: Vec<String>,
    items: Vec<Row>,
    /// Answers that came from the cache, and why.
    notes: Vec<String>,
}

/// The registries, the HTTP client (none offline) and the cache of a
/// registry command.
pub(crate) fn setup(
    paths: &Paths,
    options: &RegistryOptions,
) -> Result<(Registries, Option<Http>, Cache), CommandError> {
    let registries = config::registries(paths, &options.registries).map_err(registry_error)?;
    let http = if options.offline {
        None
    } else {
        Some(Http::new(options.registry_timeout).map_err(|e| registry_error(e.into()))?)
    };
    Ok((registries, http, Cache::new(&paths.home_dir)))
}

pub(crate) fn registry_error(e: RegistryError) -> CommandError {
    CommandError::Controller(e.to_string())
}

/// Notes for stderr.
pub(crate) fn print_notes(notes: &[String], io: &mut Io<'_>) -> Result<(), CommandError> {
    for note in notes {
        writeln!(io.err, "note: {note}")?;
    }
    Ok(())
}

/// Whether the server's publisher publishes a permission profile.
pub(crate) fn publishes_permissions(r: &ServerResponse) -> bool {
    [&r.server.meta, &r.meta].iter().any(|meta| {
        meta.get(PUBLISHER_META)
            .and_then(|p| p.get(TOOLHIVE_META))
            .and_then(|t| t.as_object())
            .is_some_and(|by_key| by_key.values().any(|m| m.get("permissions").is_some()))
    })
}

fn row(f: &Found) -> Row {
    let s = &f.response.server;
    let mut transports: Vec<String> = Vec::new();
    for kind in s
        .packages
        .iter()
        .map(|p| {
            if p.transport.kind.is_empty() {
                "stdio".to_owned()
            } else {
                p.transport.kind.clone()
            }
        })
        .chain(s.remotes.iter().map(|r| r.kind.clone()))
    {
        if !transports.contains(&kind) {
            transports.push(kind);
        }
    }
    let mut packages: Vec<String> = Vec::new();
    for p in &s.packages {
        if !packages.contains(&p.registry_type) {
            packages.push(p.registry_type.clone());
        }
    }
    Row {
        name: s.name.clone(),
        title: s.title.clone(),
        version: s.version.clone(),
        description: s.description.clone(),
        transports,
        packages,
        permissions: publishes_permissions(&f.response),
        status: f.response.status().as_str(),
        registry: f.registry.clone(),
    }
}

fn cell(list: &[String]) -> String {
    if list.is_empty() {
        "-".to_owned()
    } else {
        list.join(",")
    }
}

pub fn run(
    paths: &Paths,
    args: &SearchArgs,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let (registries, http, cache) = setup(paths, &args.registry)?;
    let client = Client::new(http.as_ref(), cache, now);
    let rt = runtime()?;
    let found = rt
        .block_on(client.search(&registries.urls, &args.query, args.limit.max(1)))
        .map_err(registry_error)?;
    let notes = client.take_notes();
    let doc = SearchResult {
        query: args.query.clone(),
        registries: registries.urls.clone(),
        items: found.iter().map(row).collect(),
        notes: notes.clone(),
    };
    print_notes(&notes, io)?;
    match args.output {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&doc).map_err(output::OutputError::from)?;
            text.push('\n');
            io.out.write_all(text.as_bytes())?;
        }
        Format::Yaml => {
            let text = yaml_serde::to_string(&doc).map_err(output::OutputError::from)?;
            io.out.write_all(text.as_bytes())?;
        }
        Format::Table | Format::Wide => {
            let wide = args.output == Format::Wide;
            let mut header: Vec<String> = [
                "NAME",
                "TITLE",
                "VERSION",
                "TRANSPORTS",
                "PACKAGES",
                "PERMISSIONS",
            ]
            .map(String::from)
            .to_vec();
            if wide {
                header.extend(["REGISTRY".to_owned(), "DESCRIPTION".to_owned()]);
            }
            let cells: Vec<Vec<String>> = doc
                .items
                .iter()
                .map(|r| {
                    let mut version = r.version.clone();
                    if r.status == Status::Deprecated.as_str() {
                        version.push_str(" (deprecated)");
                    }
                    let mut line = vec![
                        r.name.clone(),
                        r.title.clone().unwrap_or_else(|| "-".to_owned()),
                        version,
                        cell(&r.transports),
                        cell(&r.packages),
                        if r.permissions { "yes" } else { "no" }.to_owned(),
                    ];
                    if wide {
                        line.push(r.registry.clone());
                        line.push(r.description.clone().unwrap_or_default());
                    }
                    line
                })
                .collect();
            if cells.is_empty() {
                writeln!(
                    io.err,
                    "no server matches {:?} in {}",
                    args.query,
                    registries.urls.join(", ")
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut table = Table::new(header);
            table.fit(&cells);
            let mut out = table.header_line();
            for r in &cells {
                out.push_str(&table.line(r));
            }
            io.out.write_all(out.as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
