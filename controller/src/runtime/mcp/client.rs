//! The rmcp client handler of a session: what the server sends that is not
//! an answer — list changes, log messages, resource updates, and requests
//! (`roots/list`, sampling, elicitation) — goes to the watcher task or, for
//! a forwarded call, through the [`Relay`] to the client whose call is in
//! flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, ErrorData, Implementation, ListRootsResult, LoggingMessageNotification,
    LoggingMessageNotificationParam, ProtocolVersion, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, Root, ServerNotification, ServerRequest,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::mpsc;

use super::McpExit;
use super::relay::Relay;
use super::relist::ListKind;

/// What the session tells the watcher task (or, while connecting,
/// `open_session`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Notice {
    /// `notifications/*/list_changed`.
    Changed(ListKind),
    /// A remote session was lost.
    Lost(McpExit),
}

/// rmcp client handler: list-change notifications become [`Notice`]s on a
/// channel the watcher task (or, while connecting, `open_session`) drains;
/// what the server sends for a forwarded request goes through the [`Relay`].
pub(super) struct Client {
    name: Arc<str>,
    pub(super) notices: mpsc::UnboundedSender<Notice>,
    stopped: Arc<AtomicBool>,
    pub(super) relay: Arc<Relay>,
}

impl Client {
    pub(super) fn new(
        name: &str,
        relay: Arc<Relay>,
    ) -> (Client, mpsc::UnboundedReceiver<Notice>, Arc<AtomicBool>) {
        let (notices, rx) = mpsc::unbounded_channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let client = Client {
            name: name.into(),
            notices,
            stopped: Arc::clone(&stopped),
            relay,
        };
        (client, rx, stopped)
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
        let _ = self.notices.send(Notice::Changed(kind));
    }
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(ListKind::Tools);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(ListKind::Prompts);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed(ListKind::Resources);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay
            .broadcast(ServerNotification::LoggingMessageNotification(
                LoggingMessageNotification::new(params),
            ));
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay
            .broadcast(ServerNotification::ResourceUpdatedNotification(
                ResourceUpdatedNotification::new(params),
            ));
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let root = self.relay.root();
        let uri = lsp_types::Url::from_directory_path(root)
            .map(String::from)
            .unwrap_or_else(|()| format!("file://{}", root.display()));
        let mut entry = Root::new(uri);
        entry.name = root.file_name().map(|n| n.to_string_lossy().into_owned());
        Ok(ListRootsResult::new(vec![entry]))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
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
        _context: RequestContext<RoleClient>,
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

    fn get_info(&self) -> ClientConfig {
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
