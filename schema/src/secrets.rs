//! `${secret:NAME}` references: their syntax, which secrets a spec uses,
//! the spec with them replaced (for the runtime to spawn or connect with),
//! and the literal credentials of an entry that should be references.
//!
//! A reference stays in the desired spec as written — the spec, its
//! `configHash` and its approval hash (Qwen Code leaves `${secret:…}` alone,
//! so both compute the same) cover the reference, never the value. Only the
//! runtime, at spawn or connect time, calls [`resolve_mcp`] /
//! [`resolve_lsp`] with the values it looked up.
//!
//! Fields that take references are those that expand `$VAR`: `command`,
//! `args`, `env` values, `cwd`, `url`, `httpUrl`, `headers` values (LSP:
//! `command`, `args`, `env` values), and `oauth.clientSecret`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::redact;
use crate::resource::{AsWritten, LspServerSpec, McpServerSpec};

/// What a reference starts with.
pub const OPEN: &str = "${secret:";

/// Whether `name` is a secret's name: `[A-Za-z0-9_.-]+`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `s` as a secret's name: each character outside `[A-Za-z0-9_.-]` a `-`.
pub fn sanitize_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The reference to secret `name` as it is written in a file.
pub fn reference(name: &str) -> String {
    format!("{OPEN}{name}}}")
}

/// Each `${secret:NAME}` of `s` with a valid name: `(start, end, name)`,
/// byte offsets of the whole reference.
fn spans(s: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = s[from..].find(OPEN) {
        let start = from + at;
        let body = start + OPEN.len();
        match s[body..].find('}') {
            Some(len) if is_valid_name(&s[body..body + len]) => {
                out.push((start, body + len + 1, &s[body..body + len]));
                from = body + len + 1;
            }
            _ => from = body,
        }
    }
    out
}

/// The names of the secrets `s` refers to, in order (repeats kept).
pub fn names_in(s: &str) -> Vec<&str> {
    spans(s).into_iter().map(|(_, _, name)| name).collect()
}

/// `s` with every reference replaced by its value; `Err(name)` for the
/// first secret `value_of` does not know.
pub fn substitute(s: &str, value_of: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let found = spans(s);
    if found.is_empty() {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (start, end, name) in found {
        out.push_str(&s[last..start]);
        out.push_str(&value_of(name).ok_or_else(|| name.to_owned())?);
        last = end;
    }
    out.push_str(&s[last..]);
    Ok(out)
}

fn strings_of<'a>(
    one: [Option<&'a String>; 2],
    list: Option<&'a Vec<String>>,
    maps: [Option<&'a BTreeMap<String, String>>; 2],
) -> impl Iterator<Item = &'a String> {
    one.into_iter()
        .flatten()
        .chain(list.into_iter().flatten())
        .chain(maps.into_iter().flatten().flat_map(BTreeMap::values))
}

/// The secrets an MCP spec uses (in the fields of its transport).
pub fn mcp_names(spec: &McpServerSpec) -> BTreeSet<String> {
    strings_of(
        [spec.command.as_ref(), spec.cwd.as_ref()],
        spec.args.as_ref(),
        [spec.env.as_ref(), spec.headers.as_ref()],
    )
    .chain(spec.url.iter())
    .chain(spec.http_url.iter())
    .flat_map(|s| names_in(s))
    .chain(oauth_secret(spec).into_iter().flat_map(names_in))
    .map(str::to_owned)
    .collect()
}

/// `oauth.clientSecret` of an MCP spec, if it is a string.
fn oauth_secret(spec: &McpServerSpec) -> Option<&str> {
    spec.oauth.as_ref()?.get("clientSecret")?.as_str()
}

/// The secrets a language server spec uses.
pub fn lsp_names(spec: &LspServerSpec) -> BTreeSet<String> {
    strings_of(
        [spec.command.as_ref(), None],
        Some(&spec.args),
        [Some(&spec.env), None],
    )
    .flat_map(|s| names_in(s))
    .map(str::to_owned)
    .collect()
}

type ValueOf<'a> = &'a dyn Fn(&str) -> Option<String>;

fn one(v: &Option<String>, value_of: ValueOf<'_>) -> Result<Option<String>, String> {
    v.as_deref().map(|s| substitute(s, value_of)).transpose()
}

fn list(v: &[String], value_of: ValueOf<'_>) -> Result<Vec<String>, String> {
    v.iter().map(|s| substitute(s, value_of)).collect()
}

fn map(
    v: &BTreeMap<String, String>,
    value_of: ValueOf<'_>,
) -> Result<BTreeMap<String, String>, String> {
    v.iter()
        .map(|(k, s)| Ok((k.clone(), substitute(s, value_of)?)))
        .collect()
}

/// The spec as the server gets it: every reference replaced by its value
/// (`Err(name)`: a secret `value_of` does not know). Hashes stay the
/// desired spec's; the result is for spawning or connecting only.
pub fn resolve_mcp(spec: &McpServerSpec, value_of: ValueOf<'_>) -> Result<McpServerSpec, String> {
    Ok(McpServerSpec {
        command: one(&spec.command, value_of)?,
        args: spec
            .args
            .as_deref()
            .map(|a| list(a, value_of))
            .transpose()?,
        env: spec.env.as_ref().map(|e| map(e, value_of)).transpose()?,
        cwd: one(&spec.cwd, value_of)?,
        url: one(&spec.url, value_of)?,
        http_url: one(&spec.http_url, value_of)?,
        headers: spec
            .headers
            .as_ref()
            .map(|h| map(h, value_of))
            .transpose()?,
        oauth: match (&spec.oauth, oauth_secret(spec)) {
            (Some(oauth), Some(secret)) => {
                let mut oauth = oauth.clone();
                oauth.insert(
                    "clientSecret".to_owned(),
                    Value::String(substitute(secret, value_of)?),
                );
                Some(oauth)
            }
            (oauth, _) => oauth.clone(),
        },
        ..spec.clone()
    })
}

/// [`resolve_mcp`] for a language server.
pub fn resolve_lsp(spec: &LspServerSpec, value_of: ValueOf<'_>) -> Result<LspServerSpec, String> {
    Ok(LspServerSpec {
        command: one(&spec.command, value_of)?,
        args: list(&spec.args, value_of)?,
        env: map(&spec.env, value_of)?,
        ..spec.clone()
    })
}

/// A value written literally in a file where a credential goes (the rule
/// [`crate::redact`] hides by), that a reference should replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiteralCredential {
    /// The FIELD of `steward secret move`: `env.API_KEY`,
    /// `headers.Authorization`, `args.3`, `url`, `httpUrl`.
    pub field: String,
    /// Its JSON pointer inside the entry (`/env/API_KEY`).
    pub pointer: String,
}

fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The literal credentials of an entry as written (its raw JSON): env
/// values under credential-looking names (or URLs with a password or query
/// values), credential-looking headers, arguments `status` would redact,
/// URLs with a password or query values. A value holding a reference is
/// never one.
pub fn literal_credentials(entry: &Value) -> Vec<LiteralCredential> {
    let mut found = Vec::new();
    let mut push = |field: String, pointer: String| {
        found.push(LiteralCredential { field, pointer });
    };
    fn text(v: &Value) -> Option<&str> {
        v.as_str()
            .filter(|s| !s.is_empty() && !redact::has_reference(s))
    }
    if let Some(env) = entry.get("env").and_then(Value::as_object) {
        for (k, v) in env {
            if let Some(v) = text(v)
                && (redact::is_secret_name(k) || redact::redact_url(v) != v)
            {
                push(format!("env.{k}"), format!("/env/{}", escape_pointer(k)));
            }
        }
    }
    if let Some(headers) = entry.get("headers").and_then(Value::as_object) {
        for (k, v) in headers {
            if text(v).is_some() && redact::is_secret_name(k) {
                push(
                    format!("headers.{k}"),
                    format!("/headers/{}", escape_pointer(k)),
                );
            }
        }
    }
    if let Some(args) = entry.get("args").and_then(Value::as_array) {
        let written: Vec<String> = args
            .iter()
            .map(|a| a.as_str().unwrap_or_default().to_owned())
            .collect();
        for (i, (arg, shown)) in written
            .iter()
            .zip(redact::redact_args(&written))
            .enumerate()
        {
            if *arg != shown {
                push(format!("args.{i}"), format!("/args/{i}"));
            }
        }
    }
    for key in ["url", "httpUrl"] {
        if let Some(v) = entry.get(key).and_then(text)
            && redact::redact_url(v) != v
        {
            push(key.to_owned(), format!("/{key}"));
        }
    }
    found
}

/// The same rule over a spec's as-written fields (for a check made after
/// the merge, where the raw entry is gone).
pub fn literal_credentials_written(w: &AsWritten) -> Vec<LiteralCredential> {
    let mut entry = serde_json::Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(v) = value {
            entry.insert(key.to_owned(), v);
        }
    };
    put("env", w.env.as_ref().map(|e| serde_json::json!(e)));
    put("headers", w.headers.as_ref().map(|h| serde_json::json!(h)));
    put("args", w.args.as_ref().map(|a| serde_json::json!(a)));
    put("url", w.url.clone().map(Value::String));
    let http_key = if w.http_url_from_url {
        "url"
    } else {
        "httpUrl"
    };
    put(http_key, w.http_url.clone().map(Value::String));
    literal_credentials(&Value::Object(entry))
}

/// The command that moves the literal credential at `field` of `server`
/// out of `file` (see [`literal_credentials`]).
pub fn move_command(file: &Path, server: &str, field: &str) -> String {
    format!(
        "steward secret move {} {} {}",
        shell_word(&file.to_string_lossy()),
        shell_word(server),
        shell_word(field)
    )
}

/// `s` quoted for a POSIX shell when it needs it.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:@%+=,".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The warning for one literal credential of `server` in `file`.
pub fn literal_credential_message(file: &Path, server: &str, found: &LiteralCredential) -> String {
    format!(
        "{} looks like a credential written literally in the file; move it to a secret (it stays a ${{secret:…}} reference here): {}",
        found.field,
        move_command(file, server, &found.field)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "gh" => Some("ghp_123".to_owned()),
            "a.b-c_1" => Some("x".to_owned()),
            _ => None,
        }
    }

    #[test]
    fn references_are_found_only_with_valid_names() {
        assert_eq!(names_in("Bearer ${secret:gh}"), ["gh"]);
        assert_eq!(
            names_in("${secret:a.b-c_1}/${secret:gh}"),
            ["a.b-c_1", "gh"]
        );
        assert!(names_in("${secret:}").is_empty());
        assert!(names_in("${secret:a b}").is_empty());
        assert!(names_in("${secret:gh").is_empty());
        assert!(names_in("${SECRET:gh} $secret:gh ${GH}").is_empty());
        assert!(is_valid_name("github-token") && !is_valid_name("a/b"));
    }

    #[test]
    fn substitution_replaces_every_reference_and_names_a_missing_one() {
        assert_eq!(
            substitute("Bearer ${secret:gh} ${secret:gh}", &lookup).unwrap(),
            "Bearer ghp_123 ghp_123"
        );
        assert_eq!(substitute("plain ${VAR}", &lookup).unwrap(), "plain ${VAR}");
        assert_eq!(
            substitute("${secret:gh}${secret:nope}", &lookup).unwrap_err(),
            "nope"
        );
    }

    #[test]
    fn a_resolved_spec_has_values_and_keeps_its_hashes() {
        let spec = McpServerSpec {
            command: Some("srv".to_owned()),
            args: Some(vec!["--token=${secret:gh}".to_owned()]),
            env: Some(BTreeMap::from([(
                "T".to_owned(),
                "${secret:a.b-c_1}".to_owned(),
            )])),
            config_hash: "h".to_owned(),
            ..Default::default()
        };
        assert_eq!(
            mcp_names(&spec).into_iter().collect::<Vec<_>>(),
            ["a.b-c_1", "gh"]
        );
        let resolved = resolve_mcp(&spec, &lookup).unwrap();
        assert_eq!(resolved.args.unwrap(), ["--token=ghp_123"]);
        assert_eq!(resolved.env.unwrap()["T"], "x");
        assert_eq!(resolved.config_hash, "h");
    }

    #[test]
    fn an_oauth_client_secret_is_a_reference_resolved_and_redacted() {
        let oauth = serde_json::json!({"clientId": "c", "clientSecret": "${secret:gh}"});
        let spec = McpServerSpec {
            http_url: Some("https://h/mcp".to_owned()),
            oauth: oauth.as_object().cloned(),
            ..Default::default()
        };
        assert_eq!(mcp_names(&spec).into_iter().collect::<Vec<_>>(), ["gh"]);
        let resolved = resolve_mcp(&spec, &lookup).unwrap();
        let resolved_oauth = resolved.oauth.clone().unwrap();
        assert_eq!(resolved_oauth["clientSecret"], "ghp_123");
        assert_eq!(resolved_oauth["clientId"], "c");
        // Shown as written; a literal secret is hidden.
        assert_eq!(
            spec.redacted().oauth.unwrap()["clientSecret"],
            "${secret:gh}"
        );
        assert_eq!(
            resolved.redacted().oauth.unwrap()["clientSecret"],
            crate::redact::REDACTED
        );
    }

    #[test]
    fn literal_credentials_follow_the_redaction_rule() {
        let entry = serde_json::json!({
            "command": "srv",
            "args": ["--api-key", "sk-1", "--token=${secret:gh}", "--verbose"],
            "env": {"API_KEY": "sk-2", "GH_TOKEN": "${GH_TOKEN}", "MODE": "fast",
                    "DB": "postgres://u:pw@h/db"},
            "headers": {"Authorization": "Bearer x", "Accept": "application/json"},
            "httpUrl": "https://h/mcp?key=abc"
        });
        let fields: Vec<String> = literal_credentials(&entry)
            .into_iter()
            .map(|f| f.field)
            .collect();
        assert_eq!(
            fields,
            [
                "env.API_KEY",
                "env.DB",
                "headers.Authorization",
                "args.1",
                "httpUrl"
            ]
        );
        let command = move_command(Path::new("/w s/.mcp.json"), "gh", "env.API_KEY");
        assert_eq!(
            command,
            "steward secret move '/w s/.mcp.json' gh env.API_KEY"
        );
    }
}
