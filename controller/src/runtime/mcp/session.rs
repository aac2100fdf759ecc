//! The client side of a session with an MCP server: requests and their
//! answers, the server's notifications and requests, over any rmcp
//! [`Transport`] (our stdio one, rmcp's HTTP ones).
//!
//! Ours rather than rmcp's client service because of what a session costs
//! at rest: rmcp's allocates two Tokio channels whose first block holds 32
//! of its ~370-byte messages each (23 KB) plus its task, per server, before
//! any message. Here one task per session owns the transport; what is sent
//! waits boxed in an unbounded queue (8 bytes a slot), an answer goes to its
//! request's oneshot, and the server's requests and notifications go to the
//! session's [`Handler`] (the client, `super::client`). rmcp's message
//! types are used as they are.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use rmcp::RoleClient;
use rmcp::model::{
    ClientNotification, ClientRequest, ClientResult, DiscoverRequest, DiscoverRequestParams,
    ErrorData, InitializeRequest, InitializeRequestParams, InitializedNotification, JsonRpcMessage,
    ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest,
    NumberOrString, PaginatedRequestParams, ProgressToken, Prompt, ProtocolVersion, RequestId,
    RequestMetaObject, Resource, ResourceTemplate, ServerNotification, ServerPeerInfo,
    ServerRequest, ServerResult, Tool,
};
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::sync::lock;

/// What handles the server's notifications and requests.
pub(super) trait Handler: Send + Sync + 'static {
    fn notified(&self, notification: ServerNotification);
    fn answer(
        self: Arc<Self>,
        id: RequestId,
        request: ServerRequest,
    ) -> BoxFuture<'static, Result<ClientResult, ErrorData>>;
}

/// What a request can end with besides its answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// The server answered with an error.
    #[error("Mcp error: {0}")]
    Server(ErrorData),
    /// The session ended before the answer, after the request was handed
    /// to the transport: the server may have acted on it.
    #[error("the connection closed")]
    Closed,
    /// The session ended before the request was handed to the transport:
    /// the server never saw it, so it may go to another connection.
    #[error("the connection closed before the request was sent")]
    NotSent,
    /// Sending the request failed.
    #[error("send {what}")]
    Send {
        what: &'static str,
        #[source]
        error: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The answer is not a result of the request's kind.
    #[error("the server answered {0} with another result")]
    Unexpected(&'static str),
}

type Answer = Result<ServerResult, UpstreamError>;
type Outgoing = Box<TxJsonRpcMessage<RoleClient>>;

/// The requests waiting for an answer, by id.
#[derive(Default)]
struct Pending {
    waiting: Mutex<HashMap<RequestId, oneshot::Sender<Answer>>>,
}

impl Pending {
    fn answer(&self, id: &RequestId, answer: Answer) {
        if let Some(tx) = lock(&self.waiting).remove(id) {
            let _ = tx.send(answer);
        }
    }
}

/// The requests of a session the server refused before acting on them (a
/// remote server's 401, which also ends the session): the transport notes
/// them, so that such a request, closed by the session's end, is known not
/// to have run — and why: for want of a sign-in (`None`), or because the
/// token could not be refreshed for now (the reason).
#[derive(Clone, Default)]
pub(crate) struct Refused(Arc<Mutex<std::collections::HashMap<RequestId, Option<String>>>>);

impl Refused {
    pub(crate) fn note(&self, id: RequestId, transient: Option<String>) {
        lock(&self.0).insert(id, transient);
    }

    /// `None`: not refused; `Some(None)`: refused, a sign-in helps;
    /// `Some(Some(why))`: refused while a refresh failed for now.
    pub(crate) fn why(&self, id: &RequestId) -> Option<Option<String>> {
        lock(&self.0).get(id).cloned()
    }
}

/// A session's handle (cheap to clone): send requests and notifications,
/// read what the server said of itself. The session ends when its task is
/// cancelled, the transport closes, or every handle is gone.
#[derive(Clone)]
pub(crate) struct Upstream {
    outbox: mpsc::UnboundedSender<Outgoing>,
    pending: Arc<Pending>,
    next: Arc<AtomicI64>,
    info: Arc<OnceLock<Arc<ServerPeerInfo>>>,
    /// The client context every request carries in a stateless session
    /// (protocol 2026-07-28: no `initialize`).
    stamp: Arc<OnceLock<RequestMetaObject>>,
    /// What the transport noted as refused unread.
    refused: Refused,
    /// The server serves requests of protocol 2026-07-28 on this session
    /// (see [`Upstream::probe_per_request`]).
    per_request: Arc<std::sync::atomic::AtomicBool>,
}

/// A request sent; its answer comes on `rx`.
pub(crate) struct Sent {
    pub(crate) id: RequestId,
    pub(crate) progress_token: ProgressToken,
    pub(crate) rx: oneshot::Receiver<Answer>,
    /// Forgets the request when the answer is no longer awaited.
    _forget: Forget,
}

struct Forget {
    pending: Arc<Pending>,
    id: RequestId,
}

impl Drop for Forget {
    fn drop(&mut self) {
        lock(&self.pending.waiting).remove(&self.id);
    }
}

impl Upstream {
    /// Starts the session's task over `transport`; `cancel` ends it.
    pub(super) fn start<T, H: Handler>(
        transport: T,
        client: Arc<H>,
        cancel: CancellationToken,
    ) -> (Upstream, JoinHandle<()>)
    where
        T: Transport<RoleClient> + 'static,
    {
        let (outbox, queue) = mpsc::unbounded_channel();
        let pending = Arc::new(Pending::default());
        let task = tokio::spawn(drive(
            transport,
            queue,
            outbox.downgrade(),
            pending.clone(),
            client,
            cancel,
        ));
        let upstream = Upstream {
            outbox,
            pending,
            next: Arc::new(AtomicI64::new(0)),
            info: Arc::default(),
            stamp: Arc::default(),
            refused: Refused::default(),
            per_request: Arc::default(),
        };
        (upstream, task)
    }

    /// What the server said of itself in its `initialize` answer.
    pub(crate) fn peer_info(&self) -> Option<Arc<ServerPeerInfo>> {
        self.info.get().cloned()
    }

    /// `initialize`, then `notifications/initialized`.
    pub(crate) async fn initialize(
        &self,
        params: InitializeRequestParams,
    ) -> Result<Arc<ServerPeerInfo>, UpstreamError> {
        let request = ClientRequest::InitializeRequest(InitializeRequest::new(params));
        let answer = self.request_as(request, "initialize request").await?;
        let ServerResult::InitializeResult(result) = answer else {
            return Err(UpstreamError::Unexpected("initialize"));
        };
        let info = Arc::new(ServerPeerInfo::from(result));
        let _ = self.info.set(info.clone());
        self.notify(ClientNotification::InitializedNotification(
            InitializedNotification::default(),
        ))?;
        Ok(info)
    }

    /// `server/discover` (protocol 2026-07-28, stateless): the server's
    /// capabilities for `version`, and from then on every request carries
    /// the client's context in its `_meta` (and its version header).
    pub(crate) async fn discover(
        &self,
        params: InitializeRequestParams,
        version: ProtocolVersion,
    ) -> Result<Arc<ServerPeerInfo>, UpstreamError> {
        let meta = RequestMetaObject::with_client_context(
            version.clone(),
            params.client_info,
            params.capabilities,
        );
        let mut request = DiscoverRequest::new(DiscoverRequestParams {});
        request.extensions.insert(meta.clone());
        let answer = self
            .request_as(ClientRequest::DiscoverRequest(request), "server/discover")
            .await?;
        let ServerResult::DiscoverResult(result) = answer else {
            return Err(UpstreamError::Unexpected("server/discover"));
        };
        if !result.supported_versions.contains(&version) {
            return Err(UpstreamError::Server(ErrorData::new(
                rmcp::model::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
                format!(
                    "the server speaks {:?}, not {version}",
                    result.supported_versions
                ),
                None,
            )));
        }
        let info = Arc::new(ServerPeerInfo::from_discover_result(version, result));
        let _ = self.info.set(info.clone());
        let _ = self.stamp.set(meta);
        // Stateless: every request is one of 2026-07-28.
        self.per_request.store(true, Ordering::Relaxed);
        Ok(info)
    }

    /// Whether the server serves a request of protocol 2026-07-28 on this
    /// session (asked once, after `initialize`, with `server/discover`):
    /// such a request says in its `_meta` who sent it, what it can do and
    /// the level of log it wants, and may be answered `input_required`.
    pub(crate) fn per_request(&self) -> bool {
        self.per_request.load(Ordering::Relaxed)
    }

    /// Ask the server (`server/discover`, as a request of 2026-07-28)
    /// whether it serves requests of that version; a server that does not
    /// know the method answers with an error, which means no.
    pub(crate) async fn probe_per_request(&self) -> bool {
        use rmcp::model::GetMeta as _;
        use rmcp::model::{DiscoverRequest, DiscoverRequestParams, Implementation};
        let mut request =
            ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams::default()));
        let meta = request.get_meta_mut();
        meta.set_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28);
        meta.set_client_info(Implementation::new("steward", env!("CARGO_PKG_VERSION")));
        meta.set_client_capabilities(rmcp::model::ClientCapabilities::default());
        let answer = self.request(request).await;
        let serves = matches!(
            &answer,
            Ok(ServerResult::DiscoverResult(found))
                if found.supported_versions.contains(&rmcp::model::ProtocolVersion::V_2026_07_28)
        );
        self.per_request.store(serves, Ordering::Relaxed);
        serves
    }

    /// Sends `request` with a progress token of its own (and, in a
    /// stateless session, the client's context).
    pub(crate) fn send(&self, mut request: ClientRequest) -> Result<Sent, UpstreamError> {
        if let Some(stamp) = self.stamp.get() {
            use rmcp::model::GetMeta as _;
            let meta = request.get_meta_mut();
            // An agent's own request of 2026-07-28 keeps its context.
            for (key, value) in stamp.0.iter() {
                meta.0.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = NumberOrString::Number(n);
        let progress_token = ProgressToken(NumberOrString::Number(n));
        set_progress_token(&mut request, progress_token.clone());
        let (tx, rx) = oneshot::channel();
        lock(&self.pending.waiting).insert(id.clone(), tx);
        let forget = Forget {
            pending: self.pending.clone(),
            id: id.clone(),
        };
        self.outbox
            .send(Box::new(TxJsonRpcMessage::<RoleClient>::request(
                request,
                id.clone(),
            )))
            .map_err(|_| UpstreamError::NotSent)?;
        Ok(Sent {
            id,
            progress_token,
            rx,
            _forget: forget,
        })
    }

    /// The requests the server refused before acting on them.
    pub(crate) fn refused(&self) -> &Refused {
        &self.refused
    }

    /// Sends `request` and waits for its answer.
    pub(crate) async fn request(&self, request: ClientRequest) -> Answer {
        self.request_as(request, "the request").await
    }

    async fn request_as(&self, request: ClientRequest, what: &'static str) -> Answer {
        let sent = self.send(request)?;
        match sent.rx.await {
            Ok(Err(UpstreamError::Send { error, .. })) => Err(UpstreamError::Send { what, error }),
            Ok(answer) => answer,
            Err(_) => Err(UpstreamError::Closed),
        }
    }

    /// Sends a notification.
    pub(crate) fn notify(&self, notification: ClientNotification) -> Result<(), UpstreamError> {
        self.outbox
            .send(Box::new(TxJsonRpcMessage::<RoleClient>::notification(
                notification,
            )))
            .map_err(|_| UpstreamError::Closed)
    }

    pub(crate) async fn list_all_tools(&self) -> Result<Vec<Tool>, UpstreamError> {
        self.pages(
            "tools/list",
            |params| {
                ClientRequest::ListToolsRequest(ListToolsRequest {
                    params,
                    ..Default::default()
                })
            },
            |result| match result {
                ServerResult::ListToolsResult(r) => Some((r.tools, r.next_cursor)),
                _ => None,
            },
        )
        .await
    }

    pub(crate) async fn list_all_prompts(&self) -> Result<Vec<Prompt>, UpstreamError> {
        self.pages(
            "prompts/list",
            |params| {
                ClientRequest::ListPromptsRequest(ListPromptsRequest {
                    params,
                    ..Default::default()
                })
            },
            |result| match result {
                ServerResult::ListPromptsResult(r) => Some((r.prompts, r.next_cursor)),
                _ => None,
            },
        )
        .await
    }

    pub(crate) async fn list_all_resources(&self) -> Result<Vec<Resource>, UpstreamError> {
        self.pages(
            "resources/list",
            |params| {
                ClientRequest::ListResourcesRequest(ListResourcesRequest {
                    params,
                    ..Default::default()
                })
            },
            |result| match result {
                ServerResult::ListResourcesResult(r) => Some((r.resources, r.next_cursor)),
                _ => None,
            },
        )
        .await
    }

    pub(crate) async fn list_all_resource_templates(
        &self,
    ) -> Result<Vec<ResourceTemplate>, UpstreamError> {
        self.pages(
            "resources/templates/list",
            |params| {
                ClientRequest::ListResourceTemplatesRequest(ListResourceTemplatesRequest {
                    params,
                    ..Default::default()
                })
            },
            |result| match result {
                ServerResult::ListResourceTemplatesResult(r) => {
                    Some((r.resource_templates, r.next_cursor))
                }
                _ => None,
            },
        )
        .await
    }

    /// Every page of a list: requests follow `nextCursor` until there is
    /// none (or it repeats, which would never end).
    async fn pages<I>(
        &self,
        what: &'static str,
        request: impl Fn(Option<PaginatedRequestParams>) -> ClientRequest,
        items: impl Fn(ServerResult) -> Option<(Vec<I>, Option<String>)>,
    ) -> Result<Vec<I>, UpstreamError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            let params = cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let answer = self.request(request(params)).await?;
            let (page, next) = items(answer).ok_or(UpstreamError::Unexpected(what))?;
            all.extend(page);
            match next {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                _ => return Ok(all),
            }
        }
    }
}

/// Gives `request` its progress token (as rmcp's client does for every
/// request but `initialize` and `server/discover`).
fn set_progress_token(request: &mut ClientRequest, token: ProgressToken) {
    use rmcp::model::GetMeta as _;
    if !matches!(
        request,
        ClientRequest::InitializeRequest(_) | ClientRequest::DiscoverRequest(_)
    ) {
        request.get_meta_mut().set_progress_token(token);
    }
}

/// A send's outcome: the request it carried, if any, and how it went.
type SendOutcome = (
    Option<RequestId>,
    Result<(), Box<dyn std::error::Error + Send + Sync>>,
);

/// The session's task: sends what is queued — each request as a task of
/// its own (an HTTP POST answered with JSON lasts as long as its call; ours
/// for stdio keeps the order of the lines itself), a notification or an
/// answer before whatever was queued after it — while reading what the
/// server sends; ends with the transport, the cancel, or the last handle. A
/// failed send fails its request only.
async fn drive<T: Transport<RoleClient>, H: Handler>(
    mut transport: T,
    mut queue: mpsc::UnboundedReceiver<Outgoing>,
    outbox: mpsc::WeakUnboundedSender<Outgoing>,
    pending: Arc<Pending>,
    client: Arc<H>,
    cancel: CancellationToken,
) {
    let mut sends: tokio::task::JoinSet<SendOutcome> = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break,
            Some(sent) = sends.join_next(), if !sends.is_empty() => {
                if let Ok((id, Err(error))) = sent {
                    tracing::debug!(%error, "sending to the mcp server failed");
                    if let Some(id) = id {
                        pending.answer(&id, Err(UpstreamError::Send { what: "the request", error }));
                    }
                }
            }
            next = queue.recv() => {
                let Some(message) = next else { break };
                let id = match message.as_ref() {
                    JsonRpcMessage::Request(r) => Some(r.id.clone()),
                    _ => None,
                };
                let send = transport.send(*message);
                if id.is_none() {
                    // A notification (or an answer) is sent before anything
                    // queued after it: `initialized` must reach the server
                    // before the first listing. Transports bound these.
                    if let Err(error) = send.await {
                        tracing::debug!(%error, "sending to the mcp server failed");
                    }
                    continue;
                }
                sends.spawn(async move {
                    let result = send
                        .await
                        .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>);
                    (id, result)
                });
            }
            message = transport.receive() => {
                let Some(message) = message else { break };
                match message {
                    JsonRpcMessage::Response(r) => pending.answer(&r.id, Ok(r.result)),
                    JsonRpcMessage::Error(e) => match &e.id {
                        Some(id) => pending.answer(id, Err(UpstreamError::Server(e.error))),
                        None => tracing::debug!(error = %e.error, "mcp server sent an error without an id"),
                    },
                    JsonRpcMessage::Notification(n) => client.notified(n.notification),
                    JsonRpcMessage::Request(r) => {
                        let (client, outbox) = (client.clone(), outbox.clone());
                        tokio::spawn(async move {
                            let message = match client.answer(r.id.clone(), r.request).await {
                                Ok(result) => TxJsonRpcMessage::<RoleClient>::response(result, r.id),
                                Err(error) => TxJsonRpcMessage::<RoleClient>::error(error, Some(r.id)),
                            };
                            if let Some(outbox) = outbox.upgrade() {
                                let _ = outbox.send(Box::new(message));
                            }
                        });
                    }
                }
            }
        }
    }
    // The requests still queued never reached the transport: `NotSent`.
    // Whatever else still waits was sent and gets `Closed` (its sender
    // dropped).
    queue.close();
    while let Ok(message) = queue.try_recv() {
        if let JsonRpcMessage::Request(r) = message.as_ref() {
            pending.answer(&r.id, Err(UpstreamError::NotSent));
        }
    }
    lock(&pending.waiting).clear();
    let _ = transport.close().await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use rmcp::model::{ListToolsResult, PingRequest};
    use rmcp::service::RxJsonRpcMessage;
    use tokio::sync::Notify;

    use super::*;

    /// A transport whose first send waits for `gate` (an HTTP POST that
    /// lasts as long as its call); what is sent goes to `sent`.
    struct SlowFirst {
        sent: mpsc::UnboundedSender<TxJsonRpcMessage<RoleClient>>,
        incoming: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleClient>>,
        gate: Arc<Notify>,
        first: Arc<AtomicBool>,
    }

    impl Transport<RoleClient> for SlowFirst {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let (sent, gate) = (self.sent.clone(), self.gate.clone());
            let slow = self.first.swap(false, Ordering::SeqCst);
            async move {
                if slow {
                    gate.notified().await;
                }
                let _ = sent.send(item);
                Ok(())
            }
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            self.incoming.recv().await
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    struct Quiet;

    impl Handler for Quiet {
        fn notified(&self, _: ServerNotification) {}

        fn answer(
            self: Arc<Self>,
            _: RequestId,
            _: ServerRequest,
        ) -> BoxFuture<'static, Result<ClientResult, ErrorData>> {
            Box::pin(async { Ok(ClientResult::empty(())) })
        }
    }

    /// `f`, or a failure after 5 s (what a test waits for must come).
    async fn within<F: Future>(f: F) -> F::Output {
        tokio::time::timeout(std::time::Duration::from_secs(5), f)
            .await
            .expect("in time")
    }

    fn request_id(message: &TxJsonRpcMessage<RoleClient>) -> RequestId {
        match message {
            JsonRpcMessage::Request(r) => r.id.clone(),
            other => panic!("not a request: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_slow_send_holds_up_only_its_own_request() {
        let (sent_tx, mut sent) = mpsc::unbounded_channel();
        let (server, incoming) = mpsc::unbounded_channel();
        let gate = Arc::new(Notify::new());
        let transport = SlowFirst {
            sent: sent_tx,
            incoming,
            gate: gate.clone(),
            first: Arc::new(AtomicBool::new(true)),
        };
        let cancel = CancellationToken::new();
        let (upstream, task) = Upstream::start(transport, Arc::new(Quiet), cancel.clone());

        let slow = upstream
            .send(ClientRequest::PingRequest(PingRequest::default()))
            .unwrap();
        let lister = tokio::spawn({
            let upstream = upstream.clone();
            async move { upstream.list_all_tools().await }
        });
        // The listing goes out and is answered while the ping's send waits.
        let listing = within(sent.recv()).await.unwrap();
        server
            .send(RxJsonRpcMessage::<RoleClient>::response(
                ServerResult::ListToolsResult(ListToolsResult::default()),
                request_id(&listing),
            ))
            .unwrap();
        assert!(within(lister).await.unwrap().unwrap().is_empty());

        gate.notify_one();
        let ping = within(sent.recv()).await.unwrap();
        assert_eq!(request_id(&ping), slow.id);
        server
            .send(RxJsonRpcMessage::<RoleClient>::response(
                ServerResult::empty(()),
                slow.id.clone(),
            ))
            .unwrap();
        assert!(within(slow.rx).await.unwrap().is_ok());

        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn requests_waiting_when_the_session_ends_are_closed() {
        let (sent_tx, _sent) = mpsc::unbounded_channel();
        let (server, incoming) = mpsc::unbounded_channel();
        let transport = SlowFirst {
            sent: sent_tx,
            incoming,
            gate: Arc::new(Notify::new()),
            first: Arc::new(AtomicBool::new(false)),
        };
        let (upstream, task) =
            Upstream::start(transport, Arc::new(Quiet), CancellationToken::new());
        let waiting = upstream.request(ClientRequest::PingRequest(PingRequest::default()));
        // The server goes away: its stream ends.
        drop(server);
        assert!(matches!(within(waiting).await, Err(UpstreamError::Closed)));
        task.await.unwrap();
    }
}
