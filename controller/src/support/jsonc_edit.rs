//! Editing JSON-with-comments files in place (jsonc-parser's concrete
//! syntax tree): values go in as [`input`], and what was not edited keeps
//! every byte — comments, key order, formatting.

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::CstInputValue;
use serde_json::Value;

/// A JSON value as the CST editor takes it.
pub fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

/// Comments allowed; `trailing_commas` as the file's readers allow.
pub fn options(trailing_commas: bool) -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: trailing_commas,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}
