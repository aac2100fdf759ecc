//! LSP connections: one live session with one language server.
//!
//! This module owns the protocol side of a language server: it spawns the
//! server through the [`Spawner`](crate::runtime::process::Spawner) when
//! the spec has a `command` (never a
//! process of its own making: we need our process groups and parent-death
//! signal), connects to it over stdio, TCP or a unix socket, runs the
//! `initialize` / `initialized` / `workspace/didChangeConfiguration`
//! handshake with async-lsp, answers the requests servers send to clients,
//! keeps the documents opened through Steward, the diagnostics the server
//! publishes and the work-done progress it reports, and closes it all again.
//! It does not decide anything: the controller gets [`LspEvent`]s and
//! reconciles, and the gateway decides what unfinished progress means to a
//! query.
//!
//! Invariants:
//!
//! - **Nothing outlives a failed start.** Any error after the spawn or the
//!   connect closes the connection and stops the process (group reaped) before
//!   [`LspConnection::connect`] returns; the error carries the server's last
//!   stderr lines. `startupTimeout` bounds spawn + connect + `initialize`.
//! - **Only what Steward started is killed.** A tcp/socket server without a
//!   `command` is an external daemon: Steward opens and closes the connection
//!   (and ends its session with `shutdown`), but never sends it `exit` and
//!   never signals anything.
//! - **One session task per connection** drives async-lsp's main loop and
//!   notices the end of the process or the connection ([`LspEvent::Exited`],
//!   at most once). Events are armed only once `connect` succeeds (a failure
//!   while connecting is the error, not an event) and silenced first thing in
//!   [`LspConnection::stop`] and on drop.
//! - **Every wait is bounded.** async-lsp has no timeout layer: each request
//!   is wrapped in a timer that is dropped (cancelled) as soon as the answer
//!   arrives. An answer that comes after its timer fired is discarded by the
//!   main loop; it can neither panic nor leak past the connection.
//! - **Notifications never end the session.** async-lsp's default router ends
//!   the main loop on an unknown notification; ours accepts every one.
//! - **Unfinished progress ends with the connection.** A token the server
//!   began and never ended counts until the connection closes or stops, no
//!   longer; a wait for it is bounded by its caller's timeout.
//!
//! Where things are: `endpoint` says where a server is reached, `handshake`
//! opens a session (spawn, connect, `initialize`, the failure's message),
//! `session` is the session task and the state it shares, `pace` reads a
//! server that floods its client in pauses, `client` answers
//! what servers ask of their client, `documents` keeps the documents and
//! diagnostics, `progress` the unfinished work-done progress, `raw` sends
//! any request by its method, `errors` phrases async-lsp's failures, and
//! `connection` is [`LspConnection`].

mod client;
mod connection;
mod documents;
mod endpoint;
mod errors;
mod handshake;
mod pace;
mod progress;
mod raw;
mod session;
#[cfg(test)]
mod testing;

use std::sync::Arc;
use std::time::Duration;

use lsp_types::Url;

pub use self::connection::LspConnection;
pub use self::errors::LspRequestError;
pub use self::progress::Progress;

/// After `textDocument/didOpen`, how long [`LspConnection::sync_document`]
/// waits before returning, so the server has processed the document before it
/// is queried.
pub const OPEN_DELAY: Duration = Duration::from_millis(200);

/// First pause between connection attempts to a tcp/socket server Steward
/// started; it doubles up to [`CONNECT_RETRY_MAX`].
pub const CONNECT_RETRY_FIRST: Duration = Duration::from_millis(250);
/// Longest pause between connection attempts.
pub const CONNECT_RETRY_MAX: Duration = Duration::from_secs(1);

/// Something that happened to a connection after it was established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LspEvent {
    /// The server is gone; the connection is dead (stop it to clean up). The
    /// text reads after "the server": `exited with code 1`, `killed by signal
    /// 9 (SIGKILL)`, `closed the connection`.
    Exited(String),
    /// The server published diagnostics for this document.
    DiagnosticsChanged(Url),
}

/// Receives a connection's [`LspEvent`]s, from its session task: keep it
/// quick (send to a channel), it runs on the protocol loop.
pub type LspEventHandler = Arc<dyn Fn(LspEvent) + Send + Sync>;
