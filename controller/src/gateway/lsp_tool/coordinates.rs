//! Answers in the `lsp` tool's coordinates: LSP's URIs and 0-based UTF-16
//! positions become workspace-relative paths, 1-based line and character
//! columns and the trimmed source line; what the agent gives back (positions,
//! call hierarchy items, diagnostics) goes the other way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsp_types::Url;
use serde_json::{Value, json};
use steward_schema::canonical::{canonical_json, sha256_hex};

use super::args::{Args, whole};
use super::paths::Document;
use super::shapes::{SEVERITIES, Symbol, symbol_kind};
use super::{Call, Refused};
use crate::gateway::lsp::{LspError, column_of, to_lsp_position};

impl Call<'_> {
    /// The 0-based LSP position of the `line` / `character` arguments.
    pub(super) fn position(
        &self,
        doc: &Document,
        line: Option<f64>,
        character: Option<f64>,
    ) -> Result<Value, Refused> {
        let line = whole(line).unwrap_or(1);
        let character = whole(character).unwrap_or(1);
        let (line, character) =
            to_lsp_position(&doc.path, &doc.text, line, character).map_err(|e| match e {
                LspError::NoSuchLine { line, lines, .. } => Refused(format!(
                    "{} has {lines} lines; line {line} is past its end",
                    self.shown(&doc.path)
                )),
                other => Refused::from(other),
            })?;
        Ok(json!({ "line": line, "character": character }))
    }

    /// `filePath:line:col [server]`, for headings.
    pub(super) fn at(&self, doc: &Document, args: &Args, server: &str) -> String {
        format!(
            "{}:{}:{} [{server}]",
            self.shown(&doc.path),
            whole(args.line).unwrap_or(1),
            whole(args.character).unwrap_or(1)
        )
    }

    pub(super) fn uri_shown(&self, uri: &str) -> String {
        match Url::parse(uri).ok().and_then(|u| u.to_file_path().ok()) {
            Some(path) => self.shown(&path),
            None => uri.to_owned(),
        }
    }

    /// A location: workspace-relative path, 1-based positions (characters),
    /// the trimmed source line.
    pub(super) fn place(&self, lines: &mut Lines, uri: &str, range: &Value) -> Value {
        let path = Url::parse(uri).ok().and_then(|u| u.to_file_path().ok());
        let (line, character) = self.point(lines, path.as_deref(), &range["start"]);
        let (end_line, end_character) = self.point(lines, path.as_deref(), &range["end"]);
        let text = path.as_deref().and_then(|p| {
            lines
                .line(p, range["start"]["line"].as_u64().unwrap_or(0) as usize)
                .map(|l| l.trim().to_owned())
        });
        json!({
            "path": self.uri_shown(uri),
            "line": line,
            "character": character,
            "endLine": end_line,
            "endCharacter": end_character,
            "text": text,
        })
    }

    /// A 0-based LSP position → 1-based line and character column.
    pub(super) fn point(
        &self,
        lines: &mut Lines,
        path: Option<&Path>,
        position: &Value,
    ) -> (u64, u64) {
        let line = position["line"].as_u64().unwrap_or(0);
        let units = position["character"].as_u64().unwrap_or(0);
        let column = path
            .and_then(|p| lines.line(p, line as usize))
            .map_or(units + 1, |text| {
                u64::from(column_of(&text, u32::try_from(units).unwrap_or(u32::MAX)))
            });
        (line + 1, column)
    }

    pub(super) fn symbol(&self, lines: &mut Lines, s: &Symbol) -> Value {
        let mut place = self.place(lines, &s.uri, &s.range);
        place["name"] = json!(s.name);
        place["kind"] = json!(s.kind);
        if let Some(detail) = &s.detail {
            place["detail"] = json!(detail);
        }
        if let Some(container) = &s.container {
            place["container"] = json!(container);
        }
        place["server"] = json!(s.server);
        place
    }

    pub(super) fn diagnostic(
        &self,
        lines: &mut Lines,
        uri: &str,
        d: &Value,
        server: &str,
    ) -> Value {
        let mut place = self.place(lines, uri, &d["range"]);
        let severity = d["severity"]
            .as_u64()
            .and_then(|s| SEVERITIES.get((s as usize).wrapping_sub(1)))
            .copied();
        place["severity"] = json!(severity);
        place["message"] = d["message"].clone();
        place["source"] = d["source"].clone();
        place["code"] = d["code"].clone();
        place["server"] = json!(server);
        place
    }

    /// A diagnostic argument → the server's own diagnostic when one matches
    /// (by message and start, in this tool's coordinates or LSP's), else
    /// converted from this tool's coordinates.
    pub(super) fn diagnostic_in(&self, doc: &Document, given: &Value, known: &[Value]) -> Value {
        let (line, character) = (
            given["range"]["start"]["line"].as_u64(),
            given["range"]["start"]["character"].as_u64(),
        );
        let mut lines = Lines::default();
        let matching = known.iter().find(|k| {
            if k["message"] != given["message"] {
                return false;
            }
            let ours = self.point(&mut lines, Some(&doc.path), &k["range"]["start"]);
            let raw = (
                k["range"]["start"]["line"].as_u64().unwrap_or(0),
                k["range"]["start"]["character"].as_u64().unwrap_or(0),
            );
            let start = (line.unwrap_or(0), character.unwrap_or(0));
            line.is_none() || start == ours || start == raw
        });
        if let Some(known) = matching {
            return known.clone();
        }
        let convert = |p: &Value| -> Value {
            let line = whole(p["line"].as_f64()).unwrap_or(1);
            let column = whole(p["character"].as_f64()).unwrap_or(1);
            let (line, character) = to_lsp_position(&doc.path, &doc.text, line, column)
                .unwrap_or((line - 1, column - 1));
            json!({ "line": line, "character": character })
        };
        let severity = given["severity"]
            .as_str()
            .and_then(|s| SEVERITIES.iter().position(|n| *n == s))
            .map(|i| i + 1);
        let mut d = json!({
            "range": { "start": convert(&given["range"]["start"]), "end": convert(&given["range"]["end"]) },
            "message": given["message"],
        });
        if let Some(severity) = severity {
            d["severity"] = json!(severity);
        }
        for key in ["code", "source"] {
            if !given[key].is_null() {
                d[key] = given[key].clone();
            }
        }
        d
    }

    /// A call hierarchy item from a server → this tool's form, signed.
    pub(super) fn item_out(&self, lines: &mut Lines, item: &Value, server: &str) -> Option<Value> {
        let uri = item["uri"].as_str()?;
        let name = item["name"].as_str()?;
        let range = item.get("range").filter(|r| r.is_object())?;
        let selection = item
            .get("selectionRange")
            .filter(|r| r.is_object())
            .unwrap_or(range);
        let path = Url::parse(uri).ok().and_then(|u| u.to_file_path().ok());
        let convert = |lines: &mut Lines, r: &Value| {
            let (sl, sc) = self.point(lines, path.as_deref(), &r["start"]);
            let (el, ec) = self.point(lines, path.as_deref(), &r["end"]);
            json!({ "start": { "line": sl, "character": sc }, "end": { "line": el, "character": ec } })
        };
        let mut out = json!({
            "name": name,
            "kind": symbol_kind(&item["kind"]),
            "rawKind": item["kind"],
            "uri": uri,
            "range": convert(lines, range),
            "selectionRange": convert(lines, selection),
            "serverName": server,
        });
        if let Some(detail) = item["detail"].as_str() {
            out["detail"] = json!(detail);
        }
        if !item["data"].is_null() {
            out["data"] = item["data"].clone();
        }
        out["path"] = json!(self.uri_shown(uri));
        out["text"] = json!(path.as_deref().and_then(|p| {
            lines
                .line(p, selection["start"]["line"].as_u64().unwrap_or(0) as usize)
                .map(|l| l.trim().to_owned())
        }));
        if let Some(text) = path.as_deref().and_then(|p| lines.text(p)) {
            out["documentRevision"] = json!(revision(server, item, &text));
        }
        Some(out)
    }

    /// A call hierarchy item argument → the item to send to `server`;
    /// refused when it is stale (its file changed) or not one of ours.
    pub(super) fn item_in(
        &self,
        given: &Value,
        doc: &Document,
        server: &str,
    ) -> Result<Value, Refused> {
        let stale = || {
            Refused(format!(
                "the callHierarchyItem for {} is stale or was not made by prepareCallHierarchy ({} changed since, or the item was edited): call prepareCallHierarchy again",
                given["name"].as_str().unwrap_or("?"),
                self.shown(&doc.path)
            ))
        };
        let convert = |r: &Value| -> Result<Value, Refused> {
            let point = |p: &Value| -> Result<Value, Refused> {
                let line = whole(p["line"].as_f64()).ok_or_else(stale)?;
                let column = whole(p["character"].as_f64()).ok_or_else(stale)?;
                let (line, character) =
                    to_lsp_position(&doc.path, &doc.text, line, column).map_err(|_| stale())?;
                Ok(json!({ "line": line, "character": character }))
            };
            Ok(json!({ "start": point(&r["start"])?, "end": point(&r["end"])? }))
        };
        let mut item = json!({
            "name": given["name"],
            "kind": given["rawKind"].as_u64().unwrap_or(12),
            "uri": given["uri"],
            "range": convert(&given["range"])?,
            "selectionRange": convert(&given["selectionRange"])?,
        });
        if let Some(detail) = given["detail"].as_str() {
            item["detail"] = json!(detail);
        }
        if !given["data"].is_null() {
            item["data"] = given["data"].clone();
        }
        let signed_by = given["serverName"].as_str().unwrap_or(server);
        if given["documentRevision"].as_str() != Some(&revision(signed_by, &item, &doc.text)) {
            return Err(stale());
        }
        Ok(item)
    }

    /// A `CodeAction` or a bare `Command`: its title, kind, and the edits
    /// it makes — its `edit`, or a `WorkspaceEdit` among its command's
    /// arguments (clangd's `applyFix` carries its fix that way).
    pub(super) fn action(&self, lines: &mut Lines, action: &Value) -> Value {
        // A bare `Command` has a string `command`.
        let command = if action["command"].is_string() {
            Some(action)
        } else {
            Some(&action["command"]).filter(|c| c.is_object())
        };
        let carried = command
            .and_then(|c| c["arguments"].as_array())
            .into_iter()
            .flatten()
            .filter(|a| a["changes"].is_object() || a["documentChanges"].is_array());
        let mut edits = Vec::new();
        for edit in std::iter::once(&action["edit"]).chain(carried) {
            self.edits(lines, edit, &mut edits);
        }
        let mut out = json!({ "title": action["title"] });
        if let Some(kind) = action["kind"].as_str() {
            out["kind"] = json!(kind);
        }
        if action["isPreferred"] == json!(true) {
            out["isPreferred"] = json!(true);
        }
        if !edits.is_empty() {
            out["edits"] = json!(edits);
        }
        if let Some(command) = command {
            out["command"] = json!({
                "command": command["command"],
                "arguments": command["arguments"],
            });
        }
        if let Some(reason) = action["disabled"]["reason"].as_str() {
            out["disabled"] = json!(reason);
        }
        out
    }

    /// The text edits of a `WorkspaceEdit` (`changes` or `documentChanges`),
    /// each a location with its `newText`.
    fn edits(&self, lines: &mut Lines, edit: &Value, out: &mut Vec<Value>) {
        let mut add = |uri: &str, list: &Value| {
            for edit in list.as_array().into_iter().flatten() {
                let mut place = self.place(lines, uri, &edit["range"]);
                place["newText"] = edit["newText"].clone();
                out.push(place);
            }
        };
        for (uri, list) in edit["changes"].as_object().into_iter().flatten() {
            add(uri, list);
        }
        for change in edit["documentChanges"].as_array().into_iter().flatten() {
            if let Some(uri) = change["textDocument"]["uri"].as_str() {
                add(uri, &change["edits"]);
            }
        }
    }
}

/// A freshness token for a call hierarchy item: its server, the item as
/// LSP has it, and a digest of its file's text.
pub(super) fn revision(server: &str, item: &Value, text: &str) -> String {
    let signed = json!([
        server,
        item["name"],
        item["kind"],
        item["uri"],
        item["range"],
        item["selectionRange"],
        item["data"],
        sha256_hex(text.as_bytes()),
    ]);
    sha256_hex(canonical_json(&signed).as_bytes())[..32].to_owned()
}

/// Lines of files, read once per call.
#[derive(Default)]
pub(super) struct Lines {
    files: HashMap<PathBuf, Option<Arc<String>>>,
}

impl Lines {
    fn text(&mut self, path: &Path) -> Option<Arc<String>> {
        self.files
            .entry(path.to_owned())
            .or_insert_with(|| std::fs::read_to_string(path).ok().map(Arc::new))
            .clone()
    }

    fn line(&mut self, path: &Path, n: usize) -> Option<String> {
        let text = self.text(path)?;
        text.split('\n')
            .nth(n)
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_changes_with_the_file_text_and_the_item() {
        let item =
            json!({"name": "f", "kind": 12, "uri": "file:///x", "range": {}, "selectionRange": {}});
        let one = revision("s", &item, "fn f");
        assert_eq!(one, revision("s", &item, "fn f"));
        assert_ne!(one, revision("s", &item, "fn f\n"));
        assert_ne!(one, revision("t", &item, "fn f"));
        let mut moved = item.clone();
        moved["name"] = json!("g");
        assert_ne!(one, revision("s", &moved, "fn f"));
    }
}
