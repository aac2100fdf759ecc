//! The documents opened through Steward on one connection and the
//! diagnostics the server publishes: full-text sync (`didOpen`, `didChange`
//! with the next version, `didClose`), and which publication is fresh after
//! a sync.

use std::collections::{BTreeMap, HashMap};

use async_lsp::ServerSocket;
use lsp_types::notification::{DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument};
use lsp_types::{
    DidChangeTextDocumentParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    PublishDiagnosticsParams, TextDocumentContentChangeEvent, TextDocumentIdentifier,
    TextDocumentItem, Url, VersionedTextDocumentIdentifier,
};

use super::errors::LspRequestError;

/// The documents and the diagnostics of one connection. Kept under one
/// lock: a document is decided and sent under it, so versions go out in
/// order.
#[derive(Default)]
pub(super) struct Store {
    docs: BTreeMap<Url, Doc>,
    diagnostics: HashMap<Url, Published>,
}

struct Doc {
    language_id: String,
    text: String,
    version: i32,
    /// `Published::count` for this document when it was last synced.
    seen_at_sync: u64,
}

struct Published {
    diagnostics: Vec<lsp_types::Diagnostic>,
    version: Option<i32>,
    /// Publications received for this document so far.
    count: u64,
}

impl Store {
    /// Brings the server's copy of `uri` up to `text` over `socket`:
    /// `didOpen` if it is not open yet (a new `language_id` reopens it: it
    /// can only be set at open); `didChange` with the full text and the next
    /// version if it is open with other text; nothing if the text is what
    /// was sent last. Returns the version and whether `didOpen` was sent.
    pub(super) fn send_document(
        &mut self,
        socket: &ServerSocket,
        uri: Url,
        language_id: &str,
        text: String,
    ) -> Result<(i32, bool), LspRequestError> {
        let seen = self.diagnostics.get(&uri).map_or(0, |p| p.count);
        let current = self.docs.get(&uri).map(|doc| {
            (
                doc.language_id == language_id,
                doc.text == text,
                doc.version,
            )
        });
        let (version, opened) = match current {
            Some((true, true, version)) => return Ok((version, false)),
            Some((true, false, version)) => {
                let version = version + 1;
                let params = DidChangeTextDocumentParams {
                    text_document: VersionedTextDocumentIdentifier {
                        uri: uri.clone(),
                        version,
                    },
                    content_changes: vec![TextDocumentContentChangeEvent {
                        range: None,
                        range_length: None,
                        text: text.clone(),
                    }],
                };
                socket
                    .notify::<DidChangeTextDocument>(params)
                    .map_err(|_| LspRequestError::closed("textDocument/didChange"))?;
                (version, false)
            }
            reopen_or_new => {
                if reopen_or_new.is_some() {
                    self.docs.remove(&uri);
                    let params = DidCloseTextDocumentParams {
                        text_document: TextDocumentIdentifier { uri: uri.clone() },
                    };
                    socket
                        .notify::<DidCloseTextDocument>(params)
                        .map_err(|_| LspRequestError::closed("textDocument/didClose"))?;
                }
                let version = 1;
                let params = DidOpenTextDocumentParams {
                    text_document: TextDocumentItem {
                        uri: uri.clone(),
                        language_id: language_id.to_owned(),
                        version,
                        text: text.clone(),
                    },
                };
                socket
                    .notify::<DidOpenTextDocument>(params)
                    .map_err(|_| LspRequestError::closed("textDocument/didOpen"))?;
                (version, true)
            }
        };
        self.docs.insert(
            uri,
            Doc {
                language_id: language_id.to_owned(),
                text,
                version,
                seen_at_sync: seen,
            },
        );
        Ok((version, opened))
    }

    /// How many documents are open.
    pub(super) fn open_count(&self) -> usize {
        self.docs.len()
    }

    /// The documents opened: `(uri, language id, text)`.
    pub(super) fn open_documents(&self) -> Vec<(Url, String, String)> {
        self.docs
            .iter()
            .map(|(uri, doc)| (uri.clone(), doc.language_id.clone(), doc.text.clone()))
            .collect()
    }

    /// Forgets `uri` and sends `didClose` for it, if it was open; `Err`
    /// when the connection is closed.
    pub(super) fn close_document(
        &mut self,
        socket: &ServerSocket,
        uri: &Url,
    ) -> Result<(), LspRequestError> {
        if self.docs.remove(uri).is_some() {
            let params = DidCloseTextDocumentParams {
                text_document: TextDocumentIdentifier { uri: uri.clone() },
            };
            socket
                .notify::<DidCloseTextDocument>(params)
                .map_err(|_| LspRequestError::closed("textDocument/didClose"))?;
        }
        Ok(())
    }

    /// The diagnostics last published for `uri`.
    pub(super) fn diagnostics(&self, uri: &Url) -> Option<Vec<lsp_types::Diagnostic>> {
        self.diagnostics
            .get(uri)
            .map(|published| published.diagnostics.clone())
    }

    /// The diagnostics published for `uri` after its latest sync, not
    /// naming an older version (for a document not opened through Steward:
    /// the latest ones).
    pub(super) fn fresh_diagnostics(&self, uri: &Url) -> Option<Vec<lsp_types::Diagnostic>> {
        let latest = self.diagnostics.get(uri)?;
        let fresh = match self.docs.get(uri) {
            Some(doc) => {
                latest.count > doc.seen_at_sync && latest.version.is_none_or(|v| v >= doc.version)
            }
            None => true,
        };
        fresh.then(|| latest.diagnostics.clone())
    }

    /// Keeps a publication.
    pub(super) fn record(&mut self, params: PublishDiagnosticsParams) {
        let entry = self.diagnostics.entry(params.uri).or_insert(Published {
            diagnostics: Vec::new(),
            version: None,
            count: 0,
        });
        entry.count += 1;
        entry.version = params.version;
        entry.diagnostics = params.diagnostics;
    }
}
