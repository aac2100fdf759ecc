//! Variable expansion in the string fields that name things to run or reach
//! (`command`, `args`, `env`, `cwd`, `url`, `httpUrl`, `headers`).
//!
//! Syntax: `$VAR`, `${VAR}`, `${VAR:-default}` (default used when the variable
//! is unset or empty; the default may itself contain references). A `$` not
//! followed by a name or `{` is literal. Extension entries additionally see
//! `${extensionPath}`, `${CLAUDE_PLUGIN_ROOT}`, `${workspacePath}`, `${/}` and
//! `${pathSeparator}`, which take precedence over the environment.

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "expand ${{{name}}}: the variable is not set and has no default (write ${{{name}:-default}} to give one)"
    )]
    Unset { name: String },
    #[error("expand variable reference: missing '}}' after \"${{{text}\"")]
    Unterminated { text: String },
    #[error("expand \"${{{text}}}\": expected ${{NAME}} or ${{NAME:-default}}")]
    Malformed { text: String },
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

/// Expand every variable reference in `input`.
pub fn expand(input: &str, vars: &Vars<'_>) -> Result<String, ExpandError> {
    if !input.contains('$') {
        return Ok(input.to_owned());
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
                    return Err(ExpandError::Unterminated { text: body });
                }
                out.push_str(&expand_braced(&body, vars)?);
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
                    None => return Err(ExpandError::Unset { name }),
                }
                i = j;
            }
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    Ok(out)
}

fn expand_braced(body: &str, vars: &Vars<'_>) -> Result<String, ExpandError> {
    let (name, default) = match body.find(":-") {
        Some(pos) => (&body[..pos], Some(&body[pos + 2..])),
        None => (body, None),
    };
    let valid_name = name == "/"
        || (name.chars().next().is_some_and(is_name_start) && name.chars().all(is_name_char));
    if !valid_name {
        return Err(ExpandError::Malformed {
            text: body.to_owned(),
        });
    }
    match (vars.lookup(name), default) {
        (Some(v), Some(_)) if !v.is_empty() => Ok(v.to_owned()),
        (Some(v), None) => Ok(v.to_owned()),
        (_, Some(default)) => expand(default, vars),
        (None, None) => Err(ExpandError::Unset {
            name: name.to_owned(),
        }),
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

    #[test]
    fn plain_braced_and_default_forms() {
        let env = env();
        let v = Vars::env(&env);
        assert_eq!(expand("$HOME/bin", &v).unwrap(), "/home/u/bin");
        assert_eq!(expand("${HOME}x", &v).unwrap(), "/home/ux");
        assert_eq!(expand("${NOPE:-fallback}", &v).unwrap(), "fallback");
        assert_eq!(expand("${EMPTY:-fallback}", &v).unwrap(), "fallback");
        assert_eq!(expand("${TOKEN:-fallback}", &v).unwrap(), "s3cr3t");
        assert_eq!(expand("${NOPE:-$HOME/x}", &v).unwrap(), "/home/u/x");
        assert_eq!(expand("${NOPE:-${TOKEN}}", &v).unwrap(), "s3cr3t");
        assert_eq!(expand("${NOPE:-}", &v).unwrap(), "");
        assert_eq!(expand("cost: 5$ or $1", &v).unwrap(), "cost: 5$ or $1");
        assert_eq!(expand("no vars", &v).unwrap(), "no vars");
    }

    #[test]
    fn unset_without_default_names_the_variable() {
        let env = env();
        let v = Vars::env(&env);
        let err = expand("Bearer ${API_KEY}", &v).unwrap_err();
        assert_eq!(err.variable(), Some("API_KEY"));
        assert!(err.to_string().contains("${API_KEY}"), "{err}");
        assert_eq!(
            expand("$MISSING", &v).unwrap_err().variable(),
            Some("MISSING")
        );
    }

    #[test]
    fn malformed_references_are_errors() {
        let env = env();
        let v = Vars::env(&env);
        assert!(matches!(
            expand("${HOME", &v),
            Err(ExpandError::Unterminated { .. })
        ));
        assert!(matches!(
            expand("${1abc}", &v),
            Err(ExpandError::Malformed { .. })
        ));
        assert!(matches!(
            expand("${}", &v),
            Err(ExpandError::Malformed { .. })
        ));
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
            expand("${extensionPath}${/}bin${/}srv", &v).unwrap(),
            "/ext/one/bin/srv"
        );
        assert_eq!(expand("${CLAUDE_PLUGIN_ROOT}", &v).unwrap(), "/ext/one");
        assert_eq!(expand("${workspacePath}", &v).unwrap(), "/ws");
        // Outside an extension these are ordinary (unset) variables.
        assert!(expand("${extensionPath}", &Vars::env(&env)).is_err());
    }
}
