//! The control socket: a unix socket under HOME_DIR through which `steward
//! status|reload|stop|start|restart|lsp|events|logs|describe` talk to a
//! running controller. Protocol: one JSON request per line; one JSON
//! response per line (a stream of them for the requests that
//! [`Request::is_stream`]).
//!
//! - [`protocol`]: the requests, the answers and their wire form;
//! - [`server`]: the controller's end (accept, check the peer, answer);
//! - [`streams`]: the answers that are streams (`status --watch`,
//!   `events -w`, `logs -f`);
//! - [`client`]: the commands' end.

pub mod client;
pub mod protocol;
pub mod server;
pub mod streams;

pub use client::{ControlError, connect, request, stream, watch};
pub use protocol::{LogsQuery, RawJson, Request, Response};
pub use server::{Incoming, serve, write_line};
