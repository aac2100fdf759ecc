//! The plan `steward add` and `steward update` print before they write:
//! what will run (the exact argv, or the URL), from which package, version
//! and integrity, with which environment, headers and secrets (references
//! and where the values are stored — never a value), under which sandbox
//! and why, and which files are written.

use std::collections::BTreeMap;

use steward_schema::registry::entry::{Built, Choice, Resolution, package_label};
use steward_schema::registry::inputs::Origin;
use steward_schema::registry::permissions::SandboxOrigin;
use steward_schema::registry::server::{ServerResponse, Status};
use steward_schema::sandbox::SandboxField;

/// Everything a plan shows.
pub struct PlanView<'a> {
    /// `add` or `update 1.2.3 →`.
    pub verb: String,
    pub local: &'a str,
    pub registry: &'a str,
    pub response: &'a ServerResponse,
    pub choice: Choice,
    pub resolution: &'a Resolution,
    pub built: &'a Built,
    /// Where each key's value came from.
    pub origins: &'a BTreeMap<String, Origin>,
    /// Where secrets are stored (words).
    pub store: &'a str,
    pub file: String,
    pub lock: String,
    /// What happens to the approval (words).
    pub approval: String,
}

/// `argv` as a reader would type it (quoted where a shell would need it;
/// it is run without one).
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The runner of `argv`, the hosts of its registry as the egress proxy
/// will allow them (the same variables the runtime reads), and its port.
fn runner_hosts(b: &Built) -> Option<(String, String, u16)> {
    let runner = b.argv.first()?.clone();
    let of = |var: &str, default: &str| {
        b.env
            .get(var)
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| Some((u.host_str()?.to_owned(), u.port_or_known_default()?)))
            .unwrap_or_else(|| (default.to_owned(), 443))
    };
    let (hosts, port) = match runner.as_str() {
        "npx" => of("npm_config_registry", "registry.npmjs.org"),
        "uvx" => of("UV_DEFAULT_INDEX", "pypi.org, files.pythonhosted.org"),
        _ => return None,
    };
    Some((runner, hosts, port))
}

/// The sandbox line(s).
fn sandbox_lines(b: &Built) -> Vec<String> {
    let Some(field) = &b.sandbox else {
        return vec!["none applies (a remote server runs elsewhere)".to_owned()];
    };
    let shown = serde_json::to_string(field).expect("a sandbox field serializes");
    let mut out = vec![match &b.sandbox_origin {
        SandboxOrigin::Publisher => format!("{shown} (the publisher's permission profile)"),
        SandboxOrigin::Default => format!("{shown} (the publisher publishes no permissions)"),
        SandboxOrigin::Unusable(why) => {
            format!("{shown} (the publisher's permission profile cannot be used: {why})")
        }
        SandboxOrigin::NotApplicable => shown,
    }];
    if let Some((runner, hosts, port)) = runner_hosts(b) {
        let ports = match field {
            SandboxField::Profile(p) => p
                .network
                .as_ref()
                .and_then(|n| n.outbound.as_ref())
                .and_then(|o| o.allow_port.clone())
                .unwrap_or_default(),
            SandboxField::Name(_) => Vec::new(),
        };
        if ports.is_empty() || ports.contains(&port) {
            out.push(format!(
                "{runner} reaches its registry ({hosts}) through Steward's egress proxy"
            ));
        } else {
            out.push(format!(
                "warning: {runner}'s registry ({hosts}) is on port {port}, which the profile's allow_port does not list: the egress proxy will refuse it"
            ));
        }
    }
    out
}

/// The plan's text.
pub fn render(p: &PlanView<'_>) -> String {
    let s = &p.response.server;
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| lines.push((k.to_owned(), v));
    match p.response.status() {
        Status::Active => {}
        status => add(
            "status",
            format!(
                "{}{}",
                status.as_str(),
                p.response
                    .official()
                    .status_message
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
        ),
    }
    match p.choice {
        Choice::Package(i) => {
            let pkg = &s.packages[i];
            add(
                "package",
                format!(
                    "{}{}",
                    package_label(pkg),
                    pkg.registry_base_url
                        .as_deref()
                        .map(|b| format!(" (from {b})"))
                        .unwrap_or_default()
                ),
            );
            add(
                "integrity",
                p.resolution
                    .integrity()
                    .unwrap_or_else(|| "not stated by its registry".to_owned()),
            );
            if let Resolution::Pypi {
                file, entry_point, ..
            } = p.resolution
            {
                add("entry", format!("{entry_point} (console script of {file})"));
            }
            if let Resolution::Mcpb { dir, .. } = p.resolution {
                add("unpacked", dir.clone());
            }
            add("runs", shell_words(&p.built.argv));
            add("", "(that argv, without a shell)".to_owned());
        }
        Choice::Remote(_) => {
            add("url", p.built.url.clone().unwrap_or_default());
        }
    }
    let origin = |key: &str| {
        p.origins
            .get(key)
            .map(|o| format!("  ({})", o.word()))
            .unwrap_or_default()
    };
    for (title, map) in [("env", &p.built.env), ("headers", &p.built.headers)] {
        for (i, (k, v)) in map.iter().enumerate() {
            add(
                if i == 0 { title } else { "" },
                format!("{k}={v}{}", origin(k)),
            );
        }
    }
    let omitted: Vec<&String> = p
        .origins
        .iter()
        .filter(|(_, o)| **o == Origin::Omitted)
        .map(|(k, _)| k)
        .collect();
    if !omitted.is_empty() {
        add(
            "not set",
            format!(
                "{} (optional; give with --set)",
                omitted
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    for (i, (key, name)) in p.built.secrets.iter().enumerate() {
        add(
            if i == 0 { "secrets" } else { "" },
            format!("{name} (for {key}) in {}", p.store),
        );
    }
    for (i, line) in sandbox_lines(p.built).into_iter().enumerate() {
        add(if i == 0 { "sandbox" } else { "" }, line);
    }
    for (i, note) in p.built.notes.iter().enumerate() {
        add(if i == 0 { "note" } else { "" }, note.clone());
    }
    add("writes", format!("{} (entry {:?})", p.file, p.local));
    add("", p.lock.clone());
    add("approval", p.approval.clone());
    let mut out = format!(
        "Plan: {} {} {} from {} as {:?}\n",
        p.verb, s.name, s.version, p.registry, p.local
    );
    for (k, v) in lines {
        out.push_str(&format!("  {k:<10} {v}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_shown_quoted_where_a_shell_would_need_it() {
        let argv: Vec<String> = ["npx", "--yes", "@x/y@1.0.0", "a b", "it's", ""]
            .map(String::from)
            .to_vec();
        assert_eq!(
            shell_words(&argv),
            "npx --yes @x/y@1.0.0 'a b' 'it'\\''s' ''"
        );
    }
}
