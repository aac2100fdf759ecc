//! Admission: may a server run? Pure, decided before anything is spawned.
//! Gates in order — the first that fails is the reason:
//! 1. trust, 2. `disabled`, 3. allow-list (settings ∩ CLI bound),
//! 4. exclusion, 5. hash-bound approval for gated scopes (MCP only).
//!
//! Also here: gating-list and server-map equality (what decides whether a
//! settings change is relevant at all) and `unavailable_reason`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::desired::{DesiredState, InvalidEntry, Policy};
use crate::formats::{ApprovalRecord, ApprovalStatus};
use crate::glob;
use crate::load::DroppedSpec;
use crate::resource::{
    API_VERSION, Condition, ConditionStatus, Item, LspServer, LspServerSpec, McpServer,
    McpServerSpec, Metadata, Phase, Reason, ServerStatus, sandbox_in_force,
};
use crate::sandbox::{Resolved, Sandbox};

/// Why a server may not run, with a human explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub reason: Reason,
    pub message: String,
}

/// The approval state of a server (gated scopes only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    /// Not a gated scope.
    NotRequired,
    Approved,
    /// No record, or a record for another hash (the entry was edited).
    Pending,
    /// Rejected for this exact hash.
    Rejected,
}

/// Approval state of `spec` given this workspace's records.
pub fn approval_state(
    name: &str,
    spec: &McpServerSpec,
    approvals: &BTreeMap<String, ApprovalRecord>,
) -> ApprovalState {
    if !spec.scope.is_gated() {
        return ApprovalState::NotRequired;
    }
    match approvals.get(name) {
        Some(r) if r.hash == spec.approval_hash => match r.status {
            ApprovalStatus::Approved => ApprovalState::Approved,
            ApprovalStatus::Rejected => ApprovalState::Rejected,
        },
        _ => ApprovalState::Pending,
    }
}

fn not_allowed_message(kind: &str, name: &str, policy_list: &crate::desired::AllowList) -> String {
    let in_settings = policy_list
        .settings
        .as_deref()
        .is_none_or(|l| glob::matches_any(l, name));
    if !in_settings {
        format!("\"{name}\" is not in {kind}.allowed")
    } else {
        format!(
            "\"{name}\" is not in --allowed-{kind}-server-names (an upper bound settings cannot widen)"
        )
    }
}

fn excluded_by<'a>(list: &'a [String], name: &str) -> Option<&'a str> {
    list.iter()
        .find(|p| glob::matches(p, name))
        .map(String::as_str)
}

/// Whether `spec` runs `steward mcp` itself: its first
/// non-option argument is `mcp` and its command is named `steward` or like
/// this very executable (by path or file name). Such an entry is what users
/// add to register Steward with an agent, in the files Steward reads.
pub fn is_self_reference(spec: &McpServerSpec) -> bool {
    static SELF_EXE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let own = SELF_EXE.get_or_init(|| std::env::current_exe().ok());
    self_reference_of(spec, own.as_deref())
}

fn self_reference_of(spec: &McpServerSpec, own: Option<&std::path::Path>) -> bool {
    let Some(command) = spec.command.as_deref() else {
        return false;
    };
    let mut args = spec.args.iter().flatten().map(String::as_str);
    let subcommand = loop {
        match args.next() {
            // Global options before the subcommand.
            Some("--workspace") => {
                args.next();
            }
            Some(flag) if flag.starts_with('-') => {}
            other => break other,
        }
    };
    if subcommand != Some("mcp") {
        return false;
    }
    let path = std::path::Path::new(command);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(command);
    name == "steward"
        || own.is_some_and(|own| {
            own == path || own.file_name().and_then(|n| n.to_str()) == Some(name)
        })
}

/// Admission of an MCP server: `None` when admitted.
pub fn admit_mcp(name: &str, spec: &McpServerSpec, state: &DesiredState) -> Option<Blocked> {
    let policy = &state.policy;
    let blocked = |reason, message: String| Some(Blocked { reason, message });
    if is_self_reference(spec) {
        return blocked(
            Reason::SelfReference,
            "this entry runs `steward mcp`, the agent endpoint itself; Steward never starts it"
                .to_owned(),
        );
    }
    if !policy.trusted {
        return blocked(
            Reason::UntrustedWorkspace,
            format!(
                "the workspace {} is not trusted (security.folderTrust.enabled); trust it in trustedFolders.json",
                state.workspace.display()
            ),
        );
    }
    if spec.disabled == Some(true) {
        let message = match &spec.extension_name {
            Some(ext) => format!(
                "disabled: true, or disabled for the extension {ext} (extension-preferences.json)"
            ),
            None => "disabled: true".to_owned(),
        };
        return blocked(Reason::Disabled, message);
    }
    if !policy.mcp_allowed.allows(name) {
        return blocked(
            Reason::NotAllowed,
            not_allowed_message("mcp", name, &policy.mcp_allowed),
        );
    }
    if let Some(pattern) = excluded_by(&policy.mcp_excluded, name) {
        return blocked(
            Reason::Excluded,
            format!("\"{name}\" matches mcp.excluded entry \"{pattern}\""),
        );
    }
    match approval_state(name, spec, &state.approvals) {
        ApprovalState::NotRequired => None,
        ApprovalState::Approved => sandbox_widened(name, spec, state).map(|wider| Blocked {
            reason: Reason::PendingApproval,
            message: format!(
                "approved, but its sandbox is now wider than what was approved: {wider}; run `steward approve {name}` to allow it"
            ),
        }),
        ApprovalState::Pending => {
            let edited = state.approvals.contains_key(name);
            blocked(
                Reason::PendingApproval,
                if edited {
                    format!(
                        "its configuration changed since the last decision; run `steward approve {name}` to run it"
                    )
                } else {
                    format!(
                        "a {} server needs approval before it runs; run `steward approve {name}`",
                        scope_word(spec)
                    )
                },
            )
        }
        ApprovalState::Rejected => blocked(
            Reason::Rejected,
            format!(
                "rejected; edit its configuration to be asked again, or run `steward approve {name}`"
            ),
        ),
    }
}

/// What the profile in force of approved gated server `name` grants beyond
/// the one its approval was given for (Steward's own record when it has one
/// for this `approvalHash`; else the default profile — an approval made
/// with `qwen mcp approve` approved no more than that). `None` when it is
/// not wider: narrowing never asks again.
pub fn sandbox_widened(name: &str, spec: &McpServerSpec, state: &DesiredState) -> Option<String> {
    let Resolved::Profile { sandbox: now, .. } = sandbox_in_force(&spec.resolved_sandbox) else {
        return None;
    };
    let approved = match state.sandbox_approvals.get(name) {
        Some(record) if record.approval_hash == spec.approval_hash => record.sandbox.clone(),
        _ => state
            .policy
            .sandbox
            .default_profile()
            .unwrap_or_else(|_| Sandbox::standard()),
    };
    let home = state.home.as_deref().unwrap_or(std::path::Path::new("~"));
    now.widens(&approved, home, &state.workspace).map(|wider| {
        format!(
            "profile \"{}\" {wider}, beyond the approved \"{}\"",
            now.profile, approved.profile
        )
    })
}

fn scope_word(spec: &McpServerSpec) -> &'static str {
    match spec.scope {
        crate::resource::Scope::Project => "project (.mcp.json)",
        _ => "workspace settings",
    }
}

/// Admission of a language server: `None` when admitted.
pub fn admit_lsp(name: &str, spec: &LspServerSpec, state: &DesiredState) -> Option<Blocked> {
    let policy = &state.policy;
    let blocked = |reason, message: String| Some(Blocked { reason, message });
    if !policy.trusted {
        if policy.lsp_require_trusted_workspace {
            return blocked(
                Reason::UntrustedWorkspace,
                format!(
                    "the workspace {} is not trusted and lsp.requireTrustedWorkspace is true",
                    state.workspace.display()
                ),
            );
        }
        if spec.trust_required {
            return blocked(
                Reason::TrustRequired,
                "the server requires a trusted workspace (trustRequired)".to_owned(),
            );
        }
    }
    if !policy.lsp_allowed.allows(name) {
        return blocked(
            Reason::NotAllowed,
            not_allowed_message("lsp", name, &policy.lsp_allowed),
        );
    }
    if let Some(pattern) = excluded_by(&policy.lsp_excluded, name) {
        return blocked(
            Reason::Excluded,
            format!("\"{name}\" matches lsp.excluded entry \"{pattern}\""),
        );
    }
    None
}

// ---------------------------------------------------------------------------
// Gating lists and equality: whether a settings change is relevant at all
// is decided by comparing the server maps (`servers_equal`) and the lists
// that decide which servers may connect (`gating_equal`).

/// The three lists that decide which MCP servers may connect.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct McpGating {
    /// Settings `mcp.allowed`: `None` = allow all, `Some([])` = deny all.
    pub allowed: Option<Vec<String>>,
    /// The command-line upper bound (immutable for a controller's life).
    pub allowed_bound: Option<Vec<String>>,
    /// `None` ≡ `[]`.
    pub excluded: Option<Vec<String>>,
    /// Gated servers without a matching approval (pending or rejected).
    pub pending: Option<Vec<String>>,
}

/// Compute the gating lists of a desired state.
pub fn mcp_gating(state: &DesiredState) -> McpGating {
    let pending: Vec<String> = state
        .mcp
        .iter()
        .filter(|(name, d)| {
            matches!(
                approval_state(name, &d.spec, &state.approvals),
                ApprovalState::Pending | ApprovalState::Rejected
            )
        })
        .map(|(name, _)| name.clone())
        .collect();
    McpGating {
        allowed: state.policy.mcp_allowed.settings.clone(),
        allowed_bound: state.policy.mcp_allowed.cli.clone(),
        excluded: Some(state.policy.mcp_excluded.clone()),
        pending: Some(pending),
    }
}

fn as_set(list: &Option<Vec<String>>) -> BTreeSet<&str> {
    list.iter().flatten().map(String::as_str).collect()
}

/// Allow-lists: absent (allow all) differs from `[]` (deny all); otherwise
/// compared as sets.
fn allow_equal(a: &Option<Vec<String>>, b: &Option<Vec<String>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(_), Some(_)) => as_set(a) == as_set(b),
        _ => false,
    }
}

/// Gating equality: every list compared as a set; `allowed` absent ≠ `[]`;
/// `excluded`/`pending` absent ≡ `[]`.
pub fn gating_equal(a: &McpGating, b: &McpGating) -> bool {
    allow_equal(&a.allowed, &b.allowed)
        && allow_equal(&a.allowed_bound, &b.allowed_bound)
        && as_set(&a.excluded) == as_set(&b.excluded)
        && as_set(&a.pending) == as_set(&b.pending)
}

/// Server-map equality: key order irrelevant, array order significant,
/// absent ≡ `{}`.
pub fn servers_equal(
    a: Option<&serde_json::Map<String, Value>>,
    b: Option<&serde_json::Map<String, Value>>,
) -> bool {
    let empty = serde_json::Map::new();
    let a = a.unwrap_or(&empty);
    let b = b.unwrap_or(&empty);
    // serde_json's Value equality ignores object key order and respects
    // array order — exactly the rule.
    a == b
}

/// Why a configured server's tools are not available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnavailableReason {
    /// Was in the merged map during this session, is not any more.
    Removed,
    NotAllowed,
    Excluded,
    PendingApproval,
}

/// Classify `name`. "Removed" is computed on the merged map, independent of
/// gating: a server filtered by an allow-list is `NotAllowed`, not removed.
/// `None` for an admitted server or one that was never configured.
pub fn unavailable_reason(
    name: &str,
    state: &DesiredState,
    previously_configured: &BTreeSet<String>,
) -> Option<UnavailableReason> {
    let Some(d) = state.mcp.get(name) else {
        return previously_configured
            .contains(name)
            .then_some(UnavailableReason::Removed);
    };
    let policy: &Policy = &state.policy;
    if !policy.mcp_allowed.allows(name) {
        return Some(UnavailableReason::NotAllowed);
    }
    if excluded_by(&policy.mcp_excluded, name).is_some() {
        return Some(UnavailableReason::Excluded);
    }
    match approval_state(name, &d.spec, &state.approvals) {
        ApprovalState::Pending | ApprovalState::Rejected => {
            Some(UnavailableReason::PendingApproval)
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Resources as admission alone sees them (`status --offline`, and the
// starting point of the controller's status).

fn admitted_condition(blocked: Option<&Blocked>, now: &str) -> Condition {
    Condition {
        type_: "Admitted".to_owned(),
        status: if blocked.is_some() {
            ConditionStatus::False
        } else {
            ConditionStatus::True
        },
        reason: Some(
            blocked
                .map(|b| b.reason.as_str())
                .unwrap_or("Admitted")
                .to_owned(),
        ),
        message: blocked.map(|b| b.message.clone()),
        last_transition_time: now.to_owned(),
    }
}

/// Status from admission alone: `Blocked` + reason, or `Pending`.
pub fn admission_status(blocked: Option<&Blocked>, now: &str) -> ServerStatus {
    let mut status = match blocked {
        Some(b) => ServerStatus::new(Phase::Blocked, Some(b.reason), Some(b.message.clone())),
        None => ServerStatus::new(Phase::Pending, None, None),
    };
    status.conditions.push(admitted_condition(blocked, now));
    status
}

/// The status of an entry that produced no spec: `Failed`, `InvalidSpec`.
pub fn invalid_status(message: &str, now: &str) -> ServerStatus {
    let mut status = ServerStatus::new(
        Phase::Failed,
        Some(Reason::InvalidSpec),
        Some(message.to_owned()),
    );
    status.conditions.push(Condition {
        type_: "Ready".to_owned(),
        status: ConditionStatus::False,
        reason: Some(Reason::InvalidSpec.as_str().to_owned()),
        message: Some(message.to_owned()),
        last_transition_time: now.to_owned(),
    });
    status
}

/// The row of an entry that produced no spec.
pub fn invalid_item(name: &str, entry: &InvalidEntry, now: &str) -> Item {
    let metadata = Metadata {
        name: name.to_owned(),
        source: entry.source,
        generation: 1,
    };
    let status = invalid_status(&entry.message, now);
    match &entry.spec {
        DroppedSpec::Mcp(spec) => Item::McpServer(McpServer {
            api_version: API_VERSION.to_owned(),
            metadata,
            spec: spec.clone(),
            status,
        }),
        DroppedSpec::Lsp(spec) => Item::LspServer(LspServer {
            api_version: API_VERSION.to_owned(),
            metadata,
            spec: spec.clone(),
            status,
        }),
    }
}

/// Every resource of `state` with its admission status, MCP first, by name;
/// entries without a spec as `InvalidSpec` rows among them.
pub fn admission_items(state: &DesiredState, now: &str) -> Vec<Item> {
    let mut mcp: BTreeMap<&str, Item> = BTreeMap::new();
    for (name, d) in &state.mcp {
        let blocked = admit_mcp(name, &d.spec, state);
        mcp.insert(
            name,
            Item::McpServer(McpServer {
                api_version: API_VERSION.to_owned(),
                metadata: Metadata {
                    name: name.clone(),
                    source: d.source,
                    generation: 1,
                },
                spec: d.spec.clone(),
                status: admission_status(blocked.as_ref(), now),
            }),
        );
    }
    for (name, entry) in &state.invalid_mcp {
        mcp.insert(name, invalid_item(name, entry, now));
    }
    let mut lsp: BTreeMap<&str, Item> = BTreeMap::new();
    if state.lsp_enabled {
        for (name, d) in &state.lsp {
            let blocked = admit_lsp(name, &d.spec, state);
            lsp.insert(
                name,
                Item::LspServer(LspServer {
                    api_version: API_VERSION.to_owned(),
                    metadata: Metadata {
                        name: name.clone(),
                        source: d.source,
                        generation: 1,
                    },
                    spec: d.spec.clone(),
                    status: admission_status(blocked.as_ref(), now),
                }),
            );
        }
        for (name, entry) in &state.invalid_lsp {
            lsp.insert(name, invalid_item(name, entry, now));
        }
    }
    mcp.into_values().chain(lsp.into_values()).collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn spec(command: &str, args: &[&str]) -> McpServerSpec {
        serde_json::from_value(serde_json::json!({
            "transport": "stdio",
            "scope": "user",
            "command": command,
            "args": args,
            "configHash": "",
            "approvalHash": "",
        }))
        .unwrap()
    }

    #[test]
    fn an_entry_running_steward_mcp_is_a_self_reference() {
        let own = Some(Path::new("/opt/bin/steward-under-test"));
        assert!(self_reference_of(&spec("steward", &["mcp"]), own));
        assert!(self_reference_of(
            &spec("/usr/local/bin/steward", &["--workspace", "/w", "mcp"]),
            own
        ));
        assert!(self_reference_of(
            &spec("/opt/bin/steward-under-test", &["mcp"]),
            own
        ));
        assert!(self_reference_of(
            &spec("steward-under-test", &["mcp", "--workspace", "."]),
            own
        ));
    }

    #[test]
    fn other_steward_commands_and_other_programs_are_not() {
        let own = Some(Path::new("/opt/bin/steward"));
        assert!(!self_reference_of(&spec("steward", &["status"]), own));
        assert!(!self_reference_of(&spec("steward", &[]), own));
        assert!(!self_reference_of(&spec("uvx", &["mcp"]), own));
        assert!(!self_reference_of(&spec("node", &["steward", "mcp"]), own));
    }
}
