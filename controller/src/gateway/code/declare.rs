//! TypeScript declarations of tools, from their JSON Schemas (`describe_tools`).
//!
//! Per tool: a method of its server's interface (`tools.SERVER.TOOL(args)`),
//! one interface for its input and, when it has an `outputSchema`, one for
//! its output (else its result is `unknown`: text, parsed when it is JSON).
//! JSDoc comes from the descriptions; optional properties get `?`, enums
//! become unions of literals, local `$ref`s are followed (a cycle ends in
//! `unknown`). Whatever the schema, the text compiles with `tsc --noEmit`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// How deep nested schemas and `$ref`s are followed.
const DEPTH: usize = 8;
/// The most enum members spelt out (more: their base type).
const ENUM_MEMBERS: usize = 40;

/// One tool to declare.
#[derive(Debug, Clone, Copy)]
pub struct ToolDecl<'a> {
    pub server: &'a str,
    /// The tool's own name (`tools.SERVER[tool]`).
    pub tool: &'a str,
    /// Its exposed name (`callTool(exposed, ...)`).
    pub exposed: &'a str,
    pub description: Option<&'a str>,
    pub input: &'a Map<String, Value>,
    pub output: Option<&'a Map<String, Value>>,
}

/// The declarations of `tools` (grouped by server, in the order given).
pub fn declare(tools: &[ToolDecl<'_>]) -> String {
    let mut names = TypeNames::default();
    let mut by_server: BTreeMap<&str, Vec<Declared<'_, '_>>> = BTreeMap::new();
    for tool in tools {
        let base = names.pascal(&[tool.server, tool.tool]);
        // Arguments without properties are any object, said inline.
        let args = (!is_free_object(tool.input)).then(|| names.unique(&format!("{base}Args")));
        let result = tool.output.map(|_| names.unique(&format!("{base}Result")));
        by_server
            .entry(tool.server)
            .or_default()
            .push(Declared { tool, args, result });
    }
    let mut out = String::from("declare var tools: Tools;\n");
    let server_types: Vec<(&str, String)> = by_server
        .keys()
        .map(|server| {
            (
                *server,
                names.unique(&format!("{}Tools", names.pascal(&[server]))),
            )
        })
        .collect();
    out.push_str("interface Tools {\n");
    for (server, type_name) in &server_types {
        let _ = writeln!(out, "  {}: {type_name};", property_name(server));
    }
    out.push_str("}\n");
    for (server, type_name) in &server_types {
        let entries = &by_server[server];
        let _ = writeln!(
            out,
            "/** MCP server \"{}\": await tools{}.NAME(args). A result without a type is the tool's text, parsed when it is JSON. */",
            comment_text(server),
            accessor(server)
        );
        let _ = writeln!(out, "interface {type_name} {{");
        for entry in entries {
            let tool = entry.tool;
            let mut doc = tool.description.unwrap_or_default().trim().to_owned();
            let conventional = format!("{}__{}", tool.server, tool.tool);
            if tool.exposed != conventional {
                doc.push_str(&format!("\ncallTool(\"{}\", args)", tool.exposed));
            }
            jsdoc(&mut out, 1, &doc);
            let optional = if required_nothing(tool.input) {
                "?"
            } else {
                ""
            };
            let args = entry.args.as_deref().unwrap_or("Record<string, unknown>");
            let result = entry.result.as_deref().unwrap_or("unknown");
            let _ = writeln!(
                out,
                "  {}(args{optional}: {args}): Promise<{result}>;",
                property_name(tool.tool)
            );
        }
        out.push_str("}\n");
        for entry in entries {
            if let Some(args) = &entry.args {
                let input = Value::Object(entry.tool.input.clone());
                declare_type(&mut out, args, &input, &input);
            }
            if let (Some(result), Some(output)) = (&entry.result, entry.tool.output) {
                let output = Value::Object(output.clone());
                declare_type(&mut out, result, &output, &output);
            }
        }
    }
    out
}

/// A tool and the names of its types (none: said inline).
struct Declared<'a, 'b> {
    tool: &'b ToolDecl<'a>,
    args: Option<String>,
    result: Option<String>,
}

/// An object schema that names no property (any object).
fn is_free_object(schema: &Map<String, Value>) -> bool {
    let no_properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|p| p.is_empty());
    no_properties
        && schema.get("type").is_none_or(|t| t == "object")
        && [
            "$ref",
            "anyOf",
            "oneOf",
            "allOf",
            "additionalProperties",
            "enum",
            "const",
        ]
        .iter()
        .all(|k| !schema.contains_key(*k))
}

/// The one-line type of a tool's arguments, for an error message
/// (`{a: number; b?: string}`), at most `limit` characters.
pub fn shape(input: &Map<String, Value>, limit: usize) -> String {
    let root = Value::Object(input.clone());
    let mut text = String::new();
    Writer {
        root: &root,
        out: &mut text,
        inline: true,
    }
    .ty(&root, 0, 0);
    if text.chars().count() > limit {
        let cut: String = text.chars().take(limit.saturating_sub(1)).collect();
        return format!("{cut}…");
    }
    text
}

/// `interface NAME {...}` for an object schema, else `type NAME = ...;`.
fn declare_type(out: &mut String, name: &str, schema: &Value, root: &Value) {
    let mut body = String::new();
    let writer_object = is_plain_object(schema, root);
    let mut w = Writer {
        root,
        out: &mut body,
        inline: false,
    };
    w.ty(schema, 0, 0);
    let description = schema.get("description").and_then(Value::as_str);
    if let Some(description) = description {
        jsdoc(out, 0, description);
    }
    if writer_object {
        let _ = writeln!(out, "interface {name} {body}");
    } else {
        let _ = writeln!(out, "type {name} = {body};");
    }
}

/// Whether `schema` renders as an object literal type (`{...}`).
fn is_plain_object(schema: &Value, root: &Value) -> bool {
    let schema = follow(schema, root);
    schema
        .get("properties")
        .is_some_and(|p| p.as_object().is_some_and(|p| !p.is_empty()))
        && schema.get("type").is_none_or(|t| t == "object")
        && schema.get("enum").is_none()
        && schema.get("const").is_none()
        && schema.get("anyOf").is_none()
        && schema.get("oneOf").is_none()
        && schema.get("allOf").is_none()
        && schema
            .get("additionalProperties")
            .is_none_or(|a| !a.is_object())
}

fn required_nothing(input: &Map<String, Value>) -> bool {
    input
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(|r| r.is_empty())
}

/// The target of a local `$ref` (`#/...`), followed up to [`DEPTH`] times.
fn follow<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..DEPTH {
        let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        else {
            break;
        };
        schema = target;
    }
    schema
}

struct Writer<'a> {
    root: &'a Value,
    out: &'a mut String,
    /// One line, no comments (for messages).
    inline: bool,
}

impl Writer<'_> {
    /// The type of `schema` at nesting `level` (indentation), `depth`
    /// schemas deep.
    fn ty(&mut self, schema: &Value, level: usize, depth: usize) {
        if depth > DEPTH {
            self.out.push_str("unknown");
            return;
        }
        let schema = match schema {
            Value::Bool(false) => {
                self.out.push_str("never");
                return;
            }
            Value::Object(_) => schema,
            _ => {
                self.out.push_str("unknown");
                return;
            }
        };
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let target = reference
                .strip_prefix('#')
                .and_then(|pointer| self.root.pointer(pointer));
            match target {
                Some(target) => self.ty(target, level, depth + 1),
                None => self.out.push_str("unknown"),
            }
            return;
        }
        if let Some(constant) = schema.get("const") {
            self.out.push_str(&literal(constant));
            return;
        }
        if let Some(members) = schema.get("enum").and_then(Value::as_array)
            && !members.is_empty()
            && members.len() <= ENUM_MEMBERS
            && members.iter().all(|m| !m.is_object() && !m.is_array())
        {
            let union: Vec<String> = members.iter().map(literal).collect();
            self.out.push_str(&union.join(" | "));
            return;
        }
        for (keyword, joiner) in [("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")] {
            if let Some(parts) = schema.get(keyword).and_then(Value::as_array)
                && !parts.is_empty()
            {
                let own = own_type(schema);
                let mut pieces = Vec::new();
                for part in parts {
                    let mut piece = String::new();
                    Writer {
                        root: self.root,
                        out: &mut piece,
                        inline: self.inline,
                    }
                    .ty(part, level, depth + 1);
                    pieces.push(parenthesized(piece));
                }
                if let Some(own) = own {
                    // Properties beside the combination: both hold.
                    let mut base = String::new();
                    let mut bare = schema.as_object().cloned().unwrap_or_default();
                    bare.remove(keyword);
                    bare.insert("type".into(), Value::String(own.to_owned()));
                    Writer {
                        root: self.root,
                        out: &mut base,
                        inline: self.inline,
                    }
                    .ty(&Value::Object(bare), level, depth + 1);
                    let _ = write!(
                        self.out,
                        "{} & ({})",
                        parenthesized(base),
                        pieces.join(joiner)
                    );
                } else {
                    self.out.push_str(&pieces.join(joiner));
                }
                return;
            }
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if schema.get("properties").is_some() => vec!["object"],
            _ if schema.get("items").is_some() => vec!["array"],
            _ => Vec::new(),
        };
        if types.is_empty() {
            self.out.push_str("unknown");
            return;
        }
        let mut seen = BTreeSet::new();
        let mut first = true;
        for t in types {
            let mut piece = String::new();
            let mut w = Writer {
                root: self.root,
                out: &mut piece,
                inline: self.inline,
            };
            match t {
                "string" => piece.push_str("string"),
                "number" | "integer" => piece.push_str("number"),
                "boolean" => piece.push_str("boolean"),
                "null" => piece.push_str("null"),
                "array" => w.array(schema, level, depth),
                "object" => w.object(schema, level, depth),
                _ => piece.push_str("unknown"),
            }
            if seen.insert(piece.clone()) {
                if !first {
                    self.out.push_str(" | ");
                }
                first = false;
                self.out.push_str(&piece);
            }
        }
    }

    fn array(&mut self, schema: &Value, level: usize, depth: usize) {
        if let Some(prefix) = schema.get("prefixItems").and_then(Value::as_array) {
            let mut parts = Vec::new();
            for item in prefix {
                let mut piece = String::new();
                self.nested(&mut piece).ty(item, level, depth + 1);
                parts.push(piece);
            }
            let _ = write!(self.out, "[{}]", parts.join(", "));
            return;
        }
        match schema.get("items") {
            Some(items @ Value::Object(_)) => {
                let mut piece = String::new();
                self.nested(&mut piece).ty(items, level, depth + 1);
                if piece.contains(['|', '&']) || piece.contains('\n') {
                    let _ = write!(self.out, "Array<{piece}>");
                } else {
                    let _ = write!(self.out, "{piece}[]");
                }
            }
            _ => self.out.push_str("unknown[]"),
        }
    }

    fn nested<'b>(&'b self, out: &'b mut String) -> Writer<'b> {
        Writer {
            root: self.root,
            out,
            inline: self.inline,
        }
    }

    fn object(&mut self, schema: &Value, level: usize, depth: usize) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        let Some(properties) = properties.filter(|p| !p.is_empty()) else {
            match additional {
                Some(Value::Bool(false)) => self.out.push_str("Record<string, never>"),
                Some(extra @ Value::Object(_)) => {
                    let mut piece = String::new();
                    self.nested(&mut piece).ty(extra, level, depth + 1);
                    let _ = write!(self.out, "Record<string, {piece}>");
                }
                _ => self.out.push_str("Record<string, unknown>"),
            }
            return;
        };
        let required: BTreeSet<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let indent = "  ".repeat(level + 1);
        let members: Vec<(String, String)> = properties
            .iter()
            .map(|(name, property)| {
                let mut piece = String::new();
                self.nested(&mut piece).ty(property, level + 1, depth + 1);
                let optional = if required.contains(name.as_str()) {
                    ""
                } else {
                    "?"
                };
                (
                    format!("{}{optional}: {piece}", property_name(name)),
                    doc_of(property, self.root),
                )
            })
            .collect();
        let extra = matches!(additional, Some(Value::Object(_)));
        if self.inline {
            let mut parts: Vec<String> = members.into_iter().map(|(m, _)| m).collect();
            if extra {
                parts.push("[key: string]: unknown".into());
            }
            let _ = write!(self.out, "{{{}}}", parts.join("; "));
            return;
        }
        self.out.push_str("{\n");
        for (member, doc) in members {
            jsdoc(self.out, level + 1, &doc);
            let _ = writeln!(self.out, "{indent}{member};");
        }
        if extra {
            let _ = writeln!(self.out, "{indent}[key: string]: unknown;");
        }
        let _ = write!(self.out, "{}}}", "  ".repeat(level));
    }
}

/// The `type` a schema with a combination (`anyOf`...) also states.
fn own_type(schema: &Value) -> Option<&str> {
    (schema.get("properties").is_some()).then_some("object")
}

fn parenthesized(piece: String) -> String {
    if piece.contains(" | ") || piece.contains(" & ") {
        format!("({piece})")
    } else {
        piece
    }
}

/// The JSDoc text of a property: its description and what else a caller
/// should know (an integer, bounds, a format, the default).
fn doc_of(property: &Value, root: &Value) -> String {
    let property = follow(property, root);
    let mut doc = property
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut notes = Vec::new();
    if property.get("type").and_then(Value::as_str) == Some("integer") {
        notes.push("integer".to_owned());
    }
    for (keyword, what) in [
        ("minimum", ">="),
        ("maximum", "<="),
        ("minLength", "length >="),
        ("maxLength", "length <="),
        ("minItems", "items >="),
        ("maxItems", "items <="),
    ] {
        if let Some(n) = property.get(keyword).filter(|n| n.is_number()) {
            notes.push(format!("{what} {n}"));
        }
    }
    if let Some(format) = property.get("format").and_then(Value::as_str) {
        notes.push(format!("format {format}"));
    }
    if let Some(default) = property.get("default") {
        notes.push(format!("default {default}"));
    }
    if !notes.is_empty() {
        if !doc.is_empty() {
            doc.push(' ');
        }
        let _ = write!(doc, "({})", notes.join(", "));
    }
    doc
}

/// A JSDoc comment of `text` at `level`; nothing for no text.
fn jsdoc(out: &mut String, level: usize, text: &str) {
    let text = comment_text(text.trim());
    if text.is_empty() {
        return;
    }
    let indent = "  ".repeat(level);
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}/** {} */", lines[0]);
        return;
    }
    let _ = writeln!(out, "{indent}/**");
    for line in lines {
        if line.is_empty() {
            let _ = writeln!(out, "{indent} *");
        } else {
            let _ = writeln!(out, "{indent} * {line}");
        }
    }
    let _ = writeln!(out, "{indent} */");
}

/// Text that cannot end the comment it is in.
fn comment_text(text: &str) -> String {
    text.replace("*/", "*\\/")
}

/// A property key: bare when it is an identifier, else a string literal.
fn property_name(name: &str) -> String {
    if is_identifier(name) {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

/// `.name` or `["name"]`, as a program writes it.
pub fn accessor(name: &str) -> String {
    if is_identifier(name) {
        format!(".{name}")
    } else {
        format!("[{}]", Value::String(name.to_owned()))
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A literal type for a JSON scalar.
fn literal(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        _ => "unknown".to_owned(),
    }
}

/// Type names, each used once.
#[derive(Default)]
struct TypeNames {
    used: BTreeSet<String>,
}

impl TypeNames {
    /// `PascalCase` of the words of `parts` (an identifier).
    fn pascal(&self, parts: &[&str]) -> String {
        let mut name = String::new();
        for word in parts
            .iter()
            .flat_map(|p| p.split(|c: char| !c.is_ascii_alphanumeric()))
            .filter(|w| !w.is_empty())
        {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                name.push(first.to_ascii_uppercase());
                name.push_str(chars.as_str());
            }
        }
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            name.insert(0, 'T');
        }
        name
    }

    fn unique(&mut self, name: &str) -> String {
        let mut candidate = name.to_owned();
        let mut n = 2;
        while !self.used.insert(candidate.clone()) {
            candidate = format!("{name}{n}");
            n += 1;
        }
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_tool_becomes_a_method_with_an_args_interface_and_a_result_type() {
        let input = object(json!({
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "First number"},
                "b": {"type": "integer", "minimum": 0},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "when": {"type": ["string", "null"], "format": "date-time"},
                "nested": {"type": "object", "properties": {"x-y": {"type": "boolean"}}, "required": ["x-y"]}
            },
            "required": ["a", "b"]
        }));
        let output = object(json!({
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"]
        }));
        let text = declare(&[ToolDecl {
            server: "everything",
            tool: "get-sum",
            exposed: "everything__get-sum",
            description: Some("Returns the sum of two numbers */ evil"),
            input: &input,
            output: Some(&output),
        }]);
        insta::assert_snapshot!(text, @r#"
        declare var tools: Tools;
        interface Tools {
          everything: EverythingTools;
        }
        /** MCP server "everything": await tools.everything.NAME(args). A result without a type is the tool's text, parsed when it is JSON. */
        interface EverythingTools {
          /** Returns the sum of two numbers *\/ evil */
          "get-sum"(args: EverythingGetSumArgs): Promise<EverythingGetSumResult>;
        }
        interface EverythingGetSumArgs {
          /** First number */
          a: number;
          /** (integer, >= 0) */
          b: number;
          /** (default "fast") */
          mode?: "fast" | "slow";
          nested?: {
            "x-y": boolean;
          };
          tags?: string[];
          /** (format date-time) */
          when?: string | null;
        }
        interface EverythingGetSumResult {
          sum: number;
        }
        "#);
    }

    #[test]
    fn refs_unions_and_free_objects_are_typed_and_cycles_end() {
        let input = object(json!({
            "type": "object",
            "$defs": {
                "node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}},
                "color": {"enum": ["red", 1, null]}
            },
            "properties": {
                "node": {"$ref": "#/$defs/node"},
                "color": {"$ref": "#/$defs/color"},
                "either": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
                "meta": {"type": "object", "additionalProperties": {"type": "string"}},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
                "free": {}
            }
        }));
        let text = declare(&[ToolDecl {
            server: "my server",
            tool: "9lives",
            exposed: "my_server__9lives",
            description: None,
            input: &input,
            output: None,
        }]);
        assert!(text.contains("  \"my server\": MyServerTools;"), "{text}");
        assert!(
            text.contains("\"9lives\"(args?: MyServer9livesArgs"),
            "{text}"
        );
        assert!(
            text.contains("callTool(\"my_server__9lives\", args)"),
            "{text}"
        );
        assert!(text.contains("color?: \"red\" | 1 | null;"), "{text}");
        assert!(text.contains("either?: string | number[];"), "{text}");
        assert!(text.contains("meta?: Record<string, string>;"), "{text}");
        assert!(text.contains("pair?: [string, number];"), "{text}");
        assert!(text.contains("free?: unknown;"), "{text}");
        assert!(
            text.contains("): Promise<unknown>;"),
            "no output schema: {text}"
        );
        assert!(!text.contains("MyServer9livesResult"), "{text}");
        let free = object(json!({"type": "object"}));
        let text = declare(&[ToolDecl {
            server: "s",
            tool: "ping",
            exposed: "s__ping",
            description: None,
            input: &free,
            output: None,
        }]);
        assert!(
            text.contains("  ping(args?: Record<string, unknown>): Promise<unknown>;"),
            "{text}"
        );
        assert!(!text.contains("PingArgs"), "{text}");
        // The cycle is cut after DEPTH levels.
        assert!(text.matches("next?:").count() <= DEPTH + 1, "{text}");
    }

    #[test]
    fn a_shape_is_one_line_and_bounded() {
        let input = object(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "string", "description": "x"}},
            "required": ["a"]
        }));
        assert_eq!(shape(&input, 200), "{a: number; b?: string}");
        assert_eq!(shape(&input, 10).chars().count(), 10);
    }
}
