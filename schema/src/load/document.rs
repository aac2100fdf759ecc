//! What every loader runs a source file through: the text read and parsed
//! as JSON with comments, duplicate keys reported, the document
//! schema-checked outside its server entries and read as typed content,
//! and the outcome turned into a [`ParsedSource`] as the load mode says.
//! Also the schema validators of every format, built once.

use std::path::Path;
use std::sync::LazyLock;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{Content, FileText, LoadContext, LoadMode, ParsedSource, Problems, unreadable};
use crate::diagnostic::Diagnostic;
use crate::jsonc::{self, Document};
use crate::resource::{SourceKind, SourceState};
use crate::schemas;
use crate::validate::SchemaValidator;

macro_rules! validator {
    ($name:ident, $schema:expr) => {
        pub(super) static $name: LazyLock<SchemaValidator> = LazyLock::new(|| {
            SchemaValidator::new(&$schema).expect("generated schemas are valid JSON Schema")
        });
    };
}

validator!(SETTINGS, schemas::settings());
validator!(MCP_JSON, schemas::mcp_json());
validator!(LSP_JSON, schemas::lsp_json());
validator!(EXTENSION, schemas::extension());
validator!(APPROVALS, schemas::approvals());
validator!(TRUSTED_FOLDERS, schemas::trusted_folders());
validator!(MCP_SERVERS_MAP, schemas::mcp_servers_map());
validator!(MCP_ENTRY, schemas::mcp_server_entry());
validator!(LSP_ENTRY, schemas::lsp_server_entry());

/// Read → parse → `build`, turning the outcome into a `ParsedSource`.
pub(super) fn load_document(
    kind: SourceKind,
    path: &Path,
    text: &FileText,
    cx: &LoadContext<'_>,
    build: impl FnOnce(&mut Document, &mut Problems) -> Option<Content>,
) -> ParsedSource {
    let text = match text {
        FileText::Absent => return ParsedSource::absent(kind, path),
        FileText::Text(text) => text,
        other => {
            return ParsedSource::invalid(
                kind,
                path,
                unreadable(path, other).into_iter().collect(),
            );
        }
    };
    let mut doc = match jsonc::parse(text) {
        Ok(doc) => doc,
        Err(err) => {
            return ParsedSource::invalid(
                kind,
                path,
                vec![Diagnostic::new(
                    path,
                    Some(err.pos),
                    "",
                    format!("invalid JSON: {}", err.message),
                )],
            );
        }
    };
    let mut problems = Problems::default();
    duplicate_key_warnings(&doc, path, &mut problems);
    let content = build(&mut doc, &mut problems);
    let Problems {
        errors: mut diags,
        mut warnings,
        dropped,
        sandbox_keys,
    } = problems;
    for list in [&mut diags, &mut warnings] {
        list.sort_by(|a, b| {
            (a.file.clone(), a.line, a.column, a.pointer.clone()).cmp(&(
                b.file.clone(),
                b.line,
                b.column,
                b.pointer.clone(),
            ))
        });
        list.dedup();
    }
    let loaded = |state, content| ParsedSource {
        kind,
        path: path.to_path_buf(),
        state,
        diagnostics: diags.clone(),
        warnings: warnings.clone(),
        dropped: dropped.clone(),
        sandbox_keys: sandbox_keys.clone(),
        content,
    };
    match content {
        Some(content) if diags.is_empty() => loaded(SourceState::Valid, content),
        Some(content) if cx.mode == LoadMode::Lenient => loaded(SourceState::Invalid, content),
        _ => ParsedSource {
            warnings,
            sandbox_keys,
            ..ParsedSource::invalid(kind, path, diags)
        },
    }
}

/// A warning for every key written twice in one object of `doc`.
pub(super) fn duplicate_key_warnings(doc: &Document, path: &Path, diags: &mut Problems) {
    for (pos, key) in doc.duplicate_keys() {
        diags.warnings.push(Diagnostic::new(
            path,
            Some(*pos),
            "",
            format!("duplicate key \"{key}\": the last one is used, as in Qwen Code"),
        ));
    }
}

/// Schema-check the document outside its server entries (the children of
/// `entry_maps`); returns the value to build from, taken out of `doc` (which
/// keeps its positions). Entries are checked one by one when they are built,
/// after the coercions Qwen Code applies ([`crate::lenient`]), so an entry's
/// problem never rejects the rest. `None` when the source must be rejected
/// whole (a problem outside every entry).
pub(super) fn checked_value(
    doc: &mut Document,
    validator: &SchemaValidator,
    path: &Path,
    entry_maps: &[&str],
    diags: &mut Problems,
) -> Option<Value> {
    let mut held: Vec<(&str, Map<String, Value>)> = Vec::new();
    for map in entry_maps {
        if let Some(Value::Object(obj)) = doc.value.pointer_mut(map) {
            let entries = std::mem::take(obj);
            for (name, entry) in &entries {
                // `$schema` and the like are document keys, not servers.
                let stand_in = if map.is_empty() && name.starts_with('$') {
                    entry.clone()
                } else {
                    Value::Object(Map::new())
                };
                obj.insert(name.clone(), stand_in);
            }
            held.push((map, entries));
        }
    }
    let violations = validator.check(doc);
    for (map, entries) in held {
        if let Some(Value::Object(obj)) = doc.value.pointer_mut(map) {
            *obj = entries;
        }
    }
    let mut value = std::mem::take(&mut doc.value);
    integral_numbers_as_integers(&mut value);
    if violations.is_empty() {
        Some(value)
    } else {
        diags
            .errors
            .extend(violations.into_iter().map(|v| v.into_diagnostic(path)));
        None
    }
}

/// Numbers written with a zero fraction (`1.0`, `5e3`) become integers, as
/// JSON Schema (which already accepted them as integers) and JavaScript
/// (whose `JSON.parse` cannot tell `1.0` from `1`) see them; otherwise the
/// typed fields (`timeout`, ports, counts) would reject what validation let
/// through — and reject the whole source, without a position.
pub(super) fn integral_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() == 0.0 {
                if (0.0..u64::MAX as f64).contains(&f) {
                    *value = Value::from(f as u64);
                } else if (i64::MIN as f64..0.0).contains(&f) {
                    *value = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers_as_integers),
        _ => {}
    }
}

pub(super) fn typed<T: DeserializeOwned>(
    value: &Value,
    path: &Path,
    diags: &mut Problems,
) -> Option<T> {
    match T::deserialize(value) {
        Ok(v) => Some(v),
        Err(err) => {
            diags
                .errors
                .push(Diagnostic::new(path, None, "", err.to_string()));
            None
        }
    }
}

/// The object at `value[key]`, taken out of `value` (absent or not an
/// object: empty — the schema check already reported a wrong type).
pub(super) fn take_object(value: &mut Value, key: &str) -> Map<String, Value> {
    match value.as_object_mut().and_then(|o| o.remove(key)) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Every member of the object `value`, taken out of it.
pub(super) fn take_all(value: &mut Value) -> Map<String, Value> {
    match std::mem::take(value) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
