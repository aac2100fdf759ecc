//! `steward outdated` and `steward update [NAME]`: the entries recorded in
//! the lock files (beside `.mcp.json` and the user's `settings.json`)
//! against their registry's latest version. An update is planned exactly as
//! an add is — the same package kind, the values given before — and
//! compared with what is locked ([`steward_schema::registry::compare`]);
//! one that widens the sandbox or adds a secret is shown and asked about
//! again, and the approval follows the new configuration only when it is
//! accepted and the entry was approved before.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{Map, Value};
use steward_schema::admission::{self, ApprovalState};
use steward_schema::load::LoadMode;
use steward_schema::registry::compare::{self, Changes};
use steward_schema::registry::entry::{self, Built, Choice, Resolution};
use steward_schema::registry::inputs::{self, Given};
use steward_schema::registry::lock::{self, Locked};
use steward_schema::secrets::sanitize_name;

use super::add::{self, Answered};
use super::client::runtime;
use super::output::{self, Format, Table};
use super::plan::{self, PlanView};
use super::prompt::Terminal;
use super::registry_args::{OutdatedArgs, RegistryOptions, UpdateArgs};
use super::search::{print_notes, registry_error, setup};
use super::{CommandError, Io};
use crate::desired::offline::{self, Inputs};
use crate::registry::client::{Client, Found};
use crate::registry::config;
use crate::registry::http::Http;
use crate::registry::packages::{self, Options, Resolver};
use crate::registry::write::{self, Scope};
use crate::registry::{Pick, choose, on_path};
use crate::runtime::secrets::{self, SecretValue};
use crate::support::paths::Paths;

fn failed(message: impl Into<String>) -> CommandError {
    CommandError::Controller(message.into())
}

/// An entry recorded in a lock file.
struct Candidate {
    scope: Scope,
    local: String,
    locked: Locked,
    file: PathBuf,
    lock_file: PathBuf,
    /// Edited since it was added (its digest differs), or gone.
    edited: bool,
    gone: bool,
}

fn candidates(paths: &Paths) -> Result<Vec<Candidate>, CommandError> {
    let mut out = Vec::new();
    for scope in [Scope::Workspace, Scope::User] {
        let (file, lock_file) = write::files(paths, scope);
        let records = write::read_lock(&lock_file).map_err(|e| registry_error(e.into()))?;
        if records.servers.is_empty() {
            continue;
        }
        let entries: Map<String, Value> =
            write::entries(&file).map_err(|e| registry_error(e.into()))?;
        for (local, locked) in records.servers {
            let entry = entries.get(&local).and_then(Value::as_object);
            out.push(Candidate {
                scope,
                edited: entry.is_some_and(|e| lock::entry_sha256(e) != locked.entry_sha256),
                gone: entry.is_none(),
                local,
                locked,
                file: file.clone(),
                lock_file: lock_file.clone(),
            });
        }
    }
    Ok(out)
}

/// An update planned for one candidate.
struct Planned {
    found: Found,
    choice: Choice,
    resolution: Resolution,
    built: Built,
    answered: Answered,
    changes: Changes,
}

/// The choice that runs the same artefact kind as before.
fn same_choice(
    locked: &Locked,
    found: &Found,
    search_path: &std::ffi::OsStr,
) -> Result<Choice, CommandError> {
    let detail = &found.response.server;
    let pick = match (&locked.package, &locked.remote) {
        (Some(p), _) => detail
            .packages
            .iter()
            .position(|n| n.registry_type == p.registry_type && n.identifier == p.identifier)
            .or_else(|| {
                detail
                    .packages
                    .iter()
                    .position(|n| n.registry_type == p.registry_type)
            })
            .map_or(Pick::Auto, |i| Pick::Package((i + 1).to_string())),
        (None, Some(r)) => detail
            .remotes
            .iter()
            .position(|n| n.kind == r.kind)
            .map_or(Pick::Auto, |i| Pick::Remote((i + 1).to_string())),
        (None, None) => Pick::Auto,
    };
    choose(detail, &pick, &|program| on_path(program, search_path)).map_err(registry_error)
}

/// Everything one run needs to plan updates.
struct Planner<'a> {
    paths: &'a Paths,
    env: &'a BTreeMap<String, String>,
    rt: tokio::runtime::Runtime,
    http: Option<Http>,
    cache: crate::registry::cache::Cache,
    flags: Vec<String>,
    now: SystemTime,
    stored: std::collections::BTreeSet<String>,
}

impl Planner<'_> {
    /// The latest version of `c`'s server, if it differs from the locked one.
    fn latest(&self, c: &Candidate, io: &mut Io<'_>) -> Result<Option<Found>, String> {
        let registries = if self.flags.is_empty() {
            vec![config::normalize(&c.locked.registry)]
        } else {
            self.flags.clone()
        };
        let client = Client::new(self.http.as_ref(), self.cache.clone(), self.now);
        let found = self
            .rt
            .block_on(client.get(&registries, &c.locked.name, None));
        let _ = print_notes(&client.take_notes(), io);
        let found = found.map_err(|e| e.to_string())?;
        Ok((found.response.server.version != c.locked.version).then_some(found))
    }

    /// The update of `c` to `found`, answered with what was given before
    /// (and `stdin`/the terminal, when `term` is some).
    fn plan(
        &self,
        c: &Candidate,
        found: Found,
        stdin: &BTreeMap<String, SecretValue>,
        term: &mut Option<Terminal>,
        dry_run: bool,
        io: &mut Io<'_>,
    ) -> Result<Planned, String> {
        let search_path =
            std::ffi::OsString::from(self.env.get("PATH").cloned().unwrap_or_default());
        let choice = same_choice(&c.locked, &found, &search_path).map_err(|e| e.to_string())?;
        let detail = &found.response.server;
        let resolver = Resolver::new(
            self.http.as_ref(),
            self.cache.clone(),
            self.now,
            add::bundles_root(self.paths, self.env),
        );
        let entry_point = c
            .locked
            .package
            .as_ref()
            .and_then(|p| p.entry_point.clone());
        let resolved = self.rt.block_on(packages::resolve(
            &resolver,
            detail,
            choice,
            &Options { entry_point },
        ));
        let _ = print_notes(&resolver.take_notes(), io);
        let (resolution, extra) = resolved.map_err(|e| e.to_string())?;
        let questions = entry::questions_of(detail, choice, &extra);
        let known: std::collections::BTreeSet<&str> =
            questions.iter().map(|q| q.key.as_str()).collect();
        let given = Given {
            // What was given before, for the values the new version still has.
            set: c
                .locked
                .given
                .iter()
                .filter(|(k, _)| known.contains(k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            secret_values: stdin.keys().cloned().collect(),
            stored: self.stored.clone(),
            secret_names: c.locked.secrets.clone(),
            interactive: term.is_some() || dry_run,
        };
        let local = c.local.clone();
        let name = move |key: &str| sanitize_name(&format!("{local}.{key}"));
        let decided = inputs::decide(&questions, &given, &name).map_err(|e| e.to_string())?;
        let answered = add::answer_all(decided, stdin, term, dry_run).map_err(|e| e.to_string())?;
        let built = entry::build(
            detail,
            &found.response.meta,
            choice,
            &resolution,
            &answered.answers,
        )
        .map_err(|e| e.to_string())?;
        let changes = compare::changes(
            &c.locked,
            &built,
            &self.paths.home_dir,
            &self.paths.workspace,
        );
        Ok(Planned {
            found,
            choice,
            resolution,
            built,
            answered,
            changes,
        })
    }
}

fn planner<'a>(
    paths: &'a Paths,
    options: &RegistryOptions,
    env: &'a BTreeMap<String, String>,
    now: SystemTime,
) -> Result<(Planner<'a>, Box<dyn secrets::SecretBackend>), CommandError> {
    let flags = if options.registries.is_empty() {
        Vec::new()
    } else {
        setup(paths, options)?.0.urls
    };
    let (_, http, cache) = setup(
        paths,
        &RegistryOptions {
            registries: Vec::new(),
            ..options.clone()
        },
    )?;
    let rt = runtime()?;
    let backend = rt.block_on(secrets::open(&paths.home_dir));
    let stored = rt
        .block_on(backend.names())
        .unwrap_or_default()
        .into_iter()
        .collect();
    Ok((
        Planner {
            paths,
            env,
            rt,
            http,
            cache,
            flags,
            now,
            stored,
        },
        backend,
    ))
}

/// One row of `steward outdated`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    name: String,
    scope: &'static str,
    server: String,
    current: String,
    latest: Option<String>,
    changes: Vec<String>,
    widens: bool,
    edited: bool,
    error: Option<String>,
}

fn scope_word(scope: Scope) -> &'static str {
    match scope {
        Scope::Workspace => "workspace",
        Scope::User => "user",
    }
}

pub fn outdated(
    paths: &Paths,
    args: &OutdatedArgs,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let (planner, _) = planner(paths, &args.registry, env, now)?;
    let mut rows = Vec::new();
    for c in candidates(paths)? {
        let mut row = Row {
            name: c.local.clone(),
            scope: scope_word(c.scope),
            server: c.locked.name.clone(),
            current: c.locked.version.clone(),
            latest: None,
            changes: Vec::new(),
            widens: false,
            edited: c.edited,
            error: None,
        };
        if c.gone {
            continue;
        }
        match planner.latest(&c, io) {
            Ok(None) => continue,
            Ok(Some(found)) => {
                row.latest = Some(found.response.server.version.clone());
                match planner.plan(&c, found, &BTreeMap::new(), &mut None, true, io) {
                    Ok(p) => {
                        row.widens = p.changes.widens();
                        row.changes = p.changes.phrases();
                    }
                    Err(why) => row.error = Some(why),
                }
            }
            Err(why) => row.error = Some(why),
        }
        rows.push(row);
    }
    match args.output {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&serde_json::json!({"items": rows}))
                .map_err(output::OutputError::from)?;
            text.push('\n');
            io.out.write_all(text.as_bytes())?;
        }
        Format::Yaml => {
            let text = yaml_serde::to_string(&serde_json::json!({"items": rows}))
                .map_err(output::OutputError::from)?;
            io.out.write_all(text.as_bytes())?;
        }
        Format::Table | Format::Wide => {
            if rows.is_empty() {
                writeln!(
                    io.err,
                    "every entry added from a registry is at its latest version"
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let mut changes = if let Some(e) = &r.error {
                        format!("error: {e}")
                    } else if r.changes.is_empty() {
                        "version only".to_owned()
                    } else {
                        r.changes.join("; ")
                    };
                    if r.edited {
                        changes.push_str(" (entry edited by hand)");
                    }
                    vec![
                        r.name.clone(),
                        r.scope.to_owned(),
                        r.server.clone(),
                        r.current.clone(),
                        r.latest.clone().unwrap_or_else(|| "?".to_owned()),
                        changes,
                    ]
                })
                .collect();
            let mut table = Table::new(
                ["NAME", "SCOPE", "SERVER", "CURRENT", "LATEST", "CHANGES"]
                    .map(String::from)
                    .to_vec(),
            );
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

pub fn update(
    paths: &Paths,
    args: &UpdateArgs,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let all = candidates(paths)?;
    for name in &args.names {
        if !all.iter().any(|c| &c.local == name) {
            return Err(failed(format!(
                "update {name}: it was not added from a registry (no record in {} or {})",
                write::files(paths, Scope::Workspace).1.display(),
                write::files(paths, Scope::User).1.display()
            )));
        }
    }
    let stdin = if args.apply.secrets_stdin {
        add::read_secrets_stdin()?
    } else {
        BTreeMap::new()
    };
    let (planner, backend) = planner(paths, &args.registry, env, now)?;
    let mut term = Terminal::open();
    let (_, state) = offline::load_desired(paths, &Inputs::default(), env, LoadMode::Lenient);
    let mut failures: Vec<String> = Vec::new();
    let mut updated = 0;
    for c in all
        .into_iter()
        .filter(|c| args.names.is_empty() || args.names.contains(&c.local))
    {
        if c.gone {
            failures.push(format!(
                "{}: its entry is no longer in {}",
                c.local,
                c.file.display()
            ));
            continue;
        }
        if c.edited {
            failures.push(format!(
                "{}: its entry in {} was edited since it was added, and an update would overwrite that (undo the edit, or remove its record from {} and add it again)",
                c.local,
                c.file.display(),
                c.lock_file.display()
            ));
            continue;
        }
        let found = match planner.latest(&c, io) {
            Ok(Some(found)) => found,
            Ok(None) => {
                if !args.names.is_empty() {
                    writeln!(
                        io.out,
                        "{} is at the latest version ({})",
                        c.local, c.locked.version
                    )?;
                }
                continue;
            }
            Err(why) => {
                failures.push(format!("{}: {why}", c.local));
                continue;
            }
        };
        let p = match planner.plan(&c, found, &stdin, &mut term, args.apply.dry_run, io) {
            Ok(p) => p,
            Err(why) => {
                failures.push(format!("{}: {why}", c.local));
                continue;
            }
        };
        let was_approved = state.mcp.get(&c.local).is_some_and(|d| {
            admission::approval_state(&c.local, &d.spec, &state.approvals)
                == ApprovalState::Approved
        });
        let approve = c.scope == Scope::Workspace && was_approved && !args.apply.no_approve;
        let store = super::secret::backend_words(backend.kind(), paths);
        let approval = match (c.scope, approve, was_approved) {
            (Scope::User, ..) => "none needed (user settings are not approval-gated)".to_owned(),
            (_, true, _) => format!("{} approved again, for the new configuration", c.local),
            (_, false, true) => format!(
                "not approved (--no-approve): it waits for `steward approve {}`",
                c.local
            ),
            (_, false, false) => {
                "as it was: it was not approved before, so it is not now".to_owned()
            }
        };
        let view = PlanView {
            verb: format!("update {} →", c.locked.version),
            local: &c.local,
            registry: &p.found.registry,
            response: &p.found.response,
            choice: p.choice,
            resolution: &p.resolution,
            built: &p.built,
            origins: &p.answered.origins,
            store: &store,
            file: c.file.display().to_string(),
            lock: c.lock_file.display().to_string(),
            approval,
        };
        io.out.write_all(plan::render(&view).as_bytes())?;
        let phrases = p.changes.phrases();
        writeln!(
            io.out,
            "  changes    {}",
            if phrases.is_empty() {
                "the version only".to_owned()
            } else {
                phrases.join("; ")
            }
        )?;
        if args.apply.dry_run {
            writeln!(io.out, "dry run: nothing was written")?;
            continue;
        }
        if p.changes.widens() {
            writeln!(
                io.out,
                "this update widens what {} may do ({}): it needs your acceptance",
                c.local,
                phrases.join("; ")
            )?;
            io.out.flush()?;
            match add::accepted(&args.apply, &mut term, &format!("Update {}?", c.local)) {
                Ok(true) => {}
                Ok(false) => {
                    writeln!(io.out, "{} not updated: nothing was written", c.local)?;
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{}: {e}", c.local));
                    continue;
                }
            }
        }
        let locked = add::record(
            &p.found,
            p.choice,
            &p.resolution,
            &p.built,
            &p.answered.given,
            now,
        );
        add::commit(
            &planner.rt,
            &*backend,
            paths,
            c.scope,
            &c.local,
            &p.built,
            locked,
            &p.answered.to_store,
            approve,
            env,
            io,
        )?;
        updated += 1;
    }
    if updated == 0 && failures.is_empty() && !args.apply.dry_run && args.names.is_empty() {
        writeln!(
            io.err,
            "every entry added from a registry is at its latest version"
        )?;
    }
    if failures.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(failed(format!("update:\n  {}", failures.join("\n  "))))
    }
}
