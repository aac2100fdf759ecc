//! Stdio sessions that outlive their controller.
//!
//! `steward mcp` hands the agent's stdio to the controller
//! ([`super::handover`]) and stays, as the agent's child, until the session
//! ends. When the controller goes away first — stopped for a restart or an
//! upgrade, or killed — the agent must not notice: `steward mcp` attaches to
//! the next controller (or becomes it) and hands the same pipes over again
//! with a [`Resume`]: the client's `initialize` parameters (the new
//! controller serves the session as already initialized: no second
//! handshake on the wire), the lists it last saw (it hears `list_changed`
//! when they differ), a 2026-07-28 client's open `subscriptions/listen`
//! requests (read again first, so they go on) and the bytes the old
//! controller read but did not serve.
//!
//! The controller tells `steward mcp` what it needs over the socket, one
//! [`Back`] line at a time: the session's state whenever it changes, then
//! either [`Back::Ended`] (the agent hung up: `steward mcp` exits too) or
//! [`Back::Drained`] (a graceful stop). A graceful stop stops reading the
//! agent's input at a message boundary ([`Gate`]), lets every request
//! already read be answered, and hands back what was read past that
//! boundary, so no request is lost; from then on nothing more of it reaches
//! the agent (its teardown would answer, and so end, the open listens). A
//! killed controller says nothing, but it kept the requests it was serving
//! where `steward mcp` reads them ([`Ledger`]): `steward mcp` answers those
//! at once (their work may or may not have been done, so they are not sent
//! again) instead of leaving their client waiting for its timeout, and the
//! next ones are served.
//!
//! Wire format, both ways: a JSON line, optionally followed by raw bytes
//! whose count the line gives (the bytes of the agent's input that move
//! from one controller to the next).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use rmcp::model::InitializeRequestParams;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf};
use tokio::sync::watch;

use crate::support::sync::lock;

/// How long a stopping controller lets the requests it read be answered
/// before it hands their session back (the ones still unanswered are lost).
pub const HANDBACK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a session needs to go on under another controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resume {
    /// The client's `initialize` parameters, with the protocol version
    /// negotiated; none for a client of the 2026-07-28 lifecycle (which has
    /// no `initialize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialize: Option<InitializeRequestParams>,
    /// The fingerprints of the lists the client last saw (tools, prompts,
    /// resources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<[u64; 3]>,
    /// The client's open `subscriptions/listen` requests (2026-07-28), as
    /// it sent them: the next controller reads them first and goes on
    /// serving them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listens: Vec<String>,
    /// The agent's input read but not served: it comes first.
    #[serde(skip)]
    pub pending: Vec<u8>,
}

/// What `steward mcp` answers the request `id` (canonical JSON) of
/// `method` when the controller serving it was killed (one JSON-RPC line): a
/// tool call gets an error result, which the agent's model reads; any other
/// request a JSON-RPC error. `None` for an id that is not JSON.
fn killed_answer(id: &str, method: &str) -> Option<Vec<u8>> {
    let id: serde_json::Value = serde_json::from_str(id).ok()?;
    let why = "steward's controller was killed while serving this request; \
               the session goes on under the next controller";
    let answer = if method == "tools/call" {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!(
                "{why}. The tool may or may not have run: check before calling it again."
            )}],
            "isError": true,
        }})
    } else {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32603,
            "message": format!("{why}; send the request again"),
        }})
    };
    let mut line = serde_json::to_vec(&answer).ok()?;
    line.push(b'\n');
    Some(line)
}

/// The requests a controller is serving in a handed-over session, kept where
/// the `steward mcp` that handed it over can read them once the controller
/// was killed: a memory file (`memfd`) the controller makes for the session
/// and passes to `steward mcp` with the session's first [`Back::State`].
/// Rewritten at each change (one `pwrite`, no wake-up of `steward mcp`:
/// nothing reads it while the controller lives). The record is a 4-byte
/// little-endian length, then a JSON [`Served`].
#[derive(Debug)]
pub struct Ledger(std::fs::File);

impl Ledger {
    /// A new, empty ledger.
    #[allow(unsafe_code)]
    pub fn create() -> io::Result<Ledger> {
        // SAFETY: a NUL-terminated name and flags; the descriptor returned
        // is owned by nothing else.
        let fd = unsafe { libc::memfd_create(c"steward-inflight".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned here alone.
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Ledger(std::fs::File::from(fd)))
    }

    /// The ledger a controller passed.
    pub fn from_fd(fd: OwnedFd) -> Ledger {
        Ledger(std::fs::File::from(fd))
    }

    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.0)
    }

    /// Record `served` in place of what was there.
    fn write(&self, served: &Served) {
        use std::os::unix::fs::FileExt as _;
        let mut record = vec![0u8; 4];
        if serde_json::to_writer(&mut record, served).is_err() {
            return;
        }
        let len = (record.len() - 4) as u32;
        record[..4].copy_from_slice(&len.to_le_bytes());
        if let Err(error) = self.0.write_all_at(&record, 0) {
            tracing::debug!(%error, "record the requests in flight");
        }
    }

    /// What was last recorded (nothing when the record is unreadable: a
    /// write cut short by the kill).
    pub fn read(&self) -> Served {
        use std::os::unix::fs::FileExt as _;
        let mut len = [0u8; 4];
        if self.0.read_exact_at(&mut len, 0).is_err() {
            return Served::default();
        }
        let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
        if self.0.read_exact_at(&mut body, 4).is_err() {
            return Served::default();
        }
        serde_json::from_slice(&body).unwrap_or_default()
    }
}

/// What a [`Ledger`] holds: where the session's output stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Served {
    /// The requests delivered and not answered: canonical id → method.
    #[serde(default)]
    pub inflight: BTreeMap<String, String>,
    /// A message to the agent was begun and not ended (its line break not
    /// written yet): a kill leaves that line torn.
    #[serde(default)]
    pub torn: bool,
}

impl Served {
    /// What `steward mcp` writes to the agent once the controller was
    /// killed: a line break ending a torn message (the agent drops that
    /// line, and nothing after it is glued to it), then an answer to each
    /// request.
    pub fn killed_answers(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.torn {
            out.push(b'\n');
        }
        for (id, method) in &self.inflight {
            out.extend(killed_answer(id, method).unwrap_or_default());
        }
        out
    }
}

/// What a bridge sends after the handover's mark: its client's view and,
/// when the session went on elsewhere before, how to resume it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attach {
    /// [`super::profile::Profile::encode`]d, empty for the default.
    #[serde(default)]
    pub profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
    /// How many raw bytes (the resume's pending input) follow the line.
    #[serde(default)]
    pub pending: usize,
}

/// What a controller tells the bridge of a handed-over session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Back {
    /// The session's state, each time it changes.
    #[serde(rename_all = "camelCase")]
    State {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        initialize: Option<Box<InitializeRequestParams>>,
        seen: [u64; 3],
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        listens: Vec<String>,
    },
    /// The controller stops; every request read was answered; `pending`
    /// raw bytes follow (the input read past the last served message).
    Drained { pending: usize },
    /// The agent hung up: the session is over.
    Ended,
}

/// A JSON line and the raw bytes after it.
pub fn frame<T: Serialize>(head: &T, bytes: &[u8]) -> Vec<u8> {
    let mut out = serde_json::to_vec(head).expect("a frame head serializes");
    out.push(b'\n');
    out.extend_from_slice(bytes);
    out
}

/// Read one JSON line (after what `start` already holds), then `count(&head)`
/// raw bytes; `Ok(None)` at the end of the stream before a line.
pub async fn read_frame<T, R>(
    read: &mut R,
    start: &mut Vec<u8>,
    count: impl Fn(&T) -> usize,
) -> io::Result<Option<(T, Vec<u8>)>>
where
    T: for<'de> Deserialize<'de>,
    R: AsyncRead + Unpin,
{
    let end = loop {
        if let Some(end) = start.iter().position(|b| *b == b'\n') {
            break end;
        }
        let mut more = [0u8; 4096];
        match read.read(&mut more).await? {
            0 => return Ok(None),
            n => start.extend_from_slice(&more[..n]),
        }
    };
    let head: T = serde_json::from_slice(&start[..end])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    start.drain(..=end);
    let want = count(&head);
    while start.len() < want {
        let mut more = vec![0u8; (want - start.len()).min(64 * 1024)];
        match read.read(&mut more).await? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the stream ended inside a frame",
                ));
            }
            n => start.extend_from_slice(&more[..n]),
        }
    }
    let bytes: Vec<u8> = start.drain(..want).collect();
    Ok(Some((head, bytes)))
}

/// The session's state as the controller reports it to the bridge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Handback {
    pub initialize: Option<InitializeRequestParams>,
    pub seen: [u64; 3],
    /// See [`Resume::listens`] (kept by the [`Gate`]).
    pub listens: Vec<String>,
}

impl Handback {
    pub fn back(&self) -> Back {
        Back::State {
            initialize: self.initialize.clone().map(Box::new),
            seen: self.seen,
            listens: self.listens.clone(),
        }
    }
}

/// A sender of a session's [`Handback`].
pub type HandbackTx = watch::Sender<Handback>;

/// The agent's input delivered to the session whole messages at a time,
/// with the requests read and not yet answered counted, so that it can stop
/// at a message boundary with nothing in flight (see the module doc). The
/// requests in flight go to the session's [`Ledger`], the open
/// `subscriptions/listen` requests it saw to its [`Handback`].
#[derive(Debug, Clone, Default)]
pub struct Gate {
    state: Arc<Mutex<GateState>>,
    answered: Arc<tokio::sync::Notify>,
    handback: Option<HandbackTx>,
    ledger: Option<Arc<Ledger>>,
}

#[derive(Debug, Default)]
struct GateState {
    /// Read from the agent, not yet delivered.
    buf: Vec<u8>,
    /// Bytes of a message whose delivery has begun (it is delivered whole
    /// even while draining).
    committed: usize,
    /// The requests delivered and not answered, and whether a message to
    /// the agent is half written (what the ledger records).
    served: Served,
    /// The open `subscriptions/listen` requests delivered: id (canonical
    /// JSON) and the request's line.
    listens: Vec<(String, String)>,
    draining: bool,
    /// Drained: the session is the next controller's, nothing more goes
    /// to the agent from here (the end of a message begun excepted). What
    /// comes after is the session's teardown: the answers that end its
    /// open listens, which the next controller goes on serving.
    sealed: bool,
    /// The input ended.
    eof: bool,
    waker: Option<Waker>,
}

/// What the gate needs of one message (the rest is skipped).
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// A response's head (its result is skipped).
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Cancelled<'a> {
    #[serde(borrow, rename = "requestId")]
    request_id: &'a RawValue,
}

fn canonical(id: &RawValue) -> String {
    serde_json::from_str::<serde_json::Value>(id.get())
        .map(|v| v.to_string())
        .unwrap_or_else(|_| id.get().to_owned())
}

/// Long-lived requests that are not waited for when draining: a
/// 2026-07-28 client's list-change subscription stays open for the session.
const NOT_WAITED: &[&str] = &["subscriptions/listen"];

/// What a message changed of what the gate keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    Nothing,
    /// The requests in flight (the ledger's).
    InFlight,
    /// The open listens (the handback's).
    Listens,
}

impl GateState {
    /// Count what the message at the start of the buffer (`len` bytes)
    /// does to the requests in flight and the open listens.
    fn delivered(&mut self, len: usize) -> Kept {
        let line = &self.buf[..len];
        let Ok(head) = serde_json::from_slice::<Head<'_>>(line) else {
            return Kept::Nothing;
        };
        match (head.method.as_deref(), head.id) {
            (Some(method), Some(id)) if NOT_WAITED.contains(&method) => {
                let text = String::from_utf8_lossy(line).trim_end().to_owned();
                self.listens.push((canonical(id), text));
                Kept::Listens
            }
            (Some(method), Some(id)) => {
                self.served
                    .inflight
                    .insert(canonical(id), method.to_owned());
                Kept::InFlight
            }
            (Some("notifications/cancelled"), None) => {
                let cancelled = head
                    .params
                    .and_then(|p| serde_json::from_str::<Cancelled<'_>>(p.get()).ok())
                    .map(|c| canonical(c.request_id));
                cancelled.map_or(Kept::Nothing, |id| self.ended(&id))
            }
            _ => Kept::Nothing,
        }
    }

    /// The request `id` was answered or cancelled: which it was.
    fn ended(&mut self, id: &str) -> Kept {
        if self.served.inflight.remove(id).is_some() {
            return Kept::InFlight;
        }
        let before = self.listens.len();
        self.listens.retain(|(open, _)| open != id);
        if self.listens.len() != before {
            Kept::Listens
        } else {
            Kept::Nothing
        }
    }
}

impl Gate {
    /// A gate that keeps `handback`'s open listens and, in `ledger`, the
    /// requests in flight.
    pub fn reporting(handback: HandbackTx, ledger: Option<Arc<Ledger>>) -> Gate {
        Gate {
            handback: Some(handback),
            ledger,
            ..Gate::default()
        }
    }

    /// Pass on what `kept` says changed: the requests in flight to the
    /// ledger, the open listens to the handback.
    fn report(&self, kept: Kept) {
        match kept {
            Kept::Nothing => {}
            Kept::InFlight => {
                if let Some(ledger) = &self.ledger {
                    // Under the lock: the last change is the last written.
                    ledger.write(&lock(&self.state).served);
                }
            }
            Kept::Listens => {
                let Some(handback) = &self.handback else {
                    return;
                };
                let now: Vec<String> = lock(&self.state)
                    .listens
                    .iter()
                    .map(|(_, line)| line.clone())
                    .collect();
                handback.send_if_modified(|h| {
                    let changed = h.listens != now;
                    h.listens = now;
                    changed
                });
            }
        }
    }

    /// The agent's input `read`, through this gate.
    pub fn reader<R: AsyncRead + Unpin>(&self, read: R) -> GateReader<R> {
        GateReader {
            read,
            gate: self.clone(),
        }
    }

    /// The agent's output `write`, seen by this gate (answers end requests).
    pub fn writer<W: AsyncWrite + Unpin>(&self, write: W) -> GateWriter<W> {
        GateWriter {
            write,
            line: Vec::new(),
            torn: false,
            gate: self.clone(),
        }
    }

    /// How many requests were read and not answered.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        lock(&self.state).served.inflight.len()
    }

    /// Stop delivering input at the next message boundary and wait (until
    /// `deadline`) for every request delivered to be answered; then the
    /// input read but not delivered, and how many requests were left
    /// unanswered.
    pub async fn drain(&self, deadline: tokio::time::Instant) -> (Vec<u8>, usize) {
        lock(&self.state).draining = true;
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            {
                let state = lock(&self.state);
                if (state.served.inflight.is_empty() && state.committed == 0) || state.eof {
                    break;
                }
            }
            if tokio::time::timeout_at(deadline, answered).await.is_err() {
                break;
            }
        }
        let mut state = lock(&self.state);
        state.sealed = true;
        let unanswered = state.served.inflight.len();
        // A message begun but not delivered whole cannot move: it is lost
        // with the unanswered requests.
        let committed = state.committed.min(state.buf.len());
        state.buf.drain(..committed);
        state.committed = 0;
        (std::mem::take(&mut state.buf), unanswered)
    }
}

/// The reading side of a [`Gate`].
pub struct GateReader<R> {
    read: R,
    gate: Gate,
}

impl<R: AsyncRead + Unpin> AsyncRead for GateReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            {
                let mut state = lock(&this.gate.state);
                if state.committed == 0 {
                    if state.draining {
                        // Never more: the session is handed back.
                        state.waker = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    let end = state.buf.iter().position(|b| *b == b'\n');
                    let whole = match end {
                        Some(end) => Some(end + 1),
                        // The last message of an input that ended without a
                        // line break.
                        None if state.eof && !state.buf.is_empty() => Some(state.buf.len()),
                        None if state.eof => return Poll::Ready(Ok(())),
                        None => None,
                    };
                    if let Some(len) = whole {
                        let kept = state.delivered(len);
                        if kept != Kept::Nothing {
                            drop(state);
                            this.gate.report(kept);
                            state = lock(&this.gate.state);
                        }
                        state.committed = len;
                    }
                }
                if state.committed > 0 {
                    let n = state.committed.min(out.remaining());
                    out.put_slice(&state.buf[..n]);
                    state.buf.drain(..n);
                    state.committed -= n;
                    if state.committed == 0 {
                        drop(state);
                        this.gate.answered.notify_waiters();
                    }
                    return Poll::Ready(Ok(()));
                }
            }
            // No whole message buffered: read more.
            let mut chunk = [0u8; 8192];
            let mut chunk = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.read).poll_read(cx, &mut chunk) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let mut state = lock(&this.gate.state);
                    if chunk.filled().is_empty() {
                        state.eof = true;
                        drop(state);
                        this.gate.answered.notify_waiters();
                    } else {
                        state.buf.extend_from_slice(chunk.filled());
                    }
                }
            }
        }
    }
}

/// The writing side of a [`Gate`].
pub struct GateWriter<W> {
    write: W,
    /// The message being written, up to its line break.
    line: Vec<u8>,
    /// Whether the ledger says a message is half written.
    torn: bool,
    gate: Gate,
}

impl<W> GateWriter<W> {
    /// Bytes written: each whole line that answers a request ends it.
    fn wrote(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&bytes[..end]);
            bytes = &bytes[end + 1..];
            // Nothing waits for an answer (a notification to the agent, say):
            // no need to read the message.
            let waiting = {
                let state = lock(&self.gate.state);
                !state.served.inflight.is_empty() || !state.listens.is_empty()
            };
            let answered = waiting
                .then(|| serde_json::from_slice::<Answer<'_>>(&self.line).ok())
                .flatten()
                .filter(|a| a.method.is_none())
                .and_then(|a| a.id.map(canonical));
            self.line.clear();
            if let Some(id) = answered {
                let kept = lock(&self.gate.state).ended(&id);
                if kept != Kept::Nothing {
                    self.gate.report(kept);
                    self.gate.answered.notify_waiters();
                }
            }
        }
        self.line.extend_from_slice(bytes);
        // A message is written whole in one write but when the agent's pipe
        // is full or the message is larger: then the ledger says so.
        let torn = !self.line.is_empty();
        if torn != self.torn && self.gate.ledger.is_some() {
            self.torn = torn;
            lock(&self.gate.state).served.torn = torn;
            self.gate.report(Kept::InFlight);
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for GateWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut buf = buf;
        if lock(&this.gate.state).sealed {
            if this.line.is_empty() {
                return Poll::Ready(Ok(buf.len()));
            }
            // The end of the message begun, no further.
            let end = buf
                .iter()
                .position(|b| *b == b'\n')
                .map_or(buf.len(), |e| e + 1);
            buf = &buf[..end];
        }
        match Pin::new(&mut this.write).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                this.wrote(&buf[..n]);
                Poll::Ready(Ok(n))
            }
            other => other,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().write).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().write).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    #[tokio::test]
    async fn draining_waits_for_answers_and_hands_back_what_was_not_delivered() {
        let gate = Gate::default();
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n{\"jsonrpc\":\"2.0\",\"id\":3,";
        let mut reader = gate.reader(&input[..]);
        let mut first = vec![0u8; 4096];
        let n = reader.read(&mut first).await.unwrap();
        // One whole message at a time.
        assert_eq!(&first[..n], &input[..n]);
        assert!(first[..n].ends_with(b"}\n"));
        assert_eq!(gate.in_flight(), 1);

        let (sink, mut peer) = tokio::io::duplex(1024);
        let mut writer = gate.writer(sink);
        let drained = tokio::spawn({
            let gate = gate.clone();
            async move {
                gate.drain(tokio::time::Instant::now() + std::time::Duration::from_secs(5))
                    .await
            }
        });
        tokio::task::yield_now().await;
        assert!(!drained.is_finished());
        // The answer, written in two pieces.
        writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\"")
            .await
            .unwrap();
        writer.write_all(b":1,\"result\":{}}\n").await.unwrap();
        let (pending, unanswered) = drained.await.unwrap();
        assert_eq!(unanswered, 0);
        // Everything after the first message moves to the next controller.
        assert_eq!(pending, &input[n..]);
        let mut echoed = vec![0u8; 64];
        let m = peer.read(&mut echoed).await.unwrap();
        assert!(m > 0);
    }

    #[tokio::test]
    async fn a_cancelled_request_is_not_waited_for_and_listen_never_is() {
        let gate = Gate::default();
        let input = b"{\"id\":\"a\",\"method\":\"tools/call\"}\n{\"id\":7,\"method\":\"subscriptions/listen\"}\n{\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"a\"}}\n";
        let mut reader = gate.reader(&input[..]);
        let mut all = Vec::new();
        reader.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, input);
        assert_eq!(gate.in_flight(), 0);
    }

    #[tokio::test]
    async fn open_listens_are_kept_in_the_handback_until_answered_or_cancelled() {
        let (handback, state) = watch::channel(Handback::default());
        let gate = Gate::reporting(handback, None);
        let listen = |id: &str| {
            format!("{{\"id\":{id},\"method\":\"subscriptions/listen\",\"params\":{{}}}}")
        };
        let input = format!(
            "{}\n{}\n{{\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":7}}}}\n",
            listen("7"),
            listen("\"b\"")
        );
        let mut reader = gate.reader(input.as_bytes());
        let mut line = vec![0u8; 4096];
        let n = reader.read(&mut line).await.unwrap();
        assert_eq!(&line[..n], format!("{}\n", listen("7")).as_bytes());
        assert_eq!(state.borrow().listens, [listen("7")]);
        let _ = reader.read(&mut line).await.unwrap();
        assert_eq!(state.borrow().listens, [listen("7"), listen("\"b\"")]);
        // Cancelled: gone; listens are never waited for.
        let _ = reader.read(&mut line).await.unwrap();
        assert_eq!(state.borrow().listens, [listen("\"b\"")]);
        assert_eq!(gate.in_flight(), 0);
        // Answered (the client ended it): gone.
        let (sink, _peer) = tokio::io::duplex(1024);
        let mut writer = gate.writer(sink);
        writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"result\":{}}\n")
            .await
            .unwrap();
        assert!(state.borrow().listens.is_empty());
        match state.borrow().back() {
            Back::State { listens, .. } => assert!(listens.is_empty()),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn the_ledger_has_the_requests_in_flight_and_a_half_written_message() {
        let (handback, _state) = watch::channel(Handback::default());
        let ledger = Arc::new(Ledger::create().unwrap());
        // What `steward mcp` reads: the descriptor it was passed.
        let read = Ledger::from_fd(ledger.as_fd().try_clone_to_owned().unwrap());
        assert_eq!(read.read(), Served::default());
        let gate = Gate::reporting(handback, Some(ledger));
        let input = b"{\"id\":1,\"method\":\"tools/call\"}\n{\"id\":\"p\",\"method\":\"prompts/get\"}\n{\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"p\"}}\n";
        let mut reader = gate.reader(&input[..]);
        let mut line = vec![0u8; 4096];
        let request = |id: &str, method: &str| (id.to_owned(), method.to_owned());
        let requests = || read.read().inflight.into_iter().collect::<Vec<_>>();
        let _ = reader.read(&mut line).await.unwrap();
        assert_eq!(requests(), [request("1", "tools/call")]);
        let _ = reader.read(&mut line).await.unwrap();
        assert_eq!(
            requests(),
            [request("\"p\"", "prompts/get"), request("1", "tools/call")]
        );
        // Cancelled by the client: not served any more.
        let _ = reader.read(&mut line).await.unwrap();
        assert_eq!(requests(), [request("1", "tools/call")]);
        // The answer, written in two pieces: torn in between.
        let (sink, _peer) = tokio::io::duplex(1024);
        let mut writer = gate.writer(sink);
        writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,")
            .await
            .unwrap();
        assert!(read.read().torn);
        let killed = read.read().killed_answers();
        assert!(
            killed.starts_with(b"\n{"),
            "{}",
            String::from_utf8_lossy(&killed)
        );
        assert_eq!(killed.iter().filter(|b| **b == b'\n').count(), 2);
        writer.write_all(b"\"result\":{}}\n").await.unwrap();
        assert_eq!(read.read(), Served::default());
        assert!(read.read().killed_answers().is_empty());
    }

    #[test]
    fn a_killed_controllers_call_is_answered_as_a_tool_error_and_other_requests_as_errors() {
        let answer = |id: &str, method: &str| -> serde_json::Value {
            let line = killed_answer(id, method).unwrap();
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
            assert!(line.ends_with(b"\n"));
            serde_json::from_slice(&line).unwrap()
        };
        let call = answer("7", "tools/call");
        assert_eq!(call["id"], 7);
        assert_eq!(call["result"]["isError"], true);
        let text = call["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("may or may not have run"), "{text}");
        let other = answer("\"x\"", "resources/read");
        assert_eq!(other["id"], "x");
        assert_eq!(other["error"]["code"], -32603);
        assert!(killed_answer("not json", "tools/call").is_none());
    }

    #[tokio::test]
    async fn after_a_drain_only_the_end_of_a_message_begun_reaches_the_agent() {
        let gate = Gate::default();
        let (sink, mut agent) = tokio::io::duplex(1024);
        let mut writer = gate.writer(sink);
        writer.write_all(b"{\"a\":1}\n{\"b\":").await.unwrap();
        let _ = gate
            .drain(tokio::time::Instant::now() + std::time::Duration::from_secs(1))
            .await;
        // The session's teardown: the end of the message begun, then an
        // answer to a listen, which must not reach the agent.
        writer
            .write_all(b"2}\n{\"id\":7,\"result\":{}}\n")
            .await
            .unwrap();
        writer.write_all(b"{\"c\":3}\n").await.unwrap();
        drop(writer);
        let mut got = Vec::new();
        agent.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"{\"a\":1}\n{\"b\":2}\n");
    }

    #[tokio::test]
    async fn the_deadline_ends_a_drain_and_counts_what_was_left() {
        let gate = Gate::default();
        let input = b"{\"id\":1,\"method\":\"tools/call\"}\n";
        let mut reader = gate.reader(&input[..]);
        let mut buf = vec![0u8; 64];
        let _ = reader.read(&mut buf).await.unwrap();
        let (_, unanswered) = gate
            .drain(tokio::time::Instant::now() + std::time::Duration::from_millis(20))
            .await;
        assert_eq!(unanswered, 1);
    }

    #[tokio::test]
    async fn frames_carry_a_line_and_raw_bytes() {
        let attach = Attach {
            profile: String::new(),
            resume: Some(Resume {
                seen: Some([1, 2, 3]),
                ..Resume::default()
            }),
            pending: 5,
        };
        let bytes = frame(&attach, b"ab\ncd");
        let mut start = Vec::new();
        let (head, raw) = read_frame::<Attach, _>(&mut &bytes[..], &mut start, |a| a.pending)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(raw, b"ab\ncd");
        assert_eq!(head.resume.unwrap().seen, Some([1, 2, 3]));
    }
}
