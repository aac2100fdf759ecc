//! Qwen Code's view of an MCP server entry, and the approval hash it stores.
//!
//! `mcpApprovals.json` is shared with Qwen Code (0.24): a decision made with
//! `qwen mcp approve` must be one Steward honours and the other way round, so
//! [`approval_hash`] reproduces exactly what Qwen Code computes
//! (`hashMcpServerConfig`): the entry *as Qwen Code holds it* — `.mcp.json`
//! entries after its Claude-format normalization, settings entries after its
//! `$VAR` expansion — without `scope`, `extensionName` and `description`,
//! serialized by `JSON.stringify` with object keys sorted (JavaScript's sort:
//! UTF-16 code units), then sha256.
//!
//! Everything here mirrors JavaScript semantics on purpose (truthiness,
//! `JSON.stringify` number and string formatting), and is checked against
//! the real Qwen Code by the differential tests.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::canonical::sha256_hex;
use crate::resource::Scope;

/// Fields Qwen Code leaves out of the approval hash (provenance and labels).
const NON_BEHAVIORAL_FIELDS: [&str; 3] = ["scope", "extensionName", "description"];

/// Variables Qwen Code never expands (left literal in settings).
const NEVER_EXPANDED: [&str; 6] = [
    "SESSION_ID",
    "QWEN_CODE_SESSION_ID",
    "QWEN_SERVER_TOKEN",
    "QWEN_DAEMON_TOKEN",
    "QWEN_CODE_EXTERNAL_TOOL_GUARD_TOKEN",
    "QWEN_CODE_PRIVATE_ACP_CAPABILITY",
];

/// The approval hash of the entry `literal` (as written in its file), for a
/// server of `scope`. `vars` resolves `$VAR` the way Qwen Code does for
/// settings files (the process environment, then `HOME_DIR/.env`).
pub fn approval_hash(
    literal: &Value,
    scope: Scope,
    vars: &dyn Fn(&str) -> Option<String>,
) -> String {
    hash_mcp_server_config(&held_entry(literal, scope, vars))
}

/// The entry as Qwen Code holds it after loading `literal` from a source of
/// `scope`: settings layers expand variables in every string; `.mcp.json`
/// entries are normalized from the Claude Code format and not expanded.
pub fn held_entry(literal: &Value, scope: Scope, vars: &dyn Fn(&str) -> Option<String>) -> Value {
    match scope {
        Scope::Project => normalize_claude_entry(literal),
        Scope::User | Scope::Workspace | Scope::System => expand_value(literal, vars),
        Scope::Extension | Scope::Cli => literal.clone(),
    }
}

/// Qwen Code's `hashMcpServerConfig`.
pub fn hash_mcp_server_config(config: &Value) -> String {
    let behavioral = match config {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !NON_BEHAVIORAL_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    };
    let mut out = String::new();
    js_stringify_sorted(&behavioral, &mut out);
    sha256_hex(out.as_bytes())
}

/// Qwen Code's `normalizeClaudeMcpServer`: Claude Code's `type` selector
/// folded into Qwen Code's fields. An entry with `command`, `httpUrl` or
/// `tcp` loses `type` (unless it is `sdk`); one with a string `url` has it
/// moved to `httpUrl` when `type` is `http`, and loses `type` (unless `sdk`).
pub fn normalize_claude_entry(raw: &Value) -> Value {
    let Value::Object(server) = raw else {
        return raw.clone();
    };
    let is_sdk = server.get("type").and_then(Value::as_str) == Some("sdk");
    if ["command", "httpUrl", "tcp"]
        .iter()
        .any(|k| server.get(*k).is_some_and(truthy))
    {
        if !server.contains_key("type") || is_sdk {
            return raw.clone();
        }
        let mut rest = server.clone();
        rest.remove("type");
        return Value::Object(rest);
    }
    if let Some(Value::String(url)) = server.get("url") {
        let is_http = server.get("type").and_then(Value::as_str) == Some("http");
        let mut rest = server.clone();
        rest.remove("url");
        if !is_sdk {
            rest.remove("type");
        }
        let key = if is_http { "httpUrl" } else { "url" };
        rest.insert(key.to_owned(), Value::String(url.clone()));
        return Value::Object(rest);
    }
    raw.clone()
}

/// JavaScript truthiness of a JSON value.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// Qwen Code's `resolveEnvVarsInObject`: every string value (not keys),
/// recursively, with `$NAME` / `${ANYTHING}` replaced by the variable's value
/// when it is set and left literal otherwise.
pub fn expand_value(value: &Value, vars: &dyn Fn(&str) -> Option<String>) -> Value {
    match value {
        Value::String(s) => Value::String(expand_string(s, vars)),
        Value::Array(items) => Value::Array(items.iter().map(|v| expand_value(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), expand_value(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Qwen Code's `resolveEnvVarsInString`: the regex `\$(?:(\w+)|{([^}]+)})`.
/// There is no `${NAME:-default}` form: the braces' whole content is the name.
pub fn expand_string(s: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    if !s.contains('$') {
        return s.to_owned();
    }
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, used) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) if end > 0 => (Some(&braced[..end]), end + 2),
                _ => (None, 0),
            }
        } else {
            let end = after.find(|c: char| !is_word(c)).unwrap_or(after.len());
            if end > 0 {
                (Some(&after[..end]), end)
            } else {
                (None, 0)
            }
        };
        match name {
            Some(name) => {
                let whole = &rest[at..at + 1 + used];
                let upper = name.to_ascii_uppercase();
                let value = if NEVER_EXPANDED.contains(&upper.as_str()) {
                    None
                } else {
                    vars(name)
                };
                out.push_str(value.as_deref().unwrap_or(whole));
                rest = &rest[at + 1 + used..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The variables Qwen Code expands settings with: the process environment,
/// then the `KEY=value` lines of `HOME_DIR/.env` for names the environment
/// does not set.
pub fn settings_vars<'a>(
    env: &'a BTreeMap<String, String>,
    home_env: &'a BTreeMap<String, String>,
) -> impl Fn(&str) -> Option<String> + 'a {
    move |name: &str| env.get(name).or_else(|| home_env.get(name)).cloned()
}

/// `JSON.stringify` of `value` with every object's keys sorted as
/// JavaScript's `Array.prototype.sort` sorts strings (by UTF-16 code units).
pub fn js_stringify_sorted(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&js_number(n)),
        Value::String(s) => js_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                js_stringify_sorted(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                js_string(key, out);
                out.push(':');
                js_stringify_sorted(&map[key], out);
            }
            out.push('}');
        }
    }
}

/// A string as `JSON.stringify` writes it.
fn js_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A number as JavaScript's `Number.prototype.toString` writes it (what
/// `JSON.stringify` uses): the shortest digits that read back the same
/// double, in plain notation for exponents from -7 to 20, else `d.ddde±n`.
pub fn js_number(n: &serde_json::Number) -> String {
    let f = match n.as_f64() {
        Some(f) if f.is_finite() => f,
        _ => return "null".to_owned(),
    };
    if f == 0.0 {
        return "0".to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1; // position of the decimal point after the first n digits
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let sign = if n - 1 < 0 { '-' } else { '+' };
        let e = (n - 1).abs();
        if k == 1 {
            format!("{digits}e{sign}{e}")
        } else {
            format!("{}.{}e{sign}{e}", &digits[..1], &digits[1..])
        }
    };
    if f < 0.0 { format!("-{body}") } else { body }
}

/// The `KEY=value` pairs of a dotenv file (the subset of the format Qwen Code's
/// `dotenv` reads that matters for names: `export` prefixes, quotes, comments).
pub fn parse_dotenv(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(at) = line.find(['=', ':']) else {
            continue;
        };
        let (key, value) = (&line[..at], &line[at + 1..]);
        let key = key.trim();
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            continue;
        }
        let value = value.trim();
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'' | '`')) => match value[1..].find(q) {
                Some(end) => {
                    let inner = &value[1..1 + end];
                    if q == '"' {
                        inner.replace("\\n", "\n").replace("\\r", "\r")
                    } else {
                        inner.to_owned()
                    }
                }
                None => value.to_owned(),
            },
            // Unquoted: up to a `#` (a comment), trimmed.
            _ => value.split('#').next().unwrap_or("").trim_end().to_owned(),
        };
        out.insert(key.to_owned(), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_vars(_: &str) -> Option<String> {
        None
    }

    /// Hashes Qwen Code 0.24.4 wrote for these entries (from `qwen mcp approve`
    /// runs; the differential tests re-check them against the real CLI).
    #[test]
    fn hashes_qwen_code_wrote() {
        let entry = json!({"command":"echo","args":["$HOME"],"env":{"X":"$NOPE"}});
        assert_eq!(
            approval_hash(&entry, Scope::Project, &no_vars),
            "e2d6d0f0fa5bc09bd54d87f0f8513a466ac3e6171e8b46192e14a7639cbf3de7"
        );
        // Claude's `type: "stdio"` is dropped before hashing.
        let claude =
            json!({"type": "stdio", "command":"echo","args":["$HOME"],"env":{"X":"$NOPE"}});
        assert_eq!(
            approval_hash(&claude, Scope::Project, &no_vars),
            approval_hash(&entry, Scope::Project, &no_vars)
        );
    }

    #[test]
    fn claude_normalization_follows_qwen_code() {
        let n = |v: Value| normalize_claude_entry(&v);
        assert_eq!(
            n(json!({"type": "http", "url": "http://h/mcp"})),
            json!({"httpUrl": "http://h/mcp"})
        );
        assert_eq!(
            n(json!({"type": "sse", "url": "http://h/sse"})),
            json!({"url": "http://h/sse"})
        );
        // A command wins over `type`, which is dropped; `url` stays.
        assert_eq!(
            n(json!({"type": "http", "command": "x", "url": "http://h"})),
            json!({"command": "x", "url": "http://h"})
        );
        // `sdk` is kept; an empty command is not a command.
        assert_eq!(
            n(json!({"type": "sdk", "command": "x"})),
            json!({"type": "sdk", "command": "x"})
        );
        assert_eq!(
            n(json!({"type": "http", "command": "", "url": "u"})),
            json!({"command": "", "httpUrl": "u"})
        );
        assert_eq!(n(json!({"type": "stdio"})), json!({"type": "stdio"}));
    }

    #[test]
    fn expansion_follows_qwen_code() {
        let vars = |name: &str| match name {
            "HOME" => Some("/h".to_owned()),
            "EMPTY" => Some(String::new()),
            "SESSION_ID" => Some("s".to_owned()),
            _ => None,
        };
        let e = |s: &str| expand_string(s, &vars);
        assert_eq!(e("$HOME/x"), "/h/x");
        assert_eq!(e("${HOME}x"), "/hx");
        assert_eq!(e("a${EMPTY}b"), "ab");
        // Unset, defaults, malformed and protected names stay literal.
        assert_eq!(e("${NOPE}"), "${NOPE}");
        assert_eq!(e("${HOME:-d}"), "${HOME:-d}");
        assert_eq!(e("${}$"), "${}$");
        assert_eq!(e("${HOME"), "${HOME");
        assert_eq!(e("$$HOME"), "$/h");
        assert_eq!(e("$SESSION_ID"), "$SESSION_ID");
        assert_eq!(e("$1x"), "$1x");
        assert_eq!(
            expand_value(&json!({"$HOME": ["$HOME", 1, null]}), &vars),
            json!({"$HOME": ["/h", 1, null]})
        );
    }

    #[test]
    fn stringify_matches_javascript() {
        let s = |v: Value| {
            let mut out = String::new();
            js_stringify_sorted(&v, &mut out);
            out
        };
        assert_eq!(
            s(json!({"b": null, "a": [3, 1], "\u{10000}": 1, "\u{ffff}": 2})),
            "{\"a\":[3,1],\"b\":null,\"\u{10000}\":1,\"\u{ffff}\":2}"
        );
        assert_eq!(
            s(json!("a\"\\\u{1}\u{7f}\n")),
            "\"a\\\"\\\\\\u0001\u{7f}\\n\""
        );
        let num = |f: f64| js_number(&serde_json::Number::from_f64(f).unwrap());
        assert_eq!(num(1e21), "1e+21");
        assert_eq!(num(1e20), "100000000000000000000");
        assert_eq!(num(1.5e-7), "1.5e-7");
        assert_eq!(num(0.000001), "0.000001");
        assert_eq!(num(-2.5), "-2.5");
        assert_eq!(num(123.456), "123.456");
        assert_eq!(num(-0.0), "0");
        assert_eq!(js_number(&serde_json::Number::from(600000u64)), "600000");
        assert_eq!(
            js_number(&serde_json::Number::from(12345678901234567890u64)),
            "12345678901234567000"
        );
    }

    #[test]
    fn dotenv_lines() {
        let env = parse_dotenv(
            "# c\nexport A=1\nB = \"two words\" \nC='x' # y\nD=v#note\nE: colon\nbad line\n",
        );
        assert_eq!(env.get("A").map(String::as_str), Some("1"));
        assert_eq!(env.get("B").map(String::as_str), Some("two words"));
        assert_eq!(env.get("C").map(String::as_str), Some("x"));
        assert_eq!(env.get("D").map(String::as_str), Some("v"));
        assert_eq!(env.get("E").map(String::as_str), Some("colon"));
        assert_eq!(env.len(), 5);
    }
}
