//! The stdio server's stdout on its way to rmcp: every read tells the
//! [`Relay`] the server is talking, and a line that is not JSON (which rmcp
//! would skip silently) is flagged — the first one fails a start.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

use super::relay::Relay;

/// Bytes of a non-JSON stdout line kept for the error message.
const GARBAGE_SAMPLE_BYTES: usize = 200;
/// Non-JSON stdout lines logged at `warn` per connection; later ones at `debug`.
const GARBAGE_WARNINGS: u32 = 3;

/// Passes the server's stdout through to rmcp and flags lines that are not
/// JSON (rmcp skips them silently). The first one is published on `garbage`
/// (while connecting it fails the start); later ones are only logged.
pub(super) struct StdoutWatch<R> {
    inner: R,
    name: Arc<str>,
    line: LineState,
    /// The current non-JSON line, up to [`GARBAGE_SAMPLE_BYTES`].
    sample: Vec<u8>,
    garbage: watch::Sender<Option<String>>,
    /// Non-JSON lines seen so far (the first is still being published while
    /// it grows).
    seen: u32,
    /// Told whenever the server writes anything.
    relay: Arc<Relay>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineState {
    /// Only whitespace (or a byte-order mark) so far.
    Start,
    /// Starts like JSON: rmcp's to judge.
    Json,
    /// Not JSON.
    Garbage,
}

impl<R> StdoutWatch<R> {
    pub(super) fn new(
        name: &str,
        inner: R,
        garbage: watch::Sender<Option<String>>,
        relay: Arc<Relay>,
    ) -> Self {
        StdoutWatch {
            inner,
            name: name.into(),
            line: LineState::Start,
            sample: Vec::new(),
            garbage,
            seen: 0,
            relay,
        }
    }

    fn scan(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            match (self.line, byte) {
                (_, b'\n') => {
                    if self.line == LineState::Garbage {
                        self.end_garbage_line();
                    }
                    self.line = LineState::Start;
                }
                (LineState::Start, b' ' | b'\t' | b'\r' | 0xEF | 0xBB | 0xBF) => {}
                (LineState::Start, b'{' | b'[') => self.line = LineState::Json,
                (LineState::Start, _) => {
                    self.line = LineState::Garbage;
                    self.sample.clear();
                    self.sample.push(byte);
                }
                (LineState::Garbage, _) if self.sample.len() < GARBAGE_SAMPLE_BYTES => {
                    self.sample.push(byte);
                }
                _ => {}
            }
        }
        // An unterminated line counts as soon as it is seen: a server may
        // write it and then hang.
        if self.line == LineState::Garbage && self.seen == 0 {
            self.publish();
        }
    }

    fn publish(&self) {
        let text = String::from_utf8_lossy(&self.sample).trim_end().to_owned();
        self.garbage.send_if_modified(|current| {
            if current.as_deref() == Some(text.as_str()) {
                return false;
            }
            *current = Some(text);
            true
        });
    }

    fn end_garbage_line(&mut self) {
        if self.seen == 0 {
            self.publish();
        }
        self.seen = self.seen.saturating_add(1);
        let text = String::from_utf8_lossy(&self.sample);
        if self.seen <= GARBAGE_WARNINGS {
            tracing::warn!(server = %self.name, line = %text.trim_end(), "mcp server wrote a non-JSON line on stdout; ignored");
        } else {
            tracing::debug!(server = %self.name, line = %text.trim_end(), "mcp server wrote a non-JSON line on stdout; ignored");
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for StdoutWatch<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && buf.filled().len() > before
        {
            this.relay.heard();
            this.scan(&buf.filled()[before..]);
        }
        polled
    }
}
