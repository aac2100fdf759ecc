//! What a program gets from a tool's answer: the value inside the MCP result
//! envelope, never the envelope itself.
//!
//! `structuredContent` as it is; else the content: one text item parsed when
//! it is JSON, else as a string; several text items joined with newlines;
//! binary items (images, audio, blobs) as descriptors `{type, mimeType,
//! bytes}`; a mix as an array of those. A result with `isError` is the
//! tool's text, which the program gets as a thrown `ToolError`.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// The value of a successful result.
pub fn value(result: &CallToolResult) -> Value {
    if let Some(structured) = &result.structured_content {
        return structured.clone();
    }
    let items: Vec<&ContentBlock> = result.content.iter().collect();
    if items.is_empty() {
        return Value::Null;
    }
    let texts: Option<Vec<&str>> = items.iter().map(|c| text_of(c)).collect();
    match texts {
        Some(texts) if texts.len() == 1 => {
            serde_json::from_str(texts[0]).unwrap_or_else(|_| Value::String(texts[0].to_owned()))
        }
        Some(texts) => Value::String(texts.join("\n")),
        None => Value::Array(items.iter().map(|c| item(c)).collect()),
    }
}

/// The message of a tool error: its text items, joined.
pub fn error_text(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result.content.iter().filter_map(|c| text_of(c)).collect();
    if texts.is_empty() {
        return match &result.structured_content {
            Some(structured) => structured.to_string(),
            None => "the tool reported an error without a message".to_owned(),
        };
    }
    texts.join("\n")
}

fn text_of(content: &ContentBlock) -> Option<&str> {
    content.as_text().map(|t| t.text.as_str())
}

/// One content item of a mixed answer: text as a string, anything else
/// described by its wire form (binary data by its size).
fn item(content: &ContentBlock) -> Value {
    if let Some(text) = text_of(content) {
        return Value::String(text.to_owned());
    }
    let wire = serde_json::to_value(content).unwrap_or(Value::Null);
    let field = |v: &Value, key: &str| v.get(key).cloned().unwrap_or(Value::Null);
    let kind = field(&wire, "type");
    match kind.as_str() {
        Some("image" | "audio") => json!({
            "type": kind,
            "mimeType": field(&wire, "mimeType"),
            "bytes": decoded_len(wire.get("data")),
        }),
        Some("resource") => {
            let resource = field(&wire, "resource");
            let mut described = json!({
                "type": "resource",
                "uri": field(&resource, "uri"),
                "mimeType": field(&resource, "mimeType"),
            });
            match resource.get("text") {
                Some(text) => described["text"] = text.clone(),
                None => described["bytes"] = json!(decoded_len(resource.get("blob"))),
            }
            described
        }
        Some("resource_link") => json!({
            "type": "resource_link",
            "uri": field(&wire, "uri"),
            "name": field(&wire, "name"),
            "mimeType": field(&wire, "mimeType"),
        }),
        _ => wire,
    }
}

/// The size of base64 data once decoded.
fn decoded_len(data: Option<&Value>) -> usize {
    let data = data.and_then(Value::as_str).unwrap_or_default();
    let digits = data.trim().trim_end_matches('=').len();
    digits * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(content: Vec<ContentBlock>) -> CallToolResult {
        CallToolResult::success(content)
    }

    #[test]
    fn structured_content_comes_as_it_is() {
        let mut r = result(vec![ContentBlock::text("{\"ignored\": true}")]);
        r.structured_content = Some(json!({"sum": 3}));
        assert_eq!(value(&r), json!({"sum": 3}));
    }

    #[test]
    fn one_json_text_is_parsed_other_text_is_a_string_and_several_are_joined() {
        assert_eq!(
            value(&result(vec![ContentBlock::text("{\"a\": [1, 2]}")])),
            json!({"a": [1, 2]})
        );
        assert_eq!(
            value(&result(vec![ContentBlock::text("Echo: hi")])),
            json!("Echo: hi")
        );
        assert_eq!(
            value(&result(vec![
                ContentBlock::text("one"),
                ContentBlock::text("two")
            ])),
            json!("one\ntwo")
        );
        assert_eq!(value(&result(vec![])), Value::Null);
    }

    #[test]
    fn binary_content_becomes_descriptors() {
        // 70 bytes, in base64.
        let png = "A".repeat(94) + "==";
        let r = result(vec![
            ContentBlock::text("a tiny image:"),
            ContentBlock::image(png, "image/png"),
        ]);
        assert_eq!(
            value(&r),
            json!(["a tiny image:", {"type": "image", "mimeType": "image/png", "bytes": 70}])
        );
    }

    #[test]
    fn an_error_is_its_text() {
        let r = CallToolResult::error(vec![ContentBlock::text("no such city")]);
        assert_eq!(error_text(&r), "no such city");
        let r = CallToolResult::error(vec![]);
        assert!(error_text(&r).contains("without a message"));
    }
}
