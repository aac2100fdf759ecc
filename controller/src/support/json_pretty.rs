//! JSON text indented exactly as `serde_json::to_string_pretty` indents it,
//! without parsing it into values: `steward status -o json` prints the
//! controller's compact document this way (at 500 servers, parsing the
//! ~1 MB document into a `WorkspaceStatus` and writing it back took ~10 ms,
//! ten times what the controller takes to send it).
//!
//! The input must be valid JSON (it is what serde_json wrote); whitespace
//! outside strings is dropped and strings, numbers and literals are copied
//! byte for byte.

/// `json` indented by two spaces per level, `": "` after keys, `[]` and
/// `{}` for empty containers.
pub fn pretty(json: &str) -> String {
    let bytes = json.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len() + bytes.len() / 2);
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                let end = string_end(bytes, i);
                out.extend_from_slice(&bytes[i..end]);
                i = end;
                continue;
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                let next = skip_space(bytes, i + 1);
                if bytes.get(next) == Some(&close) {
                    out.extend_from_slice(&[b, close]);
                    i = next + 1;
                    continue;
                }
                depth += 1;
                out.push(b);
                newline(&mut out, depth);
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b',');
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => out.push(b),
        }
        i += 1;
    }
    // Only whole runs of the input's bytes and ASCII were written.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The index just past the string that opens at `start` (its closing quote
/// included; the end of the input when it is not closed).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while let Some(off) = memchr::memchr2(b'"', b'\\', &bytes[i.min(bytes.len())..]) {
        i += off;
        if bytes[i] == b'\\' {
            i += 2;
        } else {
            return i + 1;
        }
    }
    bytes.len()
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

fn newline(out: &mut Vec<u8>, depth: usize) {
    out.push(b'\n');
    out.resize(out.len() + 2 * depth, b' ');
}

#[cfg(test)]
mod tests {
    use super::pretty;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn same_as_serde(v: &Value) {
        let compact = serde_json::to_string(v).unwrap();
        assert_eq!(pretty(&compact), serde_json::to_string_pretty(v).unwrap());
    }

    #[test]
    fn indents_as_serde_json_does() {
        same_as_serde(&json!({
            "a": [], "b": {}, "c": [1, -2.5e-7, true, null, "x"],
            "quote \" and \\ back": "{[,:]}\u{1}\u{e9}\u{1f600}",
            "nested": {"d": [{"e": [[]]}, {}]}, "": ""
        }));
        same_as_serde(&json!([]));
        same_as_serde(&json!("plain"));
        same_as_serde(&json!(12));
    }

    #[test]
    fn whitespace_of_the_input_is_not_kept() {
        let text = " { \"a\" : [ 1 , { } , [ ] ] ,\n\"b\":\t\"x y\" } ";
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(pretty(text), serde_json::to_string_pretty(&v).unwrap());
    }

    fn values() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".*".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map(".*", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_indents_as_serde_json_does(v in values()) {
            same_as_serde(&v);
        }
    }
}
