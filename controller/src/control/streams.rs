//! Streaming answers on the control socket ([`crate::control::Request::is_stream`]):
//! `status --watch`, `events -w` and `logs -f`. Each is one loop
//! (`push`): compute what is new, send it, wait for the store it reads to
//! change (or the client to hang up), again. Nothing here goes through the
//! controller's event loop: these only read the stores.

use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::watch;

use crate::control::protocol::{Answer, LogsQuery, RawJson, Reply, Request};
use crate::control::server::write_answer;
use crate::desired::snapshot::{DesiredStore, Key, Snapshot};
use crate::observe::logs::Which;
use crate::observe::status::StatusStore;
use crate::observe::view::StatusView;

/// What one turn of a stream does.
enum Step {
    /// Send these answers, then wait for a change.
    Send(Vec<Answer>),
    /// Nothing new: wait for a change.
    Wait,
    /// Send this last answer (if any) and end the stream.
    End(Option<Box<Answer>>),
}

/// Answer a streaming request until the client hangs up (or the stream ends).
pub async fn serve(
    request: Request,
    stream: UnixStream,
    store: Arc<DesiredStore>,
    view: Arc<StatusView>,
) {
    let status = view.status().clone();
    match request {
        Request::Watch => watch_status(stream, view, false).await,
        Request::StatusWithSecrets { .. } => watch_status(stream, view, true).await,
        Request::Events { .. } => watch_events(stream, status).await,
        Request::Logs(query) => follow_logs(stream, store, status, query).await,
        other => {
            let mut stream = stream;
            let _ = write_answer(
                &mut stream,
                Err(format!("answer {other:?} as a stream: it is not one")),
            )
            .await;
        }
    }
}

/// Send what `next` says after every change seen on `changes`, until the
/// client hangs up or `next` ends the stream.
async fn push(
    mut stream: UnixStream,
    mut changes: watch::Receiver<u64>,
    mut next: impl FnMut() -> Step,
) {
    loop {
        // Mark the current version seen before computing, so a change made
        // while computing wakes the next turn.
        changes.borrow_and_update();
        match next() {
            Step::Send(answers) => {
                for answer in answers {
                    if write_answer(&mut stream, answer).await.is_err() {
                        return;
                    }
                }
            }
            Step::Wait => {}
            Step::End(last) => {
                if let Some(answer) = last {
                    let _ = write_answer(&mut stream, *answer).await;
                }
                return;
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            // A hung-up client is noticed on the next write; also poll for EOF.
            _ = stream.readable() => {
                let mut buf = [0u8; 1];
                if let Ok(0) = stream.try_read(&mut buf) {
                    return;
                }
            }
        }
        let _ = stream.flush().await;
    }
}

/// `status --watch`: the document now and on every change (only when it differs).
async fn watch_status(stream: UnixStream, view: Arc<StatusView>, show_secrets: bool) {
    let changes = view.status().subscribe();
    let mut last: Option<Arc<RawValue>> = None;
    push(stream, changes, move || {
        // The view's JSON: shared with `status` requests, and only the
        // items that changed are serialized again.
        let Ok(json) = view.json(show_secrets) else {
            return Step::End(None);
        };
        if last.as_ref().is_some_and(|l| l.get() == json.get()) {
            return Step::Wait;
        }
        last = Some(json.clone());
        Step::Send(vec![Ok(Reply::StatusJson(RawJson(json)))])
    })
    .await;
}

/// `events -w`: every event kept, then each new or updated one.
async fn watch_events(stream: UnixStream, status: Arc<StatusStore>) {
    let changes = status.events().subscribe();
    let mut after = 0u64;
    let mut first = true;
    push(stream, changes, move || {
        let events = status.events().since(after);
        if events.is_empty() && !first {
            return Step::Wait;
        }
        first = false;
        after = events
            .iter()
            .map(|e| e.resource_version)
            .max()
            .unwrap_or(after);
        Step::Send(vec![Ok(Reply::Events(events))])
    })
    .await;
}

/// The server `query` names in `snap`: one of either kind, or the one of
/// `query.kind`.
pub fn logs_key(snap: &Snapshot, query: &LogsQuery) -> Result<Key, String> {
    let candidates: Vec<Key> = [Key::mcp(&query.name), Key::lsp(&query.name)]
        .into_iter()
        .filter(|k| query.kind.is_none_or(|kind| k.kind == kind) && snap.contains(k))
        .collect();
    match candidates.as_slice() {
        [key] => Ok(key.clone()),
        [] => Err(format!(
            "find server \"{}\": no such server in this workspace (known: {})",
            query.name,
            snap.keys()
                .into_iter()
                .map(|k| k.name)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => Err(format!(
            "choose between McpServer/{0} and LspServer/{0}: both exist (pass --kind mcp or --kind lsp)",
            query.name
        )),
    }
}

/// `logs` (one answer): the kept lines of one instance of the server.
pub fn read_logs(snap: &Snapshot, status: &StatusStore, query: &LogsQuery) -> Answer {
    let key = logs_key(snap, query)?;
    let which = if query.previous {
        Which::Previous
    } else {
        Which::Current
    };
    Ok(match status.logs().read(&key, which, query.tail) {
        Some(chunk) => Reply::Logs(chunk),
        None => Reply::Message(no_logs_message(snap, &key, query.previous)),
    })
}

fn no_logs_message(snap: &Snapshot, key: &Key, previous: bool) -> String {
    let remote = snap.get(key).is_some_and(|d| match d {
        crate::desired::snapshot::Desired::Mcp(m) => m.spec.command.is_none(),
        crate::desired::snapshot::Desired::Lsp(l) => l.spec.command.is_none(),
    });
    if remote {
        format!("{key} runs no process here (a remote server): it has no stderr")
    } else if previous {
        format!("{key} has no previous process")
    } else {
        format!("{key} has not started a process yet")
    }
}

/// `logs -f`: the kept lines (or the last `tail`), then every new line —
/// of the next processes too — until the server leaves the configuration.
async fn follow_logs(
    stream: UnixStream,
    store: Arc<DesiredStore>,
    status: Arc<StatusStore>,
    query: LogsQuery,
) {
    let changes = status.logs().subscribe();
    let mut after: Option<u64> = None;
    push(stream, changes, move || {
        let snap = store.snapshot();
        let key = match logs_key(&snap, &query) {
            Ok(key) => key,
            Err(_) if after.is_some() => {
                return Step::End(Some(Box::new(Ok(Reply::Message(format!(
                    "{}: it left the configuration",
                    query.name
                ))))));
            }
            Err(e) => return Step::End(Some(Box::new(Err(e)))),
        };
        let logs = status.logs();
        let Some(seen) = after else {
            // First turn: what is kept now (the announcement of "no process
            // yet" included), then only what follows.
            let first = read_logs(&snap, &status, &query);
            after = Some(match &first {
                Ok(Reply::Logs(chunk)) => chunk.last_seq,
                _ => 0,
            });
            return Step::Send(vec![first]);
        };
        let chunks = logs.since(&key, seen);
        let Some(last) = chunks.last() else {
            return Step::Wait;
        };
        after = Some(last.last_seq);
        // One answer per instance, so the client sees where a new process begins.
        Step::Send(chunks.into_iter().map(|c| Ok(Reply::Logs(c))).collect())
    })
    .await;
}
