//! The session task of a connection and the state it shares with the
//! connection: the task drives async-lsp's main loop until the connection
//! or the process ends, records how, and reports it once
//! ([`LspEvent::Exited`]) — only when the connection was armed (`connect`
//! succeeded) and not stopped. The work-done progress still unfinished then
//! is over with it.

use std::future::Future;
use std::sync::{Arc, Mutex};

use async_lsp::ServerSocket;
use lsp_types::PublishDiagnosticsParams;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::documents::Store;
use super::errors::{closed_by_peer, describe};
use super::progress::Unfinished;
use super::{LspEvent, LspEventHandler};
use crate::runtime::process::ExitInfo;
use crate::runtime::start::{EXIT_SETTLE, wait_exit};
use crate::support::sync::lock;

/// What the connection and its session task share.
pub(super) struct Shared {
    pub(super) name: String,
    pub(super) on_event: LspEventHandler,
    pub(super) life: Mutex<Life>,
    pub(super) store: Mutex<Store>,
    /// Bumped on every publishDiagnostics; wakes `wait_for_diagnostics`.
    pub(super) published: watch::Sender<u64>,
    /// The work-done progress the server has begun and not ended; wakes
    /// `wait_for_progress_end`.
    pub(super) progress: watch::Sender<Unfinished>,
}

#[derive(Default)]
pub(super) struct Life {
    /// `connect` succeeded: events may be emitted.
    pub(super) armed: bool,
    /// `stop` or drop began: no more events.
    pub(super) stopped: bool,
    /// How the connection ended, once it has (reads after "the server").
    pub(super) closed: Option<String>,
}

impl Shared {
    /// Reports `event` when the connection is armed and not stopped.
    pub(super) fn emit(&self, event: LspEvent) {
        let live = {
            let life = lock(&self.life);
            life.armed && !life.stopped
        };
        if live {
            tracing::debug!(server = %self.name, event = ?event, "lsp event");
            (self.on_event)(event);
        }
    }

    /// Keeps a `textDocument/publishDiagnostics` and reports it.
    pub(super) fn publish(&self, params: Value) {
        let params = match serde_json::from_value::<PublishDiagnosticsParams>(params) {
            Ok(params) => params,
            Err(error) => {
                tracing::debug!(server = %self.name, %error, "ignored malformed publishDiagnostics");
                return;
            }
        };
        let uri = params.uri.clone();
        lock(&self.store).record(params);
        self.published.send_modify(|count| *count += 1);
        self.emit(LspEvent::DiagnosticsChanged(uri));
    }

    /// Follows a `$/progress` notification.
    pub(super) fn progress(&self, params: &Value) {
        self.progress.send_if_modified(|unfinished| {
            let changed = unfinished.apply(params);
            if changed {
                tracing::debug!(server = %self.name, token = %params["token"], value = %params["value"], "work-done progress");
            }
            changed
        });
    }

    /// The connection ended (or is being stopped): what was in progress
    /// will not end by itself, so it is over, and waiters wake.
    pub(super) fn end_progress(&self) {
        self.progress.send_if_modified(Unfinished::close);
    }
}

/// The session task's handles; dropping them aborts the tasks (closing the
/// connection and the tcp/socket server's stdio pipes).
pub(super) struct Tasks {
    pub(super) session: Option<JoinHandle<()>>,
    pub(super) pipes: Option<JoinHandle<()>>,
    /// Interrupts the session task's wait for an exit status.
    pub(super) close: CancellationToken,
}

impl Tasks {
    pub(super) fn abort(&mut self) {
        self.close.cancel();
        for task in [&self.session, &self.pipes].into_iter().flatten() {
            task.abort();
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Drives the main loop until the connection or the process ends, records
/// how, and reports it (when armed and not stopped).
pub(super) async fn run_session(
    main_loop: impl Future<Output = async_lsp::Result<()>>,
    socket: ServerSocket,
    mut exit: Option<watch::Receiver<Option<ExitInfo>>>,
    shared: Arc<Shared>,
    close: CancellationToken,
) {
    // async-lsp's loop panics once every socket is gone: keep one.
    let _socket = socket;
    let how = tokio::select! {
        ended = main_loop => {
            let how = match ended {
                Ok(()) => "closed the connection".to_owned(),
                Err(error) if closed_by_peer(&error) => "closed the connection".to_owned(),
                Err(error) => format!("broke the connection: {}", describe(&error)),
            };
            tracing::debug!(server = %shared.name, how = %how, "lsp main loop ended");
            lock(&shared.life).closed = Some(how.clone());
            shared.end_progress();
            match exit.as_mut() {
                Some(exit) => tokio::select! {
                    () = close.cancelled() => return,
                    info = tokio::time::timeout(EXIT_SETTLE, wait_exit(Some(exit))) => {
                        info.map_or(how, |info| info.to_string())
                    }
                },
                None => how,
            }
        }
        info = wait_exit(exit.as_mut()) => {
            let how = info.to_string();
            lock(&shared.life).closed = Some(how.clone());
            shared.end_progress();
            how
        }
    };
    shared.emit(LspEvent::Exited(how));
}
