//! `steward add NAME[@VERSION]`: one server from an MCP registry, pinned to
//! an exact version, its plan printed and accepted before anything is
//! written; secrets into the store as `${secret:…}`; the entry written into
//! `.mcp.json` (or the user's settings) with the rest of the file intact,
//! its resolution into the lock file beside it, and the entry approved.
//!
//! The steps [`apply`] shares with `steward update`: answering the entry's
//! questions ([`answer_all`]), storing secrets and writing ([`commit`]).

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::process::ExitCode;
use std::time::SystemTime;

use steward_schema::load::LoadMode;
use steward_schema::registry::entry::{self, Built, Choice, Resolution};
use steward_schema::registry::inputs::{
    self, Answer, Decision, Given, Origin, Question, check_value,
};
use steward_schema::registry::lock::{self, Locked, LockedPackage, LockedRemote};
use steward_schema::registry::permissions::SandboxOrigin;
use steward_schema::secrets::sanitize_name;

use super::approve::{self, Verb};
use super::client::runtime;
use super::plan::{self, PlanView};
use super::prompt::{Terminal, trim_line};
use super::registry_args::{AddArgs, AddScope, ApplyOptions};
use super::search::{print_notes, registry_error, setup};
use super::{CommandError, Io};
use crate::desired::offline::{self, Inputs};
use crate::observe::clock::rfc3339;
use crate::registry::client::{Client, Found};
use crate::registry::packages::{self, Options, Resolver};
use crate::registry::write::{self, Scope};
use crate::registry::{Pick, choose, on_path};
use crate::runtime::secrets::{self, SecretBackend, SecretValue};
use crate::support::paths::Paths;

fn failed(message: impl Into<String>) -> CommandError {
    CommandError::Controller(message.into())
}

/// `--set KEY=VALUE`s by key (repeats kept in order).
pub(crate) fn parse_set(set: &[String]) -> Result<BTreeMap<String, Vec<String>>, CommandError> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in set {
        let Some((k, v)) = item.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(CommandError::Usage {
                subcommand: "add",
                message: format!("--set {item:?}: expected KEY=VALUE"),
            });
        };
        out.entry(k.to_owned()).or_default().push(v.to_owned());
    }
    Ok(out)
}

/// `KEY=VALUE` lines from stdin (`--secrets-stdin`); blank lines and `#`
/// comments skipped.
pub(crate) fn read_secrets_stdin() -> Result<BTreeMap<String, SecretValue>, CommandError> {
    let mut out = BTreeMap::new();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line?;
        let line = trim_line(&line);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            return Err(failed(format!(
                "read the secrets on stdin: line {} is not KEY=VALUE",
                n + 1
            )));
        };
        out.insert(k.trim().to_owned(), SecretValue::new(v.to_owned()));
    }
    Ok(out)
}

/// The entry's questions answered.
pub(crate) struct Answered {
    pub answers: Vec<(Question, Answer)>,
    pub origins: BTreeMap<String, Origin>,
    /// Secret names and values to store.
    pub to_store: Vec<(String, SecretValue)>,
    /// Values the user gave (for the lock file).
    pub given: BTreeMap<String, Vec<String>>,
}

/// Answers what `decided` leaves open: values asked at the terminal (checked
/// against their choices and format), secrets from `stdin` or asked without
/// echo. `dry_run`: nothing is asked for (nothing is written): the plan
/// shows what would be.
pub(crate) fn answer_all(
    decided: Vec<(Question, Decision)>,
    stdin: &BTreeMap<String, SecretValue>,
    term: &mut Option<Terminal>,
    dry_run: bool,
) -> Result<Answered, CommandError> {
    let mut out = Answered {
        answers: Vec::new(),
        origins: BTreeMap::new(),
        to_store: Vec::new(),
        given: BTreeMap::new(),
    };
    let nobody = |key: &str| failed(format!("ask for {key}: there is no terminal to ask"));
    for (q, d) in decided {
        let (answer, origin) = match d {
            Decision::Answered(Answer::Secret(name), Origin::Asked) => {
                let value = stdin.get(&q.key).cloned().ok_or_else(|| nobody(&q.key))?;
                out.to_store.push((name.clone(), value));
                (Answer::Secret(name), Origin::Asked)
            }
            Decision::Answered(answer, origin) => (answer, origin),
            Decision::AskSecret { name, .. } if dry_run => (Answer::Secret(name), Origin::WouldAsk),
            Decision::AskValue { .. } if dry_run => (
                Answer::Values(vec![format!("<{}>", q.key)]),
                Origin::WouldAsk,
            ),
            Decision::AskSecret { name, required } => {
                let t = term.as_mut().ok_or_else(|| nobody(&q.key))?;
                let value = loop {
                    let v = t.secret(&format!(
                        "{} — stored as {name}, not echoed{}: ",
                        q.label(),
                        if required {
                            ""
                        } else {
                            "; empty to leave it out"
                        }
                    ))?;
                    if !v.is_empty() || !required {
                        break v;
                    }
                    t.say("a value is required\n")?;
                };
                if value.is_empty() {
                    (Answer::Omitted, Origin::Omitted)
                } else {
                    out.to_store.push((name.clone(), SecretValue::new(value)));
                    (Answer::Secret(name), Origin::Asked)
                }
            }
            Decision::AskValue { .. } => {
                let t = term.as_mut().ok_or_else(|| nobody(&q.key))?;
                let hint = q
                    .input
                    .choices
                    .as_ref()
                    .filter(|c| !c.is_empty())
                    .map(|c| format!(" [{}]", c.join("/")))
                    .or_else(|| q.input.placeholder.as_ref().map(|p| format!(" (e.g. {p})")))
                    .unwrap_or_default();
                let value = loop {
                    let v = t.line(&format!("{}{hint}: ", q.label()))?;
                    match check_value(&q.input, &v) {
                        Ok(()) if !v.is_empty() => break v,
                        Ok(()) => t.say("a value is required\n")?,
                        Err(why) => t.say(&format!("{why}\n"))?,
                    }
                };
                out.given.insert(q.key.clone(), vec![value.clone()]);
                (Answer::Values(vec![value]), Origin::Asked)
            }
        };
        if let (Answer::Values(v), Origin::Given) = (&answer, origin) {
            out.given.insert(q.key.clone(), v.clone());
        }
        out.origins.insert(q.key.clone(), origin);
        out.answers.push((q, answer));
    }
    Ok(out)
}

/// The lock record of a resolution.
pub(crate) fn record(
    found: &Found,
    choice: Choice,
    resolution: &Resolution,
    built: &Built,
    given: &BTreeMap<String, Vec<String>>,
    now: SystemTime,
) -> Locked {
    let s = &found.response.server;
    let (package, remote) = match choice {
        Choice::Package(i) => {
            let p = &s.packages[i];
            let (resolved, entry_point) = match resolution {
                Resolution::Npm { tarball, .. } => (tarball.clone(), None),
                Resolution::Pypi {
                    file, entry_point, ..
                } => (Some(file.clone()), Some(entry_point.clone())),
                Resolution::Mcpb { .. } => (Some(p.identifier.clone()), None),
                _ => (None, None),
            };
            (
                Some(LockedPackage {
                    registry_type: p.registry_type.clone(),
                    registry_base_url: p.registry_base_url.clone(),
                    identifier: p.identifier.clone(),
                    version: p.version.clone(),
                    integrity: resolution.integrity(),
                    resolved,
                    entry_point,
                }),
                None,
            )
        }
        Choice::Remote(i) => (
            None,
            Some(LockedRemote {
                kind: s.remotes[i].kind.clone(),
                url: built.url.clone().unwrap_or_default(),
            }),
        ),
    };
    Locked {
        registry: found.registry.clone(),
        name: s.name.clone(),
        version: s.version.clone(),
        status: Some(found.response.status().as_str().to_owned()),
        package,
        remote,
        command: built.argv.first().cloned(),
        args: built.argv.iter().skip(1).cloned().collect(),
        url: built.url.clone(),
        env: built.env.clone(),
        headers: built.headers.clone(),
        secrets: built.secrets.iter().cloned().collect(),
        given: given.clone(),
        sandbox: built
            .sandbox
            .as_ref()
            .map(|f| serde_json::to_value(f).expect("a sandbox field serializes")),
        sandbox_from: Some(
            match built.sandbox_origin {
                SandboxOrigin::Publisher => "publisher",
                SandboxOrigin::Default | SandboxOrigin::Unusable(_) => "default",
                SandboxOrigin::NotApplicable => "none",
            }
            .to_owned(),
        ),
        entry_sha256: lock::entry_sha256(&built.entry),
        resolved_at: rfc3339(now),
    }
}

/// Stores the secrets, writes the entry and its lock record, and approves
/// it (workspace scope, `approve`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn commit(
    rt: &tokio::runtime::Runtime,
    backend: &dyn SecretBackend,
    paths: &Paths,
    scope: Scope,
    local: &str,
    built: &Built,
    locked: Locked,
    to_store: &[(String, SecretValue)],
    approve: bool,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<(), CommandError> {
    for (name, value) in to_store {
        rt.block_on(backend.set(name, value))
            .map_err(|e| failed(e.to_string()))?;
        writeln!(
            io.out,
            "stored {name} in {}",
            super::secret::backend_words(backend.kind(), paths)
        )?;
    }
    let (file, lock_file) = write::files(paths, scope);
    write::write_entry(&file, local, &built.entry).map_err(|e| registry_error(e.into()))?;
    write::write_lock(&lock_file, local, locked).map_err(|e| registry_error(e.into()))?;
    writeln!(
        io.out,
        "wrote {local} into {} and its resolution into {}",
        file.display(),
        lock_file.display()
    )?;
    if scope == Scope::Workspace && approve {
        approve::run(paths, Verb::Approve, &[local.to_owned()], false, env, io)?;
    }
    Ok(())
}

/// Where `add` and `update` unpack MCP bundles.
pub(crate) fn bundles_root(paths: &Paths, env: &BTreeMap<String, String>) -> std::path::PathBuf {
    packages::bundle::bundles_root(
        env.get("XDG_DATA_HOME").map(String::as_str),
        paths.user_home.as_deref(),
        &paths.home_dir,
    )
}

/// What happens to the approval, in words.
pub(crate) fn approval_words(paths: &Paths, scope: Scope, local: &str, approve: bool) -> String {
    match (scope, approve) {
        (Scope::User, _) => "none needed (user settings are not approval-gated)".to_owned(),
        (Scope::Workspace, true) => format!(
            "{local} approved for {} (the hash Qwen Code computes for the entry)",
            paths.workspace.display()
        ),
        (Scope::Workspace, false) => {
            format!("not approved (--no-approve): it waits for `steward approve {local}`")
        }
    }
}

/// Whether to go on after the plan: `--yes`, or the terminal's answer.
pub(crate) fn accepted(
    opts: &ApplyOptions,
    term: &mut Option<Terminal>,
    question: &str,
) -> Result<bool, CommandError> {
    if opts.yes {
        return Ok(true);
    }
    match term {
        Some(t) => Ok(t.confirm(question)?),
        None => Err(failed(
            "confirm the plan: there is no terminal to ask; run the command again with --yes to accept the plan above (nothing was written)",
        )),
    }
}

pub fn run(
    paths: &Paths,
    args: &AddArgs,
    env: &BTreeMap<String, String>,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let (name, version) = match args.server.split_once('@') {
        Some((n, v)) if !v.is_empty() => (n, Some(v)),
        _ => (args.server.trim_end_matches('@'), None),
    };
    let local = args
        .local
        .clone()
        .unwrap_or_else(|| name.rsplit('/').next().unwrap_or(name).to_owned());
    if local.is_empty() {
        return Err(CommandError::Usage {
            subcommand: "add",
            message: "--as: the entry's name may not be empty".to_owned(),
        });
    }
    let scope = match args.scope {
        AddScope::Workspace => Scope::Workspace,
        AddScope::User => Scope::User,
    };
    let (file, lock_file) = write::files(paths, scope);
    // A name in use anywhere would shadow or be shadowed: refused.
    let (_, state) = offline::load_desired(paths, &Inputs::default(), env, LoadMode::Lenient);
    let written = write::entries(&file).map_err(|e| registry_error(e.into()))?;
    if let Some(d) = state.mcp.get(&local) {
        return Err(failed(format!(
            "add {name} as {local}: a server named {local} is already configured in {}; choose another name with --as{}",
            d.source,
            if write::read_lock(&lock_file).is_ok_and(|l| l.servers.contains_key(&local)) {
                format!(", or update it with `steward update {local}`")
            } else {
                String::new()
            }
        )));
    }
    if written.contains_key(&local) {
        return Err(failed(format!(
            "add {name} as {local}: {} already has an entry {local}; choose another name with --as",
            file.display()
        )));
    }
    let set = parse_set(&args.set)?;
    let stdin = if args.apply.secrets_stdin {
        read_secrets_stdin()?
    } else {
        BTreeMap::new()
    };

    let (registries, http, cache) = setup(paths, &args.registry)?;
    let rt = runtime()?;
    let client = Client::new(http.as_ref(), cache.clone(), now);
    let found = rt
        .block_on(client.get(&registries.urls, name, version))
        .map_err(registry_error);
    print_notes(&client.take_notes(), io)?;
    let found = found?;
    let detail = &found.response.server;
    if found.response.status() == steward_schema::registry::server::Status::Deprecated {
        writeln!(
            io.err,
            "warning: {}@{} is deprecated in {}{}",
            detail.name,
            detail.version,
            found.registry,
            found
                .response
                .official()
                .status_message
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )?;
    }
    let pick = match (&args.package, &args.remote) {
        (Some(p), _) => Pick::Package(p.clone()),
        (None, Some(r)) => Pick::Remote(r.clone()),
        (None, None) => Pick::Auto,
    };
    let search_path = std::ffi::OsString::from(env.get("PATH").cloned().unwrap_or_default());
    let choice =
        choose(detail, &pick, &|program| on_path(program, &search_path)).map_err(registry_error)?;
    let resolver = Resolver::new(http.as_ref(), cache, now, bundles_root(paths, env));
    let resolved = rt.block_on(packages::resolve(
        &resolver,
        detail,
        choice,
        &Options {
            entry_point: args.entry_point.clone(),
        },
    ));
    print_notes(&resolver.take_notes(), io)?;
    let (resolution, extra) = resolved.map_err(|e| registry_error(e.into()))?;
    let questions = entry::questions_of(detail, choice, &extra);

    let backend = rt.block_on(secrets::open(&paths.home_dir));
    let mut term = Terminal::open();
    let given = Given {
        set,
        secret_values: stdin.keys().cloned().collect(),
        stored: rt
            .block_on(backend.names())
            .unwrap_or_default()
            .into_iter()
            .collect(),
        secret_names: BTreeMap::new(),
        // A dry run asks nobody: what would be asked shows in the plan.
        interactive: term.is_some() || args.apply.dry_run,
    };
    let secret_name = |key: &str| sanitize_name(&format!("{local}.{key}"));
    let decided =
        inputs::decide(&questions, &given, &secret_name).map_err(|e| failed(e.to_string()))?;
    let answered = answer_all(decided, &stdin, &mut term, args.apply.dry_run)?;
    let built = entry::build(
        detail,
        &found.response.meta,
        choice,
        &resolution,
        &answered.answers,
    )
    .map_err(|e| failed(e.to_string()))?;
    let approve = !args.apply.no_approve;
    let store = super::secret::backend_words(backend.kind(), paths);
    let view = PlanView {
        verb: "add".to_owned(),
        local: &local,
        registry: &found.registry,
        response: &found.response,
        choice,
        resolution: &resolution,
        built: &built,
        origins: &answered.origins,
        store: &store,
        file: file.display().to_string(),
        lock: lock_file.display().to_string(),
        approval: approval_words(paths, scope, &local, approve),
    };
    io.out.write_all(plan::render(&view).as_bytes())?;
    if args.apply.dry_run {
        writeln!(io.out, "dry run: nothing was written")?;
        return Ok(ExitCode::SUCCESS);
    }
    io.out.flush()?;
    if !accepted(&args.apply, &mut term, &format!("Add {local}?"))? {
        writeln!(io.out, "not added: nothing was written")?;
        return Ok(ExitCode::from(1));
    }
    let locked = record(&found, choice, &resolution, &built, &answered.given, now);
    commit(
        &rt,
        &*backend,
        paths,
        scope,
        &local,
        &built,
        locked,
        &answered.to_store,
        approve,
        env,
        io,
    )?;
    writeln!(
        io.out,
        "a running controller starts it now (`steward status`); without one, `steward run`"
    )?;
    Ok(ExitCode::SUCCESS)
}
