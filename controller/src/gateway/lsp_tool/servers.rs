//! Reaching the language servers for one call: which server handles a file
//! (or which ones a workspace-wide operation asks), its connection across a
//! restart, the document opened on it, and bounded requests — asked once
//! more when an answer is empty while the server has just begun indexing
//! (after the wait for it) or the document was only just opened.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lsp_types::Url;
use serde_json::Value;

use super::paths::Document;
use super::shapes::is_empty;
use super::{Call, Refused};
use crate::gateway::lsp::{LspError, REQUEST_TIMEOUT, Route, Synced};
use crate::runtime::lsp::LspConnection;

/// When a document was only just opened and the answer is empty, how long
/// before asking once more (Qwen Code's document retry delay).
const RETRY_AFTER_OPEN: Duration = Duration::from_secs(2);

impl Call<'_> {
    pub(super) fn route(&self, named: Option<&str>, file: Option<&Path>) -> Result<Route, Refused> {
        self.gateway
            .lsp
            .route(&self.snap, named, file)
            .map_err(|e| match e {
                LspError::NoServerFor { file, ext } => Refused(format!(
                    "no language server of this workspace handles \"{ext}\" files like {}: map the extension in extensionToLanguage of .lsp.json, or name a server with serverName",
                    self.shown(&file)
                )),
                other => other.into(),
            })
    }

    /// Run `use_it` on `server`'s connection, waiting for it and retrying
    /// across a restart (see `LspService::with_connection`).
    pub(super) async fn on<T, F, Fut>(&self, server: &str, use_it: F) -> Result<T, Refused>
    where
        F: Fn(Arc<LspConnection>) -> Fut,
        Fut: Future<Output = Result<T, LspError>>,
    {
        Ok(self
            .gateway
            .lsp
            .with_connection(&self.snap, &self.gateway.status, server, use_it)
            .await?)
    }

    /// Open (or refresh) `doc` on the connection, tracked for replay.
    pub(super) async fn open(
        &self,
        route: &Route,
        conn: &LspConnection,
        doc: &Document,
    ) -> Result<Synced, LspError> {
        self.gateway
            .lsp
            .open(
                &route.server,
                conn,
                &doc.path,
                &route.language,
                doc.text.clone(),
            )
            .await
    }

    /// Open `doc` on `route`'s server and send `method` with `params(uri)`.
    /// When the answer is empty and the server began indexing since the
    /// wait for it (see [`Call::indexing_since`]), ask once more when it is
    /// done. Else, when the document was only just opened and the answer is
    /// empty, ask once more after [`RETRY_AFTER_OPEN`] (the server may still
    /// be analysing it), as Qwen Code does.
    pub(super) async fn ask(
        &self,
        route: &Route,
        doc: &Document,
        method: &str,
        params: &(dyn Fn(&Url) -> Value + Sync),
    ) -> Result<(Value, Url), Refused> {
        self.on(&route.server, |conn| async move {
            let synced = self.open(route, &conn, doc).await?;
            let params = params(&synced.uri);
            let mut answer = request(&conn, method, params.clone()).await?;
            if is_empty(&answer) && self.indexing_since(&route.server, &conn).await? {
                answer = request(&conn, method, params).await?;
            } else if synced.fresh && is_empty(&answer) {
                tokio::time::sleep(RETRY_AFTER_OPEN).await;
                answer = request(&conn, method, params).await?;
            }
            Ok((answer, synced.uri))
        })
        .await
    }

    /// After an empty answer: whether the server reports work in progress
    /// now, begun after the wait before asking (many servers begin indexing
    /// once they are given a document). Then this waits for it as that wait
    /// does, and `true` says to ask once more; still unfinished in time is
    /// [`LspError::StillIndexing`].
    pub(super) async fn indexing_since(
        &self,
        server: &str,
        conn: &LspConnection,
    ) -> Result<bool, LspError> {
        if conn.progress().is_none() {
            return Ok(false);
        }
        self.gateway
            .lsp
            .until_indexed(&self.snap, server, conn)
            .await?;
        Ok(true)
    }

    /// The servers a workspace-wide operation asks: the named one, else
    /// every Ready one.
    pub(super) fn servers(&self, named: Option<&str>) -> Result<Vec<String>, Refused> {
        if let Some(name) = named {
            return Ok(vec![self.route(Some(name), None)?.server]);
        }
        let ready: Vec<String> = self
            .gateway
            .lsp
            .ready()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        if ready.is_empty() {
            return Err(Refused(
                "no language server of this workspace is ready; see `steward status`".to_owned(),
            ));
        }
        Ok(ready)
    }
}

/// Send one request, bounded.
pub(super) async fn request(
    conn: &LspConnection,
    method: &str,
    params: Value,
) -> Result<Value, LspError> {
    conn.request(method, params, REQUEST_TIMEOUT)
        .await
        .map_err(LspError::Protocol)
}
