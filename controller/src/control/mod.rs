//! The control socket: a unix socket under HOME_DIR through which `steward
//! status|reload|stop|start|restart|lsp|events|logs|describe` talk to a
//! running controller. Protocol: one JSON request per line; one JSON
//! answer per line (a stream of them for the requests that
//! [`Request::is_stream`]).
//!
//! - [`protocol`]: the requests, the typed replies ([`Reply`]) and their
//!   wire form, made and read in one place;
//! - [`server`]: the controller's end (accept, check the peer, answer on
//!   the event loop);
//! - [`streams`]: the answers that are streams (`status --watch`,
//!   `events -w`, `logs -f`);
//! - [`client`]: the commands' end: typed calls that get the kind of reply
//!   they asked for.

pub mod client;
pub mod protocol;
pub(crate) mod server;
pub(crate) mod streams;

pub use client::ControlError;
pub use protocol::{Answer, LogsQuery, RawJson, Reply, Request};
pub use server::Incoming;
