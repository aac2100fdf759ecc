//! The shapes LSP answers come in (a location or a list of them or links,
//! hover contents of three kinds, symbol trees or lists), read into plain
//! data.

use serde_json::{Value, json};

/// The LSP `SymbolKind` names, 1-based.
pub(super) const SYMBOL_KINDS: [&str; 26] = [
    "File",
    "Module",
    "Namespace",
    "Package",
    "Class",
    "Method",
    "Property",
    "Field",
    "Constructor",
    "Enum",
    "Interface",
    "Function",
    "Variable",
    "Constant",
    "String",
    "Number",
    "Boolean",
    "Array",
    "Object",
    "Key",
    "Null",
    "EnumMember",
    "Struct",
    "Event",
    "Operator",
    "TypeParameter",
];

/// The LSP `DiagnosticSeverity` names, 1-based.
pub(super) const SEVERITIES: [&str; 4] = ["error", "warning", "information", "hint"];

/// `Location`, `Location[]`, `LocationLink[]` or null → (uri, range).
pub(super) fn locations_of(raw: &Value) -> Vec<(String, Value)> {
    as_list(raw)
        .into_iter()
        .filter_map(|l| {
            let uri = l["uri"].as_str().or_else(|| l["targetUri"].as_str())?;
            let range = ["range", "targetSelectionRange", "targetRange"]
                .iter()
                .map(|k| &l[*k])
                .find(|r| r.is_object())?;
            Some((uri.to_owned(), range.clone()))
        })
        .collect()
}

/// An answer with nothing in it (null, `[]`, a hover without contents).
pub(super) fn is_empty(answer: &Value) -> bool {
    match answer {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(o) if o.contains_key("contents") => {
            hover_text(&answer["contents"]).trim().is_empty()
        }
        _ => false,
    }
}

pub(super) fn as_list(raw: &Value) -> Vec<&Value> {
    match raw {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        one => vec![one],
    }
}

/// Hover `contents` (`MarkupContent`, `MarkedString` or a list of them) as
/// text, markdown kept.
pub(super) fn hover_text(contents: &Value) -> String {
    match contents {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(hover_text)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n"),
        Value::Object(o) => {
            let value = o.get("value").and_then(Value::as_str).unwrap_or_default();
            match o.get("language").and_then(Value::as_str) {
                Some(language) if !language.is_empty() => {
                    format!("```{language}\n{value}\n```")
                }
                _ => value.to_owned(),
            }
        }
        _ => String::new(),
    }
}

/// A symbol in any of LSP's shapes.
pub(super) struct Symbol {
    pub(super) name: String,
    pub(super) kind: Option<String>,
    pub(super) detail: Option<String>,
    pub(super) container: Option<String>,
    pub(super) uri: String,
    pub(super) range: Value,
    pub(super) server: String,
    pub(super) depth: usize,
}

pub(super) fn symbol_kind(kind: &Value) -> Option<String> {
    match kind {
        Value::Number(n) => n.as_u64().map(|k| {
            SYMBOL_KINDS
                .get((k as usize).wrapping_sub(1))
                .map_or_else(|| k.to_string(), |s| (*s).to_owned())
        }),
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        _ => None,
    }
}

/// `DocumentSymbol` trees (depth-first, children after their parent) or
/// `SymbolInformation` lists, flattened.
pub(super) fn flatten_symbols(
    server: &str,
    items: &[Value],
    uri: &str,
    container: Option<&str>,
    depth: usize,
    out: &mut Vec<Symbol>,
) {
    for item in items {
        let Some(name) = item["name"].as_str() else {
            continue;
        };
        let (uri, range) = if item["selectionRange"].is_object() {
            (uri.to_owned(), item["selectionRange"].clone())
        } else if item["range"].is_object() {
            (uri.to_owned(), item["range"].clone())
        } else if let Some(u) = item["location"]["uri"].as_str() {
            (u.to_owned(), item["location"]["range"].clone())
        } else {
            continue;
        };
        out.push(Symbol {
            name: name.to_owned(),
            kind: symbol_kind(&item["kind"]),
            detail: item["detail"]
                .as_str()
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
            container: item["containerName"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| container.map(str::to_owned)),
            uri: uri.clone(),
            range,
            server: server.to_owned(),
            depth,
        });
        if let Some(children) = item["children"].as_array() {
            flatten_symbols(server, children, &uri, Some(name), depth + 1, out);
        }
    }
}

/// A `SymbolInformation` or `WorkspaceSymbol` (whose location may lack a
/// range: the file's start).
pub(super) fn workspace_symbol(item: &Value, server: &str) -> Option<Symbol> {
    let uri = item["location"]["uri"].as_str()?;
    let range = if item["location"]["range"].is_object() {
        item["location"]["range"].clone()
    } else {
        json!({ "start": { "line": 0, "character": 0 }, "end": { "line": 0, "character": 0 } })
    };
    Some(Symbol {
        name: item["name"].as_str()?.to_owned(),
        kind: symbol_kind(&item["kind"]),
        detail: None,
        container: item["containerName"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
        uri: uri.to_owned(),
        range,
        server: server.to_owned(),
        depth: 0,
    })
}

/// Whether two LSP ranges share a position (touching counts).
pub(super) fn overlaps(a: &Value, b: &Value) -> bool {
    let key = |p: &Value| {
        (
            p["line"].as_u64().unwrap_or(0),
            p["character"].as_u64().unwrap_or(0),
        )
    };
    key(&a["start"]) <= key(&b["end"]) && key(&b["start"]) <= key(&a["end"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_read_every_lsp_shape() {
        let range =
            json!({"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 4}});
        let one = json!({"uri": "file:///a", "range": range});
        let link =
            json!({"targetUri": "file:///b", "targetRange": {}, "targetSelectionRange": range});
        assert_eq!(locations_of(&one).len(), 1);
        assert_eq!(locations_of(&json!([one, link]))[1].0, "file:///b");
        assert!(locations_of(&Value::Null).is_empty());
    }

    #[test]
    fn hover_contents_of_every_shape_become_markdown_text() {
        assert_eq!(
            hover_text(&json!({"kind": "markdown", "value": "**x**"})),
            "**x**"
        );
        assert_eq!(
            hover_text(&json!([{"language": "c", "value": "int x"}, "doc"])),
            "```c\nint x\n```\n\ndoc"
        );
        assert_eq!(hover_text(&Value::Null), "");
    }

    #[test]
    fn symbol_kinds_have_names() {
        assert_eq!(symbol_kind(&json!(12)).as_deref(), Some("Function"));
        assert_eq!(symbol_kind(&json!(26)).as_deref(), Some("TypeParameter"));
        assert_eq!(symbol_kind(&json!(99)).as_deref(), Some("99"));
    }

    #[test]
    fn document_symbols_flatten_depth_first_with_their_container() {
        let r = |l: u64| json!({"start": {"line": l, "character": 0}, "end": {"line": l, "character": 1}});
        let tree = json!([{"name": "A", "kind": 5, "range": r(0), "selectionRange": r(0),
                           "children": [{"name": "m", "kind": 6, "range": r(1), "selectionRange": r(1)}]},
                          {"name": "f", "kind": 12, "range": r(3), "selectionRange": r(3)}]);
        let mut out = Vec::new();
        flatten_symbols(
            "s",
            tree.as_array().unwrap(),
            "file:///x",
            None,
            0,
            &mut out,
        );
        let seen: Vec<(&str, usize, Option<&str>)> = out
            .iter()
            .map(|s| (s.name.as_str(), s.depth, s.container.as_deref()))
            .collect();
        assert_eq!(seen, [("A", 0, None), ("m", 1, Some("A")), ("f", 0, None)]);
    }
}
