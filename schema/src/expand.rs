//! Variable expansion in the string fields that name things to run or reach
//! (`command`, `args`, `env`, `cwd`, `url`, `httpUrl`, `headers`).
//!
//! Syntax: `$VAR`, `${VAR}`, `${VAR:-default}` (default used when the variable
//! is unset or empty; the default may itself contain references). A `$` not
//! followed by a name or `{` is literal. Extension entries additionally see
//! `${extensionPath}`, `${CLAUDE_PLUGIN_ROOT}`, `${workspacePath}`, `${/}` and
//! `${pathSeparator}`, which take precedence over the environment.
//!
//! `${secret:NAME}` is not a variable: it stays in the text as written,
//! without a warning, for the runtime to resolve at spawn time
//! ([`crate::secrets`]).

use std::collections::BTreeMap;

/// Where variable values come from.
#[derive(Debug, Clone, Copy)]
pub struct Vars<'a> {
    /// The controller's environment.
    pub env: &'a BTreeMap<String, String>,
    /// Extension variables; `None` outside extensions.
    pub extension: Option<&'a BTreeMap<String, String>>,
}

impl<'a> Vars<'a> {
    pub fn env(env: &'a BTreeMap<String, String>) -> Self {
        Vars {
            env,
            extension: None,
        }
    }

    fn lookup(&self, name: &str) -> Option<&'a str> {
        if let Some(ext) = self.extension
            && let Some(v) = ext.get(name)
        {
            return Some(v.as_str());
        }
        self.env.get(name).map(String::as_str)
    }
}

/// The variables an extension's strings may use, for the extension at `extension_path`.
pub fn extension_vars(extension_path: &str, workspace_path: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    vars.insert("extensionPath".to_owned(), extension_path.to_owned());
    vars.insert("CLAUDE_PLUGIN_ROOT".to_owned(), extension_path.to_owned());
    vars.insert("workspacePath".to_owned(), workspace_path.to_owned());
    vars.insert("/".to_owned(), std::path::MAIN_SEPARATOR.to_string());
    vars.insert(
        "pathSeparator".to_owned(),
        std::path::MAIN_SEPARATOR.to_string(),
    );
    vars
}

/// A reference that could not be expanded; it stays in the text literally
/// (as Qwen Code leaves it), and is reported as a warning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "${{{name}}} is not set and has no default, so it stays literal (write ${{{name}:-default}} to give one)"
    )]
    Unset { name: String },
    #[error("\"${{{text}\" has no closing '}}', so it stays literal")]
    Unterminated { text: String },
    #[error("\"${{{text}}}\" is not ${{NAME}} or ${{NAME:-default}}, so it stays literal")]
    Malformed { text: String },
    #[error(
        "\"${{{text}}}\" is not a secret reference (a name is letters, digits, '_', '.' or '-'), so it stays literal"
    )]
    BadSecretName { text: String },
}

impl ExpandError {
    /// The variable this error is about, if any.
    pub fn variable(&self) -> Option<&str> {
        match self {
            ExpandError::Unset { name } => Some(name),
            _ => None,
        }
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expand every variable reference in `input`. A reference that cannot be
/// expanded stays as written and is returned as a problem.
pub fn expand(input: &str, vars: &Vars<'_>) -> (String, Vec<ExpandError>) {
    let mut problems = Vec::new();
    let out = expand_into(input, vars, &mut problems);
    (out, problems)
}

fn expand_into(input: &str, vars: &Vars<'_>, problems: &mut Vec<ExpandError>) -> String {
    if !input.contains('$') {
        return input.to_owned();
    }
    let chars: Vec<char> = input.chars().collect();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '$' {
            out.push(c);
            i += 1;
            continue;
        }
        match chars.get(i + 1) {
            Some('{') => {
                // Find the matching '}' (defaults may nest ${...}).
                let start = i + 2;
                let mut depth = 1;
                let mut j = start;
                while j < chars.len() {
                    match chars[j] {
                        '{' if j > 0 && chars[j - 1] == '$' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let body: String = chars[start..j.min(chars.len())].iter().collect();
                if j >= chars.len() {
                    problems.push(ExpandError::Unterminated { text: body });
                    out.extend(&chars[i..]);
                    return out;
                }
                match expand_braced(&body, vars, problems) {
                    Some(v) => out.push_str(&v),
                    None => out.extend(&chars[i..=j]),
                }
                i = j + 1;
            }
            Some(&n) if is_name_start(n) => {
                let mut j = i + 1;
                while j < chars.len() && is_name_char(chars[j]) {
                    j += 1;
                }
                let name: String = chars[i + 1..j].iter().collect();
                match vars.lookup(&name) {
                    Some(v) => out.push_str(v),
                    None => {
                        out.extend(&chars[i..j]);
                        problems.push(ExpandError::Unset { name });
                    }
                }
                i = j;
            }
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    out
}

/// The value of `${body}`, or `None` (with a problem) to keep it literal.
fn expand_braced(body: &str, vars: &Vars<'_>, problems: &mut Vec<ExpandError>) -> Option<String> {
    if let Some(name) = body.strip_prefix("secret:") {
        // Resolved by the runtime at spawn time, never here.
        if !crate::secrets::is_valid_name(name) {
            problems.push(ExpandError::BadSecretName {
                text: body.to_owned(),
            });
        }
        return None;
    }
    let (name, default) = match body.find(":-") {
        Some(pos) => (&body[..pos], Some(&body[pos + 2..])),
        None => (body, None),
    };
    let valid_name = name == "/"
        || (name.chars().next().is_some_and(is_name_start) && name.chars().all(is_name_char));
    if !valid_name {
        problems.push(ExpandError::Malformed {
            text: body.to_owned(),
        });
        return None;
    }
    match (vars.lookup(name), default) {
        (Some(v), Some(_)) if !v.is_empty() => Some(v.to_owned()),
        (Some(v), None) => Some(v.to_owned()),
        (_, Some(default)) => Some(expand_into(default, vars, problems)),
        (None, None) => {
            problems.push(ExpandError::Unset {
                name: name.to_owned(),
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [("HOME", "/home/u"), ("TOKEN", "s3cr3t"), ("EMPTY", "")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// The expansion, asserting it had no problem.
    fn clean(s: &str, v: &Vars<'_>) -> String {
        let (out, problems) = expand(s, v);
        assert!(problems.is_empty(), "{s}: {problems:?}");
        out
    }

    #[test]
    fn plain_braced_and_default_forms() {
        let env = env();
        let v = Vars::env(&env);
        assert_eq!(clean("$HOME/bin", &v), "/home/u/bin");
        assert_eq!(clean("${HOME}x", &v), "/home/ux");
        assert_eq!(clean("${NOPE:-fallback}", &v), "fallback");
        assert_eq!(clean("${EMPTY:-fallback}", &v), "fallback");
        assert_eq!(clean("${TOKEN:-fallback}", &v), "s3cr3t");
        assert_eq!(clean("${NOPE:-$HOME/x}", &v), "/home/u/x");
        assert_eq!(clean("${NOPE:-${TOKEN}}", &v), "s3cr3t");
        assert_eq!(clean("${NOPE:-}", &v), "");
        assert_eq!(clean("cost: 5$ or $1", &v), "cost: 5$ or $1");
        assert_eq!(clean("no vars", &v), "no vars");
    }

    /// Qwen Code leaves an unset variable literal; so does Steward, with a
    /// problem naming it (the loaders turn it into a warning).
    #[test]
    fn unset_without_default_stays_literal_and_names_the_variable() {
        let env = env();
        let v = Vars::env(&env);
        let (out, problems) = expand("Bearer ${API_KEY} $MISSING/$HOME", &v);
        assert_eq!(out, "Bearer ${API_KEY} $MISSING//home/u");
        let names: Vec<_> = problems.iter().filter_map(ExpandError::variable).collect();
        assert_eq!(names, ["API_KEY", "MISSING"]);
        assert!(
            problems[0].to_string().contains("${API_KEY}"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn malformed_references_stay_literal() {
        let env = env();
        let v = Vars::env(&env);
        let (out, problems) = expand("a ${HOME", &v);
        assert_eq!(out, "a ${HOME");
        assert!(matches!(problems[..], [ExpandError::Unterminated { .. }]));
        for text in ["${1abc}", "${}"] {
            let (out, problems) = expand(text, &v);
            assert_eq!(out, text);
            assert!(matches!(problems[..], [ExpandError::Malformed { .. }]));
        }
    }

    #[test]
    fn secret_references_stay_as_written_without_a_problem() {
        let env = env();
        let v = Vars::env(&env);
        assert_eq!(
            clean("Bearer ${secret:gh-token}", &v),
            "Bearer ${secret:gh-token}"
        );
        assert_eq!(clean("${NOPE:-${secret:a.b}}", &v), "${secret:a.b}");
        let (out, problems) = expand("${secret:a b}", &v);
        assert_eq!(out, "${secret:a b}");
        assert!(matches!(problems[..], [ExpandError::BadSecretName { .. }]));
    }

    #[test]
    fn extension_variables_take_precedence() {
        let env = env();
        let ext = extension_vars("/ext/one", "/ws");
        let v = Vars {
            env: &env,
            extension: Some(&ext),
        };
        assert_eq!(
            clean("${extensionPath}${/}bin${/}srv", &v),
            "/ext/one/bin/srv"
        );
        assert_eq!(clean("${CLAUDE_PLUGIN_ROOT}", &v), "/ext/one");
        assert_eq!(clean("${workspacePath}", &v), "/ws");
        // Outside an extension these are ordinary (unset) variables.
        assert!(!expand("${extensionPath}", &Vars::env(&env)).1.is_empty());
    }
}
