//! How the failures of async-lsp read: [`LspRequestError`] for a request
//! or document message, [`describe`] for the other errors we report, and
//! whether an error means the peer went away.

use std::io;
use std::time::Duration;

/// A request or document message the connection could not get through.
/// Messages read after "failed to" and name the method:
/// `send textDocument/hover: no answer within 30s`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LspRequestError {
    /// The connection is closed (the server hung up or exited, or the
    /// connection was stopped): the next connection may serve it.
    #[error("send {method}: the connection is closed")]
    Closed { method: String },
    /// No answer within the request's timeout.
    #[error("send {method}: no answer within {}", humantime::format_duration(*timeout))]
    Timeout { method: String, timeout: Duration },
    /// The server answered with an error.
    #[error("send {method}: the server answered with an error: {error}")]
    Server {
        method: String,
        error: async_lsp::ResponseError,
    },
    /// Not sent: the lifecycle requests are the connection's own, and a
    /// request must encode as JSON-RPC.
    #[error("send {method}: {why}")]
    Refused { method: String, why: &'static str },
    /// The transport failed otherwise (an undecodable answer, an I/O error).
    #[error("send {method}: {why}")]
    Transport { method: String, why: String },
}

impl LspRequestError {
    /// The failure of the answer to `method`.
    pub(super) fn of_answer(method: &str, error: async_lsp::Error) -> Self {
        let method = method.to_owned();
        match error {
            async_lsp::Error::ServiceStopped | async_lsp::Error::Eof => {
                LspRequestError::Closed { method }
            }
            async_lsp::Error::Response(error) => LspRequestError::Server { method, error },
            other => LspRequestError::Transport {
                method,
                why: other.to_string(),
            },
        }
    }

    /// `method` could not be sent: the connection is closed.
    pub(super) fn closed(method: &str) -> Self {
        LspRequestError::Closed {
            method: method.to_owned(),
        }
    }
}

/// An async-lsp error as a phrase.
pub(super) fn describe(error: &async_lsp::Error) -> String {
    match error {
        async_lsp::Error::ServiceStopped | async_lsp::Error::Eof => {
            "the connection is closed".to_owned()
        }
        async_lsp::Error::Response(response) => {
            format!("the server answered with an error: {response}")
        }
        other => other.to_string(),
    }
}

/// The peer went away: end of stream, or a write to a closed pipe/socket.
pub(super) fn closed_by_peer(error: &async_lsp::Error) -> bool {
    match error {
        async_lsp::Error::Eof => true,
        async_lsp::Error::Io(error) => matches!(
            error.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}
