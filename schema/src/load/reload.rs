//! Reloading an edit confined to one entry.
//!
//! A hot reload of a large file usually changes one server. If the bytes that
//! differ from the previous text all lie inside one entry's value, and the new
//! bytes there are exactly one JSON value, the new text is the previous
//! document with that value replaced: the text around it is the same, and a
//! complete value in the place of a value leaves the parse of the rest as it
//! was. So that entry alone is parsed, schema-checked and built, and every
//! other entry is kept as loaded. Anything else — an edit outside the
//! entries, across two of them, a comment inside the edited part, an entry
//! with a problem — falls back to the full load, which also reports problems
//! with their positions.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::document::integral_numbers_as_integers;
use super::lsp::{LspOrigin, build_lsp_entries};
use super::mcp::build_mcp_entries;
use super::settings::settings_scope;
use super::{Content, FileText, LoadContext, LoadMode, McpServers, ParsedSource, SettingsContent};
use crate::jsonc;
use crate::memo::{self, Coverage, Place};
use crate::resource::{Scope, SourceKind, SourceState};

/// Where each entry of a source's server map is in the text it was loaded
/// from (byte ranges of the entry values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySpans {
    /// `(start, end, name)` sorted by `start`: entry `name` is `text[start..end]`.
    spans: Vec<(usize, usize, Arc<str>)>,
}

#[derive(Deserialize)]
struct McpServersRaw<'a> {
    #[serde(rename = "mcpServers", borrow, default)]
    servers: Option<BTreeMap<String, &'a serde_json::value::RawValue>>,
}

/// The entry spans of `text` for a source of `kind` whose entries can be
/// reloaded one by one (settings layers, `.mcp.json`, `.lsp.json`); `None`
/// for other sources and for text serde_json does not read.
pub fn entry_spans(kind: SourceKind, text: &FileText) -> Option<EntrySpans> {
    let FileText::Text(text) = text else {
        return None;
    };
    let bom = if text.starts_with('\u{FEFF}') { 3 } else { 0 };
    let body = jsonc::blank_comments(&text[bom..])?;
    let raw: BTreeMap<String, &serde_json::value::RawValue> = match kind {
        SourceKind::LspJson => serde_json::from_str(&body).ok()?,
        SourceKind::ProjectMcpJson
        | SourceKind::SystemDefaults
        | SourceKind::UserSettings
        | SourceKind::WorkspaceSettings
        | SourceKind::SystemSettings => {
            serde_json::from_str::<McpServersRaw<'_>>(&body)
                .ok()?
                .servers?
        }
        _ => return None,
    };
    let base = body.as_ptr() as usize;
    let mut spans: Vec<(usize, usize, Arc<str>)> = raw
        .into_iter()
        // `$schema`-like keys are not servers in every map: never reloaded alone.
        .filter(|(name, _)| !name.starts_with('$'))
        .map(|(name, value)| {
            let start = value.get().as_ptr() as usize - base + bom;
            (start, start + value.get().len(), Arc::from(name))
        })
        .collect();
    spans.sort();
    Some(EntrySpans { spans })
}

/// `previous` (loaded strictly from `old_text`, valid) after the edit that
/// turned `old_text` into `new_text`, when that edit is confined to one
/// entry which is valid on its own — with the spans of `new_text`. `None`:
/// load `new_text` in full.
pub fn reload_edited_entry(
    previous: &ParsedSource,
    spans: &EntrySpans,
    old_text: &str,
    new_text: &str,
    cx: &LoadContext<'_>,
) -> Option<(ParsedSource, EntrySpans)> {
    if cx.mode != LoadMode::Strict
        || previous.state != SourceState::Valid
        || previous.has_findings()
    {
        return None;
    }
    let (old, new) = (old_text.as_bytes(), new_text.as_bytes());
    let prefix = common_prefix(old, new);
    let suffix = common_suffix(&old[prefix..], &new[prefix..]);
    let (old_end, new_end) = (old.len() - suffix, new.len() - suffix);
    let at = spans
        .spans
        .partition_point(|(start, _, _)| *start <= prefix);
    let (start, end, name) = spans.spans.get(at.checked_sub(1)?)?;
    if old_end > *end {
        return None;
    }
    // The entry's new value: what replaced old_text[start..end].
    let entry_end = end - old_end + new_end;
    let entry_text = new_text.get(*start..entry_end)?;
    let mut value: Value = serde_json::from_str(entry_text).ok()?;
    // The value itself, without the whitespace serde_json allowed around it.
    let value_start = start + (entry_text.len() - entry_text.trim_start().len());
    let value_end = entry_end - (entry_text.len() - entry_text.trim_end().len());
    integral_numbers_as_integers(&mut value);
    // A custom profile's name is reported at its place if no settings
    // define it: the full load knows the place.
    if value
        .get("sandbox")
        .and_then(Value::as_str)
        .is_some_and(|n| !crate::sandbox::BUILTINS.contains(&n))
    {
        return None;
    }
    let one = Map::from_iter([(name.to_string(), value)]);

    let content = match &previous.content {
        Content::Settings(settings) => Content::Settings(SettingsContent {
            mcp_servers: rebuild_mcp_entry(
                &settings.mcp_servers,
                one,
                &previous.path,
                settings_scope(previous.kind),
                cx,
            )?,
            ..SettingsContent::clone(settings)
        }),
        Content::McpServers(servers) => Content::McpServers(rebuild_mcp_entry(
            servers,
            one,
            &previous.path,
            Scope::Project,
            cx,
        )?),
        Content::LspServers(servers) => {
            let origin = LspOrigin::Workspace;
            let built = build_lsp_entries(&previous.path, "", &origin, cx, (one, Coverage::Some));
            Content::LspServers(replace_entries(servers, built)?)
        }
        _ => return None,
    };
    let delta = new_end as isize - old_end as isize;
    let shifted = spans
        .spans
        .iter()
        .map(|(s, e, n)| {
            if s == start {
                return Some((value_start, value_end, n.clone()));
            }
            let shift = |x: usize| {
                if x >= *end {
                    x.checked_add_signed(delta)
                } else {
                    Some(x)
                }
            };
            Some((shift(*s)?, shift(*e)?, n.clone()))
        })
        .collect::<Option<Vec<_>>>()?;
    let parsed = ParsedSource {
        kind: previous.kind,
        path: previous.path.clone(),
        state: SourceState::Valid,
        diagnostics: Vec::new(),
        warnings: Vec::new(),
        dropped: Vec::new(),
        sandbox_keys: Default::default(),
        content,
    };
    Some((parsed, EntrySpans { spans: shifted }))
}

/// Length of the longest common prefix (compared a block at a time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 128;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the longest common suffix (compared a block at a time).
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 128;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut k = 0;
    while k + BLOCK <= n && a[n - k - BLOCK..n - k] == b[n - k - BLOCK..n - k] {
        k += BLOCK;
    }
    k + a[..n - k]
        .iter()
        .rev()
        .zip(b[..n - k].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// `servers` with the one MCP entry in `one` checked and built again;
/// `None` when it has anything to report.
fn rebuild_mcp_entry(
    servers: &McpServers,
    one: Map<String, Value>,
    path: &Path,
    scope: Scope,
    cx: &LoadContext<'_>,
) -> Option<McpServers> {
    let place = Place {
        path,
        pointer: "/mcpServers",
        scope,
    };
    replace_entries(
        servers,
        build_mcp_entries(place, None, cx, (one, Coverage::Some)),
    )
}

/// `servers` with the built entries replacing theirs; `None` if one has
/// anything to report (the full load reports it with positions).
fn replace_entries<T>(
    servers: &Arc<BTreeMap<String, Arc<T>>>,
    built: Vec<(String, memo::Built<T>)>,
) -> Option<Arc<BTreeMap<String, Arc<T>>>> {
    let mut out = BTreeMap::clone(servers);
    for (name, outcome) in built {
        if !outcome.is_clean() {
            return None;
        }
        match &outcome.result {
            Ok(spec) => out.insert(name, spec.clone()),
            Err(_) => return None,
        };
    }
    Some(Arc::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn common_prefix_and_suffix_match_a_plain_scan(
            a in prop::collection::vec(0u8..3, 0..600),
            b in prop::collection::vec(0u8..3, 0..600),
            shared in prop::collection::vec(0u8..3, 0..400),
        ) {
            let (x, y) = ([&shared[..], &a, &shared].concat(), [&shared[..], &b, &shared].concat());
            let plain_prefix = x.iter().zip(&y).take_while(|(p, q)| p == q).count();
            let plain_suffix = x.iter().rev().zip(y.iter().rev()).take_while(|(p, q)| p == q).count();
            prop_assert_eq!(common_prefix(&x, &y), plain_prefix);
            prop_assert_eq!(common_suffix(&x, &y), plain_suffix);
        }
    }
}
