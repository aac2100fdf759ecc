//! The position-tracking JSONC parser: a forward-only recursive descent
//! over the text that builds the value together with its position tree,
//! records repeated keys, and says for every syntax error what was expected,
//! what was found, and where. It decides whatever the serde_json fast path
//! refuses, and builds positions on demand for a document that path read.

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use super::{Children, MAX_DEPTH, Member, Node, SyntaxError};
use crate::diagnostic::Pos;

/// Forward-only position cursor: `offset` (bytes) is at `line:column`.
struct Cursor {
    offset: usize,
    line: u32,
    column: u32,
}

pub(super) struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    i: usize,
    depth: usize,
    /// Offset of the first character after the BOM (line 1, column 1).
    start: usize,
    cursor: Cursor,
    /// Keys repeated in an object: the repetition's position, the key.
    pub(super) duplicates: Vec<(Pos, String)>,
}

type Parsed = Result<(Value, Node), SyntaxError>;

impl<'a> Parser<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let start = if text.starts_with('\u{FEFF}') { 3 } else { 0 };
        Parser {
            src: text,
            bytes: text.as_bytes(),
            i: start,
            depth: 0,
            start,
            cursor: Cursor {
                offset: start,
                line: 1,
                column: 1,
            },
            duplicates: Vec::new(),
        }
    }

    /// The whole text as one JSON value, with its position tree.
    pub(super) fn document(&mut self) -> Parsed {
        self.skip_ws()?;
        if self.i >= self.bytes.len() {
            return Err(self.error_at(self.i, "file is empty; expected a JSON value".into()));
        }
        let parsed = self.parse_value()?;
        self.skip_ws()?;
        if self.i < self.bytes.len() {
            return Err(self.expected("the end of the file after the JSON value"));
        }
        Ok(parsed)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.i).copied()
    }

    /// Position of byte `offset`. Amortized O(1) while offsets grow, as they
    /// do during parsing; an earlier offset (error reporting) rescans.
    fn pos_at(&mut self, offset: usize) -> Pos {
        if offset < self.cursor.offset {
            self.cursor = Cursor {
                offset: self.start,
                line: 1,
                column: 1,
            };
        }
        let Cursor {
            mut line,
            mut column,
            ..
        } = self.cursor;
        for &b in &self.bytes[self.cursor.offset..offset] {
            if b == b'\n' {
                line += 1;
                column = 1;
            } else if b & 0xC0 != 0x80 {
                // Not a UTF-8 continuation byte: a new character.
                column += 1;
            }
        }
        self.cursor = Cursor {
            offset,
            line,
            column,
        };
        Pos { line, column }
    }

    fn error_at(&mut self, offset: usize, message: String) -> SyntaxError {
        SyntaxError {
            pos: self.pos_at(offset),
            message,
        }
    }

    /// "expected {what}, found {what is at the current offset}".
    fn expected(&mut self, what: &str) -> SyntaxError {
        self.expected_at(self.i, what)
    }

    fn expected_at(&mut self, offset: usize, what: &str) -> SyntaxError {
        let message = match self.found(offset) {
            None => format!("unexpected end of file; expected {what}"),
            Some((found, hint)) => format!("expected {what}, found {found}{hint}"),
        };
        self.error_at(offset, message)
    }

    /// How to name what is at `offset` in a message, and a hint for common
    /// mistakes; `None` at the end of the input.
    fn found(&self, offset: usize) -> Option<(String, &'static str)> {
        let rest = self.src.get(offset..)?;
        let c = rest.chars().next()?;
        let word: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .take(33)
            .collect();
        if !word.is_empty() {
            let hint = match word.as_str() {
                "NaN" | "Infinity" => " (JSON has no NaN or Infinity)",
                w if w.eq_ignore_ascii_case("true") => "; did you mean 'true'?",
                w if w.eq_ignore_ascii_case("false") => "; did you mean 'false'?",
                w if w.eq_ignore_ascii_case("null") => "; did you mean 'null'?",
                _ => "",
            };
            let shown = if word.chars().count() > 32 {
                format!("'{}...'", word.chars().take(32).collect::<String>())
            } else {
                format!("'{word}'")
            };
            return Some((shown, hint));
        }
        Some(match c {
            '\'' => ("\"'\"".into(), " (strings use double quotes)"),
            '\n' => ("a line break".into(), ""),
            ' ' => ("a space".into(), ""),
            '\t' => ("a tab".into(), ""),
            c if c.is_control() || c.is_whitespace() || c == '\u{FEFF}' => {
                (format!("character U+{:04X}", c as u32), "")
            }
            c => (format!("'{c}'"), ""),
        })
    }

    /// Skip whitespace and comments.
    fn skip_ws(&mut self) -> Result<(), SyntaxError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.i += 1,
                Some(b'/') => match self.bytes.get(self.i + 1) {
                    Some(b'/') => {
                        self.i = match self.src[self.i..].find('\n') {
                            Some(n) => self.i + n,
                            None => self.bytes.len(),
                        };
                    }
                    Some(b'*') => match self.src[self.i + 2..].find("*/") {
                        Some(n) => self.i += 2 + n + 2,
                        None => {
                            return Err(self.error_at(self.i, "unterminated block comment".into()));
                        }
                    },
                    _ => {
                        return Err(
                            self.expected_at(self.i + 1, "'/' or '*' after '/' (a comment)")
                        );
                    }
                },
                _ => return Ok(()),
            }
        }
    }

    fn leaf(&mut self, offset: usize, value: Value) -> (Value, Node) {
        let pos = self.pos_at(offset);
        (
            value,
            Node {
                pos,
                children: Children::Leaf,
            },
        )
    }

    /// A value; whitespace before it has been skipped.
    fn parse_value(&mut self) -> Parsed {
        let start = self.i;
        match self.peek() {
            Some(b'{') => self.parse_object(),
            Some(b'[') => self.parse_array(),
            Some(b'"') => {
                let pos = self.pos_at(start);
                let s = self.parse_string()?;
                Ok((
                    Value::String(s),
                    Node {
                        pos,
                        children: Children::Leaf,
                    },
                ))
            }
            Some(b'-' | b'0'..=b'9') => {
                let pos = self.pos_at(start);
                let n = self.parse_number()?;
                Ok((
                    Value::Number(n),
                    Node {
                        pos,
                        children: Children::Leaf,
                    },
                ))
            }
            Some(b't' | b'f' | b'n') => {
                let end = self.bytes[start..]
                    .iter()
                    .position(|b| !b.is_ascii_alphanumeric() && *b != b'_' && *b != b'$')
                    .map_or(self.bytes.len(), |n| start + n);
                let value = match &self.src[start..end] {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "null" => Value::Null,
                    _ => return Err(self.expected("a value")),
                };
                self.i = end;
                Ok(self.leaf(start, value))
            }
            _ => Err(self.expected("a value")),
        }
    }

    fn enter(&mut self) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error_at(
                self.i,
                format!(
                    "nesting too deep; expected at most {MAX_DEPTH} levels of arrays and objects"
                ),
            ));
        }
        Ok(())
    }

    fn parse_object(&mut self) -> Parsed {
        self.enter()?;
        let pos = self.pos_at(self.i);
        self.i += 1;
        let mut map = Map::new();
        let mut members: HashMap<String, Member> = HashMap::new();
        self.skip_ws()?;
        if self.peek() == Some(b'}') {
            self.i += 1;
        } else {
            let mut first = true;
            loop {
                if self.peek() != Some(b'"') {
                    return Err(self.expected(if first {
                        "a property name in double quotes or '}'"
                    } else {
                        "a property name in double quotes"
                    }));
                }
                first = false;
                let key_pos = self.pos_at(self.i);
                let key = self.parse_string()?;
                self.skip_ws()?;
                if self.peek() != Some(b':') {
                    return Err(self.expected("':' after the property name"));
                }
                self.i += 1;
                self.skip_ws()?;
                let (value, node) = self.parse_value()?;
                // Duplicate keys: the last one wins (JSON.parse); remembered.
                if members.contains_key(&key) {
                    self.duplicates.push((key_pos, key.clone()));
                }
                map.insert(key.clone(), value);
                members.insert(key, Member { key: key_pos, node });
                self.skip_ws()?;
                match self.peek() {
                    Some(b',') => {
                        let comma = self.i;
                        self.i += 1;
                        self.skip_ws()?;
                        if self.peek() == Some(b'}') {
                            return Err(self.error_at(
                                comma,
                                "trailing comma is not allowed before '}'".into(),
                            ));
                        }
                    }
                    Some(b'}') => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(self.expected("',' or '}' after an object member")),
                }
            }
        }
        self.depth -= 1;
        Ok((
            Value::Object(map),
            Node {
                pos,
                children: Children::Object(members),
            },
        ))
    }

    fn parse_array(&mut self) -> Parsed {
        self.enter()?;
        let pos = self.pos_at(self.i);
        self.i += 1;
        let mut values = Vec::new();
        let mut nodes = Vec::new();
        self.skip_ws()?;
        if self.peek() == Some(b']') {
            self.i += 1;
        } else {
            loop {
                if values.is_empty() && self.peek().is_some_and(|b| b == b',') {
                    return Err(self.expected("a value or ']'"));
                }
                let (value, node) = self.parse_value()?;
                values.push(value);
                nodes.push(node);
                self.skip_ws()?;
                match self.peek() {
                    Some(b',') => {
                        let comma = self.i;
                        self.i += 1;
                        self.skip_ws()?;
                        if self.peek() == Some(b']') {
                            return Err(self.error_at(
                                comma,
                                "trailing comma is not allowed before ']'".into(),
                            ));
                        }
                    }
                    Some(b']') => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(self.expected("',' or ']' after an array element")),
                }
            }
        }
        self.depth -= 1;
        Ok((
            Value::Array(values),
            Node {
                pos,
                children: Children::Array(nodes),
            },
        ))
    }

    /// A string; `self.i` is at the opening quote.
    fn parse_string(&mut self) -> Result<String, SyntaxError> {
        let open = self.i;
        self.i += 1;
        let mut out = String::new();
        let mut run = self.i;
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error_at(open, "unterminated string".into()));
            };
            match b {
                b'"' => {
                    out.push_str(&self.src[run..self.i]);
                    self.i += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.src[run..self.i]);
                    self.parse_escape(open, &mut out)?;
                    run = self.i;
                }
                b'\n' | b'\r' => {
                    return Err(self.error_at(
                        self.i,
                        "expected '\"' to close the string, found a line break".into(),
                    ));
                }
                0x00..=0x1F => {
                    let message = format!(
                        "expected an escape sequence such as {}, found control character U+{b:04X} in a string",
                        match b {
                            b'\t' => "\\t",
                            0x08 => "\\b",
                            0x0C => "\\f",
                            _ => "\\u0000",
                        }
                    );
                    return Err(self.error_at(self.i, message));
                }
                _ => self.i += 1,
            }
        }
    }

    /// An escape sequence; `self.i` is at the backslash.
    fn parse_escape(&mut self, open: usize, out: &mut String) -> Result<(), SyntaxError> {
        let backslash = self.i;
        self.i += 1;
        let Some(b) = self.peek() else {
            return Err(self.error_at(open, "unterminated string".into()));
        };
        let simple = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{C}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                self.i += 1;
                let unit = self.hex4()?;
                let c = match unit {
                    0xD800..=0xDBFF => {
                        let low = if self.bytes[self.i..].starts_with(b"\\u") {
                            let save = self.i;
                            self.i += 2;
                            let low = self.hex4()?;
                            if (0xDC00..=0xDFFF).contains(&low) {
                                Some(low)
                            } else {
                                self.i = save;
                                None
                            }
                        } else {
                            None
                        };
                        let Some(low) = low else {
                            let written = &self.src[backslash..backslash + 6];
                            return Err(self.error_at(
                                backslash,
                                format!(
                                    "expected a low surrogate \\uDC00-\\uDFFF after the high surrogate '{written}', found none (lone surrogates are not valid unicode)"
                                ),
                            ));
                        };
                        let code = 0x10000
                            + ((u32::from(unit) - 0xD800) << 10)
                            + (u32::from(low) - 0xDC00);
                        char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
                    }
                    0xDC00..=0xDFFF => {
                        let written = &self.src[backslash..backslash + 6];
                        return Err(self.error_at(
                            backslash,
                            format!(
                                "expected a high surrogate \\uD800-\\uDBFF before the low surrogate '{written}', found none (lone surrogates are not valid unicode)"
                            ),
                        ));
                    }
                    _ => char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER),
                };
                out.push(c);
                return Ok(());
            }
            _ => {
                let found = match self.src[self.i..].chars().next() {
                    Some('\n') => "a line break".to_owned(),
                    Some(c) if c.is_control() => format!("character U+{:04X}", c as u32),
                    Some(c) => format!("'\\{c}'"),
                    None => String::new(),
                };
                return Err(self.error_at(
                    backslash,
                    format!(
                        "expected an escape sequence (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX), found {found}"
                    ),
                ));
            }
        };
        out.push(simple);
        self.i += 1;
        Ok(())
    }

    /// Four hex digits of a `\u` escape.
    fn hex4(&mut self) -> Result<u16, SyntaxError> {
        let mut unit = 0u16;
        for _ in 0..4 {
            let digit = self.peek().and_then(|b| (b as char).to_digit(16));
            let Some(digit) = digit else {
                if self.peek() == Some(b'"') {
                    return Err(self.error_at(
                        self.i,
                        "expected 4 hex digits after '\\u', found '\"'".into(),
                    ));
                }
                return Err(self.expected("4 hex digits after '\\u'"));
            };
            // Four hex digits fit in 16 bits.
            unit = (unit << 4) | digit as u16;
            self.i += 1;
        }
        Ok(unit)
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    /// A number, converted exactly as serde_json converts it.
    fn parse_number(&mut self) -> Result<Number, SyntaxError> {
        let start = self.i;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        let int_start = self.i;
        match self.peek() {
            Some(b'0') => {
                self.i += 1;
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    self.digits();
                    let written = self.src[start..self.i].to_owned();
                    return Err(self.error_at(
                        start,
                        format!("expected a number without leading zeros, found '{written}'"),
                    ));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.expected("a digit after '-'")),
        }
        let int_end = self.i;
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.expected("a digit after the decimal point"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            integer = false;
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.expected("a digit in the exponent"));
            }
        }
        let text = &self.src[start..self.i];
        // Fast path for the common small integers; serde_json itself for the
        // rest (floats, u64/i64 overflow to f64, `-0` to -0.0).
        if integer && int_end - int_start <= 18 {
            let magnitude: u64 = self.src[int_start..int_end].parse().unwrap_or(0);
            if !negative {
                return Ok(Number::from(magnitude));
            }
            if magnitude != 0 {
                // At most 18 digits: fits in i64.
                return Ok(Number::from(-(magnitude as i64)));
            }
        }
        match serde_json::from_str::<Number>(text) {
            Ok(n) => Ok(n),
            Err(_) => {
                let text = text.to_owned();
                Err(self.error_at(
                    start,
                    format!("expected a number within the range of a 64-bit float, found '{text}'"),
                ))
            }
        }
    }
}
