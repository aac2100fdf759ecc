//! The engine of `run_code`: one QuickJS runtime (through `rquickjs`) per
//! run, on a thread of its own that serves nothing else, bounded in time,
//! memory, stack and tool calls.
//!
//! The program sees only what the prelude (`prelude.js`) defines over five
//! bridges to the [`Host`]: a tool call (async: it runs on the controller's
//! runtime, the engine thread awaits its answer), a search, the catalog, a
//! log line and a sleep. Time is bounded three ways: the engine's interrupt
//! handler ends a busy program at the deadline; the engine thread's own
//! timer ends one waiting on calls or sleeps; and the caller stops waiting
//! a grace period later if the engine still has not answered (a native
//! call that does not check for interrupts), leaving the thread to finish
//! on its own. Cancellation ends a run the same ways.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rquickjs::context::EvalOptions;
use rquickjs::function::Async;
use rquickjs::{AsyncContext, AsyncRuntime, Ctx, Function, Object, Promise};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// The program's globals (see the module doc).
const PRELUDE: &str = include_str!("prelude.js");
/// The program's file name in stack traces.
const PROGRAM: &str = "program.js";
const PRELUDE_NAME: &str = "steward:prelude";
/// The engine thread's own stack: room for the engine's stack limit and the
/// Rust and C frames around it.
const THREAD_STACK: usize = 8 << 20;
/// How long the caller still waits for an engine told to stop.
const GRACE: Duration = Duration::from_secs(2);
/// Log lines kept per run before the output cap (the rest are counted).
const LOG_LINES: usize = 2000;
const LOG_BYTES: usize = 256 << 10;

/// The bounds of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall time, from the start of the run.
    pub time: Duration,
    /// The engine's heap.
    pub memory: usize,
    /// The engine's stack.
    pub stack: usize,
    /// Tool calls per run.
    pub calls: u32,
    /// Tool calls in flight at once (more wait for a turn).
    pub parallel: usize,
}

/// What a failed bridge call throws in the program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Thrown {
    /// `ToolError`, `TypeError` or `Error`.
    pub kind: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

impl Thrown {
    pub fn error(message: impl Into<String>) -> Thrown {
        Thrown {
            kind: "Error",
            message: message.into(),
            tool: None,
            server: None,
        }
    }

    pub fn type_error(message: impl Into<String>) -> Thrown {
        Thrown {
            kind: "TypeError",
            ..Thrown::error(message)
        }
    }
}

/// The answer of a bridge call: `{"ok": value}` or `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Ok(Value),
    Error(Thrown),
}

impl Answer {
    fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an answer serializes")
    }
}

/// What a program's bridges ask of the gateway.
pub trait Host: Send + Sync + 'static {
    /// One tool call: `request` is what the prelude sends (`{server, tool}`
    /// or `{name}`, and `arguments`). Runs on the controller's runtime.
    fn call(self: Arc<Self>, request: Value) -> BoxFuture<'static, Answer>;
    /// `searchTools(query, limit)`.
    fn search(&self, query: &str, limit: usize) -> Answer;
    /// The servers and their tools now: `{"server": ["tool", ...]}`.
    fn catalog(&self) -> Value;
}

/// Why a run ended without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// It ran out of its time.
    Time(Duration),
    /// It ran out of its memory (QuickJS throws `null`, or an "out of
    /// memory" error, when an allocation passes the limit).
    Memory(usize),
    /// It recursed past the stack limit.
    Stack,
    /// The client cancelled `run_code`.
    Cancelled,
    /// The program threw (or did not compile): the error and where.
    Thrown(String),
    /// The engine itself failed.
    Engine(String),
}

impl Failure {
    /// The kind of error, for traces.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Time(_) => "time_limit",
            Failure::Memory(_) => "memory_limit",
            Failure::Stack => "stack_limit",
            Failure::Cancelled => "cancelled",
            Failure::Thrown(_) => "thrown",
            Failure::Engine(_) => "engine",
        }
    }

    /// What the agent is told.
    pub fn message(&self) -> String {
        match self {
            Failure::Time(limit) => format!(
                "the program ran out of time: it was stopped after {} (give timeoutMs, up to 300000, for more)",
                humantime::format_duration(*limit)
            ),
            Failure::Memory(limit) => format!(
                "the program ran out of memory: its limit is {} MiB",
                limit >> 20
            ),
            Failure::Stack => "the program ran out of stack (too deep a recursion)".to_owned(),
            Failure::Cancelled => "the run was cancelled".to_owned(),
            Failure::Thrown(error) => error.clone(),
            Failure::Engine(error) => format!("the JavaScript engine failed: {error}"),
        }
    }
}

/// How one run went.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The returned value (`None`: nothing returned).
    pub result: Option<Value>,
    pub logs: Vec<String>,
    /// Log lines not kept (past the engine's own bound).
    pub logs_dropped: usize,
    /// Tool calls the program made.
    pub calls: u32,
    pub error: Option<Failure>,
    /// From the start of the run until the program began (engine start).
    pub start: Duration,
}

/// The run's state shared by the bridges on the engine thread.
#[derive(Default)]
struct Shared {
    logs: RefCell<Vec<String>>,
    log_bytes: Cell<usize>,
    logs_dropped: Cell<usize>,
    calls: Cell<u32>,
}

impl Shared {
    fn log(&self, level: &str, text: String) {
        let line = match level {
            "warn" | "error" => format!("{level}: {text}"),
            _ => text,
        };
        let mut logs = self.logs.borrow_mut();
        if logs.len() >= LOG_LINES || self.log_bytes.get() + line.len() > LOG_BYTES {
            self.logs_dropped.set(self.logs_dropped.get() + 1);
            return;
        }
        self.log_bytes.set(self.log_bytes.get() + line.len());
        logs.push(line);
    }
}

const RUNNING: u8 = 0;
const CANCELLED: u8 = 1;
const TIMED_OUT: u8 = 2;

/// Run `code` under `limits` with `host`'s bridges; `cancel` ends it.
/// Must be called on the controller's runtime (the tool calls run there).
pub async fn run(
    code: String,
    limits: Limits,
    host: Arc<dyn Host>,
    cancel: &CancellationToken,
) -> Outcome {
    let began = Instant::now();
    let handle = tokio::runtime::Handle::current();
    let stop = Arc::new(AtomicU8::new(RUNNING));
    let (stop_tx, stop_rx) = watch::channel(RUNNING);
    let (tx, mut rx) = oneshot::channel();
    let engine_stop = stop.clone();
    let spawned = std::thread::Builder::new()
        .name("steward-code".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let outcome = on_engine_thread(code, limits, host, handle, engine_stop, stop_rx, began);
            let _ = tx.send(outcome);
        });
    if let Err(e) = spawned {
        return Outcome {
            error: Some(Failure::Engine(format!("start the engine thread: {e}"))),
            ..Outcome::default()
        };
    }
    let hard_deadline = tokio::time::Instant::from_std(began + limits.time + GRACE);
    let why = tokio::select! {
        outcome = &mut rx => return outcome.unwrap_or_else(|_| engine_died()),
        () = cancel.cancelled() => CANCELLED,
        () = tokio::time::sleep_until(hard_deadline) => TIMED_OUT,
    };
    // The engine sees the flag at its next interrupt check or poll.
    let _ = stop.compare_exchange(RUNNING, why, Ordering::SeqCst, Ordering::SeqCst);
    stop_tx.send_replace(why);
    match tokio::time::timeout(GRACE, rx).await {
        Ok(outcome) => outcome.unwrap_or_else(|_| engine_died()),
        Err(_) => {
            tracing::warn!("a run_code engine did not stop when told; left to finish on its own");
            Outcome {
                error: Some(if why == CANCELLED {
                    Failure::Cancelled
                } else {
                    Failure::Time(limits.time)
                }),
                ..Outcome::default()
            }
        }
    }
}

fn engine_died() -> Outcome {
    Outcome {
        error: Some(Failure::Engine(
            "the engine thread ended without an answer".into(),
        )),
        ..Outcome::default()
    }
}

fn on_engine_thread(
    code: String,
    limits: Limits,
    host: Arc<dyn Host>,
    handle: tokio::runtime::Handle,
    stop: Arc<AtomicU8>,
    stop_rx: watch::Receiver<u8>,
    began: Instant,
) -> Outcome {
    // Timers only (sleep, the deadline): the tool calls run on `handle`.
    let local = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Outcome {
                error: Some(Failure::Engine(format!("start the engine's timer: {e}"))),
                ..Outcome::default()
            };
        }
    };
    local.block_on(engine(code, limits, host, handle, stop, stop_rx, began))
}

async fn engine(
    code: String,
    limits: Limits,
    host: Arc<dyn Host>,
    handle: tokio::runtime::Handle,
    stop: Arc<AtomicU8>,
    mut stop_rx: watch::Receiver<u8>,
    began: Instant,
) -> Outcome {
    let deadline = began + limits.time;
    let shared = Rc::new(Shared::default());
    let failed = |e: rquickjs::Error| Outcome {
        error: Some(Failure::Engine(e.to_string())),
        ..Outcome::default()
    };
    let runtime = match AsyncRuntime::new() {
        Ok(rt) => rt,
        Err(e) => return failed(e),
    };
    runtime.set_memory_limit(limits.memory).await;
    runtime.set_max_stack_size(limits.stack).await;
    let flag = stop.clone();
    runtime
        .set_interrupt_handler(Some(Box::new(move || {
            if flag.load(Ordering::Relaxed) != RUNNING {
                return true;
            }
            if Instant::now() >= deadline {
                let _ =
                    flag.compare_exchange(RUNNING, TIMED_OUT, Ordering::SeqCst, Ordering::SeqCst);
                return true;
            }
            false
        })))
        .await;
    let context = match AsyncContext::full(&runtime).await {
        Ok(c) => c,
        Err(e) => return failed(e),
    };
    let bridges = Bridges {
        shared: shared.clone(),
        host,
        handle,
        limits,
        deadline,
        permits: Arc::new(Semaphore::new(limits.parallel.max(1))),
    };
    let start = Rc::new(Cell::new(None));
    let started = start.clone();
    let work = context.async_with(async move |ctx| {
        let answer = evaluate(&ctx, code, bridges, || started.set(Some(began.elapsed()))).await;
        answer.map_err(|thrown| classify(&ctx, thrown, limits))
    });
    let answer = tokio::select! {
        answer = work => answer,
        () = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
            let _ = stop.compare_exchange(RUNNING, TIMED_OUT, Ordering::SeqCst, Ordering::SeqCst);
            Err(Verdict::Stopped)
        }
        _ = stop_rx.wait_for(|s| *s != RUNNING) => Err(Verdict::Stopped),
    };
    let (result, error) = match answer {
        Ok(None) => (None, None),
        Ok(Some(json)) => match serde_json::from_str(&json) {
            Ok(value) => (Some(value), None),
            Err(e) => (None, Some(Failure::Engine(format!("read the result: {e}")))),
        },
        Err(Verdict::Stopped) => (
            None,
            Some(match stop.load(Ordering::SeqCst) {
                CANCELLED => Failure::Cancelled,
                _ => Failure::Time(limits.time),
            }),
        ),
        Err(Verdict::Failed(failure)) => (None, Some(failure)),
    };
    let outcome = Outcome {
        result,
        logs: shared.logs.take(),
        logs_dropped: shared.logs_dropped.get(),
        calls: shared.calls.get(),
        error,
        start: start.get().unwrap_or_else(|| began.elapsed()),
    };
    drop(context);
    drop(runtime);
    outcome
}

/// How a run ended without a value.
enum Verdict {
    /// Its time ran out or it was cancelled (the stop flag says which).
    Stopped,
    Failed(Failure),
}

/// The bridges' shared state (see the module doc).
struct Bridges {
    shared: Rc<Shared>,
    host: Arc<dyn Host>,
    handle: tokio::runtime::Handle,
    limits: Limits,
    deadline: Instant,
    permits: Arc<Semaphore>,
}

fn eval_options(filename: &str) -> EvalOptions {
    let mut options = EvalOptions::default();
    options.strict = false;
    options.filename = Some(filename.to_owned());
    options
}

/// Install the prelude over the bridges, compile the program and run it;
/// the JSON of what it returned, or what it threw. `ready`: the program
/// is about to start.
async fn evaluate<'js>(
    ctx: &Ctx<'js>,
    code: String,
    bridges: Bridges,
    ready: impl FnOnce(),
) -> Result<Option<String>, rquickjs::Value<'js>> {
    let thrown = |e: rquickjs::Error| exception(ctx, e);
    let install: Function = ctx
        .eval_with_options(PRELUDE, eval_options(PRELUDE_NAME))
        .map_err(thrown)?;
    let exports: Object = install
        .call((
            call_bridge(ctx, &bridges).map_err(thrown)?,
            search_bridge(ctx, &bridges).map_err(thrown)?,
            catalog_bridge(ctx, &bridges).map_err(thrown)?,
            log_bridge(ctx, &bridges).map_err(thrown)?,
            sleep_bridge(ctx, &bridges).map_err(thrown)?,
        ))
        .map_err(thrown)?;
    let run: Function = exports.get("run").map_err(thrown)?;
    // On the program's first line, so that line numbers are its own.
    let wrapped = format!("(async function () {{{code}\n}})");
    let program: Function = ctx
        .eval_with_options(wrapped, eval_options(PROGRAM))
        .map_err(thrown)?;
    ready();
    let promise: Promise = run.call((program,)).map_err(thrown)?;
    promise
        .into_future::<Option<String>>()
        .await
        .map_err(thrown)
}

/// The value thrown for `error` (the pending exception, for a JavaScript one).
fn exception<'js>(ctx: &Ctx<'js>, error: rquickjs::Error) -> rquickjs::Value<'js> {
    match error {
        rquickjs::Error::Exception => ctx.catch(),
        other => {
            let text = rquickjs::String::from_str(ctx.clone(), &other.to_string());
            text.map(|s| s.into_value())
                .unwrap_or_else(|_| rquickjs::Value::new_null(ctx.clone()))
        }
    }
}

/// Which limit (if any) a thrown value means, else the error as the agent
/// reads it: `Name: message` and the program's frames.
fn classify<'js>(ctx: &Ctx<'js>, thrown: rquickjs::Value<'js>, limits: Limits) -> Verdict {
    if thrown.is_uncatchable_error() {
        // The interrupt handler: the stop flag says why.
        return Verdict::Stopped;
    }
    if thrown.is_null() {
        // QuickJS-ng throws null when the allocation of the error itself
        // fails: many small objects filled the heap.
        return Verdict::Failed(Failure::Memory(limits.memory));
    }
    let Some(object) = thrown.as_object() else {
        let text = ctx
            .json_stringify(thrown.clone())
            .ok()
            .flatten()
            .and_then(|s| s.to_string().ok())
            .unwrap_or_else(|| "a value that is not JSON".to_owned());
        return Verdict::Failed(Failure::Thrown(format!("the program threw {text}")));
    };
    let text = |key: &str| object.get::<_, Option<String>>(key).ok().flatten();
    let name = text("name").unwrap_or_else(|| "Error".to_owned());
    let message = text("message").unwrap_or_default();
    match (name.as_str(), message.as_str()) {
        ("InternalError" | "RangeError", "out of memory") => {
            return Verdict::Failed(Failure::Memory(limits.memory));
        }
        ("InternalError" | "RangeError", "stack overflow" | "Maximum call stack size exceeded") => {
            return Verdict::Failed(Failure::Stack);
        }
        _ => {}
    }
    let mut report = if message.is_empty() {
        name
    } else {
        format!("{name}: {message}")
    };
    // The program's own frames: the prelude's say nothing to its author.
    let frames: Vec<String> = text("stack")
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(PROGRAM))
        .map(|line| line.trim().to_owned())
        .collect();
    for frame in frames.iter().take(5) {
        report.push_str("\n    ");
        report.push_str(frame);
    }
    Verdict::Failed(Failure::Thrown(report))
}

fn call_bridge<'js>(ctx: &Ctx<'js>, b: &Bridges) -> rquickjs::Result<Function<'js>> {
    let shared = b.shared.clone();
    let host = b.host.clone();
    let handle = b.handle.clone();
    let permits = b.permits.clone();
    let most = b.limits.calls;
    Function::new(
        ctx.clone(),
        Async(move |request: String| {
            // Counted when made, not when its turn comes.
            let n = shared.calls.get() + 1;
            let over = n > most;
            if !over {
                shared.calls.set(n);
            }
            let host = host.clone();
            let handle = handle.clone();
            let permits = permits.clone();
            async move {
                if over {
                    let why =
                        format!("this run made its {most} tool calls, the most one run may make");
                    return Answer::Error(Thrown::error(why)).to_json();
                }
                let request: Value = match serde_json::from_str(&request) {
                    Ok(v) => v,
                    Err(e) => return Answer::Error(Thrown::type_error(e.to_string())).to_json(),
                };
                let Ok(_turn) = permits.acquire_owned().await else {
                    return Answer::Error(Thrown::error("the run is over")).to_json();
                };
                let answer = match handle.spawn(host.call(request)).await {
                    Ok(answer) => answer,
                    Err(e) => Answer::Error(Thrown::error(format!("the call failed: {e}"))),
                };
                answer.to_json()
            }
        }),
    )
}

fn search_bridge<'js>(ctx: &Ctx<'js>, b: &Bridges) -> rquickjs::Result<Function<'js>> {
    let host = b.host.clone();
    Function::new(ctx.clone(), move |query: String, limit: f64| {
        // A whole number of at least 1 (the prelude checked).
        host.search(&query, limit.max(1.0) as usize).to_json()
    })
}

fn catalog_bridge<'js>(ctx: &Ctx<'js>, b: &Bridges) -> rquickjs::Result<Function<'js>> {
    let host = b.host.clone();
    Function::new(ctx.clone(), move || host.catalog().to_string())
}

fn log_bridge<'js>(ctx: &Ctx<'js>, b: &Bridges) -> rquickjs::Result<Function<'js>> {
    let shared = b.shared.clone();
    Function::new(ctx.clone(), move |level: String, text: String| {
        shared.log(&level, text);
    })
}

fn sleep_bridge<'js>(ctx: &Ctx<'js>, b: &Bridges) -> rquickjs::Result<Function<'js>> {
    let deadline = b.deadline;
    Function::new(
        ctx.clone(),
        Async(move |ms: f64| {
            // Never past the run's end (the engine's timer ends it there).
            let wanted = Duration::try_from_secs_f64(ms.max(0.0) / 1000.0).unwrap_or(Duration::MAX);
            let until = Instant::now()
                .checked_add(wanted)
                .map_or(deadline, |t| t.min(deadline));
            async move {
                tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
            }
        }),
    )
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
