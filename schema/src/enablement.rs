//! Whether an extension is active in a workspace, and which of its MCP
//! servers the user disabled — decided from Qwen Code's files under
//! `HOME_DIR/extensions/` the way Qwen Code 0.24 decides it:
//!
//! - `extension-store/state.json` (the store) holds per extension a default
//!   activation, per-workspace overrides and legacy path rules;
//! - `extension-enablement.json` is its projection (`{name: {overrides:
//!   ["/path/*", "!/path/"]}}`, last matching rule wins), which Qwen Code
//!   imports when it is newer than the store — so the newer of the two
//!   decides;
//! - `extension-preferences.json` lists `disabledMcpServers` per extension.
//!
//! Pure: the caller reads the files (and their modification times).

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The files that decide activation, as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActivationFiles {
    /// `extension-enablement.json`.
    pub enablement: Option<Value>,
    /// `extension-store/state.json`.
    pub state: Option<Value>,
    /// Whether the enablement file is newer than the store (or the store is
    /// absent): then Qwen Code imports it, and it decides.
    pub enablement_is_newer: bool,
    /// `extension-preferences.json`.
    pub preferences: Option<Value>,
}

/// The workspace as Qwen Code matches rules against it: as given and
/// canonical, each with a leading and a trailing `/`.
pub fn rule_paths(workspace: &Path, canonical: &Path) -> Vec<String> {
    [workspace, canonical]
        .iter()
        .map(|p| slashed(&p.to_string_lossy()))
        .collect()
}

/// An override rule (`[!]/path/[*]`), as Qwen Code's `Override` reads one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    base: String,
    disable: bool,
    subdirs: bool,
}

impl Rule {
    /// A rule as written in the files.
    fn parse(rule: &str) -> Rule {
        let (disable, rest) = match rule.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, rule),
        };
        let (subdirs, base) = match rest.strip_suffix('*') {
            Some(base) => (true, base),
            None => (false, rest),
        };
        Rule {
            base: base.to_owned(),
            disable,
            subdirs,
        }
    }

    /// The rule a workspace activation stands for (one folder, no subfolders).
    fn for_workspace(path: &str, disable: bool) -> Rule {
        Rule {
            base: slashed(path),
            disable,
            subdirs: false,
        }
    }

    /// Whether the rule applies to a rule path (see [`rule_paths`]).
    fn matches(&self, path: &str) -> bool {
        if self.subdirs {
            // `/a/b/*` is the folder and everything below it.
            let base = self.base.trim_end_matches('/');
            path == base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'))
        } else {
            path == self.base
        }
    }
}

fn slashed(path: &str) -> String {
    let mut s = path.replace('\\', "/");
    if !s.starts_with('/') {
        s.insert(0, '/');
    }
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

/// One extension's activation policy in the store.
#[derive(Debug, Clone, PartialEq, Default)]
struct Policy {
    default_disabled: bool,
    /// Canonical workspace → `enabled` / `disabled` / `inherit`.
    workspaces: Vec<(String, String)>,
    rules: Vec<String>,
}

impl Policy {
    fn from_state(policy: &Value) -> Policy {
        Policy {
            default_disabled: policy.get("defaultActivation").and_then(Value::as_str)
                == Some("disabled"),
            workspaces: policy
                .get("workspaceOverrides")
                .and_then(Value::as_object)
                .map(|o| {
                    o.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
            rules: strings(policy.get("legacyPathRules")),
        }
    }

    /// Qwen Code's `importLegacyProjection`: the projection's rules that
    /// restate the policy are consumed, those that contradict one of its
    /// activations flip it, the rest become its path rules.
    fn import(&mut self, incoming: &[String]) {
        let mut generated: Vec<(Rule, Option<String>)> = Vec::new();
        if self.default_disabled {
            generated.push((Rule::parse("!/*"), None));
        }
        for (workspace, activation) in &self.workspaces {
            let disabled = match activation.as_str() {
                "inherit" => self.default_disabled,
                other => other == "disabled",
            };
            generated.push((
                Rule::for_workspace(workspace, disabled),
                Some(workspace.clone()),
            ));
        }
        let mut consumed = vec![false; generated.len()];
        let mut kept = Vec::new();
        for text in incoming {
            let rule = Rule::parse(text);
            let same = (0..generated.len()).find(|&i| !consumed[i] && generated[i].0 == rule);
            if let Some(i) = same {
                consumed[i] = true;
                continue;
            }
            let opposite = (0..generated.len()).find(|&i| {
                let g = &generated[i].0;
                !consumed[i]
                    && g.base == rule.base
                    && g.subdirs == rule.subdirs
                    && g.disable != rule.disable
            });
            match opposite {
                None => kept.push(text.clone()),
                Some(i) => {
                    consumed[i] = true;
                    let value = if rule.disable { "disabled" } else { "enabled" };
                    match &generated[i].1 {
                        Some(workspace) => {
                            for (w, a) in &mut self.workspaces {
                                if w == workspace {
                                    *a = value.to_owned();
                                }
                            }
                        }
                        None => self.default_disabled = rule.disable,
                    }
                }
            }
        }
        self.rules = kept;
    }

    /// Qwen Code's `getActivation` for the workspace.
    fn active(&self, paths: &[String], canonical: &Path) -> bool {
        let canonical = canonical.to_string_lossy();
        let exact = self
            .workspaces
            .iter()
            .find(|(w, _)| *w == canonical)
            .map(|(_, a)| a.as_str());
        match exact {
            Some("enabled") => true,
            Some("disabled") => false,
            Some(_) => !self.default_disabled,
            None => {
                let mut enabled = !self.default_disabled;
                for rule in self.rules.iter().map(|r| Rule::parse(r)) {
                    if paths.iter().any(|p| rule.matches(p)) {
                        enabled = !rule.disable;
                    }
                }
                enabled
            }
        }
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether extension `name` is active in the workspace whose rule paths are
/// `paths` (see [`rule_paths`]); `canonical` is the canonical workspace.
pub fn is_active(name: &str, files: &ActivationFiles, paths: &[String], canonical: &Path) -> bool {
    let stored = files
        .state
        .as_ref()
        .and_then(|s| s.get("extensions"))
        .and_then(Value::as_object)
        .and_then(|all| {
            all.values()
                .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
        })
        .map(Policy::from_state);
    let imports = files.enablement_is_newer || files.state.is_none();
    let policy = match (stored, imports) {
        (Some(policy), false) => policy,
        (stored, _) => {
            let incoming = match &files.enablement {
                Some(Value::Object(projection)) => projection
                    .iter()
                    .find(|(k, _)| k.to_lowercase() == name.to_lowercase())
                    .map(|(_, v)| strings(v.get("overrides")))
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            match stored {
                Some(mut policy) => {
                    policy.import(&incoming);
                    policy
                }
                None => Policy {
                    rules: incoming,
                    ..Policy::default()
                },
            }
        }
    };
    policy.active(paths, canonical)
}

/// The MCP servers of extension `name` the user disabled.
pub fn disabled_mcp_servers(name: &str, files: &ActivationFiles) -> Vec<String> {
    files
        .preferences
        .as_ref()
        .and_then(|p| p.get("disabledMcpServers"))
        .and_then(|d| d.get(name))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Where Qwen Code keeps these files, under the extensions directory.
pub fn activation_paths(extensions_dir: &Path) -> [PathBuf; 3] {
    [
        extensions_dir.join("extension-enablement.json"),
        extensions_dir
            .parent()
            .unwrap_or(extensions_dir)
            .join("extension-store")
            .join("state.json"),
        extensions_dir.join("extension-preferences.json"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths() -> Vec<String> {
        rule_paths(Path::new("/home/u/ws"), Path::new("/real/ws"))
    }

    fn projection(rules: Value) -> ActivationFiles {
        ActivationFiles {
            enablement: Some(json!({ "Ext": { "overrides": rules } })),
            enablement_is_newer: true,
            ..ActivationFiles::default()
        }
    }

    #[test]
    fn enablement_rules_last_match_wins() {
        let ws = Path::new("/real/ws");
        assert!(is_active("ext", &ActivationFiles::default(), &paths(), ws));
        assert!(!is_active("ext", &projection(json!(["!/*"])), &paths(), ws));
        assert!(is_active(
            "ext",
            &projection(json!(["!/*", "/home/u/*"])),
            &paths(),
            ws
        ));
        assert!(!is_active(
            "ext",
            &projection(json!(["!/real/ws/"])),
            &paths(),
            ws
        ));
        assert!(is_active(
            "ext",
            &projection(json!(["!/real/ws/sub/"])),
            &paths(),
            ws
        ));
        assert!(is_active(
            "ext",
            &projection(json!(["!/real/w*"])),
            &paths(),
            ws
        ));
        assert!(is_active(
            "other",
            &projection(json!(["!/*"])),
            &paths(),
            ws
        ));
    }

    /// Editing the projection flips a stored activation only with the
    /// opposite rule; dropping the rule keeps it (Qwen Code's import).
    #[test]
    fn a_newer_projection_is_imported_into_the_store() {
        let ws = Path::new("/real/ws");
        let files = |overrides: Value| ActivationFiles {
            state: Some(
                json!({"extensions": {"0123": {"name": "ext", "defaultActivation": "enabled",
                                                    "workspaceOverrides": {"/real/ws": "disabled"}}}}),
            ),
            enablement: Some(json!({"ext": {"overrides": overrides}})),
            enablement_is_newer: true,
            preferences: None,
        };
        let p = paths();
        assert!(!is_active("ext", &files(json!(["!/real/ws/"])), &p, ws));
        assert!(is_active("ext", &files(json!(["/real/ws/"])), &p, ws));
        assert!(!is_active("ext", &files(json!([])), &p, ws));
    }

    #[test]
    fn the_store_decides_when_it_is_newer() {
        let ws = Path::new("/real/ws");
        let state = |policy: Value| ActivationFiles {
            state: Some(json!({"version": 2, "extensions": {"0123": policy}})),
            enablement: Some(json!({"ext": {"overrides": []}})),
            enablement_is_newer: false,
            preferences: None,
        };
        let p = paths();
        assert!(!is_active(
            "ext",
            &state(
                json!({"name": "ext", "defaultActivation": "disabled", "workspaceOverrides": {}})
            ),
            &p,
            ws
        ));
        assert!(is_active(
            "ext",
            &state(
                json!({"name": "ext", "defaultActivation": "disabled", "workspaceOverrides": {"/real/ws": "enabled"}})
            ),
            &p,
            ws
        ));
        assert!(!is_active(
            "ext",
            &state(
                json!({"name": "ext", "defaultActivation": "enabled", "workspaceOverrides": {}, "legacyPathRules": ["!/home/u/*"]})
            ),
            &p,
            ws
        ));
        assert!(is_active(
            "ext",
            &state(
                json!({"name": "other", "defaultActivation": "disabled", "workspaceOverrides": {}})
            ),
            &p,
            ws
        ));
    }

    #[test]
    fn disabled_servers_come_from_the_preferences() {
        let files = ActivationFiles {
            preferences: Some(json!({"favorites": [], "disabledMcpServers": {"ext": ["a", "b"]}})),
            ..ActivationFiles::default()
        };
        assert_eq!(disabled_mcp_servers("ext", &files), ["a", "b"]);
        assert!(disabled_mcp_servers("other", &files).is_empty());
    }
}
