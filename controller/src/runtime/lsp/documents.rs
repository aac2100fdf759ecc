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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::time::Instant;

    use super::*;
    use crate::runtime::lsp::testing::*;
    use crate::runtime::lsp::{LspEvent, OPEN_DELAY};
    use crate::runtime::test_support::{SOON, eventually, received};

    #[tokio::test]
    async fn sync_document_opens_once_then_sends_full_changes() {
        let (_dir, ws) = workspace();
        let rec = ws.join("record.jsonl");
        let (result, _rx) = connect(&fake(&ws, json!({ "record": rec }))).await;
        let connection = result.unwrap();
        let uri = Url::from_file_path(ws.join("main.rs")).unwrap();
        let v1 = "fn main() {}\n";
        let v2 = "fn main() { run(); }\n";

        let started = Instant::now();
        let version = connection
            .sync_document(uri.clone(), "rust", v1.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 1);
        assert!(started.elapsed() >= OPEN_DELAY, "the open delay is kept");
        eventually("didOpen arrives", || {
            received(&rec, "textDocument/didOpen").len() == 1
        })
        .await;
        assert_eq!(
            received(&rec, "textDocument/didOpen")[0]["params"]["textDocument"],
            json!({ "uri": uri, "languageId": "rust", "version": 1, "text": v1 })
        );

        // Same text: nothing to send.
        let version = connection
            .sync_document(uri.clone(), "rust", v1.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 1);

        let version = connection
            .sync_document(uri.clone(), "rust", v2.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 2);
        eventually("didChange arrives", || {
            received(&rec, "textDocument/didChange").len() == 1
        })
        .await;
        let change = &received(&rec, "textDocument/didChange")[0]["params"];
        assert_eq!(change["textDocument"], json!({ "uri": uri, "version": 2 }));
        assert_eq!(
            change["contentChanges"],
            json!([{ "text": v2 }]),
            "full sync"
        );
        assert_eq!(received(&rec, "textDocument/didOpen").len(), 1);
        assert_eq!(
            connection.open_documents(),
            [(uri.clone(), "rust".to_owned(), v2.to_owned())]
        );

        connection.close_document(&uri).await;
        assert!(connection.open_documents().is_empty());
        eventually("didClose arrives", || {
            received(&rec, "textDocument/didClose").len() == 1
        })
        .await;
        // Closing an unknown document sends nothing.
        connection.close_document(&uri).await;

        // Reopened: a fresh didOpen at version 1.
        let version = connection
            .sync_document(uri.clone(), "rust", v2.to_owned())
            .await
            .unwrap();
        assert_eq!(version, 1);
        eventually("the second didOpen arrives", || {
            received(&rec, "textDocument/didOpen").len() == 2
        })
        .await;
        assert_eq!(received(&rec, "textDocument/didClose").len(), 1);
        let methods: Vec<Value> = events_named(&rec, "recv")
            .into_iter()
            .map(|message| message["method"].clone())
            .filter(|method| {
                method
                    .as_str()
                    .is_some_and(|m| m.starts_with("textDocument/"))
            })
            .collect();
        assert_eq!(
            methods,
            [
                "textDocument/didOpen",
                "textDocument/didChange",
                "textDocument/didClose",
                "textDocument/didOpen"
            ]
        );
        connection.stop(SOON).await;
    }

    #[tokio::test]
    async fn diagnostics_are_kept_per_document_and_waited_for_after_a_sync() {
        let (_dir, ws) = workspace();
        let (result, mut rx) = connect(&fake(&ws, json!({ "diagnosticsDelayMs": 300 }))).await;
        let connection = result.unwrap();
        let uri = Url::from_file_path(ws.join("bad.rs")).unwrap();
        assert_eq!(connection.diagnostics(&uri), None);
        connection
            .sync_document(
                uri.clone(),
                "rust",
                "ok\nthis is an ERROR here\n".to_owned(),
            )
            .await
            .unwrap();
        let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].range.start, lsp_types::Position::new(1, 11));
        assert_eq!(diagnostics[0].message, "fake error");
        assert_eq!(diagnostics[0].source.as_deref(), Some("fake"));
        assert_eq!(
            next_event(&mut rx).await,
            LspEvent::DiagnosticsChanged(uri.clone())
        );
        assert_eq!(connection.diagnostics(&uri).unwrap(), diagnostics);

        // After a change the old set is stale: the wait is for the new one
        // (published 300 ms later).
        connection
            .sync_document(uri.clone(), "rust", "all good\n".to_owned())
            .await
            .unwrap();
        assert_eq!(connection.diagnostics(&uri).unwrap().len(), 1, "not yet");
        let diagnostics = connection.wait_for_diagnostics(&uri, SOON).await.unwrap();
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(
            next_event(&mut rx).await,
            LspEvent::DiagnosticsChanged(uri.clone())
        );

        // Nothing published for a document: the wait gives up at its bound.
        let other = Url::from_file_path(ws.join("other.rs")).unwrap();
        let started = Instant::now();
        assert_eq!(
            connection
                .wait_for_diagnostics(&other, Duration::from_millis(200))
                .await,
            None
        );
        assert!(started.elapsed() >= Duration::from_millis(200));
        connection.stop(SOON).await;
        no_more_events(&mut rx);
    }
}
