//! Merge precedence (a later source replaces a whole entry of the same name:
//! MCP extensions < system defaults < user < `.mcp.json` < workspace <
//! system < `--mcp-config`; LSP extensions < `.lsp.json`), how the settings
//! policy keys merge, and the order of the admission gates (trust,
//! `disabled`, allow-list, exclusion, approval: the first that fails is the
//! reason), through the real loaders and `desired_state`.

use std::path::Path;

use crate::common::*;
use steward_schema::admission::{self, admission_items};
use steward_schema::desired::desired_state;
use steward_schema::resource::{ConditionStatus, Item, Phase, Reason, Scope, SourceKind};

// ---------------------------------------------------------------------------
// MCP precedence: extensions < user < .mcp.json < workspace < system < --mcp-config

fn entry(tag: &str) -> String {
    format!(r#"{{"command": "srv-{tag}"}}"#)
}

/// Every layer defines `s`; `skip` lists layers left out.
fn chain(skip: &[&str]) -> Srcs {
    let mut s = srcs();
    let on = |layer: &str| !skip.contains(&layer);
    if on("ext") {
        s = s.extension(
            "e1",
            &format!(r#"{{"mcpServers": {{"s": {}}}}}"#, entry("ext")),
        );
    }
    if on("defaults") {
        s = s.system_defaults(&settings_one("s", &entry("defaults")));
    }
    if on("user") {
        s = s.user(&settings_one("s", &entry("user")));
    }
    if on("project") {
        s = s.mcp_json(&mcp_json_one("s", &entry("project")));
    }
    if on("workspace") {
        s = s.workspace(&settings_one("s", &entry("workspace")));
    }
    if on("system") {
        s = s.system(&settings_one("s", &entry("system")));
    }
    if on("cli") {
        s = s.cli_mcp(&mcp_json_one("s", &entry("cli")));
    }
    s
}

#[test]
fn mcp_precedence_ext_user_project_workspace_system_cli() {
    let expected = [
        (vec![], "cli", SourceKind::CliMcpConfig, Scope::Cli),
        (
            vec!["cli"],
            "system",
            SourceKind::SystemSettings,
            Scope::System,
        ),
        (
            vec!["cli", "system"],
            "workspace",
            SourceKind::WorkspaceSettings,
            Scope::Workspace,
        ),
        (
            vec!["cli", "system", "workspace"],
            "project",
            SourceKind::ProjectMcpJson,
            Scope::Project,
        ),
        (
            vec!["cli", "system", "workspace", "project"],
            "user",
            SourceKind::UserSettings,
            Scope::User,
        ),
        (
            vec!["cli", "system", "workspace", "project", "user"],
            "defaults",
            SourceKind::SystemDefaults,
            Scope::System,
        ),
        (
            vec!["cli", "system", "workspace", "project", "user", "defaults"],
            "ext",
            SourceKind::Extension,
            Scope::Extension,
        ),
    ];
    for (skip, winner, source, scope) in expected {
        let state = chain(&skip).desired();
        let d = &state.mcp["s"];
        assert_eq!(
            d.spec.command.as_deref(),
            Some(&*format!("srv-{winner}")),
            "skip {skip:?}"
        );
        assert_eq!(
            d.source, source,
            "metadata.source follows the winner ({winner})"
        );
        assert_eq!(
            d.spec.scope, scope,
            "spec.scope follows the winner ({winner})"
        );
    }
}

#[test]
fn later_layer_replaces_whole_entry_never_merges_fields() {
    let s = srcs()
        .user(r#"{"mcpServers": {"s": {"command": "srv", "env": {"A": "1"}, "args": ["x"], "timeout": 5}}}"#)
        .workspace(r#"{"mcpServers": {"s": {"command": "srv"}}}"#)
        .desired();
    let spec = mcp_spec(&s, "s");
    assert_eq!(
        spec.env, None,
        "the later entry without env drops the earlier env"
    );
    assert_eq!(spec.args, None);
    assert_eq!(spec.timeout, None);
    let alone = srcs()
        .workspace(r#"{"mcpServers": {"s": {"command": "srv"}}}"#)
        .desired();
    assert_eq!(spec.config_hash, mcp_spec(&alone, "s").config_hash);
}

#[test]
fn cli_mcp_config_replaces_whole_entry_and_later_flag_wins() {
    let s = srcs()
        .system(r#"{"mcpServers": {"s": {"command": "srv", "env": {"A": "1"}}}}"#)
        .cli_mcp(r#"{"mcpServers": {"s": {"httpUrl": "http://h/one"}}}"#)
        .cli_mcp(r#"{"mcpServers": {"s": {"httpUrl": "http://h/two"}}}"#)
        .desired();
    let spec = mcp_spec(&s, "s");
    assert_eq!(spec.http_url.as_deref(), Some("http://h/two"));
    assert_eq!(spec.env, None);
    assert_eq!(spec.command, None);
}

#[test]
fn servers_of_different_names_from_every_layer_are_all_kept() {
    let s = srcs()
        .extension("e1", r#"{"mcpServers": {"e": {"command": "x"}}}"#)
        .user(&settings_one("u", r#"{"command": "x"}"#))
        .mcp_json(&mcp_json_one("p", r#"{"command": "x"}"#))
        .workspace(&settings_one("w", r#"{"command": "x"}"#))
        .system(&settings_one("y", r#"{"command": "x"}"#))
        .cli_mcp(&mcp_json_one("c", r#"{"command": "x"}"#))
        .desired();
    let names: Vec<&str> = s.mcp.keys().map(String::as_str).collect();
    assert_eq!(names, ["c", "e", "p", "u", "w", "y"]);
}

#[test]
fn first_extension_in_directory_order_keeps_a_name() {
    // Declared out of order: the loader set is sorted by directory.
    let s = srcs()
        .extension(
            "b-ext",
            r#"{"name": "b", "mcpServers": {"s": {"command": "from-b"}}}"#,
        )
        .extension(
            "a-ext",
            r#"{"name": "a", "mcpServers": {"s": {"command": "from-a"}}}"#,
        )
        .desired();
    let spec = mcp_spec(&s, "s");
    assert_eq!(spec.command.as_deref(), Some("from-a"));
    assert_eq!(spec.extension_name.as_deref(), Some("a"));
}

#[test]
fn first_extension_in_directory_order_keeps_an_lsp_name() {
    let s = srcs()
        .extension("b-ext", r#"{"lspServers": {"py": {"command": "from-b"}}}"#)
        .extension("a-ext", r#"{"lspServers": {"py": {"command": "from-a"}}}"#)
        .desired();
    assert_eq!(lsp_spec(&s, "py").command.as_deref(), Some("from-a"));
    assert_eq!(lsp_spec(&s, "py").extension_name.as_deref(), Some("a-ext"));
}

#[test]
fn workspace_lsp_json_replaces_extension_server_of_same_name() {
    let s = srcs()
        .extension(
            "e1",
            r#"{"lspServers": {"ts": {"command": "ext-ts", "trustRequired": false},
                               "go": {"command": "gopls"}}}"#,
        )
        .lsp_json(r#"{"ts": {"command": "ws-ts"}}"#)
        .desired();
    let ts = &s.lsp["ts"];
    assert_eq!(ts.source, SourceKind::LspJson);
    assert_eq!(ts.spec.scope, Scope::Workspace);
    assert_eq!(ts.spec.command.as_deref(), Some("ws-ts"));
    assert!(
        ts.spec.trust_required,
        "the workspace entry is always trustRequired"
    );
    assert_eq!(ts.spec.extension_name, None);
    assert_eq!(s.lsp["go"].source, SourceKind::Extension);
}

#[test]
fn admission_items_metadata_source_follows_the_winner() {
    let s = srcs()
        .user(&settings_one("s", r#"{"command": "x"}"#))
        .system(&settings_one("s", r#"{"command": "y"}"#))
        .lsp_json(r#"{"py": {"command": "pylsp"}}"#)
        .desired();
    let items = admission_items(&s, "2025-01-01T00:00:00Z");
    assert_eq!(items.len(), 2);
    match &items[0] {
        Item::McpServer(m) => {
            assert_eq!(m.metadata.name, "s");
            assert_eq!(m.metadata.source, SourceKind::SystemSettings);
            assert_eq!(m.spec.scope, Scope::System);
            assert_eq!(m.status.phase, Phase::Pending);
            assert_eq!(m.status.reason, None);
            assert_eq!(m.status.conditions[0].type_, "Admitted");
            assert_eq!(m.status.conditions[0].status, ConditionStatus::True);
        }
        other => panic!("expected McpServer first, found {other:?}"),
    }
    assert_eq!(items[1].metadata().source, SourceKind::LspJson);
}

#[test]
fn admission_items_report_blocked_with_reason_and_skip_lsp_when_disabled() {
    let mut s = srcs()
        .mcp_json(&mcp_json_one("p", r#"{"command": "x"}"#))
        .lsp_json(r#"{"py": {"command": "pylsp"}}"#);
    s.cli.lsp_enabled = false;
    let state = s.desired();
    let items = admission_items(&state, "t");
    assert_eq!(items.len(), 1, "no LspServer items with --no-lsp");
    let st = items[0].status();
    assert_eq!(st.phase, Phase::Blocked);
    assert_eq!(st.reason, Some(Reason::PendingApproval));
    assert_eq!(st.conditions[0].status, ConditionStatus::False);
    assert_eq!(st.conditions[0].reason.as_deref(), Some("PendingApproval"));
}

// ---------------------------------------------------------------------------
// Settings policy keys, merged as Qwen Code merges them: later wins per leaf,
// `allowed` and `excluded` lists are the union of every layer.

#[test]
fn settings_policy_later_layer_wins_per_leaf_and_allowed_lists_concatenate() {
    let s = srcs()
        .system_defaults(r#"{"mcp": {"allowed": ["d"], "serverCommand": "def"}}"#)
        .user(r#"{"mcp": {"allowed": ["u"]}}"#)
        .workspace(r#"{"mcp": {"serverCommand": "ws-cmd"}}"#)
        .desired();
    assert_eq!(
        s.policy.mcp_allowed.settings,
        Some(vec!["d".to_owned(), "u".to_owned()])
    );
    assert_eq!(s.policy.mcp_server_command.as_deref(), Some("ws-cmd"));
    let s = srcs()
        .user(r#"{"mcp": {"allowed": ["u"]}, "lsp": {"allowed": ["lu"]}}"#)
        .workspace(r#"{"mcp": {"allowed": ["w", "u", ""]}}"#)
        .system(r#"{"lsp": {"allowed": ["ls"]}}"#)
        .desired();
    assert_eq!(
        s.policy.mcp_allowed.settings,
        Some(vec!["u".to_owned(), "w".to_owned()])
    );
    assert_eq!(
        s.policy.lsp_allowed.settings,
        Some(vec!["lu".to_owned(), "ls".to_owned()])
    );
}

#[test]
fn allowed_lists_of_every_layer_admit() {
    let s = srcs()
        .user(r#"{"mcp": {"allowed": ["a", "b"]}, "mcpServers": {"a": {"command": "x"}, "c": {"command": "x"}, "d": {"command": "x"}}}"#)
        .system(r#"{"mcp": {"allowed": ["c"]}}"#)
        .desired();
    assert_eq!(mcp_reason(&s, "a"), None);
    assert_eq!(mcp_reason(&s, "c"), None);
    assert_eq!(mcp_reason(&s, "d"), Some(Reason::NotAllowed));
}

#[test]
fn an_empty_allowed_list_denies_all_only_when_no_layer_lists_names() {
    // Qwen Code concatenates: `[]` adds nothing to another layer's names.
    let s = srcs()
        .user(r#"{"mcp": {"allowed": ["a"]}, "mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}"#)
        .workspace(r#"{"mcp": {"allowed": []}}"#)
        .desired();
    assert_eq!(mcp_reason(&s, "a"), None);
    assert_eq!(mcp_reason(&s, "b"), Some(Reason::NotAllowed));
    let s = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}}}"#)
        .workspace(r#"{"mcp": {"allowed": []}}"#)
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::NotAllowed));
}

/// An untrusted workspace's settings layer is dropped whole (Qwen Code):
/// its servers are not configured at all, its lists change nothing.
#[test]
fn an_untrusted_workspace_settings_layer_is_dropped_whole() {
    let s = srcs()
        .user(r#"{"security": {"folderTrust": {"enabled": true}}, "mcpServers": {"u": {"command": "x"}}}"#)
        .workspace(r#"{"mcp": {"excluded": ["u"], "allowed": ["w"]}, "mcpServers": {"w": {"command": "x"}}}"#)
        .desired();
    assert!(!s.policy.trusted);
    assert!(s.mcp.contains_key("u") && !s.mcp.contains_key("w"));
    assert!(s.policy.mcp_excluded.is_empty());
    assert_eq!(s.policy.mcp_allowed.settings, None);
    assert_eq!(mcp_reason(&s, "u"), Some(Reason::UntrustedWorkspace));
}

/// Version-1 keys are read where Qwen Code migrates them.
#[test]
fn legacy_settings_keys_are_migrated_in_memory() {
    let s = srcs()
        .system_defaults(r#"{"folderTrust": true}"#)
        .user(r#"{"allowMCPServers": ["a", "b"], "excludeMCPServers": ["b"], "mcpServerCommand": "cmd",
                  "mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}, "c": {"command": "x"}}}"#)
        .trusted(r#"{"/ws": "TRUST_FOLDER"}"#)
        .desired();
    assert!(s.policy.folder_trust_enabled && s.policy.trusted);
    assert_eq!(mcp_reason(&s, "a"), None);
    assert_eq!(mcp_reason(&s, "b"), Some(Reason::Excluded));
    assert_eq!(mcp_reason(&s, "c"), Some(Reason::NotAllowed));
    assert_eq!(s.policy.mcp_server_command.as_deref(), Some("cmd"));
    // In a file Qwen Code has already migrated, a legacy key is ignored.
    let s = srcs()
        .user(r#"{"$version": 4, "allowMCPServers": ["a"], "mcpServers": {"b": {"command": "x"}}}"#)
        .desired();
    assert_eq!(s.policy.mcp_allowed.settings, None);
    assert_eq!(mcp_reason(&s, "b"), None);
}

#[test]
fn mcp_excluded_is_the_union_of_every_layer() {
    let s = srcs()
        .system_defaults(r#"{"mcp": {"excluded": ["d"]}}"#)
        .user(r#"{"mcp": {"excluded": ["u"]}, "mcpServers": {"d": {"command": "x"}, "u": {"command": "x"},
                  "w": {"command": "x"}, "ok": {"command": "x"}}}"#)
        .workspace(r#"{"mcp": {"excluded": ["w"]}}"#)
        .system(r#"{"mcp": {"excluded": []}}"#)
        .desired();
    for n in ["d", "u", "w"] {
        assert_eq!(mcp_reason(&s, n), Some(Reason::Excluded), "{n}");
    }
    assert_eq!(mcp_reason(&s, "ok"), None);
}

#[test]
fn later_layer_cannot_lift_an_earlier_exclusion() {
    // The workspace re-allows it explicitly; the user's exclusion stands.
    let s = srcs()
        .user(r#"{"mcp": {"excluded": ["a"]}}"#)
        .workspace(
            r#"{"mcp": {"excluded": [], "allowed": ["a"]}, "mcpServers": {"a": {"command": "x"}}}"#,
        )
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::Excluded));
}

#[test]
fn lsp_excluded_is_the_union_of_every_layer() {
    let s = srcs()
        .user(r#"{"lsp": {"excluded": ["py"]}}"#)
        .system(r#"{"lsp": {"excluded": ["go"]}}"#)
        .lsp_json(
            r#"{"py": {"command": "pylsp"}, "go": {"command": "gopls"}, "rs": {"command": "ra"}}"#,
        )
        .desired();
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::Excluded));
    assert_eq!(lsp_reason(&s, "go"), Some(Reason::Excluded));
    assert_eq!(lsp_reason(&s, "rs"), None);
}

#[test]
fn lsp_require_trusted_workspace_defaults_true_and_later_layer_wins() {
    assert!(srcs().desired().policy.lsp_require_trusted_workspace);
    let s = srcs()
        .user(r#"{"lsp": {"requireTrustedWorkspace": false}}"#)
        .desired();
    assert!(!s.policy.lsp_require_trusted_workspace);
    let s = srcs()
        .system_defaults(r#"{"lsp": {"requireTrustedWorkspace": false}}"#)
        .user(r#"{"lsp": {"requireTrustedWorkspace": true}}"#)
        .desired();
    assert!(s.policy.lsp_require_trusted_workspace);
}

#[test]
fn folder_trust_off_trusts_every_folder() {
    let s = srcs()
        .user(&settings_one("a", r#"{"command": "x"}"#))
        .trusted(r#"{"/ws": "DO_NOT_TRUST"}"#)
        .desired();
    assert!(s.policy.trusted);
    assert_eq!(mcp_reason(&s, "a"), None);
}

#[test]
fn system_settings_is_the_highest_settings_layer_for_folder_trust() {
    let s = srcs()
        .user(r#"{"security": {"folderTrust": {"enabled": true}}}"#)
        .system(r#"{"security": {"folderTrust": {"enabled": false}}}"#)
        .desired();
    assert!(s.policy.trusted);
    let s = srcs()
        .system_defaults(r#"{"security": {"folderTrust": {"enabled": false}}}"#)
        .user(r#"{"security": {"folderTrust": {"enabled": true}}}"#)
        .desired();
    assert!(!s.policy.trusted);
}

#[test]
fn trusted_folders_rules_decide_when_folder_trust_is_on() {
    let base = || {
        srcs()
            .user(r#"{"security": {"folderTrust": {"enabled": true}}, "mcpServers": {"a": {"command": "x"}}}"#)
    };
    assert!(!base().desired().policy.trusted, "no rule: untrusted");
    assert!(
        base()
            .trusted(r#"{"/ws": "TRUST_FOLDER"}"#)
            .desired()
            .policy
            .trusted
    );
    assert!(
        base()
            .trusted(r#"{"/": "TRUST_FOLDER"}"#)
            .desired()
            .policy
            .trusted
    );
    assert!(
        base()
            .trusted(r#"{"/ws/x": "TRUST_PARENT"}"#)
            .desired()
            .policy
            .trusted
    );
    assert!(
        !base()
            .trusted(r#"{"/": "TRUST_FOLDER", "/ws": "DO_NOT_TRUST"}"#)
            .desired()
            .policy
            .trusted
    );
    let s = base().trusted(r#"{"/ws": "TRUST_FOLDER"}"#).desired();
    assert_eq!(mcp_reason(&s, "a"), None);
}

// ---------------------------------------------------------------------------
// Trust keys in workspace settings are ignored.

#[test]
fn workspace_settings_cannot_turn_folder_trust_off() {
    let s = srcs()
        .user(r#"{"security": {"folderTrust": {"enabled": true}}}"#)
        .workspace(r#"{"security": {"folderTrust": {"enabled": false}}}"#)
        .mcp_json(&mcp_json_one("p", r#"{"command": "x"}"#))
        .desired();
    assert!(!s.policy.trusted);
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::UntrustedWorkspace));
}

#[test]
fn workspace_settings_cannot_lower_lsp_require_trusted_workspace() {
    let s = srcs()
        .user(r#"{"security": {"folderTrust": {"enabled": true}}}"#)
        .workspace(r#"{"lsp": {"requireTrustedWorkspace": false}}"#)
        .extension(
            "e1",
            r#"{"lspServers": {"py": {"command": "pylsp", "trustRequired": false}}}"#,
        )
        .desired();
    assert!(s.policy.lsp_require_trusted_workspace);
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::UntrustedWorkspace));
}

#[test]
fn workspace_settings_still_narrow_admission() {
    // Non-trust policy keys of the workspace layer do apply.
    let s = srcs()
        .user(r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}"#)
        .workspace(r#"{"mcp": {"excluded": ["a"]}, "lsp": {"allowed": []}}"#)
        .lsp_json(r#"{"py": {"command": "pylsp"}}"#)
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::Excluded));
    assert_eq!(mcp_reason(&s, "b"), None);
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::NotAllowed));
}

// ---------------------------------------------------------------------------
// Admission order: the first failing gate wins.

const FT_ON: &str = r#""security": {"folderTrust": {"enabled": true}}"#;

#[test]
fn untrusted_beats_disabled() {
    let s = srcs()
        .user(&format!(
            r#"{{{FT_ON}, "mcpServers": {{"a": {{"command": "x", "disabled": true}}}}}}"#
        ))
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::UntrustedWorkspace));
}

#[test]
fn disabled_beats_not_allowed() {
    let s = srcs()
        .user(
            r#"{"mcp": {"allowed": []}, "mcpServers": {"a": {"command": "x", "disabled": true}}}"#,
        )
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::Disabled));
}

#[test]
fn not_allowed_beats_excluded() {
    let s = srcs()
        .user(r#"{"mcp": {"allowed": ["b"], "excluded": ["a"]}, "mcpServers": {"a": {"command": "x"}}}"#)
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::NotAllowed));
}

#[test]
fn excluded_beats_pending_approval() {
    let s = srcs()
        .user(r#"{"mcp": {"excluded": ["p"]}}"#)
        .mcp_json(&mcp_json_one("p", r#"{"command": "x"}"#))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::Excluded));
}

#[test]
fn disabled_gated_server_is_disabled_not_pending() {
    let s = srcs()
        .mcp_json(&mcp_json_one("p", r#"{"command": "x", "disabled": true}"#))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::Disabled));
    let s = srcs()
        .mcp_json(&mcp_json_one("p", r#"{"command": "x", "disabled": false}"#))
        .desired();
    assert_eq!(mcp_reason(&s, "p"), Some(Reason::PendingApproval));
}

#[test]
fn untrusted_beats_every_gate_for_every_scope() {
    let s = srcs()
        .user(&format!(
            r#"{{{FT_ON}, "mcp": {{"allowed": [], "excluded": ["*"]}},
                "mcpServers": {{"u": {{"command": "x"}}}}}}"#
        ))
        .mcp_json(&mcp_json_one("p", r#"{"command": "x"}"#))
        .extension("e1", r#"{"mcpServers": {"e": {"command": "x"}}}"#)
        .cli_mcp(&mcp_json_one("c", r#"{"command": "x"}"#))
        .desired();
    for n in ["u", "p", "e", "c"] {
        assert_eq!(mcp_reason(&s, n), Some(Reason::UntrustedWorkspace), "{n}");
    }
}

#[test]
fn excluded_wins_over_allowed() {
    let s = srcs()
        .user(r#"{"mcp": {"allowed": ["a", "b"], "excluded": ["a"]}, "mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}"#)
        .desired();
    assert_eq!(mcp_reason(&s, "a"), Some(Reason::Excluded));
    assert_eq!(mcp_reason(&s, "b"), None);
}

#[test]
fn excluded_accepts_globs() {
    let s = srcs()
        .user(
            r#"{"mcp": {"excluded": ["git*", "t?me"]}, "mcpServers": {"github": {"command": "x"},
                  "time": {"command": "x"}, "times": {"command": "x"}}}"#,
        )
        .desired();
    assert_eq!(mcp_reason(&s, "github"), Some(Reason::Excluded));
    assert_eq!(mcp_reason(&s, "time"), Some(Reason::Excluded));
    assert_eq!(mcp_reason(&s, "times"), None);
    let msg = mcp_blocked(&s, "github").unwrap().message;
    assert!(msg.contains("git*"), "the message names the pattern: {msg}");
}

// ---------------------------------------------------------------------------
// LSP admission

#[test]
fn lsp_untrusted_with_require_trusted_workspace_is_untrusted_workspace() {
    let s = srcs()
        .user(&format!(r#"{{{FT_ON}}}"#))
        .lsp_json(r#"{"py": {"command": "pylsp"}}"#)
        .extension(
            "e1",
            r#"{"lspServers": {"go": {"command": "gopls", "trustRequired": false}}}"#,
        )
        .desired();
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::UntrustedWorkspace));
    assert_eq!(lsp_reason(&s, "go"), Some(Reason::UntrustedWorkspace));
}

#[test]
fn lsp_untrusted_without_require_blocks_only_trust_required_servers() {
    let s = srcs()
        .user(&format!(
            r#"{{{FT_ON}, "lsp": {{"requireTrustedWorkspace": false}}}}"#
        ))
        .lsp_json(r#"{"py": {"command": "pylsp"}}"#)
        .extension(
            "e1",
            r#"{"lspServers": {"go": {"command": "gopls", "trustRequired": false},
                               "rs": {"command": "rust-analyzer"}}}"#,
        )
        .desired();
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::TrustRequired));
    assert_eq!(lsp_reason(&s, "go"), None);
    assert_eq!(
        lsp_reason(&s, "rs"),
        Some(Reason::TrustRequired),
        "extension default is true"
    );
}

#[test]
fn lsp_json_cannot_lower_trust_required() {
    let s = srcs()
        .user(&format!(
            r#"{{{FT_ON}, "lsp": {{"requireTrustedWorkspace": false}}}}"#
        ))
        .lsp_json(r#"{"py": {"command": "pylsp", "trustRequired": false}}"#)
        .desired();
    assert!(lsp_spec(&s, "py").trust_required);
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::TrustRequired));
}

#[test]
fn lsp_trusted_workspace_ignores_trust_required() {
    let s = srcs()
        .user(&format!(r#"{{{FT_ON}}}"#))
        .trusted(r#"{"/ws": "TRUST_FOLDER"}"#)
        .lsp_json(r#"{"py": {"command": "pylsp"}}"#)
        .desired();
    assert_eq!(lsp_reason(&s, "py"), None);
}

#[test]
fn lsp_allowed_and_excluded_gate_language_servers() {
    let s = srcs()
        .user(r#"{"lsp": {"allowed": ["py", "go*"], "excluded": ["gopls-old"]}}"#)
        .lsp_json(
            r#"{"py": {"command": "a"}, "gopls": {"command": "a"}, "gopls-old": {"command": "a"},
                     "rs": {"command": "a"}}"#,
        )
        .desired();
    assert_eq!(lsp_reason(&s, "py"), None);
    assert_eq!(lsp_reason(&s, "gopls"), None);
    assert_eq!(lsp_reason(&s, "gopls-old"), Some(Reason::Excluded));
    assert_eq!(lsp_reason(&s, "rs"), Some(Reason::NotAllowed));
    let s = srcs()
        .user(r#"{"lsp": {"allowed": []}}"#)
        .lsp_json(r#"{"py": {"command": "a"}}"#)
        .desired();
    assert_eq!(
        lsp_reason(&s, "py"),
        Some(Reason::NotAllowed),
        "[] denies all"
    );
}

#[test]
fn lsp_cli_bound_cannot_be_widened_by_settings() {
    let servers = r#"{"py": {"command": "a"}, "go": {"command": "a"}, "rs": {"command": "a"}}"#;
    let s = srcs()
        .user(r#"{"lsp": {"allowed": ["py", "go", "rs"]}}"#)
        .lsp_json(servers)
        .allowed_lsp_flag(&["py", "go"])
        .desired();
    assert_eq!(lsp_reason(&s, "py"), None);
    assert_eq!(lsp_reason(&s, "rs"), Some(Reason::NotAllowed));
    let s = srcs()
        .user(r#"{"lsp": {"allowed": ["py"]}}"#)
        .lsp_json(servers)
        .allowed_lsp_flag(&["py", "go"])
        .desired();
    assert_eq!(
        lsp_reason(&s, "go"),
        Some(Reason::NotAllowed),
        "settings narrow"
    );
    let s = srcs()
        .lsp_json(servers)
        .allowed_lsp_flag(&["py", "go"])
        .desired();
    assert_eq!(lsp_reason(&s, "go"), None, "the bound alone");
    assert_eq!(lsp_reason(&s, "rs"), Some(Reason::NotAllowed));
    // The MCP bound does not apply to LSP and vice versa.
    let s = srcs()
        .lsp_json(servers)
        .user(&settings_one("py", r#"{"command": "x"}"#))
        .allowed_mcp_flag(&[])
        .desired();
    assert_eq!(lsp_reason(&s, "py"), None);
    assert_eq!(mcp_reason(&s, "py"), Some(Reason::NotAllowed));
}

#[test]
fn lsp_gate_order_trust_then_allow_then_exclude() {
    let s = srcs()
        .user(&format!(
            r#"{{{FT_ON}, "lsp": {{"requireTrustedWorkspace": false, "allowed": [], "excluded": ["*"]}}}}"#
        ))
        .lsp_json(r#"{"py": {"command": "a"}}"#)
        .desired();
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::TrustRequired));
    let s = srcs()
        .user(r#"{"lsp": {"allowed": [], "excluded": ["*"]}}"#)
        .lsp_json(r#"{"py": {"command": "a"}}"#)
        .desired();
    assert_eq!(lsp_reason(&s, "py"), Some(Reason::NotAllowed));
}

#[test]
fn mcp_policy_does_not_gate_lsp() {
    let s = srcs()
        .user(r#"{"mcp": {"allowed": [], "excluded": ["*"]}}"#)
        .lsp_json(r#"{"py": {"command": "a"}}"#)
        .desired();
    assert_eq!(lsp_reason(&s, "py"), None);
    assert!(admission::admit_lsp("py", lsp_spec(&s, "py"), &s).is_none());
}

#[test]
fn workspace_settings_that_are_the_user_settings_file_are_one_layer() {
    // Workspace = home: ~/.qwen/settings.json is the user layer only, so its
    // servers are user scope (no approval) rather than gated workspace scope.
    let s = srcs()
        .user(&settings_one("a", r#"{"command": "x"}"#))
        .workspace(&settings_one("a", r#"{"command": "x"}"#));
    let mut set = s.valid_sources();
    set.workspace_settings.path = set.user_settings.path.clone();
    let state = desired_state(&set, ws(), &s.cli, &|p: &Path| p.to_path_buf());
    assert_eq!(state.mcp["a"].source, SourceKind::UserSettings);
    assert_eq!(mcp_reason(&state, "a"), None);
    // Distinct files: the workspace layer wins and is gated.
    let state = s.desired();
    assert_eq!(state.mcp["a"].source, SourceKind::WorkspaceSettings);
    assert_eq!(mcp_reason(&state, "a"), Some(Reason::PendingApproval));
}

#[test]
fn trust_rules_are_read_through_canonical_paths() {
    // A rule written for a symlink to the workspace applies once resolved.
    let s = srcs()
        .user(r#"{"security": {"folderTrust": {"enabled": true}}, "mcpServers": {"a": {"command": "x"}}}"#)
        .trusted(r#"{"/home/u/link-to-ws": "TRUST_FOLDER"}"#);
    let set = s.valid_sources();
    let resolve = |p: &Path| {
        if p == Path::new("/home/u/link-to-ws") {
            Path::new("/ws").to_path_buf()
        } else {
            p.to_path_buf()
        }
    };
    let state = desired_state(&set, ws(), &s.cli, &resolve);
    assert!(state.policy.trusted);
    assert_eq!(mcp_reason(&state, "a"), None);
    let state = desired_state(&set, ws(), &s.cli, &|p: &Path| p.to_path_buf());
    assert!(!state.policy.trusted);
}
