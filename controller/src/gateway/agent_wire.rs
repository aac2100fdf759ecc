//! The agent's side of [`wire`]: what an agent sends is read with the
//! fields rmcp would drop moved into private keys, and what Steward sends
//! it is written with them back where the protocol has them — on stdio
//! line by line ([`Ingress`], [`Egress`]), over HTTP body by body
//! ([`request_body`], [`response`]).
//!
//! An agent of 2025-11-25 (said by its `initialize` on stdio, by its
//! `MCP-Protocol-Version` header over HTTP) means the experimental tasks
//! by `tasks/get` and `tasks/cancel`; rmcp reads those names as the
//! extension's of 2026-07-28, so they arrive renamed
//! ([`legacy_tasks::GET`], [`legacy_tasks::CANCEL`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::legacy_tasks;
use crate::runtime::mcp::wire;

/// Whether an agent that asked for protocol `version` means the
/// experimental tasks by `tasks/*` (every version before 2026-07-28).
pub fn legacy(version: &str) -> bool {
    version < "2026-07-28"
}

/// One message of an agent's, as rmcp can read it whole, or `None` when
/// nothing in it moves. `legacy` is what the agent's version says; an
/// `initialize` sets it.
pub fn from_agent(line: &[u8], legacy_agent: &mut bool) -> Option<Vec<u8>> {
    let find = |needle: &[u8]| memchr::memmem::find(line, needle).is_some();
    if !find(b"\"task") && !find(b"\"initialize\"") {
        return None;
    }
    let mut message: Value = serde_json::from_slice(line).ok()?;
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if method.as_deref() == Some("initialize") {
        if let Some(version) = message
            .pointer("/params/protocolVersion")
            .and_then(Value::as_str)
        {
            *legacy_agent = legacy(version);
        }
        return None;
    }
    let mut moved = wire::to_typed(&mut message);
    // A request that declares the 2026-07-28 extension in its own `_meta`
    // (SEP-2575) means that extension's methods, whatever the session's
    // version.
    let legacy_request = *legacy_agent
        && message
            .pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities/extensions")
            .and_then(|e| e.get(rmcp::model::TASKS_EXTENSION_ID))
            .is_none();
    let renamed = match method.as_deref() {
        Some("tasks/get") if legacy_request => Some(legacy_tasks::GET),
        Some("tasks/cancel") if legacy_request => Some(legacy_tasks::CANCEL),
        _ => None,
    };
    if let Some(renamed) = renamed {
        message["method"] = renamed.into();
        moved = true;
    }
    moved.then(|| serde_json::to_vec(&message).ok())?
}

/// A byte stream cut into lines: each whole line goes on mapped.
#[derive(Default)]
struct Lines {
    /// Not yet a whole line (no newline in its first `scanned` bytes).
    partial: Vec<u8>,
    scanned: usize,
}

impl Lines {
    /// Takes `bytes`; each line they complete goes to `out` as `map`
    /// makes it (`None`: as it is), its newline kept.
    fn push(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<u8>,
        mut map: impl FnMut(&[u8]) -> Option<Vec<u8>>,
    ) {
        self.partial.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(at) = memchr::memchr(b'\n', &self.partial[self.scanned..]) {
            let end = self.scanned + at;
            match map(&self.partial[start..end]) {
                Some(moved) => {
                    out.extend_from_slice(&moved);
                    out.push(b'\n');
                }
                None => out.extend_from_slice(&self.partial[start..=end]),
            }
            start = end + 1;
            self.scanned = start;
        }
        self.partial.drain(..start);
        self.scanned = self.partial.len();
    }

    /// What is left, not a whole line.
    fn rest(&mut self) -> Vec<u8> {
        self.scanned = 0;
        std::mem::take(&mut self.partial)
    }
}

/// An agent's stdio as rmcp reads it: each line through [`from_agent`].
pub struct Ingress<R> {
    inner: R,
    legacy: bool,
    lines: Lines,
    /// Lines ready for the reader, from `at`.
    ready: Vec<u8>,
    at: usize,
    eof: bool,
}

impl<R> Ingress<R> {
    /// `legacy`: the agent's version, when its `initialize` came before
    /// (a session resumed from the last controller).
    pub fn new(inner: R, legacy: bool) -> Self {
        Ingress {
            inner,
            legacy,
            lines: Lines::default(),
            ready: Vec::new(),
            at: 0,
            eof: false,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Ingress<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.at < this.ready.len() {
                let n = out.remaining().min(this.ready.len() - this.at);
                out.put_slice(&this.ready[this.at..this.at + n]);
                this.at += n;
                if this.at == this.ready.len() {
                    this.ready.clear();
                    this.at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // A last line without its newline goes as it is.
                this.ready.extend(this.lines.rest());
                if this.ready.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                this.eof = true;
            } else {
                let legacy = &mut this.legacy;
                this.lines.push(read.filled(), &mut this.ready, |line| {
                    from_agent(line, legacy)
                });
            }
        }
    }
}

/// The agent's stdio as rmcp writes it: each line through
/// [`wire::wire_line`].
pub struct Egress<W> {
    inner: W,
    lines: Lines,
    /// Lines to write, from `at`.
    pending: Vec<u8>,
    at: usize,
}

impl<W> Egress<W> {
    pub fn new(inner: W) -> Self {
        Egress {
            inner,
            lines: Lines::default(),
            pending: Vec::new(),
            at: 0,
        }
    }
}

impl<W: AsyncWrite + Unpin> Egress<W> {
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.at < self.pending.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.at += n;
        }
        self.pending.clear();
        self.at = 0;
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Egress<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        // What was taken before is written first: at most one write's
        // worth waits here.
        ready!(this.poll_drain(cx))?;
        this.lines.push(buf, &mut this.pending, wire::wire_line);
        // Started now; the rest goes with the next write or flush.
        if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let rest = this.lines.rest();
        this.pending.extend_from_slice(&rest);
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// An HTTP request's body as rmcp can read it whole ([`from_agent`]);
/// `version` is the request's `MCP-Protocol-Version`.
pub fn request_body(body: Bytes, version: Option<&str>) -> Bytes {
    let mut legacy_agent = version.is_none_or(legacy);
    match from_agent(body.trim_ascii(), &mut legacy_agent) {
        Some(moved) => Bytes::from(moved),
        None => body,
    }
}

/// One frame of a response body rmcp wrote, as the protocol has it: the
/// JSON of each SSE `data:` line (rmcp writes an event's JSON on one
/// line), or the whole body of a JSON answer.
pub fn response_frame(frame: Bytes) -> Bytes {
    if !wire::may_need_wire(&frame) {
        return frame;
    }
    if let Some(moved) = wire::wire_line(frame.trim_ascii()) {
        return Bytes::from(moved);
    }
    let mut out = Vec::with_capacity(frame.len());
    for line in frame.split_inclusive(|b| *b == b'\n') {
        let moved = line
            .strip_prefix(b"data:")
            .and_then(|data| wire::wire_line(data.trim_ascii()));
        match moved {
            Some(moved) => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&moved);
                out.push(b'\n');
            }
            None => out.extend_from_slice(line),
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn an_agents_stdio_carries_tasks_both_ways() {
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"r","task":{"ttl":5}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"s/1"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        );
        let mut read = Ingress::new(input.as_bytes(), false);
        let mut got = String::new();
        read.read_to_string(&mut got).await.unwrap();
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].contains("initialize"));
        let call: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(
            call["params"]["_meta"][wire::TASK],
            serde_json::json!({"ttl": 5})
        );
        let get: Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(get["method"], legacy_tasks::GET);
        assert_eq!(lines[3], r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);

        // A line longer than one read is whole when it is moved.
        let long = format!(
            "{}\n",
            serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "r", "arguments": {"text": "x".repeat(20_000)}, "task": {}}})
        );
        let mut read = Ingress::new(long.as_bytes(), true);
        let mut got = String::new();
        read.read_to_string(&mut got).await.unwrap();
        let call: Value = serde_json::from_str(got.trim_end()).unwrap();
        assert_eq!(call["params"]["_meta"][wire::TASK], serde_json::json!({}));
        assert_eq!(
            call["params"]["arguments"]["text"].as_str().unwrap().len(),
            20_000
        );

        // A 2026-07-28 agent's tasks/get is the extension's, and so is one
        // that declares the extension in its own `_meta`.
        let mut modern = false;
        assert!(
            from_agent(
                br#"{"id":2,"method":"tasks/get","params":{"taskId":"s/1"}}"#,
                &mut modern
            )
            .is_none()
        );
        let mut legacy_session = true;
        let opted_in = br#"{"id":2,"method":"tasks/get","params":{"taskId":"s/1","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#;
        assert!(from_agent(opted_in, &mut legacy_session).is_none());

        let mut written = Vec::new();
        let mut write = Egress::new(&mut written);
        let carried = serde_json::json!({"jsonrpc": "2.0", "id": 1,
            "result": {"content": [], "_meta": {wire::RESULT: {"task": {"taskId": "s/1"}}}}});
        let line = format!("{carried}\n");
        // Split anywhere: lines are whole when they are moved.
        write.write_all(&line.as_bytes()[..10]).await.unwrap();
        write.write_all(&line.as_bytes()[10..]).await.unwrap();
        write.write_all(b"{\"id\":2}\n").await.unwrap();
        write.flush().await.unwrap();
        let text = String::from_utf8(written).unwrap();
        let mut lines = text.lines();
        let first: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(
            first["result"],
            serde_json::json!({"task": {"taskId": "s/1"}})
        );
        assert_eq!(lines.next(), Some("{\"id\":2}"));
    }

    #[test]
    fn http_bodies_carry_tasks_both_ways() {
        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"s/1"}}"#,
        );
        let moved: Value =
            serde_json::from_slice(&request_body(body.clone(), Some("2025-11-25"))).unwrap();
        assert_eq!(moved["method"], legacy_tasks::CANCEL);
        assert_eq!(request_body(body.clone(), Some("2026-07-28")), body);
        let event = format!(
            "id: 0\ndata: {}\n\n",
            serde_json::json!({"id": 1, "result": {"tools": [{"name": "t", "_meta": {wire::EXECUTION: {"taskSupport": "optional"}}}]}})
        );
        let out = response_frame(Bytes::from(event));
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.starts_with("id: 0\ndata: "), "{text}");
        assert!(text.ends_with("\n\n"), "{text}");
        assert!(
            text.contains(r#""execution":{"taskSupport":"optional"}"#),
            "{text}"
        );
        let plain = Bytes::from_static(b"data: {\"id\":1,\"result\":{}}\n\n");
        assert_eq!(response_frame(plain.clone()), plain);
    }
}
