//! Per-server stderr logs (`steward logs NAME [-f] [--previous]`, the last
//! lines of `steward describe`).
//!
//! A process's own stderr tail ([`crate::runtime::process`]) dies with it;
//! this store outlives processes. The reconciler starts each server through
//! a spawner whose [`StderrSink`] is the server's entry here, so every
//! process of the server announces itself ([`StderrSink::started`]) and
//! hands over each line. The store keeps, per server, the current instance
//! (the newest process, running or not) and the previous one, each a ring
//! bounded by lines and bytes. Every line gets a store-wide sequence number;
//! a follower (`logs -f`) asks for the lines after the last one it got,
//! whichever instance they belong to — a late line of the old process
//! included.
//!
//! A server's build (`dev.build`) writes into the log of the server it
//! builds, under a `build` marker ([`LogStore::build_sink`]): its lines join
//! the current process's, prefixed `[build] `, so `steward logs NAME` shows
//! the build beside the process it replaces (and `--previous` once the new
//! process runs).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::desired::snapshot::Key;
use crate::runtime::process::StderrSink;

/// Lines kept per instance.
pub const LOG_LINES: usize = 1000;
/// Bytes kept per instance (the oldest lines go first).
pub const LOG_BYTES: usize = 128 * 1024;

/// Lines of one process of a server, as sent to `steward logs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogChunk {
    pub pid: u32,
    /// RFC 3339 time the process started.
    pub started_at: String,
    pub lines: Vec<String>,
    /// Lines of this process no longer kept (the ring is bounded).
    pub dropped: u64,
    /// Sequence number of the last line sent (a follower resumes after it).
    pub last_seq: u64,
}

#[derive(Debug)]
struct Instance {
    pid: u32,
    started_at: String,
    /// (sequence number, text), oldest first.
    lines: VecDeque<(u64, String)>,
    bytes: usize,
    dropped: u64,
}

impl Instance {
    fn push(&mut self, seq: u64, line: &str) {
        self.bytes += line.len();
        self.lines.push_back((seq, line.to_owned()));
        while self.lines.len() > LOG_LINES || (self.bytes > LOG_BYTES && self.lines.len() > 1) {
            if let Some((_, old)) = self.lines.pop_front() {
                self.bytes -= old.len();
                self.dropped += 1;
            }
        }
    }

    /// The last `tail` lines (all with `None`) after sequence number `after`.
    fn chunk(&self, after: u64, tail: Option<usize>) -> LogChunk {
        let lines: Vec<&(u64, String)> = self.lines.iter().filter(|(s, _)| *s > after).collect();
        let skip = tail.map_or(0, |n| lines.len().saturating_sub(n));
        let kept = &lines[skip..];
        LogChunk {
            pid: self.pid,
            started_at: self.started_at.clone(),
            lines: kept.iter().map(|(_, l)| l.clone()).collect(),
            dropped: self.dropped,
            last_seq: kept.last().map_or(after, |(s, _)| *s),
        }
    }
}

#[derive(Debug, Default)]
struct ServerLog {
    current: Option<Instance>,
    previous: Option<Instance>,
}

#[derive(Debug, Default)]
struct Inner {
    servers: HashMap<Key, ServerLog>,
    last_seq: u64,
}

/// Every server's stderr; see the module docs.
#[derive(Debug)]
pub struct LogStore {
    inner: Mutex<Inner>,
    version: watch::Sender<u64>,
}

impl Default for LogStore {
    fn default() -> Self {
        LogStore {
            inner: Mutex::new(Inner::default()),
            version: watch::Sender::new(0),
        }
    }
}

/// Which instance of a server to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Current,
    Previous,
}

impl LogStore {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sink through which the processes of `key` write here.
    pub fn sink(self: &Arc<Self>, key: &Key) -> Arc<dyn StderrSink> {
        Arc::new(ServerSink {
            store: Arc::clone(self),
            key: key.clone(),
        })
    }

    fn started(&self, key: &Key, pid: u32, now: String) {
        {
            let mut inner = self.lock();
            let log = inner.servers.entry(key.clone()).or_default();
            log.previous = log.current.take();
            log.current = Some(Instance {
                pid,
                started_at: now,
                lines: VecDeque::new(),
                bytes: 0,
                dropped: 0,
            });
        }
        self.version.send_modify(|v| *v += 1);
    }

    fn line(&self, key: &Key, pid: u32, line: &str) {
        {
            let mut inner = self.lock();
            let seq = inner.last_seq + 1;
            let Some(log) = inner.servers.get_mut(key) else {
                return;
            };
            // A late line of the previous process still goes to it.
            let instance = [log.current.as_mut(), log.previous.as_mut()]
                .into_iter()
                .flatten()
                .find(|i| i.pid == pid);
            let Some(instance) = instance else {
                return;
            };
            instance.push(seq, line);
            inner.last_seq = seq;
        }
        self.version.send_modify(|v| *v += 1);
    }

    /// Appends `text` to the current instance of `key` whatever its pid
    /// (an instance of `pid` is begun when there is none yet).
    pub fn note(&self, key: &Key, pid: u32, text: &str) {
        {
            let mut inner = self.lock();
            let seq = inner.last_seq + 1;
            let log = inner.servers.entry(key.clone()).or_default();
            let instance = log.current.get_or_insert_with(|| Instance {
                pid,
                started_at: crate::observe::clock::now_rfc3339(),
                lines: VecDeque::new(),
                bytes: 0,
                dropped: 0,
            });
            instance.push(seq, text);
            inner.last_seq = seq;
        }
        self.version.send_modify(|v| *v += 1);
    }

    /// The sink of a build of `key`'s server running `command`: its lines
    /// go to the server's current instance under a `build` marker.
    pub fn build_sink(self: &Arc<Self>, key: &Key, command: &str) -> Arc<dyn StderrSink> {
        Arc::new(BuildSink {
            store: Arc::clone(self),
            key: key.clone(),
            command: command.to_owned(),
        })
    }

    /// The last `tail` lines (all with `None`) of an instance of `key`.
    pub fn read(&self, key: &Key, which: Which, tail: Option<usize>) -> Option<LogChunk> {
        let inner = self.lock();
        let log = inner.servers.get(key)?;
        let instance = match which {
            Which::Current => log.current.as_ref(),
            Which::Previous => log.previous.as_ref(),
        }?;
        Some(instance.chunk(0, tail))
    }

    /// The lines of `key` after sequence number `after`, one chunk per
    /// instance that has some, oldest instance first.
    pub fn since(&self, key: &Key, after: u64) -> Vec<LogChunk> {
        let inner = self.lock();
        let Some(log) = inner.servers.get(key) else {
            return Vec::new();
        };
        [log.previous.as_ref(), log.current.as_ref()]
            .into_iter()
            .flatten()
            .map(|i| i.chunk(after, None))
            .filter(|c| !c.lines.is_empty())
            .collect()
    }

    /// The pid of the newest process of `key`, if it ever had one.
    pub fn current_pid(&self, key: &Key) -> Option<u32> {
        self.lock()
            .servers
            .get(key)
            .and_then(|l| l.current.as_ref())
            .map(|i| i.pid)
    }

    /// Forget `key` (it left the configuration).
    pub fn forget(&self, key: &Key) {
        self.lock().servers.remove(key);
        self.version.send_modify(|v| *v += 1);
    }

    /// A receiver that sees a new value after every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

/// One server's door into the store.
struct ServerSink {
    store: Arc<LogStore>,
    key: Key,
}

impl StderrSink for ServerSink {
    fn started(&self, pid: u32) {
        self.store
            .started(&self.key, pid, crate::observe::clock::now_rfc3339());
    }

    fn line(&self, pid: u32, line: &str) {
        self.store.line(&self.key, pid, line);
    }
}

/// A build's door into its server's log.
struct BuildSink {
    store: Arc<LogStore>,
    key: Key,
    command: String,
}

impl StderrSink for BuildSink {
    fn started(&self, pid: u32) {
        self.store.note(
            &self.key,
            pid,
            &format!("--- build (pid {pid}): {}", self.command),
        );
    }

    fn line(&self, pid: u32, line: &str) {
        self.store.note(&self.key, pid, &format!("[build] {line}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(chunk: &LogChunk) -> Vec<&str> {
        chunk.lines.iter().map(String::as_str).collect()
    }

    #[test]
    fn a_new_process_makes_the_current_one_previous() {
        let store = Arc::new(LogStore::default());
        let key = Key::mcp("a");
        let sink = store.sink(&key);
        sink.started(10);
        sink.line(10, "one");
        sink.line(10, "two");
        sink.started(11);
        sink.line(11, "three");
        // A late line of the old process.
        sink.line(10, "late");
        let current = store.read(&key, Which::Current, None).unwrap();
        assert_eq!((current.pid, lines(&current)), (11, vec!["three"]));
        let previous = store.read(&key, Which::Previous, None).unwrap();
        assert_eq!(
            (previous.pid, lines(&previous)),
            (10, vec!["one", "two", "late"])
        );
        let tail = store.read(&key, Which::Previous, Some(1)).unwrap();
        assert_eq!(lines(&tail), ["late"]);
        // An unknown pid (not one of the two kept) is ignored.
        sink.line(9, "ancient");
        assert_eq!(
            store
                .since(&key, 0)
                .iter()
                .map(|c| c.lines.len())
                .sum::<usize>(),
            4
        );
    }

    #[test]
    fn a_build_writes_into_the_current_process_under_a_marker() {
        let store = Arc::new(LogStore::default());
        let key = Key::mcp("d");
        let server = store.sink(&key);
        server.started(10);
        server.line(10, "serving");
        let build = store.build_sink(&key, "npm run build");
        build.started(20);
        build.line(20, "tsc: ok");
        store.note(&key, 20, "--- build succeeded");
        let current = store.read(&key, Which::Current, None).unwrap();
        assert_eq!(current.pid, 10);
        assert_eq!(
            lines(&current),
            [
                "serving",
                "--- build (pid 20): npm run build",
                "[build] tsc: ok",
                "--- build succeeded"
            ]
        );
        // The next process makes it all previous.
        server.started(11);
        let previous = store.read(&key, Which::Previous, None).unwrap();
        assert_eq!(previous.lines.len(), 4);
        // A build of a server that never ran begins its log.
        let other = Key::mcp("e");
        store.build_sink(&other, "make").started(30);
        assert_eq!(store.current_pid(&other), Some(30));
    }

    #[test]
    fn followers_get_only_new_lines_across_instances() {
        let store = Arc::new(LogStore::default());
        let key = Key::lsp("b");
        let sink = store.sink(&key);
        sink.started(1);
        sink.line(1, "x");
        let first = store.read(&key, Which::Current, None).unwrap();
        sink.line(1, "y");
        sink.started(2);
        sink.line(2, "z");
        let next = store.since(&key, first.last_seq);
        let got: Vec<(u32, Vec<&str>)> = next.iter().map(|c| (c.pid, lines(c))).collect();
        assert_eq!(got, [(1, vec!["y"]), (2, vec!["z"])]);
        let after = next.last().unwrap().last_seq;
        assert!(store.since(&key, after).is_empty());
    }

    #[test]
    fn each_instance_is_bounded_by_lines_and_bytes() {
        let store = Arc::new(LogStore::default());
        let key = Key::mcp("c");
        let sink = store.sink(&key);
        sink.started(1);
        for i in 0..LOG_LINES + 5 {
            sink.line(1, &format!("{i}"));
        }
        let chunk = store.read(&key, Which::Current, None).unwrap();
        assert_eq!(chunk.lines.len(), LOG_LINES);
        assert_eq!(chunk.dropped, 5);
        assert_eq!(chunk.lines[0], "5");
        let big = "x".repeat(LOG_BYTES / 4);
        for _ in 0..8 {
            sink.line(1, &big);
        }
        let chunk = store.read(&key, Which::Current, None).unwrap();
        let bytes: usize = chunk.lines.iter().map(String::len).sum();
        assert!(bytes <= LOG_BYTES, "{bytes}");
    }
}
