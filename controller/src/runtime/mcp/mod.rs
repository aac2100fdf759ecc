//! MCP connections: one live session with one MCP server.
//!
//! This module owns the protocol side of an MCP server: it spawns a stdio
//! server through the [`Spawner`](crate::runtime::process::Spawner) (never
//! rmcp's own child-process transport: we need our process groups and
//! parent-death signal) or connects to a remote endpoint (streamable HTTP or
//! SSE, built by [`remote`]), runs the `initialize` handshake (the client
//! side of the session is ours, `session`, over rmcp's message types and
//! transports), lists what the server offers (every page), and then
//! watches the session
//! — re-listing the server when it announces changes — until it is stopped. It does not decide anything: the controller gets
//! [`McpEvent`]s and reconciles.
//!
//! Where things are: `connect` opens a session (spawn or reach, handshake,
//! first lists, the failure's message), `session` carries requests and
//! answers over a transport (`stdio` for a stdio server), `client` handles
//! what the server sends that is not an answer, `stdout` watches a stdio
//! server's output, `lists` lists what a server
//! offers, `watch` is the per-connection watcher task, `relist` its
//! schedule of re-lists and `liveness` its pings, `connection` is
//! [`McpConnection`], `describe` makes errors and URLs fit for messages;
//! [`relay`] forwards calls and [`remote`] reaches remote servers.
//!
//! Invariants:
//!
//! - **Nothing outlives a failed start.** Any error after the spawn closes the
//!   session and stops the process (group reaped) before [`McpConnection::connect`]
//!   returns; the error carries the server's last stderr lines.
//! - **One watcher task per connection** re-lists the server after its
//!   list-change notifications, notices the process exiting or the session
//!   ending ([`McpEvent::Exited`]) and checks liveness. It ends with the connection: [`McpConnection::stop`]
//!   joins it before touching the process, so no event is emitted during or
//!   after a stop, and dropping the connection aborts it.
//! - **A storm of `list_changed` costs nothing.** Re-lists are coalesced
//!   per server (`relist`): at most one in flight and at most one started
//!   every 250 ms, the first at once and, after a burst, exactly one more
//!   that begins after its last notification, so nothing is missed. Only
//!   the kinds announced are listed again, and [`McpEvent::ListsChanged`]
//!   is emitted only when what the server offers differs: a server
//!   announcing the same list 1000 times a second is re-listed 4 times a
//!   second and never makes the controller look at it again.
//! - **Liveness costs nothing for a server that talks.** A server that sent
//!   anything within the ping interval, or has a forwarded call in flight, is
//!   not pinged; pings of all sessions share a budget per interval. Any
//!   answer is alive (an error answer too: some servers lack `ping`);
//!   [`McpEvent::Unresponsive`] only when a ping got no answer within twice
//!   the ping timeout *and* nothing else came from the server meanwhile.
//! - **The `initialize` lifecycle is pinned.** rmcp's default protocol version
//!   (2026-07-28) has no `initialize`; we offer the newest version that still
//!   has one (2025-11-25), and a server answers with a version it speaks
//!   (2024-11-05 … 2025-06-18 for our fake), which rmcp accepts.
//! - **Secrets stay out of our logs and messages**: env values and header
//!   values are never printed, and URLs (ours and those inside reqwest's
//!   errors) are shown without their query or user info.

// Sampling, roots and logging are deprecated by SEP-2577 (protocol 2026-07-28)
// but are part of the initialize-lifecycle versions we speak and relay.
#![allow(deprecated)]

mod client;
mod connect;
mod connection;
mod describe;
mod lists;
mod liveness;
pub mod relay;
mod relist;
pub mod remote;
mod session;
mod stdio;
mod stdout;
#[cfg(test)]
mod testing;
mod watch;
pub mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use self::client::session_capabilities;
pub use self::connection::McpConnection;
pub use self::lists::McpLists;
pub use self::liveness::PING_BUDGET;
pub use self::relay::{Broadcast, CallError, Caller, McpHandle, Relay};
use crate::runtime::process::ExitInfo;

/// How a session ended by itself. Displays as a phrase that reads after
/// "the server": `exited with code 3`, `closed the connection`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpExit {
    /// The stdio server process exited.
    Process(ExitInfo),
    /// The session closed while no exit status was seen: a remote server
    /// closed the connection, or a stdio server closed its stdout and kept
    /// running.
    Closed(String),
}

impl fmt::Display for McpExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpExit::Process(info) => write!(f, "{info}"),
            McpExit::Closed(message) => f.write_str(message),
        }
    }
}

/// Something that happened to a connection after it was established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpEvent {
    /// The server announced a change of its tools, prompts or resources,
    /// was re-listed, and offers something else than before:
    /// [`McpConnection::lists`] has it.
    ListsChanged,
    /// The server is gone; the connection is dead (stop it to clean up).
    Exited(McpExit),
    /// Two pings in a row timed out or failed; the message says how.
    Unresponsive(String),
}

/// Receives a connection's [`McpEvent`]s, from a background task.
pub type McpEventHandler = Arc<dyn Fn(McpEvent) + Send + Sync>;

/// Time bounds of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpTimeouts {
    /// Spawn to tools and prompts listed, stdio servers (also bounds each
    /// re-list).
    pub stdio_handshake: Duration,
    /// Connect to tools and prompts listed, remote servers (also bounds
    /// each re-list).
    pub remote_handshake: Duration,
    /// Time between the end of one ping and the next; zero disables pings.
    pub ping_interval: Duration,
    /// How long one ping may take.
    pub ping_timeout: Duration,
}

impl Default for McpTimeouts {
    fn default() -> Self {
        McpTimeouts {
            stdio_handshake: Duration::from_secs(30),
            remote_handshake: Duration::from_secs(5),
            ping_interval: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(5),
        }
    }
}
