//! The pure cases of MCP hot reload: server-map equality (`servers_equal`),
//! gating-list equality (`gating_equal`), the command-line upper bound on
//! the allow-list, why a configured server is unavailable
//! (`unavailable_reason`), and approvals bound to the hash of an entry.

use std::collections::BTreeSet;

use crate::common::*;
use serde_json::{Map, Value};
use steward_schema::admission::{
    self, ApprovalState, McpGating, UnavailableReason, gating_equal, mcp_gating, servers_equal,
    unavailable_reason,
};
use steward_schema::jsonc;
use steward_schema::load::LoadMode;
use steward_schema::resource::{Reason, Scope, SourceKind};

// ---------------------------------------------------------------------------
// servers_equal: key order does not matter, array order does, and an
// absent map equals `{}`.

/// The `mcpServers` map of a settings text, parsed as the loaders parse it.
fn servers(t: &str) -> Option<Map<String, Value>> {
    let doc = jsonc::parse(t).expect("valid JSONC");
    doc.value
        .get("mcpServers")
        .and_then(Value::as_object)
        .cloned()
}

fn seq(a: &str, b: &str) -> bool {
    servers_equal(servers(a).as_ref(), servers(b).as_ref())
}

#[test]
fn servers_equal_ignores_key_order_c9() {
    assert!(seq(
        r#"{"mcpServers": {"a": {"command": "x", "args": ["1"]}, "b": {"url": "http://h/sse"}}}"#,
        r#"{"mcpServers": {
              // reordered servers and fields
              "b": {"url": "http://h/sse"},
              "a": {"args": ["1"], "command": "x"}}}"#,
    ));
}

#[test]
fn servers_equal_detects_nested_args_env_headers_changes_c9() {
    let base = r#"{"mcpServers": {"a": {"command": "x", "args": ["1"], "env": {"K": "v"}},
                                  "h": {"httpUrl": "http://h/mcp", "headers": {"A": "1"}}}}"#;
    for changed in [
        r#"{"mcpServers": {"a": {"command": "x", "args": ["2"], "env": {"K": "v"}},
                           "h": {"httpUrl": "http://h/mcp", "headers": {"A": "1"}}}}"#,
        r#"{"mcpServers": {"a": {"command": "x", "args": ["1"], "env": {"K": "w"}},
                           "h": {"httpUrl": "http://h/mcp", "headers": {"A": "1"}}}}"#,
        r#"{"mcpServers": {"a": {"command": "x", "args": ["1"], "env": {"K": "v"}},
                           "h": {"httpUrl": "http://h/mcp", "headers": {"A": "2"}}}}"#,
    ] {
        assert!(!seq(base, changed), "{changed}");
    }
}

#[test]
fn servers_equal_undefined_equals_empty_map_c9() {
    assert!(servers_equal(None, Some(&Map::new())));
    assert!(servers_equal(Some(&Map::new()), None));
    assert!(servers_equal(None, None));
    assert!(seq(r#"{"theme": "dark"}"#, r#"{"mcpServers": {}}"#));
}

#[test]
fn servers_equal_detects_added_and_removed_server_c9() {
    let one = r#"{"mcpServers": {"a": {"command": "x"}}}"#;
    let two = r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}"#;
    assert!(!seq(one, two));
    assert!(!seq(two, one));
    assert!(!seq(r#"{}"#, one));
}

#[test]
fn servers_equal_args_order_is_significant_c9() {
    assert!(!seq(
        r#"{"mcpServers": {"a": {"command": "x", "args": ["--a", "--b"]}}}"#,
        r#"{"mcpServers": {"a": {"command": "x", "args": ["--b", "--a"]}}}"#,
    ));
}

// ---------------------------------------------------------------------------
// gating_equal: every list compared as a set; an absent `allowed` (allow
// all) differs from `[]` (deny all); an absent `excluded` or `pending`
// equals `[]`.

fn list(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| (*s).to_owned()).collect())
}

fn gating(
    allowed: Option<Vec<String>>,
    excluded: Option<Vec<String>>,
    pending: Option<Vec<String>>,
) -> McpGating {
    McpGating {
        allowed,
        allowed_bound: None,
        excluded,
        pending,
    }
}

#[test]
fn gating_equal_compares_every_list_as_a_set_c10() {
    let a = gating(list(&["a", "b"]), list(&["x", "y"]), list(&["p", "q"]));
    let b = gating(list(&["b", "a"]), list(&["y", "x"]), list(&["q", "p"]));
    assert!(gating_equal(&a, &b));
    let mut bound_a = a.clone();
    bound_a.allowed_bound = list(&["a", "b"]);
    let mut bound_b = b.clone();
    bound_b.allowed_bound = list(&["b", "a"]);
    assert!(gating_equal(&bound_a, &bound_b));
}

#[test]
fn gating_equal_detects_add_or_remove_in_any_list_c10() {
    let base = gating(list(&["a"]), list(&["x"]), list(&["p"]));
    let variants = [
        gating(list(&["a", "b"]), list(&["x"]), list(&["p"])),
        gating(list(&[]), list(&["x"]), list(&["p"])),
        gating(list(&["a"]), list(&["x", "y"]), list(&["p"])),
        gating(list(&["a"]), list(&[]), list(&["p"])),
        gating(list(&["a"]), list(&["x"]), list(&["p", "q"])),
        gating(list(&["a"]), list(&["x"]), list(&[])),
    ];
    for v in &variants {
        assert!(!gating_equal(&base, v), "{v:?}");
        assert!(!gating_equal(v, &base), "{v:?}");
    }
    let mut bounded = base.clone();
    bounded.allowed_bound = list(&["a"]);
    assert!(!gating_equal(&base, &bounded));
}

#[test]
fn gating_excluded_and_pending_undefined_equal_empty_c10() {
    let undefined = gating(None, None, None);
    let empty = gating(None, list(&[]), list(&[]));
    assert!(gating_equal(&undefined, &empty));
    assert!(gating_equal(&empty, &undefined));
}

#[test]
fn gating_allowed_undefined_differs_from_empty_f_h() {
    // Absent = allow all, [] = deny all: the change must be seen.
    let allow_all = gating(None, None, None);
    let deny_all = gating(list(&[]), None, None);
    assert!(!gating_equal(&allow_all, &deny_all));
    assert!(!gating_equal(&deny_all, &allow_all));
    let mut bound_absent = allow_all.clone();
    bound_absent.allowed_bound = list(&[]);
    assert!(!gating_equal(&allow_all, &bound_absent));
}

#[test]
fn editing_only_mcp_excluded_changes_gating_c5() {
    let before = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}}}"#)
        .desired();
    let after = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}}, "mcp": {"excluded": ["a"]}}"#)
        .desired();
    assert_eq!(before.mcp, after.mcp);
    assert!(!gating_equal(&mcp_gating(&before), &mcp_gating(&after)));
}

#[test]
fn unrelated_settings_edit_changes_neither_servers_nor_gating_c6() {
    let before = srcs()
        .user(r#"{"theme": "dark", "mcpServers": {"a": {"command": "x"}}}"#)
        .desired();
    let after = srcs()
        .user(r#"{"theme": "light", "skills": [1], "mcpServers": {"a": {"command": "x"}}}"#)
        .desired();
    assert_eq!(before, after);
    assert!(gating_equal(&mcp_gating(&before), &mcp_gating(&after)));
    // The loaded contents compare equal too: no reconcile at all.
    let a = load_settings_text(
        SourceKind::UserSettings,
        r#"{"theme": "dark", "mcpServers": {"a": {"command": "x"}}}"#,
        LoadMode::Strict,
    );
    let b = load_settings_text(
        SourceKind::UserSettings,
        r#"{"ui": {"x": 1}, "mcp": {}, "mcpServers": {"a": {"command": "x"}}}"#,
        LoadMode::Strict,
    );
    assert_eq!(a.content, b.content);
}

#[test]
fn settings_map_is_replaced_not_merged_on_reload_a1() {
    let before = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}"#)
        .extension("e1", r#"{"mcpServers": {"e": {"command": "z"}}}"#)
        .cli_mcp(r#"{"mcpServers": {"c": {"command": "w"}}}"#)
        .desired();
    let after = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}}}"#)
        .extension("e1", r#"{"mcpServers": {"e": {"command": "z"}}}"#)
        .cli_mcp(r#"{"mcpServers": {"c": {"command": "w"}}}"#)
        .desired();
    assert!(!after.mcp.contains_key("b"), "removals take effect");
    assert!(
        after.mcp.contains_key("e") && after.mcp.contains_key("c"),
        "other layers intact"
    );
    assert_eq!(
        before.mcp["a"], after.mcp["a"],
        "unchanged server untouched"
    );
}

#[test]
fn toggling_mcp_excluded_blocks_and_readmits_16() {
    let servers = r#""mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}"#;
    let off = srcs()
        .user(&format!(r#"{{{servers}, "mcp": {{"excluded": ["a"]}}}}"#))
        .desired();
    assert_eq!(mcp_reason(&off, "a"), Some(Reason::Excluded));
    assert_eq!(mcp_reason(&off, "b"), None);
    let on = srcs()
        .user(&format!(r#"{{{servers}, "mcp": {{"excluded": []}}}}"#))
        .desired();
    assert_eq!(mcp_reason(&on, "a"), None);
    assert_eq!(off.mcp["a"].spec.config_hash, on.mcp["a"].spec.config_hash);
}

#[test]
fn gating_lists_come_from_the_desired_state() {
    let s = srcs()
        .user(r#"{"mcp": {"allowed": ["a", "p"], "excluded": ["x"]}}"#)
        .mcp_json(r#"{"mcpServers": {"p": {"command": "x"}}}"#)
        .allowed_mcp_flag(&["a", "p", "q"])
        .desired();
    let g = mcp_gating(&s);
    assert_eq!(g.allowed, list(&["a", "p"]));
    assert_eq!(g.allowed_bound, list(&["a", "p", "q"]));
    assert_eq!(g.excluded, list(&["x"]));
    assert_eq!(g.pending, list(&["p"]));
    let none = srcs().desired();
    assert_eq!(
        mcp_gating(&none).allowed,
        None,
        "absent allowed stays absent"
    );
}

#[test]
fn allowed_empty_list_denies_all_h() {
    let s = srcs()
        .user(
            r#"{"mcp": {"allowed": []},
                "mcpServers": {"a": {"command": "x"}, "b": {"httpUrl": "http://h/mcp"}}}"#,
        )
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::NotAllowed));
    assert_eq!(mcp_reason(&s, "b"), Some(Reason::NotAllowed));
    assert_eq!(mcp_gating(&s).allowed, list(&[]));
}

#[test]
fn allowed_absent_allows_all_h() {
    let s = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}, "b": {"httpUrl": "http://h/mcp"}}}"#)
        .desired();
    assert_eq!(mcp_reason(&s, "a"), None);
    assert_eq!(mcp_reason(&s, "b"), None);
}

// ---------------------------------------------------------------------------
// The --allowed-mcp-server-names upper bound: settings can narrow it,
// never widen it.

const ABC: &str =
    r#""mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}, "c": {"command": "x"}}"#;

#[test]
fn cli_bound_cannot_be_widened_by_settings_k() {
    let s = srcs()
        .user(&format!(
            r#"{{{ABC}, "mcp": {{"allowed": ["a", "b", "c"]}}}}"#
        ))
        .allowed_mcp_flag(&["a", "b"])
        .desired();
    assert_eq!(mcp_reason(&s, "c"), Some(Reason::NotAllowed));
    assert_eq!(mcp_reason(&s, "a"), None);
    assert_eq!(mcp_reason(&s, "b"), None);
    let msg = mcp_blocked(&s, "c").unwrap().message;
    assert!(msg.contains("--allowed-mcp-server-names"), "{msg}");
}

#[test]
fn settings_can_narrow_within_cli_bound_k() {
    let s = srcs()
        .user(&format!(r#"{{{ABC}, "mcp": {{"allowed": ["a"]}}}}"#))
        .allowed_mcp_flag(&["a", "b"])
        .desired();
    assert_eq!(mcp_reason(&s, "a"), None);
    assert_eq!(mcp_reason(&s, "b"), Some(Reason::NotAllowed));
    assert_eq!(mcp_reason(&s, "c"), Some(Reason::NotAllowed));
    let msg = mcp_blocked(&s, "b").unwrap().message;
    assert!(msg.contains("mcp.allowed"), "{msg}");
}

#[test]
fn without_cli_bound_settings_allow_list_wins_unbounded_k() {
    let s = srcs()
        .user(&format!(
            r#"{{{ABC}, "mcp": {{"allowed": ["a", "b", "c"]}}}}"#
        ))
        .desired();
    for n in ["a", "b", "c"] {
        assert_eq!(mcp_reason(&s, n), None, "{n}");
    }
}

#[test]
fn cli_bound_alone_applies_when_settings_have_no_list_k() {
    let s = srcs()
        .user(&format!(r#"{{{ABC}}}"#))
        .allowed_mcp_flag(&["a", "b"])
        .desired();
    assert_eq!(mcp_reason(&s, "a"), None);
    assert_eq!(mcp_reason(&s, "b"), None);
    assert_eq!(mcp_reason(&s, "c"), Some(Reason::NotAllowed));
}

#[test]
fn empty_cli_bound_denies_all_even_with_settings_list_k() {
    let s = srcs()
        .user(&format!(r#"{{{ABC}, "mcp": {{"allowed": ["*"]}}}}"#))
        .allowed_mcp_flag(&[])
        .desired();
    for n in ["a", "b", "c"] {
        assert_eq!(mcp_reason(&s, n), Some(Reason::NotAllowed), "{n}");
    }
}

#[test]
fn allow_lists_accept_star_and_question_globs_in_both_lists_k() {
    let servers = r#""mcpServers": {"git-hub": {"command": "x"}, "git-lab": {"command": "x"},
                                     "gitea": {"command": "x"}, "time": {"command": "x"}}"#;
    // CLI bound `git*`, settings `git-?ab` → only git-lab.
    let s = srcs()
        .user(&format!(
            r#"{{{servers}, "mcp": {{"allowed": ["git-?ab"]}}}}"#
        ))
        .allowed_mcp_flag(&["git*"])
        .desired();
    assert_eq!(mcp_reason(&s, "git-lab"), None);
    assert_eq!(mcp_reason(&s, "git-hub"), Some(Reason::NotAllowed));
    assert_eq!(mcp_reason(&s, "gitea"), Some(Reason::NotAllowed));
    assert_eq!(mcp_reason(&s, "time"), Some(Reason::NotAllowed));
    // Settings `*` cannot widen the bound `git-???`.
    let s = srcs()
        .user(&format!(r#"{{{servers}, "mcp": {{"allowed": ["*"]}}}}"#))
        .allowed_mcp_flag(&["git-???"])
        .desired();
    assert_eq!(mcp_reason(&s, "git-hub"), None);
    assert_eq!(mcp_reason(&s, "git-lab"), None);
    assert_eq!(mcp_reason(&s, "gitea"), Some(Reason::NotAllowed));
    assert_eq!(mcp_reason(&s, "time"), Some(Reason::NotAllowed));
}

// ---------------------------------------------------------------------------
// unavailable_reason: removed from the merged map, not allowed, excluded or
// waiting for approval.

fn prev(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn unavailable_reason_not_allowed_b() {
    let s = srcs()
        .user(r#"{"mcp": {"allowed": ["a"]}, "mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}"#)
        .desired();
    assert_eq!(
        unavailable_reason("b", &s, &prev(&["a", "b"])),
        Some(UnavailableReason::NotAllowed)
    );
}

#[test]
fn unavailable_reason_excluded_b() {
    let s = srcs()
        .user(r#"{"mcp": {"excluded": ["b"]}, "mcpServers": {"b": {"command": "x"}}}"#)
        .desired();
    assert_eq!(
        unavailable_reason("b", &s, &prev(&["b"])),
        Some(UnavailableReason::Excluded)
    );
}

#[test]
fn unavailable_reason_pending_approval_b() {
    let s = srcs()
        .mcp_json(r#"{"mcpServers": {"p": {"command": "x"}}}"#)
        .desired();
    assert_eq!(
        unavailable_reason("p", &s, &prev(&[])),
        Some(UnavailableReason::PendingApproval)
    );
}

#[test]
fn unavailable_reason_removed_only_when_previously_configured_b() {
    let s = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}}}"#)
        .desired();
    assert_eq!(
        unavailable_reason("gone", &s, &prev(&["a", "gone"])),
        Some(UnavailableReason::Removed)
    );
    // Never configured: no reason at all.
    assert_eq!(unavailable_reason("never", &s, &prev(&["a"])), None);
}

#[test]
fn allow_list_filtered_server_is_not_allowed_not_removed_b() {
    // Narrowing the allow-list keeps the server in the merged map.
    let before = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}"#)
        .desired();
    let configured: BTreeSet<String> = before.mcp.keys().cloned().collect();
    let after = srcs()
        .user(r#"{"mcp": {"allowed": ["a"]}, "mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}"#)
        .desired();
    assert!(after.mcp.contains_key("b"), "the merged map ignores gating");
    assert_eq!(
        unavailable_reason("b", &after, &configured),
        Some(UnavailableReason::NotAllowed)
    );
}

#[test]
fn unavailable_reason_none_for_admitted_server_b() {
    let s = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}}}"#)
        .desired();
    assert_eq!(unavailable_reason("a", &s, &prev(&["a"])), None);
    assert_eq!(mcp_reason(&s, "a"), None);
}

// ---------------------------------------------------------------------------
// Hash-bound approvals: a server from a gated scope (`.mcp.json`,
// workspace settings) runs only with an approval of the hash of its entry
// as written; editing the entry asks again.

const P: &str = r#"{"mcpServers": {"p": {"command": "srv", "args": ["--port", "1"]}}}"#;
const P_EDITED: &str = r#"{"mcpServers": {"p": {"command": "srv", "args": ["--port", "2"]}}}"#;

fn approval_hash_of(s: &Srcs, name: &str) -> String {
    mcp_spec(&s.desired(), name).approval_hash.clone()
}

#[test]
fn project_mcp_json_server_without_record_is_pending_approval_d() {
    let s = srcs().mcp_json(P).desired();
    assert_eq!(mcp_spec(&s, "p").scope, Scope::Project);
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::PendingApproval));
}

#[test]
fn workspace_settings_server_without_record_is_pending_approval_d() {
    let s = srcs().workspace(P).desired();
    assert_eq!(mcp_spec(&s, "p").scope, Scope::Workspace);
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::PendingApproval));
}

#[test]
fn approved_with_same_hash_is_admitted_d() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let s = srcs()
        .mcp_json(P)
        .approvals(&approvals_json(&[("p", &h, "approved")]))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), None);
    assert_eq!(
        admission::approval_state("p", mcp_spec(&s, "p"), &s.approvals),
        ApprovalState::Approved
    );
}

#[test]
fn rejected_with_same_hash_is_rejected_d() {
    let h = approval_hash_of(&srcs().workspace(P), "p");
    let s = srcs()
        .workspace(P)
        .approvals(&approvals_json(&[("p", &h, "rejected")]))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::Rejected));
    // Still counted in the `pending` gating list: only an approval takes a
    // server out of it.
    assert_eq!(mcp_gating(&s).pending, list(&["p"]));
}

#[test]
fn editing_an_approved_entry_asks_again_d() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let s = srcs()
        .mcp_json(P_EDITED)
        .approvals(&approvals_json(&[("p", &h, "approved")]))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::PendingApproval));
    let msg = mcp_blocked(&s, "p").unwrap().message;
    assert!(msg.contains("changed"), "{msg}");
}

#[test]
fn editing_a_rejected_entry_asks_again_regression_6() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let rejected = approvals_json(&[("p", &h, "rejected")]);
    // Unrelated edit elsewhere: still rejected, not promptable.
    let s = srcs()
        .mcp_json(P)
        .user(r#"{"theme": "x"}"#)
        .approvals(&rejected)
        .desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::Rejected));
    // Editing the entry itself: pending again (strict pending → prompt).
    let s = srcs().mcp_json(P_EDITED).approvals(&rejected).desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::PendingApproval));
    assert_eq!(
        admission::approval_state("p", mcp_spec(&s, "p"), &s.approvals),
        ApprovalState::Pending
    );
}

#[test]
fn approval_survives_remove_and_identical_readd_e() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let file = approvals_json(&[("p", &h, "approved")]);
    let present = srcs().mcp_json(P).approvals(&file).desired();
    assert_eq!(mcp_reason(&present, "p"), None);
    let removed = srcs()
        .mcp_json(r#"{"mcpServers": {}}"#)
        .approvals(&file)
        .desired();
    assert!(!removed.mcp.contains_key("p"));
    assert!(
        removed.approvals.contains_key("p"),
        "records are never dropped"
    );
    let readded = srcs().mcp_json(P).approvals(&file).desired();
    assert_eq!(mcp_reason(&readded, "p"), None);
}

#[test]
fn rejection_survives_remove_and_identical_readd_e() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let file = approvals_json(&[("p", &h, "rejected")]);
    let readded = srcs().mcp_json(P).approvals(&file).desired();
    assert_eq!(mcp_reason(&readded, "p"), Some(Reason::Rejected));
}

#[test]
fn rotating_a_secret_keeps_approval_hash_but_changes_config_hash_d() {
    let entry = r#"{"mcpServers": {"p": {"command": "srv", "env": {"API_KEY": "$TOKEN"},
                    "headers": {}, "args": ["--key=${TOKEN}"]}}}"#;
    let old = srcs().mcp_json(entry).env(env_with(&[("TOKEN", "old")]));
    let new = srcs()
        .mcp_json(entry)
        .env(env_with(&[("TOKEN", "rotated")]));
    let (so, sn) = (old.desired(), new.desired());
    let (po, pn) = (mcp_spec(&so, "p"), mcp_spec(&sn, "p"));
    assert_eq!(po.env.as_ref().unwrap()["API_KEY"], "old");
    assert_eq!(pn.env.as_ref().unwrap()["API_KEY"], "rotated");
    assert_eq!(po.approval_hash, pn.approval_hash);
    assert_ne!(po.config_hash, pn.config_hash);
    // An approval made before the rotation still admits it.
    let file = approvals_json(&[("p", &po.approval_hash, "approved")]);
    let s = srcs()
        .mcp_json(entry)
        .env(env_with(&[("TOKEN", "rotated")]))
        .approvals(&file)
        .desired();
    assert_eq!(mcp_reason(&s, "p"), None);
}

#[test]
fn description_change_keeps_approval_hash_e() {
    let a = one_mcp(r#"{"command": "srv", "description": "one"}"#);
    let b = one_mcp(r#"{"command": "srv", "description": "two"}"#);
    let c = one_mcp(r#"{"command": "srv"}"#);
    assert_eq!(a.approval_hash, b.approval_hash);
    assert_eq!(a.approval_hash, c.approval_hash);
}

#[test]
fn scope_change_keeps_approval_hash_e() {
    // The same literal entry in .mcp.json (project) and workspace settings.
    let project = srcs().mcp_json(P).desired();
    let workspace = srcs().workspace(P).desired();
    assert_eq!(mcp_spec(&project, "p").scope, Scope::Project);
    assert_eq!(mcp_spec(&workspace, "p").scope, Scope::Workspace);
    assert_eq!(
        mcp_spec(&project, "p").approval_hash,
        mcp_spec(&workspace, "p").approval_hash
    );
    // Keys named scope / extensionName written in the entry are left out too.
    let a = one_mcp(r#"{"command": "srv"}"#);
    let b = one_mcp(r#"{"command": "srv", "scope": "user", "extensionName": "e"}"#);
    assert_eq!(a.approval_hash, b.approval_hash);
}

#[test]
fn approval_moves_with_identical_entry_between_gated_scopes_e() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let s = srcs()
        .workspace(P)
        .approvals(&approvals_json(&[("p", &h, "approved")]))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), None);
}

#[test]
fn ungated_scopes_need_no_approval_d() {
    let entry = r#"{"command": "srv"}"#;
    let s = srcs()
        .user(&settings_one("u", entry))
        .system(&settings_one("sys", entry))
        .system_defaults(&settings_one("def", entry))
        .extension("e1", &format!(r#"{{"mcpServers": {{"ext": {entry}}}}}"#))
        .cli_mcp(&mcp_json_one("cli", entry))
        .desired();
    for (name, scope) in [
        ("u", Scope::User),
        ("sys", Scope::System),
        ("def", Scope::System),
        ("ext", Scope::Extension),
        ("cli", Scope::Cli),
    ] {
        assert_eq!(mcp_spec(&s, name).scope, scope, "{name}");
        assert!(!scope.is_gated());
        assert_eq!(mcp_reason(&s, name), None, "{name}");
        assert_eq!(
            admission::approval_state(name, mcp_spec(&s, name), &s.approvals),
            ApprovalState::NotRequired
        );
    }
    assert!(Scope::Project.is_gated() && Scope::Workspace.is_gated());
}

#[test]
fn approvals_are_looked_up_under_the_canonical_workspace_key_only_d() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    for other_root in ["/ws/", "/ws/.", "/other", "/ws/sub", "ws"] {
        let s = srcs()
            .mcp_json(P)
            .approvals(&approvals_json_at(other_root, &[("p", &h, "approved")]))
            .desired();
        assert_eq!(
            mcp_reason(&s, "p"),
            Some(Reason::PendingApproval),
            "a record under {other_root:?} must not count"
        );
    }
    let s = srcs()
        .mcp_json(P)
        .approvals(&approvals_json_at("/ws", &[("p", &h, "approved")]))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), None);
}

#[test]
fn a_record_for_another_server_name_does_not_approve_d() {
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let renamed = r#"{"mcpServers": {"q": {"command": "srv", "args": ["--port", "1"]}}}"#;
    let s = srcs()
        .mcp_json(renamed)
        .approvals(&approvals_json(&[("p", &h, "approved")]))
        .desired();
    assert_eq!(mcp_reason(&s, "q"), Some(Reason::PendingApproval));
}

#[test]
fn winning_ungated_layer_needs_no_approval_even_if_project_defines_it_d() {
    // .mcp.json defines p, --mcp-config replaces it: scope cli, no approval.
    let s = srcs()
        .mcp_json(P)
        .cli_mcp(r#"{"mcpServers": {"p": {"command": "other"}}}"#)
        .desired();
    assert_eq!(mcp_spec(&s, "p").scope, Scope::Cli);
    assert_eq!(mcp_reason(&s, "p"), None);
    // The other way: workspace settings (gated) beat user settings.
    let s = srcs()
        .user(&settings_one("p", r#"{"command": "mine"}"#))
        .workspace(P)
        .desired();
    assert_eq!(mcp_spec(&s, "p").scope, Scope::Workspace);
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::PendingApproval));
}

#[test]
fn approval_applies_to_gated_server_that_passes_every_other_gate_only_d() {
    // Approval is the last gate: an approved-but-excluded server is Excluded.
    let h = approval_hash_of(&srcs().mcp_json(P), "p");
    let s = srcs()
        .mcp_json(P)
        .user(r#"{"mcp": {"excluded": ["p"]}}"#)
        .approvals(&approvals_json(&[("p", &h, "approved")]))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::Excluded));
}
