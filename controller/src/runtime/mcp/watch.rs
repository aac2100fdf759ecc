//! The watcher task of a connection: it re-lists the server after its
//! list-change notifications, on the schedule of [`Relist`] (and says
//! [`McpEvent::ListsChanged`] when the lists differ), notices the process
//! exiting or the session ending ([`McpEvent::Exited`], once), pings a
//! silent server ([`McpEvent::Unresponsive`]), and on request closes the
//! session by a deadline and returns without a word.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::Announced;
use super::describe::Dig;
use super::lists::{Capabilities, ListError, McpLists, list_all};
use super::liveness::{PingFuture, next_ping_slot, ping_once};
use super::relay::Relay;
use super::relist::{Kinds, Relist, SPACING};
use super::session::Upstream;
use super::{McpEvent, McpEventHandler, McpExit, McpTimeouts};
use crate::runtime::process::ExitInfo;
use crate::runtime::start::{EXIT_SETTLE, wait_exit};
use crate::support::sync::lock;

/// What the watcher task of a connection works with.
pub(super) struct WatchArgs {
    pub(super) name: String,
    /// The session's task.
    pub(super) task: JoinHandle<()>,
    pub(super) cancel: CancellationToken,
    pub(super) peer: Upstream,
    /// A remote session's loss.
    pub(super) lost: Option<mpsc::UnboundedReceiver<McpExit>>,
    pub(super) announced: Arc<Announced>,
    pub(super) exit: Option<watch::Receiver<Option<ExitInfo>>>,
    pub(super) on_event: McpEventHandler,
    pub(super) stopped: Arc<AtomicBool>,
    pub(super) timeouts: McpTimeouts,
    pub(super) dig: Dig,
    pub(super) relay: Arc<Relay>,
    pub(super) capabilities: Capabilities,
    /// The connection's lists, which the re-lists replace.
    pub(super) lists: Arc<Mutex<Arc<McpLists>>>,
    pub(super) relist_timeout: Duration,
}

/// The watcher task of one connection; it ends with the connection.
pub(super) struct Watcher {
    task: JoinHandle<()>,
    /// Asks the task to close the session by the given deadline and return.
    close: oneshot::Sender<Instant>,
}

impl Watcher {
    /// Starts the task.
    pub(super) fn spawn(args: WatchArgs) -> Watcher {
        let (close, close_rx) = oneshot::channel();
        let task = tokio::spawn(watch_session(args, close_rx));
        Watcher { task, close }
    }

    /// Has the task close the session by `deadline` and waits for it to
    /// return (aborting it when it does not, shortly after).
    pub(super) async fn close(self, deadline: Instant) {
        let Watcher { mut task, close } = self;
        let _ = close.send(deadline);
        // The task bounds its own close by `deadline`; the margin covers
        // its last steps.
        let margin = Duration::from_millis(100);
        if tokio::time::timeout_at(deadline + margin, &mut task)
            .await
            .is_err()
        {
            task.abort();
            let _ = task.await;
        }
    }

    /// Ends the task now (and with it the session).
    pub(super) fn abort(&self) {
        self.task.abort();
    }
}

/// A re-list in flight: the kinds it lists and what the server answered.
type Relisting = Pin<Box<dyn Future<Output = (Kinds, Result<McpLists, String>)> + Send>>;

/// Re-lists, reports the end of the session, pings; on `close`
/// closes the session by the deadline it is given and returns silently.
async fn watch_session(args: WatchArgs, mut close: oneshot::Receiver<Instant>) {
    let WatchArgs {
        name,
        task,
        cancel,
        peer,
        mut lost,
        announced,
        mut exit,
        on_event,
        stopped,
        timeouts,
        dig,
        relay,
        capabilities,
        lists,
        relist_timeout,
    } = args;
    let emit = |event: McpEvent| {
        if !stopped.load(Ordering::SeqCst) {
            tracing::debug!(server = %name, event = ?event, "mcp event");
            on_event(event);
        }
    };
    // However this task ends (an abort included), the session ends with it.
    let _end = cancel.clone().drop_guard();
    let session = task;
    tokio::pin!(session);
    let pinging = !timeouts.ping_interval.is_zero();
    let mut next_ping = next_ping_slot(Instant::now(), timeouts.ping_interval);
    // The ping in flight, and when it was sent.
    let mut ping: Option<(PingFuture, Instant)> = None;
    let mut unresponsive = false;
    let mut lost_open = lost.is_some();
    // A remote session's loss comes as a notice; it is the end: nothing
    // after it (a ping failing on the dead session) is reported.
    let mut ended = false;
    let mut schedule = Relist::new(SPACING);
    let mut relisting: Option<Relisting> = None;
    let relist = |kinds: Kinds| -> Relisting {
        let (name, peer) = (name.clone(), peer.clone());
        let capabilities = capabilities.only(kinds);
        Box::pin(async move {
            let listed =
                tokio::time::timeout(relist_timeout, list_all(&name, &peer, capabilities, dig))
                    .await;
            let result = match listed {
                Ok(Ok(lists)) => Ok(lists),
                Ok(Err(ListError { phase, message })) => Err(format!("{phase}: {message}")),
                Err(_) => Err(format!(
                    "no answer within {}",
                    humantime::format_duration(relist_timeout)
                )),
            };
            (kinds, result)
        })
    };

    loop {
        let relist_at = schedule.deadline();
        tokio::select! {
            biased;
            deadline = &mut close => {
                let deadline = deadline.unwrap_or_else(|_| Instant::now());
                cancel.cancel();
                if tokio::time::timeout_at(deadline, &mut session).await.is_err() {
                    tracing::debug!(server = %name, "mcp session did not close in time");
                }
                return;
            }
            // While a re-list is promised, announcements wait marked: the
            // trailing re-list takes them.
            () = announced.marked(), if !ended && !schedule.pending() => {
                if let Some(kinds) = schedule.notified(announced.take(), Instant::now()) {
                    relisting = Some(relist(kinds));
                }
            }
            loss = recv_some(lost.as_mut()), if lost_open => match loss {
                Some(_) if ended => {}
                Some(exit) => {
                    ended = true;
                    emit(McpEvent::Exited(exit));
                }
                None => lost_open = false,
            },
            info = wait_exit(exit.as_mut()) => {
                emit(McpEvent::Exited(McpExit::Process(info)));
                return;
            }
            _ = &mut session => {
                if let Some(end) = session_ended(exit.as_mut(), &mut close).await
                    && !ended
                {
                    emit(McpEvent::Exited(end));
                }
                return;
            }
            (kinds, result) = async { relisting.as_mut().expect("guarded by is_some").await }, if relisting.is_some() => {
                relisting = None;
                schedule.finished();
                match result {
                    Ok(listed) => {
                        // This task is the only writer once connected.
                        let current = lock(&lists).clone();
                        let next = current.updated(kinds, listed);
                        let changed = next != *current;
                        if changed {
                            *lock(&lists) = Arc::new(next);
                        }
                        tracing::debug!(server = %name, ?kinds, changed, "mcp server re-listed");
                        if changed {
                            emit(McpEvent::ListsChanged);
                        }
                    }
                    Err(message) if !ended => {
                        tracing::warn!(server = %name, error = %message, "could not re-list the server after its list_changed");
                    }
                    Err(_) => {}
                }
            }
            // A trailing re-list, once the window allows it.
            () = tokio::time::sleep_until(relist_at.unwrap_or_else(Instant::now)), if relist_at.is_some() => {
                schedule.mark(announced.take());
                if let Some(kinds) = schedule.due(Instant::now()) {
                    relisting = Some(relist(kinds));
                }
            }
            () = tokio::time::sleep_until(next_ping), if pinging && !unresponsive && !ended && ping.is_none() => {
                let now = Instant::now();
                // A server that talked within the interval, or is busy with a
                // call, is alive: no ping (and no controller CPU) for it.
                let recently = now.checked_sub(timeouts.ping_interval).unwrap_or(now);
                if relay.in_flight() > 0 || relay.heard_since(recently) {
                    next_ping = next_ping_slot(now, timeouts.ping_interval);
                    continue;
                }
                // Only no answer at all counts: a slow answer, or an error
                // answer (a server without `ping`), is alive.
                let patience = timeouts.ping_timeout * 2;
                ping = Some((Box::pin(ping_once(peer.clone(), patience, dig)), now));
            }
            result = async { ping.as_mut().expect("guarded by is_some").0.as_mut().await }, if ping.is_some() => {
                let sent = ping.take().map(|(_, sent)| sent).unwrap_or_else(Instant::now);
                next_ping = next_ping_slot(Instant::now(), timeouts.ping_interval);
                let Err(message) = result else { continue };
                if ended {
                    continue;
                }
                if relay.heard_since(sent) {
                    tracing::debug!(server = %name, error = %message, "no answer to ping, but the server talked meanwhile");
                    continue;
                }
                // A ping fails when the session ends, too: report the end.
                if (&mut session).now_or_never().is_some() {
                    if let Some(end) = session_ended(exit.as_mut(), &mut close).await {
                        emit(McpEvent::Exited(end));
                    }
                    return;
                }
                if exit.as_ref().is_some_and(|rx| rx.borrow().is_some()) {
                    continue; // the exit branch reports it
                }
                unresponsive = true;
                emit(McpEvent::Unresponsive(format!(
                    "{message}, and nothing else from the server meanwhile"
                )));
            }
        }
    }
}

/// The next message of `rx`; pending for ever without one.
async fn recv_some<T>(rx: Option<&mut mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// How the session ended; `None` when a close was asked for meanwhile.
async fn session_ended(
    exit: Option<&mut watch::Receiver<Option<ExitInfo>>>,
    close: &mut oneshot::Receiver<Instant>,
) -> Option<McpExit> {
    let Some(exit) = exit else {
        return Some(McpExit::Closed("closed the connection".to_owned()));
    };
    tokio::select! {
        biased;
        _ = close => None,
        info = tokio::time::timeout(EXIT_SETTLE, wait_exit(Some(exit))) => Some(match info {
            Ok(info) => McpExit::Process(info),
            Err(_) => McpExit::Closed("closed its stdout".to_owned()),
        }),
    }
}
