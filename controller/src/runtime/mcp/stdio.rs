//! The transport of a stdio server: newline-delimited JSON-RPC read from
//! its stdout and written to its stdin, in the shape of rmcp's
//! [`Transport`].
//!
//! Ours rather than rmcp's `AsyncRwTransport` for what shows with hundreds
//! of servers or a misbehaving one:
//! - **Buffers follow the traffic.** A connection at rest holds a
//!   [`READ_ROOM`] read buffer and no write buffer; the room a large
//!   `tools/list` needed is given back once it is read (rmcp keeps 16 KiB
//!   of buffers per connection, plus the capacity of the longest line it
//!   ever read).
//! - **A list change costs a line scan.** A
//!   `notifications/{tools,prompts,resources}/list_changed` is recognised
//!   here before any decoding and marked on the connection's [`Announced`];
//!   a server announcing changes a thousand times a second costs a probe
//!   per line, not a decode, a handler task and a wake-up each. While such
//!   a burst lasts (an announcement finds the last one still waiting), the
//!   stdout is read every [`BURST_PAUSE`] rather than line by line: the
//!   pipe holds what comes meanwhile, and the wake-ups per notification —
//!   most of a storm's cost — become a few per second. Only a server in
//!   a burst waits for this, by at most the pause.
//!
//! Like rmcp's: a line longer than [`MAX_LINE`] is dropped (logged), blank
//! lines, a byte-order mark and a trailing `\r` are ignored, an undecodable
//! notification is skipped, and a message that is JSON but no JSON-RPC
//! message the client knows gets an `Invalid Request` error.

use std::borrow::Cow;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::ErrorData;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;
use tokio::time::{Duration, Instant};

use super::client::Announced;
use super::relist::ListKind;
use crate::support::sync::lock;

/// The longest line read; a longer one is dropped (16 MiB, as rmcp's and
/// its streamable HTTP client's bound).
pub(super) const MAX_LINE: usize = 16 * 1024 * 1024;
/// Free room made in the read buffer before each read (a buffer that
/// grows for a long line doubles, so long lines take few reads).
const READ_ROOM: usize = 512;
/// The longest line probed for a list change (those are short).
const PROBE_MAX: usize = 512;
/// How long reading pauses in a burst of list changes (a tenth of the
/// re-list window: the re-list schedule does not notice it).
const BURST_PAUSE: Duration = Duration::from_millis(25);

/// The stdio transport of one server (see the module doc).
pub(super) struct StdioTransport<R, W> {
    name: Arc<str>,
    read: R,
    /// Bytes read and not yet handed out; empty (no allocation) at rest.
    buf: Vec<u8>,
    /// `buf[..head]` is consumed.
    head: usize,
    /// `buf[head..scanned]` holds no newline.
    scanned: usize,
    /// Dropping the rest of an oversized line, up to its newline.
    discarding: bool,
    /// In a burst of list changes: no read before this.
    paused_until: Option<Instant>,
    write: Arc<Mutex<Option<W>>>,
    /// Lines to write, in the order `send` was called: sends may run as
    /// concurrent tasks, and whichever holds the writer writes them all.
    queued: Arc<std::sync::Mutex<std::collections::VecDeque<Vec<u8>>>>,
    announced: Arc<Announced>,
}

impl<R, W> StdioTransport<R, W> {
    pub(super) fn new(name: &str, read: R, write: W, announced: Arc<Announced>) -> Self {
        StdioTransport {
            name: name.into(),
            read,
            buf: Vec::new(),
            head: 0,
            scanned: 0,
            discarding: false,
            paused_until: None,
            write: Arc::new(Mutex::new(Some(write))),
            queued: Arc::default(),
            announced,
        }
    }
}

impl<R: AsyncRead + Unpin, W> StdioTransport<R, W> {
    /// The next whole line (without its newline), as a range of `buf`;
    /// `None` at the end of the stream. Cancel-safe: a partial line stays
    /// in `buf` for the next call.
    async fn next_line(&mut self) -> Option<Range<usize>> {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let end = self.scanned + at;
                let line = self.head..end;
                self.head = end + 1;
                self.scanned = self.head;
                if std::mem::take(&mut self.discarding) {
                    continue;
                }
                return Some(line);
            }
            if self.head == self.buf.len() || self.discarding {
                // Nothing pending: the buffer goes back, and the next read
                // gets a small one.
                self.buf = Vec::new();
                self.head = 0;
            } else if self.buf.len() - self.head > MAX_LINE {
                tracing::error!(server = %self.name, max_bytes = MAX_LINE, "mcp server wrote a line longer than the limit on stdout; dropped");
                self.buf = Vec::new();
                self.head = 0;
                self.discarding = true;
            } else if self.head > 0 {
                self.buf.drain(..self.head);
                self.head = 0;
            }
            self.scanned = self.buf.len();
            if let Some(until) = self.paused_until {
                // Kept in `self`: a cancelled wait resumes, not restarts.
                tokio::time::sleep_until(until).await;
                self.paused_until = None;
            }
            self.buf.reserve(READ_ROOM);
            match self.read.read_buf(&mut self.buf).await {
                Ok(0) => return None,
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(server = %self.name, %error, "reading the mcp server's stdout failed");
                    return None;
                }
            }
        }
    }
}

impl<R, W> Transport<RoleClient> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.enqueue(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let range = self.next_line().await?;
            let line = trimmed(&self.buf[range]);
            if line.is_empty() {
                continue;
            }
            if let Some(kind) = list_changed(line) {
                if !self.announced.add(kind) {
                    self.paused_until
                        .get_or_insert_with(|| Instant::now() + BURST_PAUSE);
                }
                continue;
            }
            // What rmcp's types would drop, moved where they keep it.
            let typed = super::wire::typed_line(line);
            let error = match serde_json::from_slice(typed.as_deref().unwrap_or(line)) {
                Ok(message) => return Some(message),
                Err(error) => error,
            };
            match error.classify() {
                serde_json::error::Category::Data if !is_notification(line) => {
                    tracing::debug!(server = %self.name, %error, "mcp server sent a message the client does not know; answered Invalid Request");
                    let answer = TxJsonRpcMessage::<RoleClient>::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    // Not awaited here: `receive` may be cancelled at any
                    // await, and the answer must not be lost with it.
                    tokio::spawn(self.enqueue(answer));
                }
                // Not JSON (the stdout watch reports it), or a
                // notification the client does not know: skipped.
                _ => {
                    tracing::debug!(server = %self.name, %error, "mcp server sent a line that is no known message; skipped")
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping stdin closes the pipe: the server sees its end.
        drop(self.write.lock().await.take());
        Ok(())
    }
}

impl<R, W: AsyncWrite + Unpin + Send + 'static> StdioTransport<R, W> {
    /// Queues `item` as a line now (so lines keep the order of the calls)
    /// and returns the write of everything queued.
    fn enqueue(
        &self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let queued = match serde_json::to_vec(&item) {
            Ok(mut line) => {
                line.push(b'\n');
                lock(&self.queued).push_back(line);
                Ok(())
            }
            Err(error) => Err(io::Error::other(error)),
        };
        let (write, lines) = (self.write.clone(), self.queued.clone());
        async move {
            queued?;
            let mut write = write.lock().await;
            let Some(write) = write.as_mut() else {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the transport is closed",
                ));
            };
            // Ours may have been written by an earlier call already.
            loop {
                let next = lock(&lines).pop_front();
                let Some(line) = next else { break };
                write.write_all(&line).await?;
            }
            write.flush().await
        }
    }
}

/// `line` without surrounding whitespace (a `\r` included) and a leading
/// byte-order mark.
fn trimmed(line: &[u8]) -> &[u8] {
    let line = line.trim_ascii();
    line.strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line)
        .trim_ascii_start()
}

/// The fields of a message that tell a notification and its method.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    id: Option<IgnoredAny>,
}

/// The kind of list a `notifications/*/list_changed` line announces.
fn list_changed(line: &[u8]) -> Option<ListKind> {
    if line.len() > PROBE_MAX || memchr::memmem::find(line, b"list_changed").is_none() {
        return None;
    }
    let probe: Probe = serde_json::from_slice(line).ok()?;
    if probe.id.is_some() {
        return None;
    }
    match probe.method?.as_ref() {
        "notifications/tools/list_changed" => Some(ListKind::Tools),
        "notifications/prompts/list_changed" => Some(ListKind::Prompts),
        "notifications/resources/list_changed" => Some(ListKind::Resources),
        _ => None,
    }
}

/// A JSON object with a method and no id: nothing to answer.
fn is_notification(line: &[u8]) -> bool {
    serde_json::from_slice::<Probe>(line).is_ok_and(|p| p.method.is_some() && p.id.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport() -> (
        StdioTransport<tokio::io::DuplexStream, tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        tokio::io::DuplexStream,
        Arc<Announced>,
    ) {
        let (server_out, read) = tokio::io::duplex(64 * 1024);
        let (write, server_in) = tokio::io::duplex(64 * 1024);
        let announced = Arc::new(Announced::default());
        let t = StdioTransport::new("s", read, write, announced.clone());
        (t, server_out, server_in, announced)
    }

    #[tokio::test]
    async fn list_changes_are_announced_and_never_decoded() {
        let (mut t, mut out, _in, announced) = transport();
        let lines = concat!(
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n",
            "\u{feff}{\"method\":\"notifications/prompts/list_changed\",\"jsonrpc\":\"2.0\",\"params\":{}}\r\n",
            "\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
        );
        out.write_all(lines.as_bytes()).await.unwrap();
        let message = t.receive().await.expect("the answer");
        assert!(matches!(message, rmcp::model::JsonRpcMessage::Response(_)));
        let kinds = announced.take();
        assert!(kinds.tools && kinds.prompts && !kinds.resources);
        assert!(t.buf.is_empty() || t.head == t.buf.len());
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_list_changes_is_read_in_pauses_and_an_answer_still_comes() {
        let (mut t, mut out, _in, announced) = transport();
        let change = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n";
        out.write_all(change.repeat(3).as_bytes()).await.unwrap();
        let reader = tokio::spawn(async move {
            let message = t.receive().await;
            (message, t)
        });
        tokio::task::yield_now().await;
        // The burst paused reading; what comes meanwhile waits in the pipe.
        out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n")
            .await
            .unwrap();
        let started = Instant::now();
        let (message, t) = reader.await.unwrap();
        assert!(matches!(
            message,
            Some(rmcp::model::JsonRpcMessage::Response(_))
        ));
        let waited = started.elapsed();
        assert!(
            waited >= BURST_PAUSE / 2 && waited <= BURST_PAUSE,
            "{waited:?}"
        );
        assert!(t.paused_until.is_none());
        assert!(announced.take().tools);
    }

    #[tokio::test]
    async fn a_line_split_across_reads_is_whole_and_the_buffer_is_given_back() {
        let (mut t, mut out, _in, _announced) = transport();
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"tools\":[],\"pad\":\"{}\"}}}}\n",
            "x".repeat(40_000)
        );
        let (first, second) = big.as_bytes().split_at(1000);
        let reader = tokio::spawn(async move {
            let message = t.receive().await;
            (message, t)
        });
        out.write_all(first).await.unwrap();
        tokio::task::yield_now().await;
        out.write_all(second).await.unwrap();
        let (message, mut t) = reader.await.unwrap();
        assert!(matches!(
            message,
            Some(rmcp::model::JsonRpcMessage::Response(_))
        ));
        drop(out);
        assert!(t.receive().await.is_none());
        assert!(
            t.buf.capacity() <= READ_ROOM,
            "the room of the large line is given back: {}",
            t.buf.capacity()
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_dropped_and_the_next_one_read() {
        let (mut t, mut out, _in, _announced) = transport();
        let writer = tokio::spawn(async move {
            let chunk = vec![b'x'; 1024 * 1024];
            out.write_all(b"{\"pad\":\"").await.unwrap();
            for _ in 0..(MAX_LINE / chunk.len() + 2) {
                out.write_all(&chunk).await.unwrap();
            }
            out.write_all(b"\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n")
                .await
                .unwrap();
            out
        });
        let message = t.receive().await;
        assert!(matches!(
            message,
            Some(rmcp::model::JsonRpcMessage::Response(_))
        ));
        let _out = writer.await.unwrap();
    }

    #[tokio::test]
    async fn an_unknown_request_is_answered_and_an_unknown_notification_skipped() {
        let (mut t, mut out, mut server_in, _announced) = transport();
        out.write_all(
            concat!(
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/custom\",\"params\":[1]}\n",
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"nonsense\":true}\n",
                "not json\n",
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n",
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        assert!(t.receive().await.is_some());
        let mut answer = vec![0u8; 256];
        let n = tokio::io::AsyncReadExt::read(&mut server_in, &mut answer)
            .await
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.contains("Invalid request"), "{answer}");
        assert!(answer.ends_with('\n'));
    }

    #[test]
    fn only_a_list_change_notification_is_probed_as_one() {
        let tools = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert_eq!(list_changed(tools), Some(ListKind::Tools));
        let resources = br#"{"method":"notifications/resources/list_changed","jsonrpc":"2.0"}"#;
        assert_eq!(list_changed(resources), Some(ListKind::Resources));
        let request = br#"{"jsonrpc":"2.0","id":1,"method":"notifications/tools/list_changed"}"#;
        assert_eq!(list_changed(request), None);
        let other = br#"{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}"#;
        assert_eq!(list_changed(other), None);
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"text":"list_changed"}}"#;
        assert_eq!(list_changed(answer), None);
    }
}
