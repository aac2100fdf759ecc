//! Canonical JSON and the hashes built on it.
//!
//! Canonical form: object keys sorted recursively (by UTF-8 bytes), array
//! order kept, no insignificant whitespace, serde_json's string escaping. Two
//! documents that differ only in formatting or key order have the same
//! canonical form; any change of a value or of array order changes it.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Write `value` in canonical form.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lowercase hex sha256 of the canonical form of `value`.
pub fn hash_value(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest.iter() {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_sorted_recursively_arrays_kept() {
        let v = json!({"b": 1, "a": {"d": [3, 1, 2], "c": null}});
        assert_eq!(canonical_json(&v), r#"{"a":{"c":null,"d":[3,1,2]},"b":1}"#);
    }

    #[test]
    fn sha256_of_empty_is_well_known() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn escaping_is_stable() {
        let v = json!({"k\"ey": "line\nbreak \u{1F600}"});
        assert_eq!(
            canonical_json(&v),
            "{\"k\\\"ey\":\"line\\nbreak \u{1F600}\"}"
        );
    }
}
