//! The readable text of the `lsp` tool's answers: every location as
//! `path:line:col: source line`, kinds and severities by name.

use serde_json::{Value, json};

use super::shapes::SEVERITIES;

/// One compact JSON value per line.
pub(super) fn json_lines<'a>(values: impl Iterator<Item = &'a Value>) -> String {
    values.map(Value::to_string).collect::<Vec<_>>().join("\n")
}

pub(super) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// " (first N shown; raise limit for more)" when results were cut.
pub(super) fn shown_of(shown: usize, total: usize) -> String {
    if shown < total {
        format!(" (first {shown} shown; raise limit for more)")
    } else {
        String::new()
    }
}

/// `path:line:col: source line`.
pub(super) fn place_line(place: &Value) -> String {
    let mut line = format!(
        "{}:{}:{}",
        place["path"].as_str().unwrap_or_default(),
        place["line"],
        place["character"]
    );
    if let Some(text) = place["text"].as_str().filter(|t| !t.is_empty()) {
        line.push_str(": ");
        line.push_str(text);
    }
    line
}

/// `name (Kind) in container — path:line:col: source line`.
pub(super) fn symbol_line(symbol: &Value) -> String {
    let mut line = symbol["name"].as_str().unwrap_or_default().to_owned();
    if let Some(kind) = symbol["kind"].as_str() {
        line.push_str(&format!(" ({kind})"));
    }
    if let Some(container) = symbol["container"].as_str() {
        line.push_str(&format!(" in {container}"));
    }
    line.push_str(" — ");
    line.push_str(&place_line(symbol));
    line
}

/// `name (Kind) detail — path:line:col: source line` of an item.
pub(super) fn item_line(item: &Value) -> String {
    let mut line = item["name"].as_str().unwrap_or_default().to_owned();
    if let Some(kind) = item["kind"].as_str() {
        line.push_str(&format!(" ({kind})"));
    }
    if let Some(detail) = item["detail"].as_str() {
        line.push(' ');
        line.push_str(detail);
    }
    let start = &item["selectionRange"]["start"];
    line.push_str(&format!(
        " — {}:{}:{}",
        item["path"].as_str().unwrap_or_default(),
        start["line"],
        start["character"]
    ));
    if let Some(text) = item["text"].as_str().filter(|t| !t.is_empty()) {
        line.push_str(": ");
        line.push_str(text);
    }
    line
}

/// `path:line:col: severity: message [source code]`, then the source line.
pub(super) fn diagnostic_line(d: &Value) -> String {
    let mut line = format!(
        "{}:{}:{}: {}: {}",
        d["path"].as_str().unwrap_or_default(),
        d["line"],
        d["character"],
        d["severity"].as_str().unwrap_or("diagnostic"),
        d["message"].as_str().unwrap_or_default()
    );
    let code = match &d["code"] {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let origin: Vec<String> = [d["source"].as_str().map(str::to_owned), code]
        .into_iter()
        .flatten()
        .collect();
    if !origin.is_empty() {
        line.push_str(&format!(" [{}]", origin.join(" ")));
    }
    if let Some(text) = d["text"].as_str().filter(|t| !t.is_empty()) {
        line.push_str("\n    ");
        line.push_str(text);
    }
    line
}

/// "2 errors, 1 warning" (only the severities present).
pub(super) fn tally(diagnostics: &[Value]) -> String {
    let mut parts = Vec::new();
    for severity in SEVERITIES {
        let n = diagnostics
            .iter()
            .filter(|d| d["severity"].as_str() == Some(severity))
            .count();
        if n > 0 {
            parts.push(plural(n, severity));
        }
    }
    let other = diagnostics
        .iter()
        .filter(|d| d["severity"].is_null())
        .count();
    if other > 0 {
        parts.push(plural(other, "diagnostic"));
    }
    parts.join(", ")
}

/// `title [kind, preferred]` and its edits (else its command), indented.
pub(super) fn action_lines(action: &Value) -> String {
    let mut line = action["title"].as_str().unwrap_or_default().to_owned();
    let mut tags: Vec<String> = action["kind"]
        .as_str()
        .map(str::to_owned)
        .into_iter()
        .collect();
    if action["isPreferred"] == json!(true) {
        tags.push("preferred".to_owned());
    }
    if let Some(reason) = action["disabled"].as_str() {
        tags.push(format!("disabled: {reason}"));
    }
    if !tags.is_empty() {
        line.push_str(&format!(" [{}]", tags.join(", ")));
    }
    for edit in action["edits"].as_array().into_iter().flatten() {
        line.push_str(&format!(
            "\n   replace {}:{}:{}-{}:{} with {}",
            edit["path"].as_str().unwrap_or_default(),
            edit["line"],
            edit["character"],
            edit["endLine"],
            edit["endCharacter"],
            edit["newText"]
        ));
    }
    if let Some(command) = action["command"]["command"].as_str()
        && action["edits"].is_null()
    {
        line.push_str(&format!(
            "\n   runs the server command {command} (what it changes is not known)"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_are_tallied_by_severity_name() {
        let tallied = tally(&[
            json!({"severity": "error"}),
            json!({"severity": "error"}),
            json!({"severity": "hint"}),
        ]);
        assert_eq!(tallied, "2 errors, 1 hint");
    }
}
