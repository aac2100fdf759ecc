//! What building MCP and LSP entries share: variable expansion of a field
//! (references left literal become warnings), and collecting the built
//! entries of a map into specs, diagnostics and dropped entries.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::{DroppedEntry, DroppedSpec, Problems};
use crate::diagnostic::{Diagnostic, pointer_join};
use crate::expand::{self, Vars};
use crate::jsonc::Document;
use crate::memo::{self, FieldErrors};
use crate::resource::{LspServerSpec, McpServerSpec};
use crate::sandbox::SandboxField;

/// A spec type whose entries can be dropped with a row in status.
pub(super) trait Droppable: Sized {
    fn dropped(spec: Arc<Self>) -> DroppedSpec;
    /// The `sandbox` key as written.
    fn sandbox(&self) -> Option<&SandboxField>;
}

impl Droppable for McpServerSpec {
    fn dropped(spec: Arc<Self>) -> DroppedSpec {
        DroppedSpec::Mcp(spec)
    }
    fn sandbox(&self) -> Option<&SandboxField> {
        self.sandbox.as_ref()
    }
}

impl Droppable for LspServerSpec {
    fn dropped(spec: Arc<Self>) -> DroppedSpec {
        DroppedSpec::Lsp(spec)
    }
    fn sandbox(&self) -> Option<&SandboxField> {
        self.sandbox.as_ref()
    }
}

/// Whether `field` names a profile that only settings can define.
pub(super) fn names_custom_profile(field: Option<&SandboxField>) -> bool {
    matches!(field, Some(SandboxField::Name(n)) if !crate::sandbox::BUILTINS.contains(&n.as_str()))
}

/// The built specs by name. Warnings become warnings; an entry without a
/// spec is dropped (with a row in status), its problems becoming warnings
/// (skipped) or errors (invalid: a strict load rejects the source).
pub(super) fn collect_built<T: Droppable>(
    built: Vec<(String, memo::Built<T>)>,
    map_pointer: &str,
    doc: &Document,
    path: &Path,
    diags: &mut Problems,
) -> BTreeMap<String, Arc<T>> {
    let mut out = BTreeMap::new();
    for (name, outcome) in built {
        let pointer = pointer_join(map_pointer, &name);
        let place = |list: &FieldErrors| -> Vec<Diagnostic> {
            list.iter()
                .map(|(field, message)| {
                    let p = format!("{pointer}{field}");
                    Diagnostic::new(path, doc.position(&p), p, message.clone())
                })
                .collect()
        };
        diags.warnings.extend(place(&outcome.warnings));
        match &outcome.result {
            Ok(spec) => {
                if names_custom_profile(spec.sandbox()) {
                    let p = format!("{pointer}/sandbox");
                    let at = Diagnostic::new(path, doc.key_position(&p), p, "");
                    diags.sandbox_keys.insert(name.clone(), at);
                }
                out.insert(name, spec.clone());
            }
            Err(failed) => {
                let found = place(&failed.problems);
                diags.dropped.push(DroppedEntry {
                    name: name.clone(),
                    spec: T::dropped(failed.placeholder.clone()),
                    message: found
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                });
                if failed.skipped {
                    diags.warnings.extend(found);
                } else {
                    diags.errors.extend(found);
                }
            }
        }
    }
    out
}

/// A warning for each literal credential of entry `name` of `path`, with
/// the `steward secret move` command that replaces it by a reference.
pub(super) fn credential_warnings(
    path: &Path,
    name: &str,
    literal: &serde_json::Value,
    warnings: &mut FieldErrors,
) {
    for found in crate::secrets::literal_credentials(literal) {
        let message = crate::secrets::literal_credential_message(path, name, &found);
        warnings.push((found.pointer, message));
    }
}

/// `value` expanded; references that stay literal become warnings at `field`.
pub(super) fn expand_field(
    value: &Option<String>,
    field: &str,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
) -> Option<String> {
    let v = value.as_ref()?;
    Some(expand_one(v, field, vars, warnings))
}

pub(super) fn expand_one(
    v: &str,
    field: &str,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
) -> String {
    let (out, problems) = expand::expand(v, vars);
    warnings.extend(problems.iter().map(|p| (field.to_owned(), p.to_string())));
    out
}

pub(super) fn expand_list(
    list: &Option<Vec<String>>,
    field: &str,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
) -> Option<Vec<String>> {
    let list = list.as_ref()?;
    Some(
        list.iter()
            .enumerate()
            .map(|(i, item)| expand_one(item, &format!("{field}/{i}"), vars, warnings))
            .collect(),
    )
}

pub(super) fn expand_map(
    map: &Option<BTreeMap<String, String>>,
    field: &str,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
) -> Option<BTreeMap<String, String>> {
    let map = map.as_ref()?;
    Some(
        map.iter()
            .map(|(k, v)| {
                let at = pointer_join(field, k);
                (k.clone(), expand_one(v, &at, vars, warnings))
            })
            .collect(),
    )
}
