//! The entry memo: a load through it is exactly a load without it, and an
//! entry whose literal JSON did not change is not rebuilt (its spec is shared).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use proptest::prelude::*;
use steward_schema::load::{self, Content, LoadContext, LoadMode, ParsedSource};
use steward_schema::memo::EntryMemo;
use steward_schema::resource::SourceKind;

const SETTINGS: &str = "/ws/.qwen/settings.json";

fn cx<'a>(
    env: &'a BTreeMap<String, String>,
    mode: LoadMode,
    memo: Option<&'a EntryMemo>,
) -> LoadContext<'a> {
    LoadContext {
        memo,
        ..ctx(env, mode)
    }
}

fn settings(kind: SourceKind, t: &str, cx: &LoadContext<'_>) -> ParsedSource {
    load::load_settings(kind, Path::new(SETTINGS), &text(t), cx)
}

fn settings_servers(
    p: &ParsedSource,
) -> &BTreeMap<String, Arc<steward_schema::resource::McpServerSpec>> {
    match &p.content {
        Content::Settings(s) => &s.mcp_servers,
        other => panic!("expected settings, found {other:?} ({:?})", p.diagnostics),
    }
}

#[test]
fn unchanged_entries_are_shared_and_changed_ones_rebuilt() {
    let env = env();
    let memo = EntryMemo::new();
    let cx = cx(&env, LoadMode::Strict, Some(&memo));
    let first = settings(
        SourceKind::UserSettings,
        r#"{"mcpServers": {"a": {"command": "x", "args": ["$HOME"]}, "b": {"command": "y"}}}"#,
        &cx,
    );
    // Another layout and key order for `a`; `b` gains an argument.
    let second = settings(
        SourceKind::UserSettings,
        r#"{
          // comment
          "mcpServers": {
            "b": {"command": "y", "args": ["-v"]},
            "a": {"args": ["$HOME"], "command": "x"}
          }
        }"#,
        &cx,
    );
    let (a1, a2) = (
        &settings_servers(&first)["a"],
        &settings_servers(&second)["a"],
    );
    assert!(
        Arc::ptr_eq(a1, a2),
        "an unchanged entry is taken from the memo"
    );
    let (b1, b2) = (
        &settings_servers(&first)["b"],
        &settings_servers(&second)["b"],
    );
    assert!(!Arc::ptr_eq(b1, b2), "a changed entry is rebuilt");
    assert_ne!(b1.config_hash, b2.config_hash);
    assert_eq!(b2.args.as_deref(), Some(&["-v".to_owned()][..]));
}

#[test]
fn another_environment_rebuilds_every_entry() {
    let memo = EntryMemo::new();
    let t = r#"{"mcpServers": {"a": {"command": "x", "args": ["$TOKEN"]}}}"#;
    let old_env = env();
    let old = settings(
        SourceKind::UserSettings,
        t,
        &cx(&old_env, LoadMode::Strict, Some(&memo)),
    );
    let new_env = env_with(&[("TOKEN", "rotated")]);
    let new = settings(
        SourceKind::UserSettings,
        t,
        &cx(&new_env, LoadMode::Strict, Some(&memo)),
    );
    assert_eq!(
        settings_servers(&old)["a"].args,
        Some(vec!["s3cr3t".to_owned()])
    );
    assert_eq!(
        settings_servers(&new)["a"].args,
        Some(vec!["rotated".to_owned()])
    );
}

#[test]
fn two_layers_in_one_file_keep_their_own_scope() {
    let env = env();
    let memo = EntryMemo::new();
    let cx = cx(&env, LoadMode::Strict, Some(&memo));
    let t = r#"{"mcpServers": {"a": {"command": "x"}}}"#;
    let user = settings(SourceKind::UserSettings, t, &cx);
    let system = settings(SourceKind::SystemSettings, t, &cx);
    assert_ne!(
        settings_servers(&user)["a"].scope,
        settings_servers(&system)["a"].scope
    );
}

#[test]
fn a_failed_entry_reports_the_same_diagnostics_from_the_memo() {
    let env = env();
    let memo = EntryMemo::new();
    let t = r#"{"mcpServers": {"a": {"command": "x"}, "bad": {"httpUrl": "ftp://h"}}}"#;
    let with = cx(&env, LoadMode::Lenient, Some(&memo));
    let first = settings(SourceKind::UserSettings, t, &with);
    let second = settings(SourceKind::UserSettings, t, &with);
    let plain = settings(SourceKind::UserSettings, t, &ctx(&env, LoadMode::Lenient));
    assert!(!plain.diagnostics.is_empty());
    assert_eq!(first, plain);
    assert_eq!(second, plain);
}

/// Entries a generated file may hold: valid, invalid for the schema,
/// invalid when built, and ones that depend on the environment.
const ENTRIES: &[&str] = &[
    r#"{"command": "x"}"#,
    r#"{"command": "x", "args": ["-v"]}"#,
    r#"{"args": ["-v"], "command": "x"}"#,
    r#"{"command": "x", "env": {"T": "${TOKEN}"}}"#,
    r#"{"command": "x", "description": "same server, new words"}"#,
    r#"{"httpUrl": "http://localhost:$PORT/mcp", "headers": {"A": "$TOKEN"}}"#,
    r#"{"httpUrl": "ftp://nope"}"#,
    r#"{"command": ""}"#,
    r#"{"command": "x", "args": ["${MISSING}"]}"#,
    r#"{"command": 7}"#,
    r#"{"url": "http://h/sse", "timeout": 5000.0}"#,
];

fn file_of(entries: &[(usize, usize)]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|(name, entry)| format!("\"s{name}\": {}", ENTRIES[*entry]))
        .collect();
    format!("{{\"mcpServers\": {{{}}}}}", items.join(", "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever was loaded before, a load through the memo equals a load
    /// without one — settings, `.mcp.json` and `.lsp.json`, both modes.
    #[test]
    fn loading_through_the_memo_equals_loading_without(
        files in prop::collection::vec(
            prop::collection::vec((0usize..4, 0..ENTRIES.len()), 0..5),
            1..6,
        ),
        lenient in any::<bool>(),
        kinds in prop::collection::vec(0usize..3, 6),
    ) {
        let env = env();
        let mode = if lenient { LoadMode::Lenient } else { LoadMode::Strict };
        let memo = EntryMemo::new();
        let with = cx(&env, mode, Some(&memo));
        let without = cx(&env, mode, None);
        for (i, entries) in files.iter().enumerate() {
            let t = file_of(entries);
            let kind = [SourceKind::UserSettings, SourceKind::WorkspaceSettings, SourceKind::SystemSettings][kinds[i]];
            prop_assert_eq!(settings(kind, &t, &with), settings(kind, &t, &without));
            let mcp = Path::new("/ws/.mcp.json");
            prop_assert_eq!(
                load::load_mcp_json(mcp, &text(&t), &with),
                load::load_mcp_json(mcp, &text(&t), &without)
            );
            let lsp_text = lsp_file_of(entries);
            let lsp = Path::new("/ws/.lsp.json");
            prop_assert_eq!(
                load::load_lsp_json(lsp, &text(&lsp_text), &with),
                load::load_lsp_json(lsp, &text(&lsp_text), &without)
            );
        }
    }
}

const LSP_ENTRIES: &[&str] = &[
    r#"{"command": "clangd", "extensionToLanguage": {".c": "c"}}"#,
    r#"{"command": "clangd", "args": ["--log=error"], "extensionToLanguage": {".c": "c"}}"#,
    r#"{"command": "pyright", "extensionToLanguage": {".py": "python"}, "env": {"T": "$TOKEN"}}"#,
    r#"{"port": 9000, "extensionToLanguage": {".rs": "rust"}}"#,
    r#"{"command": "", "extensionToLanguage": {".c": "c"}}"#,
    r#"{"command": "x"}"#,
    r#"{"command": "x", "extensionToLanguage": {".c": "c"}, "startupTimeout": "soon"}"#,
];

fn lsp_file_of(entries: &[(usize, usize)]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|(name, entry)| format!("\"l{name}\": {}", LSP_ENTRIES[*entry % LSP_ENTRIES.len()]))
        .collect();
    format!("{{{}}}", items.join(", "))
}

// ---------------------------------------------------------------------------
// Reloading an edit confined to one entry

/// A settings file with comments, whitespace and strings that look like syntax.
fn rich_settings(entries: &[(usize, usize)]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|(name, entry)| {
            format!(
                "    // server {name}\n    \"s{name}\":  {}",
                ENTRIES[*entry]
            )
        })
        .collect();
    format!(
        "{{\n  \"theme\": \"a // b /* c */ {{\",\n  /* servers */\n  \"mcpServers\": {{\n{}\n  }},\n  \"mcp\": {{\"excluded\": [\"zz\"]}}\n}}\n",
        items.join(",\n")
    )
}

/// How one save changes the text.
#[derive(Debug, Clone)]
enum Edit {
    /// Entry `at` (modulo the count) gets entry text `with`.
    Replace {
        at: usize,
        with: usize,
    },
    /// Byte-level damage or noise at a relative position.
    Insert {
        at: usize,
        text: &'static str,
    },
    Delete {
        at: usize,
        len: usize,
    },
}

fn arb_edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (0usize..8, 0..ENTRIES.len()).prop_map(|(at, with)| Edit::Replace { at, with }),
        1 => (0usize..10_000, prop::sample::select(vec![" ", "\n", "x", "\"", "}", ",", "/", "// c\n", "/* c */", "1", "{", "]"]))
            .prop_map(|(at, text)| Edit::Insert { at, text }),
        1 => (0usize..10_000, 1usize..4).prop_map(|(at, len)| Edit::Delete { at, len }),
    ]
}

fn apply_edit(text: &str, entries: &mut [(usize, usize)], edit: &Edit) -> String {
    let boundary = |mut at: usize| {
        at = at.min(text.len());
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match edit {
        Edit::Replace { at, with } if !entries.is_empty() => {
            let i = at % entries.len();
            entries[i].1 = *with;
            rich_settings(entries)
        }
        Edit::Replace { .. } => text.to_owned(),
        Edit::Insert { at, text: ins } => {
            let at = boundary(at * text.len() / 10_000);
            format!("{}{ins}{}", &text[..at], &text[at..])
        }
        Edit::Delete { at, len } => {
            let from = boundary(at * text.len() / 10_000);
            let to = boundary(from + len);
            format!("{}{}", &text[..from], &text[to..])
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whenever an edit is reloaded entry by entry, the result is exactly
    /// the full strict load of the new text, and so are the new spans.
    #[test]
    fn an_edited_entry_reloads_as_the_whole_file_would(
        names in prop::collection::btree_set(0usize..12, 1..6),
        first in prop::collection::vec(0usize..4, 6),
        edits in prop::collection::vec(arb_edit(), 1..8),
        kind_at in 0usize..2,
    ) {
        let env = env();
        let memo = EntryMemo::new();
        let with = cx(&env, LoadMode::Strict, Some(&memo));
        let without = cx(&env, LoadMode::Strict, None);
        let kind = [SourceKind::UserSettings, SourceKind::WorkspaceSettings][kind_at];
        let mut entries: Vec<(usize, usize)> =
            names.iter().zip(&first).map(|(n, e)| (*n, *e)).collect();
        let mut text = rich_settings(&entries);
        let mut previous = settings(kind, &text, &with);
        let mut spans = load::entry_spans(kind, &text_of(&text));
        for edit in &edits {
            let next = apply_edit(&text, &mut entries, edit);
            let full = settings(kind, &next, &without);
            if let Some(spans_now) = &spans
                && let Some((fast, fast_spans)) =
                    load::reload_edited_entry(&previous, spans_now, &text, &next, &with)
            {
                prop_assert_eq!(&fast, &full, "{:?}\n--- old\n{}\n--- new\n{}", edit, text, next);
                prop_assert_eq!(Some(fast_spans), load::entry_spans(kind, &text_of(&next)));
            }
            // As the controller does: the full load keeps the memo current.
            previous = settings(kind, &next, &with);
            prop_assert_eq!(&previous, &full);
            spans = if previous.is_valid() { load::entry_spans(kind, &text_of(&next)) } else { None };
            text = next;
        }
    }
}

fn text_of(s: &str) -> steward_schema::load::FileText {
    text(s)
}

#[test]
fn only_an_edit_inside_one_entry_is_reloaded_alone() {
    let env = env();
    let memo = EntryMemo::new();
    let cx = cx(&env, LoadMode::Strict, Some(&memo));
    let kind = SourceKind::UserSettings;
    let old = rich_settings(&[(1, 0), (2, 1), (3, 3)]);
    let previous = settings(kind, &old, &cx);
    let spans = load::entry_spans(kind, &text(&old)).expect("spans");
    let reload = |new: &str| load::reload_edited_entry(&previous, &spans, &old, new, &cx);

    // One entry's value changes: reloaded alone, the others shared.
    let new = rich_settings(&[(1, 0), (2, 2), (3, 3)]);
    let (fast, _) = reload(&new).expect("an edit inside s2");
    assert_eq!(fast, settings(kind, &new, &ctx(&env, LoadMode::Strict)));
    assert!(Arc::ptr_eq(
        &settings_servers(&fast)["s1"],
        &settings_servers(&previous)["s1"]
    ));
    // Outside the entries (a policy key), across entries, a renamed entry,
    // an entry with a problem, a comment inside the entry: the full load decides.
    assert!(reload(&old.replace("\"zz\"", "\"yy\"")).is_none());
    assert!(reload(&rich_settings(&[(1, 1), (2, 2), (3, 3)])).is_none());
    assert!(reload(&old.replace("\"s2\"", "\"s9\"")).is_none());
    assert!(reload(&rich_settings(&[(1, 0), (2, 7), (3, 3)])).is_none());
    assert!(reload(&old.replace("\"-v\"", "\"-v\" /* c */")).is_none());
}
