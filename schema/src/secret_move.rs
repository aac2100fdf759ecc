//! `steward secret move`, the pure part: find one literal value inside a
//! server entry of a file's text and plan its replacement by a
//! `${secret:NAME}` reference — the value to store, and the new text, in
//! which nothing but that one JSON string changed (comments, key order,
//! formatting and every other byte stay as they were).
//!
//! What is stored is the credential itself: the token of an
//! `Authorization: Bearer …` header (the scheme stays in the file), the value
//! of a `--flag=value` argument whose flag looks like a credential, else the
//! whole value.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

use crate::jsonc;
use crate::redact;
use crate::secrets;

/// Which value of an entry (`env.NAME`, `headers.NAME`, `args.N`, `url`, `httpUrl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Env(String),
    Header(String),
    Arg(usize),
    Url,
    HttpUrl,
}

impl Field {
    /// Reads `env.NAME`, `headers.NAME`, `args.N`, `url` or `httpUrl`.
    pub fn parse(text: &str) -> Result<Field, MoveError> {
        let bad = || MoveError::BadField(text.to_owned());
        match text.split_once('.') {
            Some(("env", name)) if !name.is_empty() => Ok(Field::Env(name.to_owned())),
            Some(("headers", name)) if !name.is_empty() => Ok(Field::Header(name.to_owned())),
            Some(("args", n)) => n.parse().map(Field::Arg).map_err(|_| bad()),
            None if text == "url" => Ok(Field::Url),
            None if text == "httpUrl" => Ok(Field::HttpUrl),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Field::Env(n) => write!(f, "env.{n}"),
            Field::Header(n) => write!(f, "headers.{n}"),
            Field::Arg(i) => write!(f, "args.{i}"),
            Field::Url => f.write_str("url"),
            Field::HttpUrl => f.write_str("httpUrl"),
        }
    }
}

/// Why a move cannot be planned. Messages read after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoveError {
    #[error("read the field {0:?}: expected env.NAME, headers.NAME, args.N, url or httpUrl")]
    BadField(String),
    #[error("read the file: {0}")]
    Syntax(String),
    #[error("find the server {server:?} in the file (servers there: {known})")]
    NoServer { server: String, known: String },
    #[error("find {field} in the entry of {server}: it has no such value")]
    NoField { server: String, field: String },
    #[error("move {field} of {server}: it is not a string")]
    NotAString { server: String, field: String },
    #[error("move {field} of {server}: it is empty")]
    Empty { server: String, field: String },
    #[error(
        "move {field} of {server}: it already holds a reference ({shown}); only a value written literally is moved"
    )]
    AlreadyReference {
        server: String,
        field: String,
        shown: String,
    },
    #[error("use the secret name {0:?}: a name is letters, digits, '_', '.' or '-'")]
    BadName(String),
}

/// A planned move.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    /// What to store under the secret's name.
    pub value: String,
    /// The file's text with the one value replaced.
    pub text: String,
    /// The entry as written before and after (for its approval hash).
    pub before: Value,
    pub after: Value,
}

/// The default name of a moved secret: `SERVER.FIELD`, with characters a
/// name cannot hold turned into `-`.
pub fn default_name(server: &str, field: &Field) -> String {
    secrets::sanitize_name(&format!("{server}.{field}"))
}

/// Byte range of `raw` inside `body`.
fn span(body: &str, raw: &RawValue) -> (usize, usize) {
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    (start, start + raw.get().len())
}

/// Header schemes kept in the file when the token is moved.
const SCHEMES: [&str; 4] = ["Bearer ", "Basic ", "Token ", "token "];

/// What to store and what to write instead, for the literal `value`.
fn split(field: &Field, value: &str, reference: &str) -> (String, String) {
    match field {
        Field::Header(_) => {
            for scheme in SCHEMES {
                if let Some(token) = value.strip_prefix(scheme)
                    && !token.trim().is_empty()
                {
                    return (token.to_owned(), format!("{scheme}{reference}"));
                }
            }
        }
        Field::Arg(_) => {
            if let Some((flag, secret)) = value.split_once('=')
                && redact::is_secret_name(flag)
                && !secret.is_empty()
            {
                return (secret.to_owned(), format!("{flag}={reference}"));
            }
        }
        _ => {}
    }
    (value.to_owned(), reference.to_owned())
}

/// Plans moving `field` of `server` out of `text` (a settings file or
/// `.mcp.json` — servers under `mcpServers` — or, with `lsp`, `.lsp.json`)
/// into the secret `name`.
pub fn plan(
    text: &str,
    lsp: bool,
    server: &str,
    field: &Field,
    name: &str,
) -> Result<Edit, MoveError> {
    if !secrets::is_valid_name(name) {
        return Err(MoveError::BadName(name.to_owned()));
    }
    let bom = if text.starts_with('\u{FEFF}') { 3 } else { 0 };
    let body = jsonc::blank_comments(&text[bom..])
        .ok_or_else(|| MoveError::Syntax("it is not JSON with comments".to_owned()))?;
    let syntax = |e: serde_json::Error| MoveError::Syntax(e.to_string());
    let root: BTreeMap<String, &RawValue> = serde_json::from_str(&body).map_err(syntax)?;
    let servers: BTreeMap<String, &RawValue> = if lsp {
        root
    } else {
        match root.get("mcpServers") {
            Some(raw) => serde_json::from_str(raw.get()).map_err(syntax)?,
            None => BTreeMap::new(),
        }
    };
    let Some(entry_raw) = servers.get(server) else {
        let known: Vec<&str> = servers
            .keys()
            .map(String::as_str)
            .filter(|k| !k.starts_with('$'))
            .collect();
        return Err(MoveError::NoServer {
            server: server.to_owned(),
            known: if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            },
        });
    };
    let no_field = || MoveError::NoField {
        server: server.to_owned(),
        field: field.to_string(),
    };
    let entry: BTreeMap<String, &RawValue> =
        serde_json::from_str(entry_raw.get()).map_err(|_| no_field())?;
    let member = |key: &str, sub: Option<&str>| -> Result<&RawValue, MoveError> {
        let raw = entry.get(key).ok_or_else(no_field)?;
        match sub {
            None => Ok(*raw),
            Some(sub) => {
                let map: BTreeMap<String, &RawValue> =
                    serde_json::from_str(raw.get()).map_err(|_| no_field())?;
                map.get(sub).copied().ok_or_else(no_field)
            }
        }
    };
    let target: &RawValue = match field {
        Field::Env(k) => member("env", Some(k))?,
        Field::Header(k) => member("headers", Some(k))?,
        Field::Url => member("url", None)?,
        Field::HttpUrl => member("httpUrl", None)?,
        Field::Arg(i) => {
            let list: Vec<&RawValue> =
                serde_json::from_str(member("args", None)?.get()).map_err(|_| no_field())?;
            list.get(*i).copied().ok_or_else(no_field)?
        }
    };
    let value = String::deserialize(&mut serde_json::Deserializer::from_str(target.get()))
        .map_err(|_| MoveError::NotAString {
            server: server.to_owned(),
            field: field.to_string(),
        })?;
    if value.is_empty() {
        return Err(MoveError::Empty {
            server: server.to_owned(),
            field: field.to_string(),
        });
    }
    if redact::has_reference(&value) {
        return Err(MoveError::AlreadyReference {
            server: server.to_owned(),
            field: field.to_string(),
            shown: redact::redact_url(&value),
        });
    }
    let (stored, written) = split(field, &value, &secrets::reference(name));
    let (start, end) = span(&body, target);
    let mut new_text = String::with_capacity(text.len() + 16);
    new_text.push_str(&text[..bom + start]);
    new_text.push_str(&serde_json::to_string(&written).expect("a string serializes"));
    new_text.push_str(&text[bom + end..]);

    let before: Value = serde_json::from_str(entry_raw.get()).map_err(syntax)?;
    let mut after = before.clone();
    let slot = match field {
        Field::Env(k) => after.get_mut("env").and_then(|m| m.get_mut(k)),
        Field::Header(k) => after.get_mut("headers").and_then(|m| m.get_mut(k)),
        Field::Url => after.get_mut("url"),
        Field::HttpUrl => after.get_mut("httpUrl"),
        Field::Arg(i) => after.get_mut("args").and_then(|a| a.get_mut(*i)),
    };
    if let Some(slot) = slot {
        *slot = Value::String(written);
    }
    Ok(Edit {
        value: stored,
        text: new_text,
        before,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"// the team's servers
{
  "mcpServers": {
    /* GitHub */
    "github": {
      "command": "gh-mcp",   // pinned
      "args": ["--api-key=sk-arg", "--stdio"],
      "env": {"GITHUB_TOKEN": "ghp_literal", "MODE": "fast"},
      "headers": {"Authorization": "Bearer tok-1"}
    }
  }
}
"#;

    fn moved(field: &str) -> Edit {
        plan(FILE, false, "github", &Field::parse(field).unwrap(), "gh").unwrap()
    }

    #[test]
    fn only_the_one_value_changes() {
        let edit = moved("env.GITHUB_TOKEN");
        assert_eq!(edit.value, "ghp_literal");
        assert_eq!(
            edit.text,
            FILE.replace("\"ghp_literal\"", "\"${secret:gh}\"")
        );
        assert_eq!(edit.after["env"]["GITHUB_TOKEN"], "${secret:gh}");
        assert_eq!(edit.before["env"]["GITHUB_TOKEN"], "ghp_literal");
    }

    #[test]
    fn a_bearer_token_and_a_flag_value_move_without_their_prefix() {
        let edit = moved("headers.Authorization");
        assert_eq!(edit.value, "tok-1");
        assert!(
            edit.text
                .contains(r#""Authorization": "Bearer ${secret:gh}""#)
        );
        let edit = moved("args.0");
        assert_eq!(edit.value, "sk-arg");
        assert!(
            edit.text
                .contains(r#"["--api-key=${secret:gh}", "--stdio"]"#)
        );
    }

    #[test]
    fn what_cannot_be_moved_says_why() {
        let plan_err = |server: &str, field: &str, name: &str| {
            plan(FILE, false, server, &Field::parse(field).unwrap(), name).unwrap_err()
        };
        assert!(matches!(
            plan_err("nope", "url", "gh"),
            MoveError::NoServer { .. }
        ));
        assert!(matches!(
            plan_err("github", "env.NOPE", "gh"),
            MoveError::NoField { .. }
        ));
        assert!(matches!(
            plan_err("github", "url", "gh"),
            MoveError::NoField { .. }
        ));
        assert!(matches!(
            plan_err("github", "env.MODE", "a b"),
            MoveError::BadName(_)
        ));
        let once = moved("env.GITHUB_TOKEN").text;
        let again = plan(
            &once,
            false,
            "github",
            &Field::parse("env.GITHUB_TOKEN").unwrap(),
            "x",
        );
        assert!(matches!(again, Err(MoveError::AlreadyReference { .. })));
        assert!(Field::parse("cwd").is_err() && Field::parse("args.x").is_err());
        assert_eq!(
            default_name("my server", &Field::Env("API_KEY".to_owned())),
            "my-server.env.API_KEY"
        );
    }
}
