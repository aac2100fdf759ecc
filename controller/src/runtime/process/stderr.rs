//! A process's stderr: read to the end by one task into a bounded tail
//! ([`StderrTail`], the last lines for error messages), each line also sent
//! to the spawner's [`StderrSink`] (a per-server log).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::support::sync::lock;

/// Stderr lines kept per process.
pub const STDERR_TAIL_LINES: usize = 200;
/// Stderr bytes kept per process; a longer unterminated line is split.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// Receives the stderr of every process a [`Spawner`](super::Spawner) starts, besides
/// the process's own tail
/// ([`Spawner::with_stderr_sink`](super::Spawner::with_stderr_sink)); a per-server log
/// that outlives one process implements it.
pub trait StderrSink: Send + Sync {
    /// Process `pid` started: the lines that follow with this pid are its own.
    fn started(&self, pid: u32);
    /// One complete stderr line of process `pid`.
    fn line(&self, pid: u32, line: &str);
}

/// What [`read_into_tail`] hands to the process: the tail, a watch that
/// turns `true` at the end of the stream, and the reading task.
pub(super) struct StderrReader {
    pub(super) tail: Arc<Mutex<StderrTail>>,
    pub(super) eof: watch::Receiver<bool>,
    pub(super) task: JoinHandle<()>,
}

/// Starts reading the stderr of process `pid` into a tail of
/// [`STDERR_TAIL_LINES`] lines and [`STDERR_TAIL_BYTES`] bytes, each line
/// also going to `sink` (told first that `pid` started).
pub(super) fn read_into_tail(
    stderr: ChildStderr,
    pid: u32,
    sink: Option<&Arc<dyn StderrSink>>,
) -> StderrReader {
    let mut stderr_tail = StderrTail::new(STDERR_TAIL_LINES, STDERR_TAIL_BYTES);
    if let Some(sink) = sink {
        sink.started(pid);
        stderr_tail.sink = Some((Arc::clone(sink), pid));
    }
    let tail = Arc::new(Mutex::new(stderr_tail));
    let (eof_tx, eof) = watch::channel(false);
    let task = tokio::spawn(read_stderr(stderr, Arc::clone(&tail), eof_tx));
    StderrReader { tail, eof, task }
}

async fn read_stderr(
    mut stderr: ChildStderr,
    tail: Arc<Mutex<StderrTail>>,
    eof: watch::Sender<bool>,
) {
    // Small and in the task itself: a process at rest costs no buffer of
    // its own (stderr is little and rare; a burst takes more reads).
    let mut buf = [0u8; 256];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => lock(&tail).push(&buf[..n]),
        }
    }
    lock(&tail).finish();
    eof.send_replace(true);
}

/// The last lines of a stream, bounded by line count and bytes; each line
/// also goes to the spawner's sink, if any.
pub(super) struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
    partial: Vec<u8>,
    max_lines: usize,
    max_bytes: usize,
    sink: Option<(Arc<dyn StderrSink>, u32)>,
}

impl fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StderrTail")
            .field("lines", &self.lines.len())
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl StderrTail {
    fn new(max_lines: usize, max_bytes: usize) -> Self {
        StderrTail {
            lines: VecDeque::new(),
            bytes: 0,
            partial: Vec::new(),
            max_lines: max_lines.max(1),
            max_bytes: max_bytes.max(1),
            sink: None,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let room = self.max_bytes - self.partial.len();
            let take = data.len().min(room);
            match data[..take].iter().position(|&b| b == b'\n') {
                Some(newline) => {
                    self.partial.extend_from_slice(&data[..newline]);
                    data = &data[newline + 1..];
                    self.end_line();
                }
                None => {
                    self.partial.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.partial.len() >= self.max_bytes {
                        self.end_line();
                    }
                }
            }
        }
    }

    /// End of stream: the unterminated last line becomes a line.
    fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        let raw = std::mem::take(&mut self.partial);
        let mut line = String::from_utf8_lossy(&raw).into_owned();
        if line.ends_with('\r') {
            line.pop();
        }
        // Called under the tail's lock, so lines reach the sink in order.
        if let Some((sink, pid)) = &self.sink {
            sink.line(*pid, &line);
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > self.max_lines
            || (self.bytes > self.max_bytes && self.lines.len() > 1)
        {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }

    pub(super) fn last(&self, n: usize) -> Vec<String> {
        let partial =
            (!self.partial.is_empty()).then(|| String::from_utf8_lossy(&self.partial).into_owned());
        let from_lines = n.saturating_sub(usize::from(partial.is_some()));
        let skip = self.lines.len().saturating_sub(from_lines);
        self.lines
            .iter()
            .skip(skip)
            .cloned()
            .chain(partial)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_keeps_the_last_lines_within_both_bounds() {
        let mut tail = StderrTail::new(3, 1000);
        tail.push(b"one\ntwo\r\nthr");
        assert_eq!(tail.last(10), ["one", "two", "thr"]);
        tail.push(b"ee\nfour\nfive\n");
        assert_eq!(tail.last(10), ["three", "four", "five"]);
        assert_eq!(tail.last(2), ["four", "five"]);
        assert!(tail.last(0).is_empty());

        let mut tail = StderrTail::new(1000, 100);
        for i in 0..50 {
            tail.push(format!("line {i:02} {}\n", "x".repeat(20)).as_bytes());
        }
        let lines = tail.last(usize::MAX);
        assert!(
            lines.iter().map(String::len).sum::<usize>() <= 100,
            "{lines:?}"
        );
        assert!(lines.last().unwrap().starts_with("line 49"), "{lines:?}");
        assert!(
            lines.windows(2).all(|w| w[0] < w[1]),
            "out of order: {lines:?}"
        );

        // A line with no newline is split at the byte cap: memory stays bounded.
        let mut tail = StderrTail::new(10, 8);
        tail.push(&[b'a'; 20]);
        tail.finish();
        assert_eq!(tail.last(10), ["aaaa"]);
        assert!(tail.partial.is_empty() && tail.bytes <= 8);
    }
}
