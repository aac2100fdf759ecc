//! The toy language of the crate doc (`main.rs`), and the answers it gives:
//! hover, definition, implementation, references, symbols, the call
//! hierarchy, code actions and diagnostics over the open documents.

use super::*;

impl Session {
    /// The open document and the position a `TextDocumentPositionParams` names.
    pub fn position<'a>(&'a self, params: &Value) -> Option<(&'a str, &'a Document, usize, usize)> {
        let uri = params["textDocument"]["uri"].as_str()?;
        let (uri, document) = self.docs.get_key_value(uri)?;
        let line = params["position"]["line"].as_u64().unwrap_or_default() as usize;
        let character = params["position"]["character"].as_u64().unwrap_or_default() as usize;
        Some((uri, document, line, character))
    }

    pub fn hover(&self, params: &Value) -> Value {
        let Some((uri, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let word = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character));
        let value = format!(
            "fake-hover {} {uri} {line}:{character} v{} word={}",
            self.config.name,
            document.version,
            word.as_ref().map_or("", |w| w.text.as_str()),
        );
        let mut hover = json!({ "contents": { "kind": "markdown", "value": value } });
        if let Some(word) = word {
            hover["range"] = range(line, word.start, line, word.end);
        }
        hover
    }

    /// The name of the function defined by `fn <name>` / `def <name>` in an
    /// open document, else the document's start.
    pub fn definition(&self, params: &Value) -> Value {
        let Some((uri, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let word = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character));
        match word.and_then(|w| self.function(&w.text)) {
            Some(function) => json!({ "uri": function.uri, "range": function.selection }),
            None => json!({ "uri": uri, "range": range(0, 0, 0, 0) }),
        }
    }

    /// Every `impl <name>` line of the open documents, for the name under
    /// the cursor.
    pub fn implementation(&self, params: &Value) -> Value {
        let Some((_, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let Some(target) = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character))
        else {
            return json!([]);
        };
        let mut found = Vec::new();
        for (uri, document) in &self.docs {
            for (number, text) in lines(&document.text).enumerate() {
                let all = words(text);
                for pair in all.windows(2) {
                    if pair[0].text == "impl" && pair[1].text == target.text {
                        found.push(json!({
                            "uri": uri,
                            "range": range(number, pair[1].start, number, pair[1].end),
                        }));
                    }
                }
            }
        }
        json!(found)
    }

    /// `SymbolInformation` for every function whose name contains the query
    /// (case-insensitive), across the open documents.
    pub fn workspace_symbols(&self, params: &Value) -> Value {
        let query = params["query"].as_str().unwrap_or_default().to_lowercase();
        let found: Vec<Value> = self
            .functions()
            .into_iter()
            .filter(|f| f.name.to_lowercase().contains(&query))
            .map(|f| {
                json!({
                    "name": f.name,
                    "kind": 12,
                    "location": { "uri": f.uri, "range": f.selection },
                    "containerName": "fake",
                })
            })
            .collect();
        json!(found)
    }

    pub fn prepare_call_hierarchy(&self, params: &Value) -> Value {
        let Some((_, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let word = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character));
        match word.and_then(|w| self.function(&w.text)) {
            Some(function) => json!([function.item()]),
            None => json!([]),
        }
    }

    /// Every function whose body uses the item's name.
    pub fn incoming_calls(&self, params: &Value) -> Value {
        let Some(target) = params["item"]["name"].as_str() else {
            return Value::Null;
        };
        let calls: Vec<Value> = self
            .functions()
            .into_iter()
            .filter_map(|caller| {
                let ranges = self.uses_in_body(&caller, target);
                (!ranges.is_empty()).then(|| json!({ "from": caller.item(), "fromRanges": ranges }))
            })
            .collect();
        json!(calls)
    }

    /// Every function the item's body uses.
    pub fn outgoing_calls(&self, params: &Value) -> Value {
        let Some(caller) = params["item"]["name"]
            .as_str()
            .and_then(|name| self.function(name))
        else {
            return Value::Null;
        };
        let calls: Vec<Value> = self
            .functions()
            .into_iter()
            .filter_map(|callee| {
                let ranges = self.uses_in_body(&caller, &callee.name);
                (!ranges.is_empty()).then(|| json!({ "to": callee.item(), "fromRanges": ranges }))
            })
            .collect();
        json!(calls)
    }

    /// A quick fix ("ERROR" → "OK") per diagnostic of the context, and a
    /// `refactor.rewrite` that upper-cases the range's first line; filtered
    /// by `context.only` (kind prefixes).
    pub fn code_actions(&self, params: &Value) -> Value {
        let Some(uri) = params["textDocument"]["uri"].as_str() else {
            return Value::Null;
        };
        let mut actions: Vec<Value> = params["context"]["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|diagnostic| {
                json!({
                    "title": "Replace ERROR with OK",
                    "kind": "quickfix",
                    "isPreferred": true,
                    "diagnostics": [diagnostic],
                    "edit": { "changes": { uri: [{ "range": diagnostic["range"], "newText": "OK" }] } },
                })
            })
            .collect();
        let start = params["range"]["start"]["line"].as_u64().unwrap_or(0);
        actions.push(json!({
            "title": "Shout this line",
            "kind": "refactor.rewrite",
            "command": { "title": "Shout", "command": "fake.shout", "arguments": [uri, start] },
        }));
        if let Some(only) = params["context"]["only"].as_array() {
            actions.retain(|action| {
                let kind = action["kind"].as_str().unwrap_or_default();
                only.iter()
                    .filter_map(Value::as_str)
                    .any(|prefix| kind == prefix || kind.starts_with(&format!("{prefix}.")))
            });
        }
        json!(actions)
    }

    pub fn document_diagnostic(&self, params: &Value) -> Value {
        let items = params["textDocument"]["uri"]
            .as_str()
            .and_then(|uri| self.docs.get(uri))
            .map(|document| self.diagnostics_of(document))
            .unwrap_or_default();
        json!({ "kind": "full", "items": items })
    }

    pub fn workspace_diagnostic(&self) -> Value {
        let items: Vec<Value> = self
            .docs
            .iter()
            .map(|(uri, document)| {
                json!({
                    "kind": "full",
                    "uri": uri,
                    "version": document.version,
                    "items": self.diagnostics_of(document),
                })
            })
            .collect();
        json!({ "items": items })
    }

    /// One error per line containing `ERROR`.
    pub fn diagnostics_of(&self, document: &Document) -> Vec<Value> {
        lines(&document.text)
            .enumerate()
            .filter_map(|(number, line)| {
                let start = utf16_len(&line[..line.find("ERROR")?]);
                Some(json!({
                    "range": range(number, start, number, start + 5),
                    "severity": 1,
                    "source": self.config.name,
                    "code": "E1",
                    "message": "fake error",
                }))
            })
            .collect()
    }

    /// Every function defined in the open documents, in document order.
    pub fn functions(&self) -> Vec<Function> {
        let mut found = Vec::new();
        for (uri, document) in &self.docs {
            let all: Vec<&str> = lines(&document.text).collect();
            let heads: Vec<(usize, Word)> = all
                .iter()
                .enumerate()
                .filter_map(|(number, text)| function_name(text).map(|name| (number, name)))
                .collect();
            for (index, (number, name)) in heads.iter().enumerate() {
                let end = heads.get(index + 1).map_or(all.len(), |(next, _)| *next);
                let last = end.saturating_sub(1).max(*number);
                found.push(Function {
                    uri: uri.clone(),
                    name: name.text.clone(),
                    line: *number,
                    end: end.max(number + 1),
                    range: range(*number, 0, last, utf16_len(all[last])),
                    selection: range(*number, name.start, *number, name.end),
                });
            }
        }
        found
    }

    pub fn function(&self, name: &str) -> Option<Function> {
        self.functions().into_iter().find(|f| f.name == name)
    }

    /// Where `function`'s body (the lines after its definition) uses `name`.
    pub fn uses_in_body(&self, function: &Function, name: &str) -> Vec<Value> {
        let Some(document) = self.docs.get(&function.uri) else {
            return Vec::new();
        };
        lines(&document.text)
            .enumerate()
            .take(function.end)
            .skip(function.line + 1)
            .flat_map(|(number, text)| {
                words(text)
                    .into_iter()
                    .filter(|w| w.text == name)
                    .map(move |w| range(number, w.start, number, w.end))
            })
            .collect()
    }

    pub fn references(&self, params: &Value) -> Value {
        let Some((uri, document, line, character)) = self.position(params) else {
            return Value::Null;
        };
        let Some(target) = lines(&document.text)
            .nth(line)
            .and_then(|text| word_at(text, character))
        else {
            return json!([]);
        };
        let locations: Vec<Value> = lines(&document.text)
            .enumerate()
            .flat_map(|(number, text)| {
                words(text)
                    .into_iter()
                    .filter(|word| word.text == target.text)
                    .map(move |word| json!({ "uri": uri, "range": range(number, word.start, number, word.end) }))
            })
            .collect();
        json!(locations)
    }

    pub fn document_symbols(&self, params: &Value) -> Value {
        let Some(document) = params["textDocument"]["uri"]
            .as_str()
            .and_then(|uri| self.docs.get(uri))
        else {
            return Value::Null;
        };
        let symbols: Vec<Value> = lines(&document.text)
            .enumerate()
            .filter_map(|(number, text)| {
                let name = function_name(text)?;
                Some(json!({
                    "name": name.text,
                    "kind": 12, // Function
                    "range": range(number, 0, number, utf16_len(text)),
                    "selectionRange": range(number, name.start, number, name.end),
                }))
            })
            .collect();
        json!(symbols)
    }

    pub fn state(&self) -> Value {
        let documents: Vec<Value> = self
            .docs
            .iter()
            .map(|(uri, doc)| {
                json!({ "uri": uri, "languageId": doc.language_id, "version": doc.version, "text": doc.text })
            })
            .collect();
        json!({
            "pid": std::process::id(),
            "name": self.config.name,
            "connection": self.connection,
            "openDocuments": self.docs.keys().collect::<Vec<_>>(),
            "documents": documents,
            "settings": self.settings,
            "initializationOptions": self.initialization_options,
            "rootUri": self.root_uri,
            "workspaceFolders": self.workspace_folders,
            "serverRequestAnswers": self.answers,
            "shutdown": self.shutdown,
        })
    }
}

/// A function of the toy language (see the module doc).
pub struct Function {
    pub uri: String,
    pub name: String,
    /// The definition's line, and the line after the body.
    pub line: usize,
    pub end: usize,
    pub range: Value,
    pub selection: Value,
}

impl Function {
    pub fn item(&self) -> Value {
        json!({
            "name": self.name,
            "kind": 12,
            "detail": "fake function",
            "uri": self.uri,
            "range": self.range,
            "selectionRange": self.selection,
            "data": { "fake": self.name },
        })
    }
}

/// An LSP range; positions are (line, UTF-16 offset).
pub fn range(start_line: usize, start: usize, end_line: usize, end: usize) -> Value {
    json!({
        "start": { "line": start_line, "character": start },
        "end": { "line": end_line, "character": end },
    })
}

pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
}

pub fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// A run of word characters in a line, with UTF-16 offsets as LSP counts them.
pub struct Word {
    pub text: String,
    pub start: usize,
    pub end: usize,
}

pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

pub fn words(line: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current: Option<Word> = None;
    let mut offset = 0;
    for c in line.chars() {
        if is_word_char(c) {
            let word = current.get_or_insert_with(|| Word {
                text: String::new(),
                start: offset,
                end: offset,
            });
            word.text.push(c);
            word.end = offset + c.len_utf16();
        } else if let Some(word) = current.take() {
            words.push(word);
        }
        offset += c.len_utf16();
    }
    words.extend(current);
    words
}

/// The word under the cursor, or the one just before it (cursor at its end).
pub fn word_at(line: &str, character: usize) -> Option<Word> {
    let all = words(line);
    let index = all
        .iter()
        .position(|w| w.start <= character && character < w.end)
        .or_else(|| all.iter().position(|w| w.end == character))?;
    all.into_iter().nth(index)
}

/// The `<name>` of a line containing `fn <name>` or `def <name>`.
pub fn function_name(line: &str) -> Option<Word> {
    let all = words(line);
    let utf16: Vec<u16> = line.encode_utf16().collect();
    all.windows(2)
        .find(|pair| {
            let between = String::from_utf16_lossy(&utf16[pair[0].end..pair[1].start]);
            (pair[0].text == "fn" || pair[0].text == "def")
                && !between.is_empty()
                && between.chars().all(char::is_whitespace)
        })
        .map(|pair| Word {
            text: pair[1].text.clone(),
            start: pair[1].start,
            end: pair[1].end,
        })
}
