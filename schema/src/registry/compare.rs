//! What an update would change in an entry added from a registry: the argv
//! or URL, the environment and headers, the secrets it needs, and whether
//! its sandbox widens. A change that widens the sandbox or adds a secret is
//! *widening*: `steward update` shows its plan and asks again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::entry::Built;
use super::lock::Locked;
use crate::sandbox::{Sandbox, SandboxField};

/// The differences between a locked entry and its update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub argv: Option<(Vec<String>, Vec<String>)>,
    pub url: Option<(Option<String>, Option<String>)>,
    pub env_added: Vec<String>,
    pub env_removed: Vec<String>,
    pub env_changed: Vec<String>,
    pub headers_added: Vec<String>,
    pub headers_removed: Vec<String>,
    /// Keys whose value is a secret it did not need before.
    pub secrets_added: Vec<String>,
    /// What the new sandbox grants beyond the old one.
    pub sandbox_widened: Option<String>,
    /// The sandbox changed (wider, narrower or otherwise).
    pub sandbox_changed: bool,
}

impl Changes {
    /// Whether the update must be accepted again.
    pub fn widens(&self) -> bool {
        self.sandbox_widened.is_some() || !self.secrets_added.is_empty()
    }

    /// One phrase per change, for a table or a plan.
    pub fn phrases(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.argv.is_some() {
            out.push("argv".to_owned());
        }
        if self.url.is_some() {
            out.push("url".to_owned());
        }
        let list = |what: &str, keys: &[String], out: &mut Vec<String>| {
            if !keys.is_empty() {
                out.push(format!("{what} {}", keys.join(",")));
            }
        };
        list("+env", &self.env_added, &mut out);
        list("-env", &self.env_removed, &mut out);
        list("~env", &self.env_changed, &mut out);
        list("+header", &self.headers_added, &mut out);
        list("-header", &self.headers_removed, &mut out);
        list("+secret", &self.secrets_added, &mut out);
        match (&self.sandbox_widened, self.sandbox_changed) {
            (Some(more), _) => out.push(format!("sandbox widens: {more}")),
            (None, true) => out.push("sandbox narrows".to_owned()),
            _ => {}
        }
        out
    }
}

/// A sandbox field as the profile it stands for (an unknown name: the
/// default, `standard`).
pub fn profile_of(field: Option<&Value>) -> Option<Sandbox> {
    let field: SandboxField = serde_json::from_value(field?.clone()).ok()?;
    Some(match field {
        SandboxField::Name(name) => Sandbox::builtin(&name).unwrap_or_else(Sandbox::standard),
        SandboxField::Profile(p) => Sandbox::custom("inline", &p),
    })
}

fn key_diff(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let added = new
        .keys()
        .filter(|k| !old.contains_key(*k))
        .cloned()
        .collect();
    let removed = old
        .keys()
        .filter(|k| !new.contains_key(*k))
        .cloned()
        .collect();
    let changed = new
        .iter()
        .filter(|(k, v)| old.get(*k).is_some_and(|o| o != *v))
        .map(|(k, _)| k.clone())
        .collect();
    (added, removed, changed)
}

/// The changes from `old` to `new`; `home` and `workspace` make the
/// profiles' paths comparable.
pub fn changes(old: &Locked, new: &Built, home: &Path, workspace: &Path) -> Changes {
    let old_argv: Vec<String> = old.command.iter().chain(&old.args).cloned().collect();
    let (env_added, env_removed, env_changed) = key_diff(&old.env, &new.env);
    let (headers_added, headers_removed, _) = key_diff(&old.headers, &new.headers);
    let old_secrets: BTreeSet<&String> = old.secrets.values().collect();
    let secrets_added = new
        .secrets
        .iter()
        .filter(|(_, name)| !old_secrets.contains(name))
        .map(|(key, _)| key.clone())
        .collect();
    let new_sandbox = new
        .sandbox
        .as_ref()
        .map(|f| serde_json::to_value(f).expect("a sandbox field serializes"));
    let sandbox_changed = old.sandbox != new_sandbox;
    let sandbox_widened = match (
        profile_of(old.sandbox.as_ref()),
        profile_of(new_sandbox.as_ref()),
    ) {
        (Some(before), Some(after)) => after.widens(&before, home, workspace),
        // A local server that had no key ran under the default (`standard`).
        (None, Some(after)) if old.command.is_some() => {
            after.widens(&Sandbox::standard(), home, workspace)
        }
        _ => None,
    };
    Changes {
        argv: (old_argv != new.argv).then(|| (old_argv, new.argv.clone())),
        url: (old.url != new.url).then(|| (old.url.clone(), new.url.clone())),
        env_added,
        env_removed,
        env_changed,
        headers_added,
        headers_removed,
        secrets_added,
        sandbox_widened,
        sandbox_changed,
    }
}
