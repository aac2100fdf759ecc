//! From a registry entry, one chosen package (or remote), what was learnt
//! about its artefact and the answers to its questions, to the
//! `mcpServers` entry Steward writes: an exact argv, no shell.
//!
//! - npm: `npx --yes [runtime args] <id>@<version> [package args]`
//!   (`npm_config_registry` when the package's registry is not npmjs);
//! - PyPI: `uvx [runtime args] --from <id>==<version> <entry point>
//!   [package args]`, the entry point read from the distribution's metadata
//!   (`UV_DEFAULT_INDEX` when the index is not PyPI's);
//! - NuGet: `dnx [runtime args] <id>@<version> --yes -- [package args]`;
//! - OCI: `docker run -i --rm [runtime args] -e NAME… <image>@<digest>
//!   [package args]` (the environment passed by name, never on the
//!   command line);
//! - MCPB: the bundle's own command, its `${__dirname}` the unpacked
//!   bundle, `${user_config.KEY}` answered like any other value;
//! - a remote: `httpUrl` (streamable HTTP) or `url` (SSE), with headers.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::inputs::{Answer, Question, Target, substitute, template_names};
use super::permissions::{self, SandboxOrigin};
use super::server::{Argument, ArgumentKind, Package, ServerDetail, Transport};
use crate::sandbox::{PermissionProfile, SandboxField};
use crate::secrets;

/// npm's public registry (no `npm_config_registry` needed).
pub const NPM_DEFAULT: &str = "https://registry.npmjs.org";
/// PyPI (no index variable needed).
pub const PYPI_DEFAULT: &str = "https://pypi.org";

/// Which way of running the server was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// `packages[i]`.
    Package(usize),
    /// `remotes[i]`.
    Remote(usize),
}

/// What was learnt about the chosen artefact from its own registry.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Npm {
        /// `dist.integrity` (or `sha1-` of `dist.shasum`) as npm states it.
        integrity: Option<String>,
        tarball: Option<String>,
    },
    Pypi {
        /// The console script to run, from the wheel's `entry_points.txt`.
        entry_point: String,
        /// The wheel it was read from, and its sha256 as the index states it.
        file: String,
        sha256: Option<String>,
    },
    Nuget {
        integrity: Option<String>,
    },
    Oci {
        /// `image@sha256:…`.
        reference: String,
    },
    Mcpb {
        /// Where the bundle is unpacked.
        dir: String,
        /// The manifest's `server.mcp_config`.
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        sha256: String,
    },
    Remote,
}

impl Resolution {
    /// The artefact's integrity as its registry states it, if any.
    pub fn integrity(&self) -> Option<String> {
        match self {
            Resolution::Npm { integrity, .. } | Resolution::Nuget { integrity } => {
                integrity.clone()
            }
            Resolution::Pypi { sha256, .. } => sha256.as_ref().map(|s| format!("sha256:{s}")),
            Resolution::Oci { reference } => reference.split_once('@').map(|(_, d)| d.to_owned()),
            Resolution::Mcpb { sha256, .. } => Some(format!("sha256:{sha256}")),
            Resolution::Remote => None,
        }
    }
}

/// The entry, and what the plan shows of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    /// The `mcpServers` entry, as written.
    pub entry: Map<String, Value>,
    /// `command` + `args` (local servers).
    pub argv: Vec<String>,
    /// `httpUrl` or `url` (remotes).
    pub url: Option<String>,
    pub env: BTreeMap<String, String>,
    pub headers: BTreeMap<String, String>,
    /// `(key, secret name)` of every secret the entry refers to.
    pub secrets: Vec<(String, String)>,
    pub sandbox: Option<SandboxField>,
    pub sandbox_origin: SandboxOrigin,
    /// What the user should know (Docker, the runner's registry…).
    pub notes: Vec<String>,
}

/// Why an entry cannot be built. Messages read after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("use {what}: the registry gives no exact version for it (Steward pins exact versions)")]
    NoVersion { what: String },
    #[error(
        "run package {what}: its transport is {kind}; Steward runs packages that speak stdio (choose another with --package or --remote)"
    )]
    Transport { what: String, kind: String },
    #[error("use remote {what}: its type {kind:?} is neither streamable-http nor sse")]
    RemoteType { what: String, kind: String },
    #[error("use remote {what}: it has no URL")]
    NoUrl { what: String },
    #[error("build the entry: the resolution does not match the chosen {what}")]
    Mismatch { what: String },
}

/// A package's label: `npm @x/y@1.2.3`.
pub fn package_label(p: &Package) -> String {
    match &p.version {
        Some(v) if !p.identifier.ends_with(v.as_str()) => {
            format!("{} {}@{}", p.registry_type, p.identifier, v)
        }
        _ => format!("{} {}", p.registry_type, p.identifier),
    }
}

/// The questions of `choice` (MCPB: `user_config` comes with the manifest).
pub fn questions_of(detail: &ServerDetail, choice: Choice, extra: &[Question]) -> Vec<Question> {
    let mut out = match choice {
        Choice::Package(i) => {
            let p = &detail.packages[i];
            super::inputs::questions(
                &p.runtime_arguments,
                &p.package_arguments,
                &p.environment_variables,
                &[],
                &BTreeMap::new(),
            )
        }
        Choice::Remote(i) => {
            let r = &detail.remotes[i];
            super::inputs::questions(&[], &[], &[], &r.headers, &r.variables)
        }
    };
    out.extend(extra.iter().cloned());
    out
}

/// The answers by key, for substitution.
struct Answers<'a>(&'a [(Question, Answer)]);

impl Answers<'_> {
    fn get(&self, key: &str) -> Option<&Answer> {
        self.0.iter().find(|(q, _)| q.key == key).map(|(_, a)| a)
    }

    /// The value of variable `name` (one string), if answered.
    fn variable(&self, name: &str) -> Option<String> {
        match self.get(name)? {
            Answer::Values(v) => v.first().cloned(),
            Answer::Template(t) => Some(t.clone()),
            Answer::Secret(s) => Some(secrets::reference(s)),
            Answer::Omitted => None,
        }
    }

    /// What question `q` contributes (several for a repeated one).
    fn rendered(&self, q: &Question) -> Vec<String> {
        match self.get(&q.key) {
            Some(Answer::Values(v)) => v.clone(),
            Some(Answer::Template(t)) => {
                let names = template_names(t, &q.input.variables);
                vec![substitute(t, &|n| {
                    if names.iter().any(|k| k == n) {
                        self.variable(n)
                    } else {
                        None
                    }
                })]
            }
            Some(Answer::Secret(name)) => vec![secrets::reference(name)],
            Some(Answer::Omitted) | None => Vec::new(),
        }
    }

    fn for_target(&self, target: &Target) -> Option<&Question> {
        self.0.iter().map(|(q, _)| q).find(|q| &q.target == target)
    }
}

/// The argv of one argument list.
fn arguments(list: &[Argument], runtime: bool, answers: &Answers<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for (index, arg) in list.iter().enumerate() {
        let Some(q) = answers.for_target(&Target::Argument { runtime, index }) else {
            continue;
        };
        let values = answers.rendered(q);
        match (arg.kind, arg.name.as_deref()) {
            (ArgumentKind::Named, Some(flag)) => {
                for v in values {
                    match (q.input.format.as_deref(), v.as_str()) {
                        (Some("boolean"), "false") => {}
                        (Some("boolean"), "true") | (_, "") => out.push(flag.to_owned()),
                        _ => {
                            out.push(flag.to_owned());
                            out.push(v);
                        }
                    }
                }
            }
            _ => out.extend(values),
        }
    }
    out
}

/// The environment (or headers) the answers give, by name.
fn key_values(answers: &Answers<'_>, header: bool) -> BTreeMap<String, String> {
    answers
        .0
        .iter()
        .filter_map(|(q, _)| match &q.target {
            Target::Env(n) if !header => Some((n, q)),
            Target::Header(n) if header => Some((n, q)),
            _ => None,
        })
        .filter_map(|(name, q)| {
            let v = answers.rendered(q);
            v.into_iter().next().map(|v| (name.clone(), v))
        })
        .collect()
}

fn trimmed_base(base: Option<&str>) -> Option<&str> {
    base.map(|b| b.trim_end_matches('/'))
        .filter(|b| !b.is_empty())
}

/// PyPI's simple index under a registry base URL.
pub fn simple_index(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/simple") || base.ends_with("/+simple") {
        base.to_owned()
    } else {
        format!("{base}/simple")
    }
}

/// The keys a package's publisher profile may be filed under.
fn profile_keys(p: &Package) -> Vec<String> {
    let mut keys = vec![p.identifier.clone()];
    if let Some(v) = &p.version {
        keys.push(format!("{}@{v}", p.identifier));
        keys.push(format!("{}:{v}", p.identifier));
    }
    keys
}

/// Builds the entry. `metas`: the server's `_meta`, then the registry
/// response's (where a publisher profile may be).
pub fn build(
    detail: &ServerDetail,
    response_meta: &Map<String, Value>,
    choice: Choice,
    resolution: &Resolution,
    answers: &[(Question, Answer)],
) -> Result<Built, BuildError> {
    let answers = Answers(answers);
    let metas = [&detail.meta, response_meta];
    let mut notes = Vec::new();
    let mut env = key_values(&answers, false);
    let headers = key_values(&answers, true);
    // Each secret once, under the key whose answer it is (a template's
    // secret variable is a question of its own).
    let secrets: Vec<(String, String)> = answers
        .0
        .iter()
        .filter_map(|(q, a)| match a {
            Answer::Secret(name) => Some((q.key.clone(), name.clone())),
            _ => None,
        })
        .collect();
    let mut entry = Map::new();
    if let Some(d) = detail.description.as_ref().filter(|d| !d.is_empty()) {
        entry.insert("description".into(), Value::String(d.clone()));
    }
    let (argv, url, sandbox, origin) = match choice {
        Choice::Remote(i) => {
            let r = &detail.remotes[i];
            let url = remote_url(r, &answers, &detail.name)?;
            let key = match r.kind.as_str() {
                "streamable-http" | "http" => "httpUrl",
                "sse" => "url",
                other => {
                    return Err(BuildError::RemoteType {
                        what: format!("{} of {}", i + 1, detail.name),
                        kind: other.to_owned(),
                    });
                }
            };
            entry.insert(key.into(), Value::String(url.clone()));
            if !headers.is_empty() {
                entry.insert("headers".into(), string_map(&headers));
            }
            (Vec::new(), Some(url), None, SandboxOrigin::NotApplicable)
        }
        Choice::Package(i) => {
            let p = &detail.packages[i];
            let kind = if p.transport.kind.is_empty() {
                "stdio"
            } else {
                p.transport.kind.as_str()
            };
            if kind != "stdio" {
                return Err(BuildError::Transport {
                    what: package_label(p),
                    kind: kind.to_owned(),
                });
            }
            let runtime = arguments(&p.runtime_arguments, true, &answers);
            let package = arguments(&p.package_arguments, false, &answers);
            let version = || {
                p.version
                    .clone()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| BuildError::NoVersion {
                        what: package_label(p),
                    })
            };
            let mismatch = || BuildError::Mismatch {
                what: package_label(p),
            };
            let base = trimmed_base(p.registry_base_url.as_deref());
            let mut argv: Vec<String> = Vec::new();
            match (p.registry_type.as_str(), resolution) {
                ("npm", Resolution::Npm { .. }) => {
                    argv.push("npx".into());
                    argv.push("--yes".into());
                    argv.extend(runtime);
                    argv.push(format!("{}@{}", p.identifier, version()?));
                    argv.extend(package);
                    if let Some(base) = base.filter(|b| *b != NPM_DEFAULT) {
                        env.insert("npm_config_registry".into(), format!("{base}/"));
                    }
                }
                ("pypi", Resolution::Pypi { entry_point, .. }) => {
                    argv.push("uvx".into());
                    argv.extend(runtime);
                    argv.push("--from".into());
                    argv.push(format!("{}=={}", p.identifier, version()?));
                    argv.push(entry_point.clone());
                    argv.extend(package);
                    if let Some(base) = base.filter(|b| *b != PYPI_DEFAULT) {
                        env.insert("UV_DEFAULT_INDEX".into(), simple_index(base));
                    }
                }
                ("nuget", Resolution::Nuget { .. }) => {
                    argv.push("dnx".into());
                    argv.extend(runtime);
                    argv.push(format!("{}@{}", p.identifier, version()?));
                    argv.push("--yes".into());
                    argv.push("--".into());
                    argv.extend(package);
                }
                ("oci", Resolution::Oci { reference }) => {
                    argv.extend(["docker", "run", "-i", "--rm"].map(String::from));
                    argv.extend(runtime);
                    for name in env.keys() {
                        argv.push("-e".into());
                        argv.push(name.clone());
                    }
                    argv.push(reference.clone());
                    argv.extend(package);
                }
                (
                    "mcpb",
                    Resolution::Mcpb {
                        dir,
                        command,
                        args,
                        env: bundle_env,
                        ..
                    },
                ) => {
                    let fill = |s: &str| bundle_string(s, dir, &answers);
                    argv.push(fill(command));
                    argv.extend(args.iter().map(|a| fill(a)));
                    argv.extend(runtime);
                    argv.extend(package);
                    for (k, v) in bundle_env {
                        let v = fill(v);
                        // A `${user_config.X}` left unanswered is left out.
                        if !v.contains("${user_config.") {
                            env.entry(k.clone()).or_insert(v);
                        }
                    }
                }
                _ => return Err(mismatch()),
            }
            let (sandbox, origin) = package_sandbox(p, resolution, &metas, &mut notes);
            (argv, None, sandbox, origin)
        }
    };
    if let Some((command, args)) = argv.split_first() {
        entry.insert("command".into(), Value::String(command.clone()));
        entry.insert(
            "args".into(),
            Value::Array(args.iter().cloned().map(Value::String).collect()),
        );
        if !env.is_empty() {
            entry.insert("env".into(), string_map(&env));
        }
    }
    if let Some(field) = &sandbox {
        entry.insert(
            "sandbox".into(),
            serde_json::to_value(field).expect("a sandbox field serializes"),
        );
    }
    for (key, value) in env.iter().chain(&headers) {
        if has_variable(value) {
            notes.push(format!(
                "{key} holds \"$\" followed by a name, which Steward expands from its environment"
            ));
        }
    }
    Ok(Built {
        entry,
        argv,
        url,
        env,
        headers,
        secrets,
        sandbox,
        sandbox_origin: origin,
        notes,
    })
}

fn string_map(m: &BTreeMap<String, String>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// Whether `s` has a `$NAME`/`${NAME}` Steward would expand (references
/// to secrets aside).
fn has_variable(s: &str) -> bool {
    let b = s.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == b'$'
            && match b.get(i + 1) {
                Some(c) if c.is_ascii_alphabetic() || *c == b'_' => true,
                Some(b'{') => !s[i..].starts_with(secrets::OPEN),
                _ => false,
            }
    })
}

/// A remote's URL with its variables substituted.
fn remote_url(r: &Transport, answers: &Answers<'_>, server: &str) -> Result<String, BuildError> {
    let url = r.url.as_deref().ok_or_else(|| BuildError::NoUrl {
        what: server.to_owned(),
    })?;
    Ok(substitute(url, &|n| {
        if r.variables.contains_key(n) {
            answers.variable(n)
        } else {
            None
        }
    }))
}

/// A string of an MCPB manifest: `${__dirname}` the bundle's directory,
/// `${user_config.KEY}` the answer to KEY (left as written when none).
fn bundle_string(s: &str, dir: &str, answers: &Answers<'_>) -> String {
    let mut out = s.replace("${__dirname}", dir);
    while let Some(start) = out.find("${user_config.") {
        let body = start + "${user_config.".len();
        let Some(len) = out[body..].find('}') else {
            break;
        };
        let key = out[body..body + len].to_owned();
        match answers.variable(&key) {
            Some(v) => out.replace_range(start..body + len + 1, &v),
            None => break,
        }
    }
    out
}

/// The sandbox of a package: the publisher's profile, else `none`; Docker
/// runs `off` (its socket is hidden by every other profile); a bundle may
/// read its own directory.
fn package_sandbox(
    p: &Package,
    resolution: &Resolution,
    metas: &[&Map<String, Value>],
    notes: &mut Vec<String>,
) -> (Option<SandboxField>, SandboxOrigin) {
    if p.registry_type == "oci" {
        notes.push(
            "Docker runs the server in a container: the docker client needs Docker's socket, which every profile but off hides, so the entry runs with sandbox off (the container is the isolation; the publisher's permissions are not applied by Steward)".to_owned(),
        );
        return (
            Some(SandboxField::Name("off".into())),
            SandboxOrigin::NotApplicable,
        );
    }
    let bundle_dir = match resolution {
        Resolution::Mcpb { dir, .. } => Some(dir.clone()),
        _ => None,
    };
    let with_bundle = |mut profile: PermissionProfile| {
        if let Some(dir) = &bundle_dir {
            let read = profile.read.get_or_insert_with(Vec::new);
            if !read.contains(dir) {
                read.push(dir.clone());
            }
        }
        profile
    };
    let (profile, origin) = match permissions::publisher_profile(metas, &profile_keys(p)) {
        Some(Ok(profile)) => (Some(with_bundle(profile)), SandboxOrigin::Publisher),
        Some(Err(why)) => (None, SandboxOrigin::Unusable(why)),
        None => (None, SandboxOrigin::Default),
    };
    if p.registry_type == "nuget" && profile.is_none() && bundle_dir.is_none() {
        // The egress proxy lets npx and uvx reach their registries under
        // `none`; it does not know dnx, which downloads when it starts.
        notes.push(
            "dnx downloads the package when it starts, and Steward's egress proxy knows only npm's and PyPI's runners: without a published profile the entry gets network (outbound connections, files as none)".to_owned(),
        );
        return (Some(SandboxField::Name("network".into())), origin);
    }
    match profile {
        Some(profile) => (Some(SandboxField::Profile(profile)), origin),
        None => match bundle_dir {
            Some(dir) => (
                Some(SandboxField::Profile(PermissionProfile {
                    read: Some(vec![dir]),
                    ..PermissionProfile::default()
                })),
                origin,
            ),
            None => (Some(permissions::default_field()), origin),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::inputs::{Decision, Given, decide};
    use crate::registry::server::ServerDetail;
    use serde_json::json;

    fn detail(v: Value) -> ServerDetail {
        serde_json::from_value(v).unwrap()
    }

    /// Decides with `set` and secrets at hand for `secret_keys`, not interactive.
    fn answer(
        d: &ServerDetail,
        choice: Choice,
        set: &[(&str, &str)],
        secret_keys: &[&str],
    ) -> Vec<(Question, Answer)> {
        let mut given = Given::default();
        for (k, v) in set {
            given
                .set
                .entry((*k).to_owned())
                .or_default()
                .push((*v).to_owned());
        }
        given.secret_values = secret_keys.iter().map(|k| (*k).to_owned()).collect();
        decide(&questions_of(d, choice, &[]), &given, &|k| format!("w.{k}"))
            .unwrap()
            .into_iter()
            .map(|(q, d)| match d {
                Decision::Answered(a, _) => (q, a),
                other => panic!("undecided {other:?}"),
            })
            .collect()
    }

    fn npm() -> ServerDetail {
        detail(json!({
            "name": "io.github.x/weather", "version": "1.2.3", "description": "Weather",
            "packages": [{
                "registryType": "npm", "registryBaseUrl": "http://127.0.0.1:9/npm/",
                "identifier": "@x/weather", "version": "1.2.3",
                "transport": {"type": "stdio"},
                "runtimeArguments": [{"type": "named", "name": "--node-options", "value": "--max-old-space-size={mem}",
                                      "variables": {"mem": {"default": "512"}}}],
                "packageArguments": [
                    {"type": "named", "name": "--mode", "default": "local", "choices": ["local", "proxy"]},
                    {"type": "named", "name": "--verbose", "format": "boolean"},
                    {"type": "positional", "valueHint": "dir", "isRepeated": true},
                    {"type": "positional", "value": "serve"}
                ],
                "environmentVariables": [
                    {"name": "WEATHER_KEY", "isSecret": true, "isRequired": true},
                    {"name": "UNITS", "default": "metric"}
                ]
            }],
            "_meta": {"io.modelcontextprotocol.registry/publisher-provided": {"io.github.stacklok": {
                "@x/weather": {"permissions": {"network": {"outbound": {"allow_host": ["api.weather.com"], "allow_port": [443]}}}}
            }}}
        }))
    }

    #[test]
    fn an_npm_package_becomes_an_exact_argv_with_its_secret_a_reference() {
        let d = npm();
        let answers = answer(
            &d,
            Choice::Package(0),
            &[("dir", "/a b"), ("dir", "/c"), ("verbose", "true")],
            &["WEATHER_KEY"],
        );
        let res = Resolution::Npm {
            integrity: Some("sha512-abc".into()),
            tarball: None,
        };
        let b = build(&d, &Map::new(), Choice::Package(0), &res, &answers).unwrap();
        assert_eq!(
            b.argv,
            [
                "npx",
                "--yes",
                "--node-options",
                "--max-old-space-size=512",
                "@x/weather@1.2.3",
                "--mode",
                "local",
                "--verbose",
                "/a b",
                "/c",
                "serve"
            ]
        );
        assert_eq!(b.env["WEATHER_KEY"], "${secret:w.WEATHER_KEY}");
        assert_eq!(b.env["UNITS"], "metric");
        assert_eq!(b.env["npm_config_registry"], "http://127.0.0.1:9/npm/");
        assert_eq!(
            b.secrets,
            [("WEATHER_KEY".to_owned(), "w.WEATHER_KEY".to_owned())]
        );
        assert_eq!(b.sandbox_origin, SandboxOrigin::Publisher);
        assert_eq!(
            b.entry["sandbox"],
            json!({"network": {"outbound": {"allow_host": ["api.weather.com"], "allow_port": [443]}}})
        );
        assert_eq!(b.entry["command"], "npx");
        assert_eq!(b.entry["description"], "Weather");
        assert_eq!(res.integrity().as_deref(), Some("sha512-abc"));
    }

    #[test]
    fn a_pypi_package_runs_its_entry_point_through_uvx() {
        let d = detail(json!({"name": "a/b", "version": "2", "packages": [{
            "registryType": "pypi", "registryBaseUrl": "http://127.0.0.1:9/pypi",
            "identifier": "clock-server", "version": "2.0.1"}]}));
        let res = Resolution::Pypi {
            entry_point: "tick-tock".into(),
            file: "clock_server-2.0.1-py3-none-any.whl".into(),
            sha256: Some("ff".into()),
        };
        let b = build(&d, &Map::new(), Choice::Package(0), &res, &[]).unwrap();
        assert_eq!(
            b.argv,
            ["uvx", "--from", "clock-server==2.0.1", "tick-tock"]
        );
        assert_eq!(b.env["UV_DEFAULT_INDEX"], "http://127.0.0.1:9/pypi/simple");
        assert_eq!(b.entry["sandbox"], json!("none"));
        assert_eq!(b.sandbox_origin, SandboxOrigin::Default);
        // PyPI itself needs no index variable.
        let d = detail(json!({"name": "a/b", "version": "2", "packages": [{
            "registryType": "pypi", "registryBaseUrl": "https://pypi.org",
            "identifier": "clock-server", "version": "2.0.1"}]}));
        let b = build(&d, &Map::new(), Choice::Package(0), &res, &[]).unwrap();
        assert!(b.env.is_empty(), "{:?}", b.env);
    }

    #[test]
    fn nuget_oci_and_bundles() {
        let d = detail(json!({"name": "a/b", "version": "1", "packages": [
            {"registryType": "nuget", "identifier": "Knapcode.Sample", "version": "0.5.0",
             "packageArguments": [{"type": "positional", "value": "mcp"}]},
            {"registryType": "oci", "identifier": "ghcr.io/x/y:1.0",
             "environmentVariables": [{"name": "TOKEN", "isSecret": true}]},
            {"registryType": "mcpb", "identifier": "https://x/b.mcpb", "fileSha256": "ab"}
        ]}));
        let b = build(
            &d,
            &Map::new(),
            Choice::Package(0),
            &Resolution::Nuget { integrity: None },
            &answer(&d, Choice::Package(0), &[], &[]),
        )
        .unwrap();
        assert_eq!(
            b.argv,
            ["dnx", "Knapcode.Sample@0.5.0", "--yes", "--", "mcp"]
        );
        assert_eq!(b.entry["sandbox"], json!("network"));
        let oci = Resolution::Oci {
            reference: "ghcr.io/x/y@sha256:00".into(),
        };
        let b = build(
            &d,
            &Map::new(),
            Choice::Package(1),
            &oci,
            &answer(&d, Choice::Package(1), &[], &["TOKEN"]),
        )
        .unwrap();
        assert_eq!(
            b.argv,
            [
                "docker",
                "run",
                "-i",
                "--rm",
                "-e",
                "TOKEN",
                "ghcr.io/x/y@sha256:00"
            ]
        );
        assert_eq!(b.env["TOKEN"], "${secret:w.TOKEN}");
        assert_eq!(b.entry["sandbox"], json!("off"));
        assert!(b.notes[0].contains("Docker"));
        let bundle = Resolution::Mcpb {
            dir: "/h/b".into(),
            command: "node".into(),
            args: vec![
                "${__dirname}/server/index.js".into(),
                "--key=${user_config.key}".into(),
            ],
            env: BTreeMap::from([("HOME_HINT".into(), "${__dirname}".into())]),
            sha256: "ab".into(),
        };
        let key: Question = Question {
            key: "key".into(),
            target: Target::Variable,
            input: serde_json::from_value(json!({"default": "k1"})).unwrap(),
            repeated: false,
        };
        let b = build(
            &d,
            &Map::new(),
            Choice::Package(2),
            &bundle,
            &[(key, Answer::Values(vec!["k1".into()]))],
        )
        .unwrap();
        assert_eq!(b.argv, ["node", "/h/b/server/index.js", "--key=k1"]);
        assert_eq!(b.env["HOME_HINT"], "/h/b");
        assert_eq!(b.entry["sandbox"], json!({"read": ["/h/b"]}));
        assert_eq!(bundle.integrity().as_deref(), Some("sha256:ab"));
        // A resolution of another kind is a bug, said so.
        assert!(matches!(
            build(&d, &Map::new(), Choice::Package(0), &oci, &[]),
            Err(BuildError::Mismatch { .. })
        ));
    }

    #[test]
    fn a_remote_gets_its_url_and_headers_with_the_secret_a_reference() {
        let d = detail(json!({"name": "a/b", "version": "1", "remotes": [
            {"type": "sse", "url": "https://x/sse"},
            {"type": "streamable-http", "url": "https://{region}.x/mcp",
             "variables": {"region": {"default": "eu", "choices": ["eu", "us"]}},
             "headers": [{"name": "Authorization", "value": "Bearer {token}",
                          "variables": {"token": {"isSecret": true, "isRequired": true}}},
                         {"name": "X-Plain", "default": "1"}]}
        ]}));
        let answers = answer(&d, Choice::Remote(1), &[("region", "us")], &["token"]);
        let b = build(
            &d,
            &Map::new(),
            Choice::Remote(1),
            &Resolution::Remote,
            &answers,
        )
        .unwrap();
        assert_eq!(b.entry["httpUrl"], "https://us.x/mcp");
        assert_eq!(b.headers["Authorization"], "Bearer ${secret:w.token}");
        assert_eq!(b.headers["X-Plain"], "1");
        assert_eq!(b.secrets, [("token".to_owned(), "w.token".to_owned())]);
        assert!(b.entry.get("sandbox").is_none() && b.entry.get("command").is_none());
        let b = build(&d, &Map::new(), Choice::Remote(0), &Resolution::Remote, &[]).unwrap();
        assert_eq!(b.entry["url"], "https://x/sse");
    }

    #[test]
    fn what_cannot_be_run_is_refused_with_the_reason() {
        let d = detail(json!({"name": "a/b", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "x"},
            {"registryType": "npm", "identifier": "y", "version": "1",
             "transport": {"type": "streamable-http", "url": "http://localhost:8080"}}
        ]}));
        let npm = Resolution::Npm {
            integrity: None,
            tarball: None,
        };
        assert!(matches!(
            build(&d, &Map::new(), Choice::Package(0), &npm, &[]),
            Err(BuildError::NoVersion { .. })
        ));
        assert!(matches!(
            build(&d, &Map::new(), Choice::Package(1), &npm, &[]),
            Err(BuildError::Transport { .. })
        ));
    }

    #[test]
    fn a_value_steward_would_expand_is_pointed_out() {
        let d = detail(json!({"name": "a/b", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "x", "version": "1",
             "environmentVariables": [{"name": "P", "default": "a$HOME"}]}]}));
        let answers = answer(&d, Choice::Package(0), &[], &[]);
        let npm = Resolution::Npm {
            integrity: None,
            tarball: None,
        };
        let b = build(&d, &Map::new(), Choice::Package(0), &npm, &answers).unwrap();
        assert!(
            b.notes.iter().any(|n| n.contains("P holds")),
            "{:?}",
            b.notes
        );
    }
}
