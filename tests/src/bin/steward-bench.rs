//! `steward-bench`: benchmarks of the real controller (`steward-under-test
//! run`) driving fake MCP servers, side by side with `mcp-hub` (npm) on the
//! same fake servers when it is installed. Prints one JSON summary on stdout;
//! progress goes to stderr. Every number's key names its unit (`Ms`, `Mb`,
//! `Pct`, ...); counts are plain integers.
//!
//! ```text
//! cargo build --release -p steward-tests --bins
//! target/release/steward-bench [--quick]
//!     [--only reload,burst,cold,cost,mcp-hub,readiness,gate,gateway,search,storm,observe,
//!            first-list,restarts,lazy,dev,sandbox,code,views]
//!     [--observe watch|poll] [--edits N] [--debounce-ms MS] [--mcp-hub PATH | --no-mcp-hub]
//!     [--reload-ns 1,10,100] [--cost-ns 10,50,500] [--controller-arg ARG]... [--out FILE]
//!     [--cold-ns 10,100,500] [--init-delay-ms 300] [--start-cpu-ms 10]
//! ```
//!
//! Each scenario is a module of `src/bench/`: `reload`, `burst`, `cold`,
//! `cost` and `mcp-hub` (measured as said below), `readiness` and `gate`
//! (cold starts of `npx`-like servers, idle CPU, `status` time and stop at
//! N = 500, edits while 50 slow servers start) in `readiness.rs`, and
//! `gateway` (the agent endpoint's added latency, throughput, list_changed
//! delay, RSS) and `search` (`search_tools` at 1000 tools) in `gateway.rs`,
//! `storm` (a server announcing `tools/list_changed` 1000 times a second
//! for 10 s: the controller's CPU and how often it re-lists) in `storm.rs`,
//! and `first-list` (an agent's launch → first `tools/list`, cold vs warm
//! catalog cache, ten real servers) in `first_list.rs`, and `restarts`
//! (calls lost by an agent's session over graceful restarts and kills of
//! the controller) in `restarts.rs`, and `lazy` (the memory of the server
//! processes with 20 real servers of which 3 are called, eager vs `--start
//! lazy --idle-stop`) in `lazy.rs`, `dev` (a save of a watched source
//! file → a connected client sees the new tool list, without and with a
//! build, beside a config edit) in `dev.rs`, `sandbox` (what least
//! privilege costs: sandboxed against `off` starts and reloads, the exec
//! shim alone, the egress proxy) in `sandbox.rs`, and `code` (code mode: the
//! bytes a multi-step task puts through the agent's context, direct vs
//! `run_code`; an inner call's latency; engine start; `describe_tools` size)
//! in `code.rs`, and `views` (a call's added latency through the one-server
//! view against the aggregate endpoint and the server directly, small and
//! 1 MiB results) in `views.rs`; the module docs of those say how they measure.
//!
//! `--quick` (about 25 s) runs every scenario at small sizes; it is meant for
//! a smoke test (no errors, no churn, at most 2 restarts for the burst), not
//! for figures: its idle window is shorter than the ping period and its CPU
//! windows are a few ticks long.
//!
//! How things are measured (the JSON repeats the essentials under `method`):
//! - Everything runs in temp dirs (QWEN_HOME, HOME, system settings paths as
//!   the envtest harness sets them); the controller runs with its defaults
//!   except `--debounce-ms` (passed explicitly so the spacing of edits is
//!   known) and RUST_LOG unset (the product default, `info`).
//! - An edit is a write of the whole user `settings.json` by rename; its
//!   clock starts right before the `rename(2)` and stops when the edited
//!   server is seen `Ready` with `observedHash == spec.configHash`, the new
//!   env in its spec and a new pid. The status is observed through the
//!   control socket's `watch` stream (pushed on every change, timestamped on
//!   receipt by a dedicated reader thread) or, with `--observe poll`, by a
//!   `status` request every 2 ms.
//! - Edits are spaced so each one is a leading edge of the debounce: the next
//!   write comes at least `debounce + 100 ms` after the previous one.
//! - Restarts are counted from the fakes' record files ("start" events),
//!   per edit window, so a restart of any server that was not the edit's
//!   target counts as churn.
//! - CPU is `utime + stime` of the controller from `/proc/<pid>/stat` (clock
//!   ticks, whole process including exited threads) and, as a
//!   high-resolution cross-check, the sum of `/proc/<pid>/task/*/schedstat`
//!   (ns, live threads only; used for the targets when no thread exited in
//!   the window). Cost windows are whole multiples of the 15 s ping period:
//!   pings of servers started together come in rounds. The CPU *of an edit*
//!   (the N = 500 / N = 10 target) is the edit window's CPU less the idle
//!   rate measured just before at the same N — the pings of N idle servers,
//!   which have their own target — per edit; the total is reported beside
//!   it. Peak RSS is `VmHWM`.
//! - mcp-hub runs with `--watch` on its own config file (same fakes, same
//!   edits); "connected again" is its new process in the record file, then
//!   `connected` from `POST /api/servers/info`.
//! - `machineBusyPctPerScenario` is the whole machine's CPU use during each
//!   scenario, so a run disturbed by other work shows it; `binaries` says
//!   whether any source is newer than the controller binary measured.
//!
//! Every process started here (controllers, mcp-hub, the fakes they spawn)
//! is stopped when its guard drops, on error too, and on SIGINT/SIGTERM.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use steward::control::{Request, client, protocol};
use steward_schema::resource::{Item, McpServer, Phase, WorkspaceStatus};
use steward_tests::fake_mcp::{self, FakeMcpConfig, read_record};
use steward_tests::harness::{Env, alive, base_env, poll, signal};

#[path = "../bench/burst.rs"]
mod burst;
#[path = "../bench/cleanup.rs"]
mod cleanup;
#[path = "../bench/code.rs"]
mod code;
#[path = "../bench/cold.rs"]
mod cold;
#[path = "../bench/controller.rs"]
mod controller;
#[path = "../bench/cost.rs"]
mod cost;
#[path = "../bench/dev.rs"]
mod dev;
#[path = "../bench/first_list.rs"]
mod first_list;
#[path = "../bench/fleet.rs"]
mod fleet;
#[path = "../bench/gateway.rs"]
mod gateway;
#[path = "../bench/lazy.rs"]
mod lazy;
#[path = "../bench/mcp_hub.rs"]
mod mcp_hub;
#[path = "../bench/measure.rs"]
mod measure;
#[path = "../bench/observe.rs"]
mod observe;
#[path = "../bench/opts.rs"]
mod opts;
#[path = "../bench/readiness.rs"]
mod readiness;
#[path = "../bench/reload.rs"]
mod reload;
#[path = "../bench/report.rs"]
mod report;
#[path = "../bench/restarts.rs"]
mod restarts;
#[path = "../bench/sandbox.rs"]
mod sandbox;
#[path = "../bench/sandbox_cost.rs"]
mod sandbox_cost;
#[path = "../bench/storm.rs"]
mod storm;
#[path = "../bench/views.rs"]
mod views;

// What every scenario shares, in scope in each module through `use super::*`
// (as are the imports above).
use cleanup::*;
use controller::*;
use fleet::*;
use measure::*;
use opts::*;

fn main() {
    let opts = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("steward-bench: {e:#}");
            std::process::exit(2);
        }
    };
    install_signal_cleanup();
    let code = match report::bench(opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("steward-bench: {e:#}");
            1
        }
    };
    cleanup_all();
    std::process::exit(code);
}
