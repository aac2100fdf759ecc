//! JSON with comments (JSONC), parsed into a [`serde_json::Value`] together
//! with the source position of every value and of every object key.
//!
//! This module owns the syntax of every JSON source Steward reads. It accepts
//! exactly what the TypeScript CLI sharing these files accepts
//! (`strip-json-comments` followed by `JSON.parse`): strict JSON plus `//` and
//! `/* */` comments wherever whitespace may appear, and a leading UTF-8 BOM.
//! Everything else (trailing commas, single quotes, unquoted keys, `NaN`,
//! leading zeros, raw control characters in strings, bad escapes) is a
//! [`SyntaxError`] naming what was expected, what was found, and where.
//!
//! Decisions where `JSON.parse` does something a Rust `String` cannot hold or
//! that would surprise a user:
//! - a lone UTF-16 surrogate escape (`"\uD800"`) is an error (JSON.parse keeps
//!   it as an unpaired code unit);
//! - a number too large for an `f64` (`1e400`) is an error (JSON.parse gives
//!   `Infinity`, which JSON cannot hold);
//! - duplicate keys: the last one wins, as in JSON.parse.
//!
//! Positions are 1-based; columns count characters (a tab or a multi-byte
//! character is one column). Only `\n` starts a new line (`\r\n` works as
//! expected; a lone `\r` is not a line break, as in `strip-json-comments`).
//! Everything is linear in the size of the input: positions are computed by a
//! cursor that only moves forward while parsing.
//!
//! Positions are only needed to report a problem, and most loads have none:
//! [`parse`] first tries serde_json on the text with its comments blanked out
//! (same offsets) and builds the position tree only when a position is asked
//! for, by running this module's parser. Whenever serde_json refuses the text
//! (a syntax error, or nesting deeper than its limit), this module's parser
//! decides — so what is accepted, the values produced, and every error
//! message are exactly this parser's (a property test checks both agree).

mod parser;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use self::parser::Parser;
use crate::diagnostic::{Diagnostic, Pos};

/// How many arrays/objects may be nested inside each other.
pub const MAX_DEPTH: usize = 256;

/// A parsed JSONC document: its value and where each part of it was written.
#[derive(Clone)]
pub struct Document {
    pub value: Value,
    /// The text, kept to find positions on demand.
    text: String,
    root: OnceLock<Node>,
    /// Keys written twice in one object (the last one wins): where the
    /// repeated key is, and the key.
    duplicates: Vec<(Pos, String)>,
}

/// Position tree mirroring `Document::value` (not keyed by pointer strings, so
/// building it costs nothing per nesting level).
#[derive(Clone)]
struct Node {
    pos: Pos,
    children: Children,
}

#[derive(Clone)]
enum Children {
    Leaf,
    Array(Vec<Node>),
    Object(HashMap<String, Member>),
}

#[derive(Clone)]
struct Member {
    key: Pos,
    node: Node,
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Document")
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

/// What a pointer lookup found: the deepest node reached, and whether the
/// pointer resolved completely (then `key` is set for object members).
struct Lookup {
    pos: Pos,
    key: Option<Pos>,
    exact: bool,
}

impl Document {
    /// Position of the value at `pointer` (RFC 6901, `""` = root); falls back
    /// to the nearest ancestor that has one. `None` only for a pointer that
    /// is not `""` and does not start with `/`.
    pub fn position(&self, pointer: &str) -> Option<Pos> {
        self.lookup(pointer).map(|l| l.pos)
    }

    /// Position of the *key* of the object member at `pointer` (for "unknown
    /// property" messages); falls back to [`Document::position`] for array
    /// elements, the root, and pointers that do not resolve.
    pub fn key_position(&self, pointer: &str) -> Option<Pos> {
        self.lookup(pointer).map(|l| match (l.exact, l.key) {
            (true, Some(key)) => key,
            _ => l.pos,
        })
    }

    /// Keys written twice in the same object, with the position of the
    /// repetition (JSON.parse keeps the last value, as this parser does).
    pub fn duplicate_keys(&self) -> &[(Pos, String)] {
        &self.duplicates
    }

    /// The position tree, built on first use (the text parsed before, so
    /// parsing it again cannot fail).
    fn root(&self) -> &Node {
        self.root
            .get_or_init(|| match Parser::new(&self.text).document() {
                Ok((_, root)) => root,
                Err(_) => Node {
                    pos: Pos { line: 1, column: 1 },
                    children: Children::Leaf,
                },
            })
    }

    fn lookup(&self, pointer: &str) -> Option<Lookup> {
        if pointer.is_empty() {
            return Some(Lookup {
                pos: self.root().pos,
                key: None,
                exact: true,
            });
        }
        let rest = pointer.strip_prefix('/')?;
        let mut node = self.root();
        let mut key = None;
        for raw in rest.split('/') {
            let next = match &node.children {
                Children::Leaf => None,
                Children::Array(items) => array_index(raw).and_then(|i| items.get(i)),
                Children::Object(members) => {
                    let token = unescape_token(raw);
                    members.get(token.as_str()).map(|m| {
                        key = Some(m.key);
                        &m.node
                    })
                }
            };
            match next {
                Some(child) => {
                    if !matches!(node.children, Children::Object(_)) {
                        key = None;
                    }
                    node = child;
                }
                None => {
                    return Some(Lookup {
                        pos: node.pos,
                        key: None,
                        exact: false,
                    });
                }
            }
        }
        Some(Lookup {
            pos: node.pos,
            key,
            exact: true,
        })
    }
}

/// An RFC 6901 array index: `0` or digits without a leading zero.
fn array_index(token: &str) -> Option<usize> {
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    if ok { token.parse().ok() } else { None }
}

fn unescape_token(token: &str) -> String {
    if token.contains('~') {
        token.replace("~1", "/").replace("~0", "~")
    } else {
        token.to_owned()
    }
}

/// A syntax error: a lowercase fragment saying what was expected and what was
/// found, at the position of the offending character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

impl SyntaxError {
    /// This error as a diagnostic of `file` (pointer: the whole document).
    pub fn into_diagnostic(self, file: impl Into<std::path::PathBuf>) -> Diagnostic {
        Diagnostic::new(file, Some(self.pos), "", self.message)
    }
}

/// Parse JSON with comments. See the module documentation for what is accepted.
pub fn parse(text: &str) -> Result<Document, SyntaxError> {
    if let Some((value, repeated)) = fast_value(text) {
        // Duplicates are rare: only then is the text parsed again to find them.
        let duplicates = if repeated {
            let mut parser = Parser::new(text);
            let _ = parser.document();
            parser.duplicates
        } else {
            Vec::new()
        };
        return Ok(Document {
            value,
            text: text.to_owned(),
            root: OnceLock::new(),
            duplicates,
        });
    }
    let mut parser = Parser::new(text);
    let (value, root) = parser.document()?;
    Ok(Document {
        value,
        text: text.to_owned(),
        root: OnceLock::from(root),
        duplicates: parser.duplicates,
    })
}

/// The value of `text` by serde_json, comments blanked out, and whether an
/// object in it repeats a key; `None` when serde_json refuses it (then this
/// module's parser decides).
fn fast_value(text: &str) -> Option<(Value, bool)> {
    let body = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let body = blank_comments(body)?;
    let value = serde_json::from_str(&body).ok()?;
    let mut de = serde_json::Deserializer::from_str(&body);
    let repeated = serde::de::DeserializeSeed::deserialize(RepeatedKeys, &mut de).unwrap_or(true);
    Some((value, repeated))
}

/// Whether an object of a JSON text repeats a key (a serde pass that keeps
/// no values).
struct RepeatedKeys;

impl<'de> serde::de::DeserializeSeed<'de> for RepeatedKeys {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RepeatedKeys {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut repeated = false;
        while let Some(key) = map.next_key::<String>()? {
            repeated |= !seen.insert(key);
            repeated |= map.next_value_seed(RepeatedKeys)?;
        }
        Ok(repeated)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        let mut repeated = false;
        while let Some(r) = seq.next_element_seed(RepeatedKeys)? {
            repeated |= r;
        }
        Ok(repeated)
    }
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
}

/// `text` with every comment replaced by spaces (line breaks kept); `None`
/// for a `/` that starts no comment or an unterminated block comment.
pub(crate) fn blank_comments(text: &str) -> Option<Cow<'_, str>> {
    let bytes = text.as_bytes();
    if !bytes.contains(&b'/') {
        return Some(Cow::Borrowed(text));
    }
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => in_string = true,
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                let end = text[i + 2..].find("*/")? + i + 4;
                for c in &mut out[i..end] {
                    if *c != b'\n' {
                        *c = b' ';
                    }
                }
                i = end;
                continue;
            }
            (b'/', _) => return None,
            _ => {}
        }
        i += 1;
    }
    // Whole comments (so whole characters) became spaces: still UTF-8.
    String::from_utf8(out).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn pos(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }

    fn err(text: &str) -> (u32, u32, String) {
        let e = parse(text).expect_err(text);
        (e.pos.line, e.pos.column, e.message)
    }

    fn ok(text: &str) -> Value {
        parse(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e} at {:?}", e.pos))
            .value
    }

    #[test]
    fn comments_in_every_position() {
        let text = r#"// leading line comment
/* leading block */ { // after open brace
  /* before key */ "a" /* before colon */ : /* before value */ 1 /* after value */ , // after comma
  "b" : [ /* in array */ 1 /* after element */ , /* before element */ 2 // before close
  ] , "c" : { /* empty object with comment */ } ,
  "d" : [ // empty array with comment
  ],
  "e": "http://not/a/comment /* nor this */" /*
  multi-line
  block */
} // trailing line comment without newline"#;
        let doc = parse(text).unwrap();
        assert_eq!(
            doc.value,
            json!({"a": 1, "b": [1, 2], "c": {}, "d": [], "e": "http://not/a/comment /* nor this */"})
        );
        assert_eq!(doc.position(""), Some(pos(2, 21)));
        assert_eq!(doc.position("/a"), Some(pos(3, 64)));
        assert_eq!(doc.position("/b/1"), Some(pos(4, 71)));
        assert_eq!(doc.position("/e"), Some(pos(8, 8)));
        assert_eq!(ok("1// c"), json!(1));
        assert_eq!(ok("/**/1/***/"), json!(1));
        assert_eq!(ok("/* a * / b **/ [/*]*/]"), json!([]));
        assert_eq!(ok("{\"a\"//c\n:\n//c\n2}"), json!({"a": 2}));
    }

    #[test]
    fn crlf_line_endings() {
        let doc = parse("{\r\n  // c\r\n  \"a\": 1\r\n}").unwrap();
        assert_eq!(doc.position("/a"), Some(pos(3, 8)));
        assert_eq!(doc.key_position("/a"), Some(pos(3, 3)));
    }

    #[test]
    fn leading_bom_is_skipped_and_takes_no_column() {
        let doc = parse("\u{FEFF}{\"a\": true}").unwrap();
        assert_eq!(doc.value, json!({"a": true}));
        assert_eq!(doc.position(""), Some(pos(1, 1)));
        assert_eq!(doc.position("/a"), Some(pos(1, 7)));
        // A BOM anywhere else is not whitespace.
        assert_eq!(
            err("1 \u{FEFF}"),
            (
                1,
                3,
                "expected the end of the file after the JSON value, found character U+FEFF".into()
            )
        );
    }

    #[test]
    fn escapes_and_surrogate_pairs() {
        assert_eq!(
            ok(r#""\" \\ \/ \b \f \n \r \t \u0041\u00e9\u4E2D \ud83d\ude00 \u0000""#),
            json!("\" \\ / \u{8} \u{c} \n \r \t Aé中 😀 \u{0}")
        );
        assert_eq!(ok(r#""plain ünïcödé 😀""#), json!("plain ünïcödé 😀"));
        assert_eq!(ok(r#""\uDBFF\uDFFF""#), json!("\u{10FFFF}"));
    }

    #[test]
    fn unicode_column_counting() {
        let text = "{\"é😀\": \"ü\",\t\"k\": [\"中文\", 1]}";
        let doc = parse(text).unwrap();
        assert_eq!(doc.key_position("/é😀"), Some(pos(1, 2)));
        assert_eq!(doc.position("/é😀"), Some(pos(1, 8)));
        assert_eq!(doc.key_position("/k"), Some(pos(1, 13)));
        assert_eq!(doc.position("/k/0"), Some(pos(1, 19)));
        assert_eq!(doc.position("/k/1"), Some(pos(1, 25)));
        assert_eq!(
            err("[\"😀😀\", x]"),
            (1, 8, "expected a value, found 'x'".into())
        );
    }

    #[test]
    fn numbers_convert_like_serde_json() {
        for text in [
            "0",
            "-0",
            "1",
            "-1",
            "1.0",
            "1.5e3",
            "1E-2",
            "-0.0",
            "9223372036854775807",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "123456789012345678",
            "1234567890123456789",
            "0.1",
            "2.2250738585072014e-308",
            "1e308",
        ] {
            let ours = ok(text);
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
            assert_eq!(ours.to_string(), theirs.to_string(), "{text}");
        }
        assert!(ok("18446744073709551615").is_u64());
        assert!(ok("-9223372036854775808").is_i64());
        assert!(ok("18446744073709551616").is_f64());
        assert!(ok("-0").is_f64());
        assert!(ok("1.0").is_f64());
    }

    #[test]
    fn syntax_errors_name_expected_and_found_at_the_offending_character() {
        let cases: &[(&str, (u32, u32, &str))] = &[
            (
                "{\"a\": 1,}",
                (1, 8, "trailing comma is not allowed before '}'"),
            ),
            (
                "[1, 2,\n]",
                (1, 6, "trailing comma is not allowed before ']'"),
            ),
            (
                "{\"a\": 1,\n // c\n }",
                (1, 8, "trailing comma is not allowed before '}'"),
            ),
            (
                "{\"a\": 1 \"b\": 2}",
                (
                    1,
                    9,
                    "expected ',' or '}' after an object member, found '\"'",
                ),
            ),
            (
                "[1 2]",
                (
                    1,
                    4,
                    "expected ',' or ']' after an array element, found '2'",
                ),
            ),
            (
                "{'a': 1}",
                (
                    1,
                    2,
                    "expected a property name in double quotes or '}', found \"'\" (strings use double quotes)",
                ),
            ),
            (
                "{\"a\": 'x'}",
                (
                    1,
                    7,
                    "expected a value, found \"'\" (strings use double quotes)",
                ),
            ),
            (
                "{a: 1}",
                (
                    1,
                    2,
                    "expected a property name in double quotes or '}', found 'a'",
                ),
            ),
            (
                "{\"a\": 1, b: 1}",
                (
                    1,
                    10,
                    "expected a property name in double quotes, found 'b'",
                ),
            ),
            (
                "{\"a\" 1}",
                (1, 6, "expected ':' after the property name, found '1'"),
            ),
            ("{\"a\": }", (1, 7, "expected a value, found '}'")),
            ("[,1]", (1, 2, "expected a value or ']', found ','")),
            ("[1,,2]", (1, 4, "expected a value, found ','")),
            (
                "NaN",
                (
                    1,
                    1,
                    "expected a value, found 'NaN' (JSON has no NaN or Infinity)",
                ),
            ),
            (
                "-Infinity",
                (
                    1,
                    2,
                    "expected a digit after '-', found 'Infinity' (JSON has no NaN or Infinity)",
                ),
            ),
            (
                "True",
                (1, 1, "expected a value, found 'True'; did you mean 'true'?"),
            ),
            ("nul", (1, 1, "expected a value, found 'nul'")),
            ("truex", (1, 1, "expected a value, found 'truex'")),
            ("undefined", (1, 1, "expected a value, found 'undefined'")),
            (
                "01",
                (1, 1, "expected a number without leading zeros, found '01'"),
            ),
            (
                "[-007]",
                (
                    1,
                    2,
                    "expected a number without leading zeros, found '-007'",
                ),
            ),
            (
                "1.",
                (
                    1,
                    3,
                    "unexpected end of file; expected a digit after the decimal point",
                ),
            ),
            (
                "1.e5",
                (1, 3, "expected a digit after the decimal point, found 'e5'"),
            ),
            (".5", (1, 1, "expected a value, found '.'")),
            ("+1", (1, 1, "expected a value, found '+'")),
            (
                "1e+",
                (
                    1,
                    4,
                    "unexpected end of file; expected a digit in the exponent",
                ),
            ),
            (
                "1e400",
                (
                    1,
                    1,
                    "expected a number within the range of a 64-bit float, found '1e400'",
                ),
            ),
            ("\"abc", (1, 1, "unterminated string")),
            ("[\"abc\\", (1, 2, "unterminated string")),
            (
                "{\"a\": \"abc\n\"}",
                (
                    1,
                    11,
                    "expected '\"' to close the string, found a line break",
                ),
            ),
            (
                "\"a\tb\"",
                (
                    1,
                    3,
                    "expected an escape sequence such as \\t, found control character U+0009 in a string",
                ),
            ),
            (
                "\"a\u{1}b\"",
                (
                    1,
                    3,
                    "expected an escape sequence such as \\u0000, found control character U+0001 in a string",
                ),
            ),
            (
                "\"\\x\"",
                (
                    1,
                    2,
                    "expected an escape sequence (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX), found '\\x'",
                ),
            ),
            (
                "\"\\'\"",
                (
                    1,
                    2,
                    "expected an escape sequence (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX), found '\\''",
                ),
            ),
            (
                "\"\\u12G4\"",
                (1, 6, "expected 4 hex digits after '\\u', found 'G4'"),
            ),
            (
                "\"\\u12\"",
                (1, 6, "expected 4 hex digits after '\\u', found '\"'"),
            ),
            (
                "\"\\uD83D\"",
                (
                    1,
                    2,
                    "expected a low surrogate \\uDC00-\\uDFFF after the high surrogate '\\uD83D', found none (lone surrogates are not valid unicode)",
                ),
            ),
            (
                "\"\\uD83D\\u0041\"",
                (
                    1,
                    2,
                    "expected a low surrogate \\uDC00-\\uDFFF after the high surrogate '\\uD83D', found none (lone surrogates are not valid unicode)",
                ),
            ),
            (
                "\"x\\uDE00\"",
                (
                    1,
                    3,
                    "expected a high surrogate \\uD800-\\uDBFF before the low surrogate '\\uDE00', found none (lone surrogates are not valid unicode)",
                ),
            ),
            (
                "{\"a\": [1, 2}",
                (
                    1,
                    12,
                    "expected ',' or ']' after an array element, found '}'",
                ),
            ),
            (
                "{\"a\": 1",
                (
                    1,
                    8,
                    "unexpected end of file; expected ',' or '}' after an object member",
                ),
            ),
            (
                "{\"a\":",
                (1, 6, "unexpected end of file; expected a value"),
            ),
            ("[", (1, 2, "unexpected end of file; expected a value")),
            (
                "{",
                (
                    1,
                    2,
                    "unexpected end of file; expected a property name in double quotes or '}'",
                ),
            ),
            (
                "{} {}",
                (
                    1,
                    4,
                    "expected the end of the file after the JSON value, found '{'",
                ),
            ),
            ("1 /* open", (1, 3, "unterminated block comment")),
            (
                "{\n  /* never\n closed",
                (2, 3, "unterminated block comment"),
            ),
            (
                "1 / 2",
                (
                    1,
                    4,
                    "expected '/' or '*' after '/' (a comment), found a space",
                ),
            ),
            (
                "1 /",
                (
                    1,
                    4,
                    "unexpected end of file; expected '/' or '*' after '/' (a comment)",
                ),
            ),
            (
                "[1,\u{a0}2]",
                (1, 4, "expected a value, found character U+00A0"),
            ),
            ("{\"k\": é}", (1, 7, "expected a value, found 'é'")),
        ];
        for (text, (line, column, message)) in cases {
            assert_eq!(
                err(text),
                (*line, *column, (*message).to_owned()),
                "input: {text:?}"
            );
        }
    }

    #[test]
    fn error_positions_on_later_lines() {
        let text = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",},\n  }\n}";
        assert_eq!(
            err(text),
            (3, 25, "trailing comma is not allowed before '}'".into())
        );
        let e = parse("{\n\t\"a\": tru\n}").unwrap_err();
        assert_eq!(
            (e.pos, e.to_string()),
            (pos(2, 7), "expected a value, found 'tru'".into())
        );
        let d = e.into_diagnostic("x.json");
        assert_eq!(d.to_string(), "x.json:2:7: expected a value, found 'tru'");
    }

    #[test]
    fn empty_input() {
        for text in [
            "",
            "   \n\t",
            "// only a comment",
            "/* a */ // b\n",
            "\u{FEFF}",
        ] {
            assert_eq!(
                err(text).2,
                "file is empty; expected a JSON value",
                "{text:?}"
            );
        }
        assert_eq!(
            err(""),
            (1, 1, "file is empty; expected a JSON value".into())
        );
    }

    #[test]
    fn pointers_with_escapes_and_fallback_to_ancestors() {
        let text = r#"{
  "a/b": {"m~n": [10, {"x": 1}]},
  "": 0
}"#;
        let doc = parse(text).unwrap();
        assert_eq!(doc.position("/a~1b/m~0n/1/x"), Some(pos(2, 29)));
        assert_eq!(doc.key_position("/a~1b/m~0n/1/x"), Some(pos(2, 24)));
        assert_eq!(doc.key_position("/a~1b/m~0n"), Some(pos(2, 11)));
        assert_eq!(doc.position("/a~1b/m~0n"), Some(pos(2, 18)));
        assert_eq!(doc.position("/"), Some(pos(3, 7)));
        // Array elements and the root have no key: key_position falls back.
        assert_eq!(doc.key_position("/a~1b/m~0n/0"), Some(pos(2, 19)));
        assert_eq!(doc.key_position(""), Some(pos(1, 1)));
        // Unresolvable pointers fall back to the nearest ancestor.
        assert_eq!(doc.position("/a~1b/m~0n/7"), Some(pos(2, 18)));
        assert_eq!(doc.position("/a~1b/m~0n/01"), Some(pos(2, 18)));
        assert_eq!(doc.position("/a~1b/nope/deeper"), Some(pos(2, 10)));
        assert_eq!(doc.key_position("/a~1b/nope"), Some(pos(2, 10)));
        assert_eq!(doc.position("/a~1b/m~0n/0/x"), Some(pos(2, 19)));
        assert_eq!(doc.position("/zzz"), Some(pos(1, 1)));
        assert_eq!(doc.position("no-slash"), None);
        assert_eq!(doc.key_position("no-slash"), None);
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let doc = parse("{\"a\": 1, \"b\": 2, \"a\": [3]}").unwrap();
        assert_eq!(doc.value, json!({"a": [3], "b": 2}));
        assert_eq!(doc.position("/a"), Some(pos(1, 23)));
        assert_eq!(doc.key_position("/a"), Some(pos(1, 18)));
        assert_eq!(doc.position("/a/0"), Some(pos(1, 24)));
    }

    #[test]
    fn depth_limit() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        let e = parse(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert_eq!(e.pos, pos(1, MAX_DEPTH as u32 + 1));
        assert_eq!(
            e.message,
            "nesting too deep; expected at most 256 levels of arrays and objects"
        );
        // Far deeper input is an error, not a stack overflow.
        let deep = "{\"a\":".repeat(100_000);
        assert!(
            parse(&deep)
                .unwrap_err()
                .message
                .starts_with("nesting too deep")
        );
    }

    #[test]
    fn large_single_line_input_is_linear() {
        // 200k elements on one line: position lookups must not rescan the line.
        let items: Vec<String> = (0..200_000)
            .map(|i| format!("{{\"k\":\"v{i}\"}}"))
            .collect();
        let text = format!("[{}]", items.join(","));
        assert!(text.len() > 3_000_000);
        let doc = parse(&text).unwrap();
        let last = doc.position("/199999/k").unwrap();
        assert_eq!(last.line, 1);
        assert_eq!(last.column as usize, text.len() - "\"v199999\"}]".len() + 1);
    }

    /// Values serde_json itself reproduces exactly from its own output
    /// (some floats do not without its `float_roundtrip` feature).
    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter_map("not representable", |f| {
                let v = serde_json::Number::from_f64(f).map(Value::Number)?;
                serde_json::from_str(&v.to_string()).ok()
            }),
            any::<String>().prop_map(Value::String),
            "[\"\\\\/*{}\\[\\],: \t\n]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z/~\"\\\\ é]{0,5}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Insert comments between the tokens of a JSON text (outside strings).
    fn with_comments(json: &str) -> String {
        let mut out = String::from("/* start */\n");
        let mut in_string = false;
        let mut escaped = false;
        for (n, c) in json.chars().enumerate() {
            if in_string {
                out.push(c);
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => {
                    in_string = true;
                    out.push(c);
                }
                '{' | '[' | ',' | ':' => {
                    out.push(c);
                    out.push_str(if n % 2 == 0 { "/* c */" } else { "// c\n" });
                }
                '}' | ']' => {
                    out.push_str("/**/");
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
        out.push_str("\n// end");
        out
    }

    proptest! {
        #[test]
        fn roundtrips_serde_json_output(v in arb_value()) {
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            prop_assert_eq!(&parse(&pretty).unwrap().value, &v);
            let compact = serde_json::to_string(&v).unwrap();
            prop_assert_eq!(&parse(&compact).unwrap().value, &v);
            let commented = with_comments(&pretty);
            prop_assert_eq!(&parse(&commented).unwrap().value, &v, "{}", commented);
        }

        #[test]
        fn never_panics_on_arbitrary_input(s in "[\\[\\]{}\",:0-9a-z\\\\/* \n-]{0,40}") {
            let _ = parse(&s);
        }

        /// The serde_json fast path accepts nothing this parser refuses and
        /// produces the same value for everything it accepts.
        #[test]
        fn fast_path_agrees_with_the_parser(s in "(\u{FEFF})?[\\[\\]{}\",:0-9a-z\\\\/*.eE+\t\r \n-]{0,40}") {
            check_fast_path(&s)?;
        }

        #[test]
        fn fast_path_agrees_on_valid_documents(v in arb_value(), cut in 0usize..400) {
            let text = with_comments(&serde_json::to_string_pretty(&v).unwrap());
            check_fast_path(&text)?;
            // Damaged: cut short, or a character removed.
            let mut at = cut.min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            check_fast_path(&text[..at])?;
            let mut damaged = text.clone();
            if at < damaged.len() {
                damaged.remove(at);
            }
            check_fast_path(&damaged)?;
        }
    }

    fn check_fast_path(text: &str) -> Result<(), TestCaseError> {
        let mut parser = Parser::new(text);
        let slow = parser.document().map(|(v, _)| v);
        match (fast_value(text), slow) {
            (Some((fast, repeated)), Ok(slow)) => {
                prop_assert_eq!(fast, slow, "{:?}", text);
                // The cheap repeated-key check agrees with the parser.
                prop_assert_eq!(repeated, !parser.duplicates.is_empty(), "{:?}", text);
            }
            (Some((fast, _)), Err(e)) => {
                prop_assert!(
                    false,
                    "fast path accepted {:?} as {} but the parser says {}",
                    text,
                    fast,
                    e.message
                )
            }
            (None, _) => {}
        }
        Ok(())
    }

    #[test]
    fn fast_path_edge_cases() {
        for text in [
            "",
            " ",
            "\u{FEFF}{}",
            "{\"a\": \"//not a comment\", \"b\": \"/*nor this*/\"}",
            "{\"a\": 1} // trailing",
            "{\"a\": 1} /* unterminated",
            "{\"a\": 1 /* é */}",
            "[1,]",
            "{\"a\": 1,}",
            "01",
            "-0",
            "1e400",
            "\"\\uD800\"",
            "\"\\uD83D\\uDE00\"",
            "\"tab\there\"",
            "{\"a\":1,\"a\":2}",
            "/",
            "1 / 2",
            "\"\\\\\" // c",
            "[\"\\\"//\"]",
            "NaN",
        ] {
            check_fast_path(text).unwrap();
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(
            fast_value(&deep).is_none(),
            "deeper than serde_json's limit"
        );
        assert!(parse(&deep).is_ok(), "but within this parser's");
    }

    #[test]
    fn positions_are_found_for_a_fast_parsed_document() {
        let doc = parse("// c\n{\n  \"a\": [1, {\"b\": true}]\n}").unwrap();
        assert!(doc.root.get().is_none(), "positions are built on demand");
        assert_eq!(doc.position("/a/1/b"), Some(pos(3, 18)));
        assert_eq!(doc.key_position("/a"), Some(pos(3, 3)));
    }
}
