//! The client of a session: what the server sends that is not an answer — list changes, log messages, resource updates, and requests
//! (`roots/list`, sampling, elicitation) — goes to the watcher task or, for
//! a forwarded call, through the [`Relay`] to the client whose call is in
//! flight. List changes are marked on the session's [`Announced`] (a stdio
//! server's before rmcp sees them, by its transport).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use futures::future::BoxFuture;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, ErrorData, Implementation, ListRootsResult, LoggingMessageNotification,
    ProtocolVersion, ResourceUpdatedNotification, Root, ServerNotification, ServerRequest,
};
use tokio::sync::Notify;

use super::relay::Relay;
use super::relist::{Kinds, ListKind};
use super::session::Handler;

/// The kinds of list a server announced as changed that the watcher task
/// (or, while connecting, `open_session`) has not taken yet. Marking wakes
/// the watcher only when nothing was marked: a burst while the watcher
/// holds off (a re-list in flight or the window of [`Relist`]) costs an
/// atomic `or` per notification and no wake-up.
///
/// [`Relist`]: super::relist::Relist
#[derive(Debug, Default)]
pub(super) struct Announced {
    kinds: AtomicU8,
    wake: Notify,
}

impl Announced {
    /// The server announced that its `kind` list changed. `false` when
    /// announcements were already waiting (a burst: the watcher holds off).
    pub(super) fn add(&self, kind: ListKind) -> bool {
        let first = self.kinds.fetch_or(kind.bit(), Ordering::AcqRel) == 0;
        if first {
            self.wake.notify_one();
        }
        first
    }

    /// The kinds marked since the last take.
    pub(super) fn take(&self) -> Kinds {
        Kinds::from_bits(self.kinds.swap(0, Ordering::AcqRel))
    }

    /// Returns once something was marked since the last take (or a wake
    /// left over from a take that found it: then [`Announced::take`] may
    /// be empty).
    pub(super) async fn marked(&self) {
        self.wake.notified().await;
    }
}

/// The session's client: list-change notifications are marked on the
/// [`Announced`] the watcher task (or, while connecting, `open_session`)
/// takes; what the server sends for a forwarded request goes through the
/// [`Relay`].
pub(super) struct Client {
    name: Arc<str>,
    pub(super) announced: Arc<Announced>,
    stopped: Arc<AtomicBool>,
    pub(super) relay: Arc<Relay>,
}

impl Client {
    pub(super) fn new(name: &str, relay: Arc<Relay>) -> (Client, Arc<AtomicBool>) {
        let stopped = Arc::new(AtomicBool::new(false));
        let client = Client {
            name: name.into(),
            announced: Arc::default(),
            stopped: Arc::clone(&stopped),
            relay,
        };
        (client, stopped)
    }

    /// A server request goes to the client whose call is in flight.
    async fn forward(&self, request: ServerRequest, what: &str) -> Result<ClientResult, ErrorData> {
        match self.relay.current_caller() {
            Some(caller) => caller.forward(request).await,
            None => Err(ErrorData::invalid_request(
                format!(
                    "{what} is only available while a client's call to this server is in flight"
                ),
                None,
            )),
        }
    }

    fn changed(&self, kind: ListKind) {
        self.relay.heard();
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        tracing::trace!(server = %self.name, kind = ?kind, "mcp list_changed");
        self.announced.add(kind);
    }
}

impl Client {
    /// A notification of the server (progress is the transport's, see
    /// [`RelayedProgress`](super::relay::RelayedProgress)).
    fn notification(&self, notification: ServerNotification) {
        match notification {
            ServerNotification::ToolListChangedNotification(_) => self.changed(ListKind::Tools),
            ServerNotification::PromptListChangedNotification(_) => {
                self.changed(ListKind::Prompts);
            }
            ServerNotification::ResourceListChangedNotification(_) => {
                self.changed(ListKind::Resources);
            }
            ServerNotification::LoggingMessageNotification(n) => {
                self.relay
                    .broadcast(ServerNotification::LoggingMessageNotification(
                        LoggingMessageNotification::new(n.params),
                    ))
            }
            ServerNotification::ResourceUpdatedNotification(n) => {
                self.relay
                    .broadcast(ServerNotification::ResourceUpdatedNotification(
                        ResourceUpdatedNotification::new(n.params),
                    ))
            }
            other => {
                tracing::trace!(server = %self.name, notification = ?other, "mcp notification")
            }
        }
    }

    /// The answer to a request of the server.
    async fn answer_request(&self, request: ServerRequest) -> Result<ClientResult, ErrorData> {
        match request {
            ServerRequest::PingRequest(_) => Ok(ClientResult::empty(())),
            ServerRequest::ListRootsRequest(_) => {
                Ok(ClientResult::ListRootsResult(self.list_roots()))
            }
            ServerRequest::CreateMessageRequest(r) => self
                .create_message(r.params)
                .await
                .map(|result| ClientResult::CreateMessageResult(Box::new(result))),
            ServerRequest::ElicitRequest(r) => self
                .create_elicitation(r.params)
                .await
                .map(ClientResult::ElicitResult),
            ServerRequest::CustomRequest(r) => Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {}", r.method),
                None,
            )),
            _ => Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "method not found",
                None,
            )),
        }
    }

    fn list_roots(&self) -> ListRootsResult {
        let root = self.relay.root();
        let uri = lsp_types::Url::from_directory_path(root)
            .map(String::from)
            .unwrap_or_else(|()| format!("file://{}", root.display()));
        let mut entry = Root::new(uri);
        entry.name = root.file_name().map(|n| n.to_string_lossy().into_owned());
        ListRootsResult::new(vec![entry])
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.forward(request, "sampling").await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(ErrorData::internal_error(
                "the client answered sampling/createMessage with another result",
                None,
            )),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, ErrorData> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.forward(request, "elicitation").await? {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the client answered elicitation/create with another result",
                None,
            )),
        }
    }

    /// What the session's `initialize` says of Steward.
    pub(super) fn info() -> ClientConfig {
        #[allow(deprecated)]
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new("steward", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

impl Handler for Client {
    fn notified(&self, notification: ServerNotification) {
        self.notification(notification);
    }

    fn answer(
        self: Arc<Self>,
        request: ServerRequest,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>> {
        Box::pin(async move { self.answer_request(request).await })
    }
}
