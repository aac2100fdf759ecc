//! Where `steward run`'s log lines go: stderr, through a sink that can never
//! panic or block the controller.
//!
//! Writing to stderr from the thread that logs fails when the reader went
//! away (`steward run 2>&1 | head`, a quit pager: EPIPE, and tracing's own
//! fallback then `eprintln!`s, which panics) and blocks when the reader
//! stalls (a pager scrolled back: the pipe fills up). Either would stop the
//! worker, the reaper or the signal handler that happened to log. So each
//! formatted line is handed to one `steward-log` thread through a bounded
//! queue: a full queue drops the line (and the next line that gets through
//! says how many were lost), a failed write is ignored, and after a broken
//! pipe nothing is written any more. A lost log sink drops log lines,
//! nothing else.
//!
//! A panic is reported through the same sink (never the default hook's
//! direct write to stderr) and handed to a callback, which `steward run`
//! uses to stop every server and exit.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer, Registry};

/// Lines queued for the writer thread before new ones are dropped.
const QUEUE_LINES: usize = 4096;

enum Msg {
    Line(Vec<u8>),
    Flush(mpsc::Sender<()>),
}

/// A `MakeWriter` for tracing-subscriber: every event becomes one line on
/// the sink's queue. Cheap to clone.
#[derive(Clone)]
pub struct LogSink {
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSink")
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl LogSink {
    /// A sink writing to this process's stderr from its own thread.
    pub fn stderr() -> io::Result<Self> {
        Self::to(io::stderr())
    }

    /// A sink writing to `out` from its own thread (`steward-log`).
    pub fn to(out: impl Write + Send + 'static) -> io::Result<Self> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&dropped);
        std::thread::Builder::new()
            .name("steward-log".to_owned())
            .spawn(move || write_lines(&rx, out, &counter))?;
        Ok(LogSink { tx, dropped })
    }

    /// Waits (at most `within`) until every line queued so far was written
    /// or given up on. For the end of the program.
    pub fn flush(&self, within: Duration) {
        let (done, wait) = mpsc::channel();
        let deadline = Instant::now() + within;
        // `send` would block on a full queue behind a stalled reader.
        let mut msg = Msg::Flush(done);
        loop {
            match self.tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return,
                Err(TrySendError::Full(back)) => {
                    if Instant::now() >= deadline {
                        return;
                    }
                    msg = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        let _ = wait.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }

    fn send(&self, line: Vec<u8>) {
        if self.tx.try_send(Msg::Line(line)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn write_lines(rx: &Receiver<Msg>, mut out: impl Write, dropped: &AtomicU64) {
    let mut broken = false;
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Flush(done) => {
                let _ = out.flush();
                let _ = done.send(());
            }
            // The reader is gone for good: drain, never write again.
            Msg::Line(_) if broken => {}
            Msg::Line(line) => {
                let lost = dropped.swap(0, Ordering::Relaxed);
                let mut result = Ok(());
                if lost > 0 {
                    let note = format!("steward: {lost} log lines dropped (stderr too slow)\n");
                    result = out.write_all(note.as_bytes());
                }
                result = result.and_then(|()| out.write_all(&line));
                if let Err(e) = result {
                    broken = e.kind() == io::ErrorKind::BrokenPipe;
                }
            }
        }
    }
}

/// One event's bytes, queued as one line when tracing drops the writer.
#[derive(Debug)]
pub struct LineWriter {
    buf: Vec<u8>,
    sink: LogSink,
}

impl Write for LineWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            // A secret's value never reaches the log (see support::scrub).
            let line = crate::support::scrub::scrub_bytes(std::mem::take(&mut self.buf));
            self.sink.send(line);
        }
    }
}

impl<'a> MakeWriter<'a> for LogSink {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter {
            buf: Vec::with_capacity(256),
            sink: self.clone(),
        }
    }
}

/// Reports every panic as an `error` log line (never a direct write to
/// stderr) and then calls `on_panic`, once per panic. Replaces the previous
/// hook for the rest of the process's life.
pub fn report_panics(on_panic: impl Fn() + Send + Sync + 'static) {
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("non-string panic payload");
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        tracing::error!(thread, location, "panic: {message}");
        on_panic();
    }));
}

/// Whether [`report_panics`] saw a panic (for the exit status).
#[derive(Debug, Default, Clone)]
pub struct PanicFlag(Arc<AtomicBool>);

impl PanicFlag {
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The process's sink, once [`install`]ed.
static SINK: OnceLock<LogSink> = OnceLock::new();

/// Installs the global tracing subscriber writing to stderr through a
/// [`LogSink`]: `RUST_LOG` filter (default `info,rmcp=warn`), text or JSON.
/// A second call changes nothing.
/// rmcp logs every notification and every transport retry, some at WARN;
/// Steward reports what matters about a server itself, with its name.
const RMCP_DIRECTIVE: &str = "rmcp=error";

/// `RUST_LOG` (default `info`) with rmcp held to errors unless it names rmcp.
fn log_filter(rust_log: Option<&str>) -> String {
    let base = rust_log.map(str::trim).filter(|s| !s.is_empty());
    match base {
        Some(s) if s.contains("rmcp") => s.to_owned(),
        Some(s) => format!("{s},{RMCP_DIRECTIVE}"),
        None => format!("info,{RMCP_DIRECTIVE}"),
    }
}

/// Colour only for a person at a terminal (and never with `NO_COLOR` set).
fn use_ansi(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

pub fn install(json: bool) {
    install_with(json, None);
}

/// A layer beside the log's (the trace export), which sees every span and
/// event whatever the log's filter.
pub type ExtraLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// [`install`], with `extra` beside the log when given.
pub fn install_with(json: bool, extra: Option<ExtraLayer>) {
    let Ok(sink) = LogSink::stderr() else {
        return;
    };
    let directives = log_filter(std::env::var("RUST_LOG").ok().as_deref());
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter(None)));
    if let Some(extra) = extra {
        // The log's filter applies to the log alone.
        let ansi = use_ansi(
            io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        );
        let log = tracing_subscriber::fmt::layer()
            .with_writer(sink.clone())
            .with_ansi(ansi)
            .log_internal_errors(false);
        let registry = tracing_subscriber::registry().with(extra);
        let installed = if json {
            registry.with(log.json().with_filter(filter)).try_init()
        } else {
            registry.with(log.with_filter(filter)).try_init()
        };
        if installed.is_ok() {
            let _ = SINK.set(sink);
        }
        return;
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(sink.clone())
        .with_ansi(use_ansi(
            io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .log_internal_errors(false);
    let installed = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    if installed.is_ok() {
        let _ = SINK.set(sink);
    }
}

/// Writes out what is queued (bounded by `within`); for the end of `run`.
pub fn flush(within: Duration) {
    if let Some(sink) = SINK.get() {
        sink.flush(within);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn rmcp_is_held_to_errors_unless_rust_log_names_it() {
        assert_eq!(log_filter(None), "info,rmcp=error");
        assert_eq!(log_filter(Some("  ")), "info,rmcp=error");
        assert_eq!(log_filter(Some("debug")), "debug,rmcp=error");
        assert_eq!(
            log_filter(Some("steward=debug,info")),
            "steward=debug,info,rmcp=error"
        );
        assert_eq!(log_filter(Some("rmcp=debug")), "rmcp=debug");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(use_ansi(true, None));
        assert!(use_ansi(true, Some(OsStr::new(""))));
        assert!(!use_ansi(true, Some(OsStr::new("1"))));
        assert!(!use_ansi(false, None));
    }

    /// A writer that records what it got and fails as told.
    #[derive(Clone, Default)]
    struct Out {
        got: Arc<Mutex<Vec<u8>>>,
        fail: Arc<Mutex<Option<io::ErrorKind>>>,
        gate: Arc<Mutex<()>>,
    }

    impl Write for Out {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            let _held = self.gate.lock().unwrap();
            if let Some(kind) = *self.fail.lock().unwrap() {
                return Err(io::Error::from(kind));
            }
            self.got.lock().unwrap().extend_from_slice(data);
            Ok(data.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn log(sink: &LogSink, line: &str) {
        let mut w = sink.make_writer();
        w.write_all(line.as_bytes()).unwrap();
    }

    const PANIC_HELPER_ENV: &str = "STEWARD_TEST_PANIC_MARKER";

    /// Not a test on its own: re-executed by
    /// `a_panic_in_any_thread_reaches_the_callback`, it installs the hook
    /// and panics in a worker thread. Without the env var it returns.
    #[test]
    fn panic_helper() {
        let Some(marker) = std::env::var_os(PANIC_HELPER_ENV) else {
            return;
        };
        report_panics(move || {
            let _ = std::fs::write(&marker, "on_panic called");
        });
        let worker = std::thread::spawn(|| panic!("a worker blew up (expected by this test)"));
        assert!(worker.join().is_err());
    }

    #[test]
    fn a_panic_in_any_thread_reaches_the_callback() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("marker");
        // This module's path without the crate name, as the test harness names tests.
        let helper = format!(
            "{}::panic_helper",
            module_path!().split_once("::").unwrap().1
        );
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &helper, "--test-threads", "1"])
            .env(PANIC_HELPER_ENV, &marker)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "on_panic called");
    }

    #[test]
    fn lines_arrive_whole_and_in_order() {
        let out = Out::default();
        let sink = LogSink::to(out.clone()).unwrap();
        for i in 0..100 {
            log(&sink, &format!("line {i}\n"));
        }
        sink.flush(Duration::from_secs(10));
        let got = String::from_utf8(out.got.lock().unwrap().clone()).unwrap();
        let expected: String = (0..100).map(|i| format!("line {i}\n")).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_broken_pipe_drops_lines_and_never_fails_the_logger() {
        let out = Out::default();
        *out.fail.lock().unwrap() = Some(io::ErrorKind::BrokenPipe);
        let sink = LogSink::to(out.clone()).unwrap();
        for i in 0..10_000 {
            log(&sink, &format!("line {i}\n"));
        }
        sink.flush(Duration::from_secs(10));
        assert!(out.got.lock().unwrap().is_empty());
    }

    #[test]
    fn a_stalled_writer_never_blocks_the_logger_and_the_loss_is_reported() {
        let out = Out::default();
        let stall = out.gate.lock().unwrap();
        let sink = LogSink::to(out.clone()).unwrap();
        let started = Instant::now();
        let lines = QUEUE_LINES * 3;
        for i in 0..lines {
            log(&sink, &format!("line {i}\n"));
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // Bounded even while the writer is stuck.
        let flushing = Instant::now();
        sink.flush(Duration::from_millis(100));
        assert!(flushing.elapsed() < Duration::from_secs(5));
        drop(stall);
        sink.flush(Duration::from_secs(10));
        log(&sink, "after\n");
        sink.flush(Duration::from_secs(10));
        let got = String::from_utf8(out.got.lock().unwrap().clone()).unwrap();
        assert!(
            got.contains("log lines dropped"),
            "{}",
            &got[got.len() - 200..]
        );
        assert!(got.ends_with("after\n"));
        assert!(got.lines().count() < lines, "nothing was dropped");
    }
}
