//! # steward — the controller
//!
//! ## Theory of operation
//!
//! Data flows one way, one folder per step:
//!
//! ```text
//! source files ──watch──▶ snapshot ──diff──▶ queue ──▶ reconcile(key) ──launch──▶ instance ──▶ runtime
//!  (desired/)  (engine/)  (desired/: state    ▲       (engine/: decide,   (engine/: one   (runtime/:
//!                          + admission)       │        never wait)         attempt)        process,
//!                                             │          │                    │             mcp, lsp)
//!                                             └──────────┼─── phase events ───┘
//!                                                        ▼
//!                      observe/ (status store, events, logs, status view) ──▶ control/ (socket: status, events, logs)
//!                      gateway/ registry of live connections             ──▶ gateway/ (agents: tools, `lsp` tool)
//! ```
//!
//! [`cli`] is the edge (one file per command); [`support`] holds paths, the
//! workspace lock, logging, atomic writes. No file imports a file that
//! imports it back.
//!
//! - **Sources → snapshot.** [`desired::sources`] reads files; `steward-schema` parses,
//!   validates, normalizes and merges them. [`desired::snapshot::DesiredStore`] keeps,
//!   per source, the last *valid* content in force: cold start is lenient,
//!   every later load is strict, so an invalid edit is reported `Invalid` and
//!   changes nothing that runs. What Qwen Code tolerates is no error: it
//!   loads, with warnings (`sources[].warnings`, a log line), and an entry
//!   that yields no spec keeps a `Failed`/`InvalidSpec` row instead of
//!   vanishing. Each change publishes a new immutable
//!   [`desired::snapshot::Snapshot`] (desired servers, admission, generations).
//! - **Level-triggered.** Events — a settled file change ([`engine::watch`], its debounce a pure state machine), a server
//!   exiting or offering other tools (the runtime re-lists it after its `list_changed`,
//!   coalesced by another pure state machine), a settled change of a `dev`
//!   server's own source (`engine::watch::dev`, the same debounce, trailing only),
//!   `steward reload|stop|start`, the
//!   periodic resync — only say *which keys to look at*. The snapshot diff
//!   enqueues exactly the keys whose spec or admission changed; a formatting
//!   edit changes no key and so touches nothing.
//! - **Queue invariants** ([`engine::queue`]): duplicates coalesce; a key is never
//!   reconciled by two workers at once; a key dirtied during its reconcile
//!   runs once more afterwards; workers are bounded; delayed requeues keep
//!   the earliest time. Backoff policy lives in [`engine::backoff`]: per key for
//!   start failures (counting only attempts made after their delay), kubelet
//!   style for crash loops, reset on a spec change or a save of the source.
//! - **Reconcile** ([`engine::reconcile`]) gets only a key, reads the latest snapshot
//!   and what is observed, and acts on the difference — added → start,
//!   removed → stop, `configHash` changed → stop then start, filters changed →
//!   re-filter, unchanged → untouched, not admitted → stop and `Blocked`.
//!   Admission is decided before anything is spawned. A `dev` server's
//!   source is one more thing compared: the watcher counts its settled
//!   changes (a code generation), and an instance running an older
//!   generation is replaced like one of an older `configHash` — after
//!   `dev.build`, run as a task of its own through the runtime's spawner; a
//!   failed build keeps what runs (`BuildFailed`). A reconcile decides and
//!   *launches*; it never awaits a process. Keys whose admission turns to
//!   Blocked (and removals) go to the front of the queue.
//! - **Instances** ([`engine::instance`]): one attempt to run one spec, in its own
//!   task — spawn, handshake, discovery, then the drain, close, grace period
//!   and reaping when asked to stop. Each phase change (`Starting{pid}`,
//!   `Ready`, `Failed`, `Exited`, `Stopped`) comes back as an event for its
//!   key, so readiness is observed, not awaited: cold start is bounded by the
//!   machine, and a gate never waits behind a slow handshake. A new spec
//!   starts only once the old instance is `Stopped`: never two processes of
//!   one server.
//! - **Who owns a process.** Exactly one instance task per running attempt;
//!   the reconciler holds its handle. Every
//!   child is started by [`runtime::process::Spawner`]'s dedicated thread
//!   (posix_spawn of an exec shim), in its own process group, with a
//!   parent-death signal; stopping is protocol
//!   close → SIGTERM to the group → SIGKILL → every member reaped. The
//!   controller is a child subreaper: descendants that escaped their group
//!   come back to it and die with their server ([`runtime::reaper`], which
//!   also cleans up after a killed predecessor).
//! - **Every local server is sandboxed** ([`runtime::sandbox`]). Which
//!   permission profile a server gets is desired state, decided purely
//!   (`steward_schema::sandbox`: the entry's `sandbox`, the user's
//!   `steward.sandbox`; a workspace file only narrows; the profile in force
//!   is part of `configHash`, and bound to an approval). At spawn the
//!   runtime turns it into a plan that the exec shim applies in the server's
//!   own process before it execs it — a user and mount namespace, Landlock,
//!   `no_new_privs`, seccomp — and an egress proxy when the profile lists
//!   hosts; what this kernel enforces of it becomes `status.sandbox`. The
//!   controller's own sockets refuse any process that descends from it.
//! - **How a reload becomes status.** Reconciles write [`observe::status::StatusStore`];
//!   the outcomes of the keys a reload enqueued are collected into
//!   `status.controller.lastReload` once they have all finished
//!   (`engine::reload`). `steward status` reads the document
//!   ([`observe::view::StatusView`]: the store's view plus the gateway's
//!   facts, serialized once per change) through the [`control`] socket under
//!   HOME_DIR, specs redacted of secrets unless asked
//!   (`steward_schema::redact`).
//! - **Secrets are resolved at the last moment** ([`runtime::secrets`]). A
//!   `${secret:NAME}` stays a reference in every spec, hash, status and file;
//!   the engine keeps a book of the values its desired state references
//!   (looked up from the Secret Service, or Steward's file store when there
//!   is none, at start, on `steward reload`, when `steward secret set|rm`
//!   says a name changed, and for names an edit adds — never by reconcile,
//!   which only reads the book). Reconcile gives an instance the spec with
//!   its values and compares the fingerprint of those with what a running
//!   instance got, so a rotation restarts exactly the servers that use the
//!   secret; a missing or unreadable one is a gate (`SecretMissing`,
//!   `SecretUnavailable`). Values leave only to their server;
//!   [`support`]'s scrub puts the reference back into any log line or
//!   failure message that would quote one.
//! - **Events and logs are observed state too.** Every change of a server's
//!   phase or reason in the status store is an event ([`observe::events`]; reloads
//!   and rejected sources are the controller's own); every process a
//!   reconcile spawns writes its stderr into the server's [`observe::logs`] entry,
//!   which keeps the current and the previous process. `steward events -w`,
//!   `logs -f` and `status --watch` are served as [`control::streams`] that read those
//!   stores and never go through the event loop.
//! - **The agent endpoint is a reader, too** ([`gateway`]). Reconcile
//!   publishes each Ready MCP connection, with its filtered catalog, into
//!   the [`gateway::registry::Registry`] (a server restarting for a new
//!   configuration stays listed as `Restarting`, so calls wait for it). On
//!   the way in, [`gateway::pins`] judges each catalog against the definitions
//!   pinned for its `configHash` (trust on first use) and holds back the
//!   changed ones, which `steward approve NAME --tools` re-pins. Every
//!   client session reads the registry's union (`server__tool` names, at
//!   most its `--max-name-len` long) through its own view
//!   ([`gateway::profile`]: every tool, `search_tools` / `call_tool` over
//!   [`gateway::search`], `describe_tools` / `run_code` of code mode, or a
//!   mix), forwards calls through [`runtime::mcp::relay`] along one call
//!   path ([`gateway::call`]: a direct call, `call_tool`, and each inner
//!   call of a `run_code` program, whose engine runs on a thread of its
//!   own, [`gateway::code`]), and learns of changes from the registry's
//!   version, coalesced into `list_changed` when what *it* lists differs. A call to a
//!   server that is not live is answered from the status store: why, and what
//!   to do. The gateway never enqueues work, and reconcile never waits on a
//!   client. Each published catalog is also kept in [`gateway::cache`]
//!   (per `configHash`, written off the reconcile path); the next
//!   controller lists the admitted servers' cached catalogs before any
//!   client attaches, as `Cached` registry slots that calls wait on until
//!   the live connection replaces them. With `--start lazy` / `--idle-stop`
//!   reconcile keeps such a server `Idle` (not started, or stopped after no
//!   call used it for that long; the relay knows the last call) and its
//!   `Cached` slot listed; a call that waits on it sends a *demand* on a
//!   channel the event loop receives like a control request, which marks
//!   the key wanted in the reconciler and enqueues it — the gateway still
//!   enqueues nothing itself. A stopping controller hands each
//!   handed-over stdio session back to its `steward mcp` ([`gateway::resume`])
//!   after the requests it read are answered; HTTP session ids outlive it
//!   ([`gateway::http_sessions`]).
//! - **Export is a reader at the end, too** ([`export`]). `steward export
//!   --format toolhive` maps the desired state and admission (loaded as
//!   `status --offline` loads them) to ToolHive operator resources with a
//!   pure function, asking a running controller only for tool lists, and
//!   checks manifests against the CRDs it carries. It writes nothing the
//!   controller reads.
//! - **Adding a server is an input step before the sources** ([`registry`]).
//!   `steward add` asks MCP registries (cached for offline use), learns the
//!   chosen artefact's exact version and integrity from its own package
//!   registry, and *writes sources*: one `mcpServers` entry (the rest of the
//!   file untouched) and the lock file beside it, then approves the entry
//!   as `steward approve` does. What the entry says is decided purely
//!   (`steward_schema::registry`). It never touches what runs: the
//!   controller sees the edit like any other.
//! - **Metrics and traces cost nothing unasked** ([`observe::metrics`],
//!   [`observe::trace`]). Each step counts what it does into one registry
//!   (an atomic add, a short lock for a histogram); what the status store
//!   knows (servers by phase, sources, queue depth) is read only when
//!   `/metrics` is scraped. Spans of reloads, reconciles, starts and
//!   forwarded calls are built only when an OTLP endpoint is configured; a
//!   call continues its client's `traceparent` and passes its own upstream.
// The public surface: what the binaries (`cli::main`) and the integration
// tests and benchmarks of steward-tests use (the control client, the stores
// they drive directly, the runtime, paths). The engine and the gateway are
// reached only through `steward run` / `steward mcp`.
pub mod cli;
pub mod control;
pub mod desired;
pub(crate) mod engine;
pub mod export;
pub(crate) mod gateway;
pub mod observe;
pub mod registry;
pub mod runtime;
pub mod support;
