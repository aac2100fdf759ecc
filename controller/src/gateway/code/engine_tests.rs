//! The engine against a fake host: results, logs, every limit, cancellation
//! and what a program can reach.

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use futures::FutureExt as _;
use serde_json::json;

use super::*;

const LIMITS: Limits = Limits {
    time: Duration::from_secs(5),
    memory: 64 << 20,
    stack: 1 << 20,
    calls: 100,
    parallel: 8,
};

/// A run of 300 ms.
const SHORT: Limits = Limits {
    time: Duration::from_millis(300),
    ..LIMITS
};

/// Answers `echo` with its arguments (after `sleepMs`), fails `broken`
/// with a tool error; counts calls in flight.
#[derive(Default)]
struct Fake {
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    requests: Mutex<Vec<Value>>,
    cancelled: AtomicUsize,
}

impl Host for Fake {
    fn call(self: Arc<Self>, request: Value) -> BoxFuture<'static, Answer> {
        async move {
            self.requests.lock().unwrap().push(request.clone());
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            // Dropped half-way when the run ends: counted as cancelled.
            struct Leaving<'a>(&'a Fake, bool);
            impl Drop for Leaving<'_> {
                fn drop(&mut self) {
                    self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
                    if !self.1 {
                        self.0.cancelled.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            let mut leaving = Leaving(&self, false);
            let args = request["arguments"].clone();
            if let Some(ms) = args["sleepMs"].as_u64() {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            leaving.1 = true;
            match request["tool"].as_str() {
                Some("broken") => Answer::Error(Thrown {
                    kind: "ToolError",
                    message: "it broke".into(),
                    tool: Some("broken".into()),
                    server: request["server"].as_str().map(str::to_owned),
                }),
                _ => Answer::Ok(args),
            }
        }
        .boxed()
    }

    fn search(&self, query: &str, limit: usize) -> Answer {
        Answer::Ok(json!([{"name": "s__echo", "query": query, "limit": limit}]))
    }

    fn catalog(&self) -> Value {
        json!({"s": ["echo", "broken"], "other-server": ["get-sum"]})
    }
}

async fn run_with(code: &str, limits: Limits) -> (Outcome, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let outcome = run(
        code.to_owned(),
        limits,
        fake.clone(),
        &CancellationToken::new(),
    )
    .await;
    (outcome, fake)
}

async fn run_code(code: &str) -> Outcome {
    run_with(code, LIMITS).await.0
}

#[tokio::test]
async fn a_program_returns_json_logs_and_counts_its_calls() {
    let outcome = run_code(
        r#"
        console.log("start", {a: 1}, [2], 3n);
        console.warn("careful");
        const one = await tools.s.echo({x: 1});
        const two = await callTool("s__echo", {y: 2});
        const sum = await tools["other-server"]["get-sum"]({a: 1, b: 2});
        return {one, two, sum, keys: Object.keys(tools), big: 10n, set: new Set([1, 2])};
        "#,
    )
    .await;
    assert_eq!(outcome.error, None);
    assert_eq!(
        outcome.result,
        Some(json!({
            "one": {"x": 1}, "two": {"y": 2}, "sum": {"a": 1, "b": 2},
            "keys": ["other-server", "s"], "big": "10", "set": [1, 2]
        }))
    );
    assert_eq!(outcome.logs, ["start {\"a\":1} [2] 3", "warn: careful"]);
    assert_eq!(outcome.calls, 3);
    assert!(
        outcome.start < Duration::from_millis(500),
        "{:?}",
        outcome.start
    );
}

#[tokio::test]
async fn nothing_returned_is_no_result() {
    let outcome = run_code("const x = 1;").await;
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.result, None);
}

#[tokio::test]
async fn a_tool_error_throws_a_tool_error_the_program_can_catch() {
    let outcome = run_code(
        r#"
        try { await tools.s.broken({}); } catch (e) {
          return {name: e.name, message: e.message, tool: e.tool, server: e.server,
                  isToolError: e instanceof ToolError};
        }
        "#,
    )
    .await;
    assert_eq!(
        outcome.result,
        Some(
            json!({"name": "ToolError", "message": "it broke", "tool": "broken",
                    "server": "s", "isToolError": true})
        )
    );
    let outcome = run_code("await tools.s.broken({});\nreturn 1;").await;
    let Some(Failure::Thrown(error)) = outcome.error else {
        panic!("{outcome:?}")
    };
    assert!(error.starts_with("ToolError: it broke"), "{error}");
    assert!(
        error.contains("program.js:1"),
        "the program's line: {error}"
    );
    assert!(!error.contains("prelude"), "{error}");
}

#[tokio::test]
async fn arguments_that_are_not_an_object_throw_before_any_call() {
    let (outcome, fake) = run_with("await tools.s.echo([1, 2]);", LIMITS).await;
    let Some(Failure::Thrown(error)) = outcome.error else {
        panic!("{outcome:?}")
    };
    assert!(
        error.starts_with("TypeError: tools.s.echo: the arguments must be an object"),
        "{error}"
    );
    assert!(fake.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_syntax_error_says_where() {
    let outcome = run_code("const = 1;").await;
    let Some(Failure::Thrown(error)) = outcome.error else {
        panic!("{outcome:?}")
    };
    assert!(error.starts_with("SyntaxError"), "{error}");
    assert!(error.contains("program.js:1"), "{error}");
}

#[tokio::test]
async fn a_busy_loop_ends_at_the_time_limit() {
    let limits = SHORT;
    let began = Instant::now();
    let (outcome, _) = run_with("console.log('spinning'); while (true) {}", limits).await;
    assert_eq!(outcome.error, Some(Failure::Time(limits.time)));
    assert_eq!(outcome.logs, ["spinning"], "logs before the limit are kept");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    // A busy loop that catches everything is still stopped.
    let (outcome, _) = run_with("for (;;) { try { while (true) {} } catch (e) {} }", limits).await;
    assert_eq!(outcome.error, Some(Failure::Time(limits.time)));
}

#[tokio::test]
async fn a_program_waiting_on_a_call_ends_at_the_time_limit_and_the_call_is_dropped() {
    let limits = SHORT;
    let began = Instant::now();
    let (outcome, fake) = run_with("await tools.s.echo({sleepMs: 60000});", limits).await;
    assert_eq!(outcome.error, Some(Failure::Time(limits.time)));
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(outcome.calls, 1);
    // The call's task on the controller's runtime outlives the run unless
    // the host cancels it (the gateway's host does, with the run's token).
    assert_eq!(fake.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn many_small_objects_end_at_the_memory_limit() {
    let limits = Limits {
        memory: 16 << 20,
        ..LIMITS
    };
    let (outcome, _) = run_with("const a = []; for (;;) a.push({i: a.length});", limits).await;
    assert_eq!(
        outcome.error,
        Some(Failure::Memory(16 << 20)),
        "{outcome:?}"
    );
    let (outcome, _) = run_with(
        "const a = []; for (;;) a.push('y'.repeat(1 << 20));",
        limits,
    )
    .await;
    assert_eq!(
        outcome.error,
        Some(Failure::Memory(16 << 20)),
        "{outcome:?}"
    );
    let (outcome, _) = run_with(
        "const a = []; for (;;) a.push(new Array(100000).fill(1));",
        limits,
    )
    .await;
    assert_eq!(
        outcome.error,
        Some(Failure::Memory(16 << 20)),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn deep_recursion_ends_at_the_stack_limit() {
    let outcome = run_code("const f = (n) => f(n + 1) + 1; return f(0);").await;
    assert_eq!(outcome.error, Some(Failure::Stack), "{outcome:?}");
}

#[tokio::test]
async fn calls_past_the_limit_throw_and_at_most_the_parallel_limit_run_at_once() {
    let (outcome, fake) = run_with(
        r#"
        const all = await Promise.all(Array.from({length: 20}, (_, i) => tools.s.echo({i, sleepMs: 50})));
        let refused;
        try {
          for (let i = 0; i < 100; i++) await tools.s.echo({i});
        } catch (e) { refused = e.message; }
        return {done: all.length, refused};
        "#,
        LIMITS,
    )
    .await;
    assert_eq!(outcome.error, None, "{outcome:?}");
    let result = outcome.result.unwrap();
    assert_eq!(result["done"], 20);
    assert_eq!(
        result["refused"],
        "this run made its 100 tool calls, the most one run may make"
    );
    assert_eq!(outcome.calls, 100);
    assert_eq!(fake.requests.lock().unwrap().len(), 100);
    assert_eq!(fake.most_in_flight.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn cancelling_ends_a_sleeping_or_busy_run_at_once() {
    for code in [
        "await sleep(60000);",
        "while (true) {}",
        "await tools.s.echo({sleepMs: 60000});",
    ] {
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            canceller.cancel();
        });
        let began = Instant::now();
        let outcome = run(code.to_owned(), LIMITS, Arc::new(Fake::default()), &cancel).await;
        assert_eq!(outcome.error, Some(Failure::Cancelled), "{code}");
        assert!(
            began.elapsed() < Duration::from_secs(2),
            "{code}: {:?}",
            began.elapsed()
        );
    }
}

#[tokio::test]
async fn sleep_waits_and_search_answers() {
    let began = Instant::now();
    let outcome = run_code("await sleep(50); return await searchTools('time in Tokyo', 3);").await;
    assert!(began.elapsed() >= Duration::from_millis(50));
    assert_eq!(
        outcome.result,
        Some(json!([{"name": "s__echo", "query": "time in Tokyo", "limit": 3}]))
    );
}

#[tokio::test]
async fn a_program_reaches_nothing_of_the_host() {
    let outcome = run_code(
        r#"
        const names = ["require", "process", "fetch", "std", "os", "setTimeout", "setInterval",
                       "XMLHttpRequest", "WebSocket", "Deno", "Bun", "print", "scriptArgs",
                       "__host", "hostCall"];
        const present = names.filter((n) => typeof globalThis[n] !== "undefined");
        let imported;
        try { await import("os"); imported = "yes"; } catch (e) { imported = e.name; }
        tools.s = 1;
        return {present, imported, stillProxy: typeof tools.s.echo};
        "#,
    )
    .await;
    assert_eq!(outcome.error, None, "{outcome:?}");
    let result = outcome.result.unwrap();
    assert_eq!(result["present"], json!([]), "{result}");
    assert_ne!(result["imported"], "yes");
    assert_eq!(result["stillProxy"], "function");
}

#[tokio::test]
async fn awaiting_printing_or_converting_the_tools_is_not_a_call() {
    let (outcome, fake) = run_with(
        r#"
        const s = await tools.s;
        console.log(tools.s, tools);
        return {type: typeof s, json: JSON.stringify(tools.s), keys: Object.keys(tools.s),
                unlisted: typeof tools.s.addedLater};
        "#,
        LIMITS,
    )
    .await;
    assert_eq!(outcome.error, None, "{outcome:?}");
    assert_eq!(
        outcome.result,
        Some(
            json!({"type": "object", "json": "{}", "keys": ["echo", "broken"],
                    "unlisted": "function"})
        )
    );
    assert_eq!(outcome.logs, ["{} {\"other-server\":{},\"s\":{}}"]);
    assert!(fake.requests.lock().unwrap().is_empty());
}
