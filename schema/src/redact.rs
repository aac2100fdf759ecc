//! Showing a spec without its secrets: people paste `steward status` into
//! bug reports, so what it shows must not hold a credential.
//!
//! A spec holds `args`, `env`, `url`/`httpUrl` and `headers` *expanded*: a
//! `${GITHUB_TOKEN}` in the file is the token itself in the spec. The
//! redacted spec shows those fields as written in the file instead
//! ([`AsWritten`]), so a reference stays a reference, and replaces with
//! [`REDACTED`] what is written literally where credentials go:
//! - a header value without a variable reference (`Bearer abc…`);
//! - an env value whose name looks like a credential (`API_KEY`, `*TOKEN*`,
//!   `*SECRET*`, `*PASSWORD*`…) and holds no reference;
//! - in a URL (in `url`, `httpUrl`, env values and args): the password of
//!   its user info (the whole user info when it has no password) and the
//!   value of every query parameter, unless it is a reference;
//! - in args: the value after a credential-looking flag (`--token X`,
//!   `--api-key=X`) and the value of a `NAME=value` pair with such a name.
//!
//! Everything else (commands, paths, hashes, names) is shown as it is. A spec
//! whose as-written values are unknown (not built from a source) shows
//! [`REDACTED`] for every value of those fields: it never falls back to the
//! expanded one. Field names never change, only values.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::formats::{LspServerEntry, McpServerEntry};
use crate::resource::{
    AsWritten, Item, LspServerSpec, McpServerSpec, McpTransport, WorkspaceStatus,
};

/// What a hidden value is shown as.
pub const REDACTED: &str = "<redacted>";

/// Name fragments (compared case-insensitively) that mark an env variable,
/// a flag or a query parameter as a credential.
const SECRET_NAME_PARTS: [&str; 11] = [
    "token",
    "secret",
    "passw",
    "pass",
    "key",
    "auth",
    "credential",
    "cookie",
    "session",
    "private",
    "signature",
];

/// The as-written fields of an MCP entry, for the transport the spec uses
/// (the same choice `build_mcp` makes: `type: "http"` takes `url` when
/// `httpUrl` is absent).
pub fn mcp_as_written(entry: &McpServerEntry, transport: McpTransport) -> AsWritten {
    match transport {
        McpTransport::Stdio => AsWritten {
            args: entry.args.clone(),
            env: entry.env.clone(),
            ..AsWritten::default()
        },
        McpTransport::Http => AsWritten {
            http_url: entry.http_url.clone().or_else(|| entry.url.clone()),
            http_url_from_url: entry.http_url.is_none(),
            headers: entry.headers.clone(),
            ..AsWritten::default()
        },
        McpTransport::Sse => AsWritten {
            url: entry.url.clone(),
            headers: entry.headers.clone(),
            ..AsWritten::default()
        },
    }
}

/// The as-written fields of a language server entry.
pub fn lsp_as_written(entry: &LspServerEntry) -> AsWritten {
    AsWritten {
        args: entry.args.clone(),
        env: entry.env.clone(),
        ..AsWritten::default()
    }
}

/// Whether `s` holds a variable reference (`$NAME` or `${…}`).
pub fn has_reference(s: &str) -> bool {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$'
            && chars
                .peek()
                .is_some_and(|n| *n == '{' || n.is_ascii_alphabetic() || *n == '_')
        {
            return true;
        }
    }
    false
}

/// Whether a variable, flag or parameter name looks like it holds a credential.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_NAME_PARTS.iter().any(|part| lower.contains(part))
}

/// `value` of a credential slot: as written when it is a reference.
fn secret_value(value: &str) -> String {
    if has_reference(value) {
        value.to_owned()
    } else {
        REDACTED.to_owned()
    }
}

/// A URL with its user info password and query values redacted (references
/// kept). Text that is not a URL is returned as it is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let userinfo = match userinfo.split_once(':') {
                Some((user, password)) => format!("{user}:{}", secret_value(password)),
                None => secret_value(userinfo),
            };
            format!("{userinfo}@{host}")
        }
        None => authority.to_owned(),
    };
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (tail, None),
    };
    let mut out = format!("{scheme}://{authority}");
    match before_fragment.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((k, v)) => format!("{k}={}", secret_value(v)),
                    None => param.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(before_fragment),
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// One free-form value (an env value, an arg): URLs in it redacted.
fn redact_text(value: &str) -> String {
    if value.contains("://") {
        value
            .split(' ')
            .map(|word| match word.find("://") {
                // Keep what precedes the scheme (`--url=`, a quote).
                Some(i) => {
                    let start = word[..i]
                        .rfind(|c: char| {
                            !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                        })
                        .map_or(0, |p| p + 1);
                    format!("{}{}", &word[..start], redact_url(&word[start..]))
                }
                None => word.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        value.to_owned()
    }
}

/// `args` as written with credentials redacted.
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut after_secret_flag = false;
    for arg in args {
        let shown = if after_secret_flag && !arg.starts_with('-') {
            secret_value(arg)
        } else if let Some((name, value)) = arg.split_once('=')
            && is_secret_name(name)
            && !name.contains("://")
        {
            format!("{name}={}", secret_value(value))
        } else {
            redact_text(arg)
        };
        after_secret_flag = arg.starts_with('-') && !arg.contains('=') && is_secret_name(arg);
        out.push(shown);
    }
    out
}

/// `env` as written with credentials redacted.
pub fn redact_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| {
            let shown = if is_secret_name(k) {
                secret_value(v)
            } else {
                redact_text(v)
            };
            (k.clone(), shown)
        })
        .collect()
}

/// Header values: as written only when they hold a reference.
pub fn redact_headers(headers: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| (k.clone(), secret_value(v)))
        .collect()
}

/// Every value of `map` hidden (its as-written form is unknown).
fn hide_all(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.keys()
        .map(|k| (k.clone(), REDACTED.to_owned()))
        .collect()
}

/// The written value of a field when known, else every value hidden.
fn shown<T>(
    expanded: &Option<T>,
    written: &Option<T>,
    redact: impl Fn(&T) -> T,
    hide: impl Fn(&T) -> T,
) -> Option<T> {
    match (expanded, written) {
        (None, _) => None,
        (Some(_), Some(w)) => Some(redact(w)),
        (Some(e), None) => Some(hide(e)),
    }
}

impl McpServerSpec {
    /// This spec as `status` shows it by default (see the module docs).
    pub fn redacted(&self) -> McpServerSpec {
        let w = &self.as_written;
        let hide_list = |v: &Vec<String>| vec![REDACTED.to_owned(); v.len()];
        let hide_one = |_: &String| REDACTED.to_owned();
        McpServerSpec {
            args: shown(&self.args, &w.args, |a| redact_args(a), hide_list),
            env: shown(&self.env, &w.env, redact_env, hide_all),
            url: shown(&self.url, &w.url, |u| redact_url(u), hide_one),
            http_url: shown(&self.http_url, &w.http_url, |u| redact_url(u), hide_one),
            headers: shown(&self.headers, &w.headers, redact_headers, hide_all),
            oauth: self.oauth.as_ref().map(redact_oauth),
            ..self.clone()
        }
    }
}

/// An `oauth` object with a literal `clientSecret` hidden (a reference
/// stays).
fn redact_oauth(
    oauth: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut oauth = oauth.clone();
    if let Some(secret) = oauth.get_mut("clientSecret")
        && !secret.as_str().is_some_and(has_reference)
    {
        *secret = serde_json::Value::String(REDACTED.to_owned());
    }
    oauth
}

impl LspServerSpec {
    /// This spec as `status` shows it by default (see the module docs).
    pub fn redacted(&self) -> LspServerSpec {
        let w = &self.as_written;
        let args = match &w.args {
            Some(a) => redact_args(a),
            None => vec![REDACTED.to_owned(); self.args.len()],
        };
        let env = match &w.env {
            Some(e) => redact_env(e),
            None => hide_all(&self.env),
        };
        LspServerSpec {
            args,
            env,
            ..self.clone()
        }
    }
}

/// Redact the spec of every item of `status` (the default of `status`,
/// `describe` and the control socket; `--show-secrets` skips it).
pub fn redact_status(status: &mut WorkspaceStatus) {
    for item in &mut status.items {
        match item {
            Item::McpServer(s) => s.spec = Arc::new(s.spec.redacted()),
            Item::LspServer(s) => s.spec = Arc::new(s.spec.redacted()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn references_are_found() {
        assert!(has_reference("${TOKEN}"));
        assert!(has_reference("Bearer $TOKEN"));
        assert!(has_reference("${A:-x}"));
        assert!(!has_reference("a$ b"));
        assert!(!has_reference("$1"));
        assert!(!has_reference("cost: 5$"));
        assert!(!has_reference("plain"));
    }

    #[test]
    fn env_shows_references_and_hides_literal_credentials() {
        let env = map(&[
            ("GITHUB_TOKEN", "${GITHUB_TOKEN}"),
            ("API_KEY", "sk-live-123"),
            ("DB_PASSWORD", "hunter2"),
            ("DEBUG", "1"),
            (
                "DATABASE_URL",
                "postgres://app:hunter2@db:5432/app?sslmode=require",
            ),
        ]);
        assert_eq!(
            redact_env(&env),
            map(&[
                ("GITHUB_TOKEN", "${GITHUB_TOKEN}"),
                ("API_KEY", REDACTED),
                ("DB_PASSWORD", REDACTED),
                ("DEBUG", "1"),
                (
                    "DATABASE_URL",
                    "postgres://app:<redacted>@db:5432/app?sslmode=<redacted>"
                ),
            ])
        );
    }

    #[test]
    fn headers_show_only_references() {
        let headers = map(&[
            ("Authorization", "Bearer ${TOKEN}"),
            ("X-Api-Key", "abc123"),
            ("Accept", "application/json"),
        ]);
        assert_eq!(
            redact_headers(&headers),
            map(&[
                ("Authorization", "Bearer ${TOKEN}"),
                ("X-Api-Key", REDACTED),
                ("Accept", REDACTED),
            ])
        );
    }

    #[test]
    fn urls_lose_passwords_and_query_values_but_keep_references() {
        let cases = [
            ("https://mcp.example/sse", "https://mcp.example/sse"),
            (
                "https://mcp.example/mcp?apiKey=abc&v=${VERSION}#top",
                "https://mcp.example/mcp?apiKey=<redacted>&v=${VERSION}#top",
            ),
            ("https://user:pw@host/x", "https://user:<redacted>@host/x"),
            (
                "https://ghp_abc@github.com/",
                "https://<redacted>@github.com/",
            ),
            ("https://${USER}:${PW}@h/", "https://${USER}:${PW}@h/"),
            ("not a url", "not a url"),
            ("http://h?flag", "http://h?flag"),
        ];
        for (input, want) in cases {
            assert_eq!(redact_url(input), want, "{input}");
        }
    }

    #[test]
    fn args_hide_credential_flags_pairs_and_url_secrets() {
        let args = strings(&[
            "--token",
            "abc",
            "--api-key=def",
            "--password",
            "${PW}",
            "API_KEY=ghi",
            "--url=https://h/x?key=jkl",
            "--verbose",
            "server.js",
            "--key-file",
            "--stdio",
        ]);
        assert_eq!(
            redact_args(&args),
            strings(&[
                "--token",
                REDACTED,
                "--api-key=<redacted>",
                "--password",
                "${PW}",
                "API_KEY=<redacted>",
                "--url=https://h/x?key=<redacted>",
                "--verbose",
                "server.js",
                "--key-file",
                "--stdio",
            ])
        );
    }

    fn mcp_spec() -> McpServerSpec {
        McpServerSpec {
            transport: McpTransport::Stdio,
            scope: crate::resource::Scope::User,
            command: Some("/usr/bin/srv".to_owned()),
            args: Some(strings(&["--token", "s3cr3t"])),
            env: Some(map(&[("TOKEN", "s3cr3t"), ("MODE", "fast")])),
            cwd: None,
            url: None,
            http_url: None,
            headers: None,
            timeout: None,
            trust: None,
            include_tools: None,
            exclude_tools: None,
            description: None,
            disabled: None,
            oauth: None,
            sandbox: None,
            resolved_sandbox: None,
            qwen: Default::default(),
            extension_name: None,
            dev: None,
            config_hash: "h".to_owned(),
            approval_hash: "a".to_owned(),
            as_written: AsWritten {
                args: Some(strings(&["--token", "${TOKEN}"])),
                env: Some(map(&[("TOKEN", "${TOKEN}"), ("MODE", "fast")])),
                ..AsWritten::default()
            },
        }
    }

    #[test]
    fn a_redacted_spec_shows_what_was_written_and_keeps_everything_else() {
        let spec = mcp_spec();
        let shown = spec.redacted();
        assert_eq!(shown.args, Some(strings(&["--token", "${TOKEN}"])));
        assert_eq!(
            shown.env,
            Some(map(&[("TOKEN", "${TOKEN}"), ("MODE", "fast")]))
        );
        assert_eq!(shown.command, spec.command);
        assert_eq!(shown.config_hash, spec.config_hash);
        // The JSON has the same field names.
        let keys = |s: &McpServerSpec| {
            serde_json::to_value(s)
                .unwrap()
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&shown), keys(&spec));
        assert!(!serde_json::to_string(&shown).unwrap().contains("s3cr3t"));
    }

    #[test]
    fn unknown_as_written_values_are_hidden_not_shown_expanded() {
        let mut spec = mcp_spec();
        spec.as_written = AsWritten::default();
        let shown = spec.redacted();
        assert_eq!(shown.args, Some(strings(&[REDACTED, REDACTED])));
        assert_eq!(
            shown.env,
            Some(map(&[("MODE", REDACTED), ("TOKEN", REDACTED)]))
        );
    }
}
