//! The command line of `steward`: clap definitions and the
//! help text that teaches them. Parsing only — what each command does lives
//! in [`crate::cli`].
//!

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use steward_schema::desired::CliOptions;
use steward_schema::resource::ResourceKind;

use crate::cli::install_args::{self, CompletionsArgs, DoctorArgs, ManArgs, SchemaArgs};
use crate::cli::output::Format;
use crate::cli::registry_args;
use crate::desired::offline::Inputs;
use crate::gateway::names;
use crate::gateway::profile::{self, Expose, Profile, ProfileError};

const TOP_AFTER_HELP: &str = "\
Files read (HOME_DIR is $QWEN_HOME if set, else ~/.qwen; WS is --workspace):
  lowest settings     $QWEN_CODE_SYSTEM_DEFAULTS_PATH or /etc/qwen-code/system-defaults.json
  user settings       HOME_DIR/settings.json
  workspace settings  WS/.qwen/settings.json (gated: its servers need approval)
  highest settings    $QWEN_CODE_SYSTEM_SETTINGS_PATH or /etc/qwen-code/settings.json
  project MCP         WS/.mcp.json (gated)
  language servers    WS/.lsp.json
  extensions          HOME_DIR/extensions/*/qwen-extension.json
  folder trust        $QWEN_CODE_TRUSTED_FOLDERS_PATH or HOME_DIR/trustedFolders.json
  approvals           $QWEN_CODE_MCP_APPROVALS_PATH or HOME_DIR/mcpApprovals.json

Steward never creates or writes a file inside the workspace but when asked: .vscode/settings.json
(`steward schema --editor vscode --write`), .mcp.json and .mcp.lock.json (`steward add`, `update`).

Environment:
  QWEN_HOME        HOME_DIR (default ~/.qwen)
  XDG_RUNTIME_DIR  where the one-controller-per-workspace lock lives (default $TMPDIR/steward-<uid>)
  STEWARD_NOW      pin \"now\" to an RFC 3339 time (for tests and reproducible output)

Exit codes:
  0  ok
  1  error, or invalid input (validate found problems)
  2  usage error (unknown command, option or name)

Try:
  steward status --offline          what would run here, and why not
  steward validate                  check every configuration file
  steward approve --all             approve this workspace's pending servers
  steward describe NAME             one server: spec, status, stderr, events
  steward events -w                 what the controller does, as it happens";

/// Steward keeps an AI agent's MCP and LSP servers running exactly as the
/// workspace's configuration files declare.
#[derive(Debug, Parser)]
#[command(
    name = "steward",
    version,
    about = "Keep an AI agent's MCP and LSP servers in step with the workspace's configuration files",
    long_about = "Steward is a per-workspace controller: it reads the workspace's and the user's \
configuration files (settings.json layers, .mcp.json, .lsp.json, extensions), normalizes them into \
McpServer and LspServer resources, decides which of them may run (trust, allow-lists, exclusions, \
approvals) and keeps exactly those running.",
    after_help = "Run `steward --help` for the files read, the environment and the exit codes.",
    after_long_help = TOP_AFTER_HELP,
    propagate_version = true,
    args_override_self = true
)]
pub struct Cli {
    /// The workspace root (default: the current directory). Symlinks are
    /// resolved once; approvals and trust rules are keyed by that canonical path.
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        default_value = ".",
        hide_default_value = true
    )]
    pub workspace: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the JSON Schema of a source format or resource kind
    #[command(long_about = "\
Print the JSON Schema (Draft 2020-12) of a source format or a resource kind, as pretty JSON. \
Every field carries a description and its default; point an editor at it with \"$schema\".

Without NAME (or with `all`), prints every schema as one JSON object keyed by name. With --out, \
writes each schema to DIR/<name>.schema.json (creating DIR) and prints the paths written.

With --editor vscode, writes the schemas of the source formats under HOME_DIR/steward/schemas/ \
(again whenever steward's version changes) and prints the `json.schemas` setting that associates \
them with .mcp.json, .lsp.json, .qwen/settings.json, ~/.qwen/settings.json, qwen-extension.json, \
the approvals and the trusted-folders files — for VS Code and every editor embedding its JSON \
language service (Zed, Neovim with vscode-json-languageserver). --write merges it into the \
workspace's .vscode/settings.json instead, keeping that file's comments and other settings.

Examples:
  steward schema mcp-json > mcp-json.schema.json
  steward schema all --out crds-like-specs
  steward schema --editor vscode --write")]
    Schema(SchemaArgs),

    /// Check configuration files strictly; print every problem as path:line:col
    #[command(long_about = "\
Check configuration files with the strict rules a hot reload applies: a file with any problem \
would be rejected whole. Prints every problem as `path:line:col: message (at /json/pointer)`, one \
per line, on stdout, and exits 1 if there is any.

Without FILE, checks every source of the workspace (absent files are fine). With FILE, the format \
comes from the file name: settings.json, .mcp.json / mcp.json / *.mcp.json, .lsp.json / *.lsp.json, \
trustedFolders.json, mcpApprovals.json, qwen-extension.json.

Examples:
  steward validate
  steward validate .mcp.json ~/.qwen/settings.json
  steward validate --workspace ~/src/app --mcp-config extra.mcp.json")]
    Validate(ValidateArgs),

    /// Show every server, its spec, hashes and why it is (not) running
    #[command(long_about = "\
Show the WorkspaceStatus of the workspace: every McpServer and LspServer with its spec, hashes \
and status (Blocked with a reason, or Pending when admitted), whether the workspace is trusted, \
and every source file with its state (Valid, Invalid, Absent) and error.

With a controller running (`steward run`), shows its live view through the control socket: \
phases, pids, tools, restarts, the last reload. --watch keeps printing changes (like `kubectl get \
-w`; one JSON document per line with -o json). Without a running controller, or with --offline, \
it computes the status from the files alone, as a cold start of `steward run` with the same flags \
would, and says so on stderr. In the table view, invalid sources are reported as warnings on stderr; \
`-o wide` adds a MESSAGE column (the first line of each server's status message).

Examples:
  steward status
  steward status --watch
  steward status -o wide
  steward status --offline
  steward status --offline -o yaml --allowed-mcp-server-names github,time
  steward status --offline -o json | jq '.items[] | select(.status.phase == \"Blocked\")'

Values of env, headers, URLs (user info and query) and args are shown as written in the files \
(`${MY_TOKEN}` stays `${MY_TOKEN}`), with credentials written literally shown as <redacted>; \
--show-secrets shows them expanded, as the servers get them — except ${secret:NAME} references, \
which stay references everywhere.")]
    Status(StatusArgs),

    /// Approve gated MCP servers (from .mcp.json or workspace settings)
    #[command(long_about = "\
Approve MCP servers that come from the project's .mcp.json (scope project) or the workspace's \
.qwen/settings.json (scope workspace): such servers never run before they are approved. The \
decision is bound to the server's current approvalHash, so editing its entry asks again, while \
removing and re-adding the identical entry keeps it. Decisions are stored in the approvals file \
under the canonical workspace root.

--all approves every gated server not yet approved for its current configuration.

With --tools, accepts instead the tool and prompt definitions the named servers offer now (--all: \
every server with quarantined ones). The running controller pins the definitions each server \
offers when it first runs a configuration (trust on first use); a definition that changes later \
without a configuration change, or a tool the server adds, is quarantined — not listed, and a \
call to it says what changed — until accepted this way. Nothing is written to the approvals file.

Examples:
  steward approve github
  steward approve --all --workspace ~/src/app
  steward approve github --tools")]
    Approve(ApproveArgs),

    /// Reject gated MCP servers (they stay stopped until their entry changes)
    #[command(long_about = "\
Reject MCP servers from the project's .mcp.json or the workspace's .qwen/settings.json. A \
rejected server stays blocked (reason Rejected) until its entry is edited (which asks again) or \
it is approved.

--all rejects every gated server that is pending a decision.

Examples:
  steward reject untrusted-tool
  steward reject --all")]
    Reject(DecisionArgs),

    /// Run the controller for the workspace (until SIGINT/SIGTERM)
    #[command(
        long_about = "\
Run the controller: start every admitted server, keep each in step with the configuration files \
while they change (restarting only what changed), restart crashed servers with backoff, and serve \
`steward status|reload|stop|start` on a control socket under HOME_DIR. One controller per \
workspace: a second `run` exits 1 naming the first one's pid (one started while the first is \
stopping — a restart — waits up to a minute for it to exit). Agents reach the servers through \
`steward mcp` (which attaches to this controller) or, with --mcp-listen, over HTTP.

Edits are applied as soon as a file is saved and valid; a burst of saves within --debounce-ms \
coalesces into one trailing apply; an invalid edit changes nothing that runs and shows up as an \
Invalid source in `steward status`. SIGINT/SIGTERM stop every server and exit 0; a second signal \
exits at once. Logs go to stderr (RUST_LOG, --log-format).

Examples:
  steward run
  steward run --workspace ~/src/app --allowed-mcp-server-names github,time
  steward run --mcp-listen 127.0.0.1:7331
  RUST_LOG=steward=debug steward run --log-format json",
        args_override_self = true
    )]
    Run(RunArgs),

    /// Re-read every source (extensions included) and apply the result
    #[command(long_about = "\
Ask the running controller to re-read every source, extensions included (they are not watched), \
and wait until the reconciles it caused have finished; prints what the reload did.

Example:
  steward reload")]
    Reload,

    /// Stop servers and keep them stopped (across reloads and restarts)
    #[command(long_about = "\
Stop servers and keep them stopped — across reloads and controller restarts — until `steward \
start NAME`. Their status shows Blocked / StoppedByUser.

Example:
  steward stop github")]
    Stop(NamesArgs),

    /// Undo `steward stop`
    Start(NamesArgs),

    /// Serve every server's tools to an agent: MCP on stdin/stdout
    #[command(
        long_about = "\
The agent endpoint: an MCP server on stdin/stdout that offers the tools, prompts and resources of \
every Ready MCP server of the workspace (named server__tool), and code intelligence as one `lsp` \
tool while a language server is Ready. The list follows the configuration files live: after each \
edit the agent gets notifications/tools/list_changed instead of restarting. Calls to a server that \
is restarting for a new configuration wait for it; calls to a server that cannot run say why.

When a controller already runs for the workspace (`steward run`), this process hands its stdin and \
stdout to it and waits (or copies the bytes, when they are not pipes or sockets). Otherwise it becomes the controller itself (with the options below, as `steward run` would) \
and stays up while any agent is attached; when the last one leaves it stops every server and exits.

With many servers, --expose search keeps the catalog out of the agent's context: it lists only \
search_tools (find tools by describing the task) and call_tool (call one), and reaches tools added \
after it connected even when the agent never re-lists. --expose direct,search lists both. \
--expose code adds run_code (a JavaScript program that calls the tools, so that their \
intermediate results stay out of the agent's context; bounded in time, memory and calls) and \
describe_tools (the tools' TypeScript types); it combines with the others (direct,code). \
--max-name-len shortens the exposed names for agents that prefix them (Claude Code shows \
mcp__steward__server__tool and needs it within 64 characters: use 50).

--server NAME serves one server alone under its own names (tools, prompts, resources, templates, \
completion), still under all of Steward's governance (admission, pinned tool definitions, the \
sandbox, the wait while it restarts, idle start): register each server with the agent separately \
(Claude Code then shows mcp__github__create_issue) while one controller supervises them all. An \
unknown or not admitted name is refused with the reason and what to run. Over HTTP the same view \
is /mcp?server=NAME.

Register it with an agent, e.g.:
  claude mcp add steward -- steward mcp --workspace ~/src/app --max-name-len 50
  qwen mcp add steward steward mcp --workspace ~/src/app
  claude mcp add github -- steward mcp --workspace ~/src/app --server github
and run the agent with --allowed-mcp-server-names steward so that it does not also launch the \
servers itself. Logs go to stderr.",
        args_override_self = true
    )]
    Mcp(McpArgs),

    /// Show one server in detail: spec, status, conditions, stderr, events
    #[command(long_about = "\
Show one server the way `kubectl describe` does: its metadata and spec (values as written in the \
files, secrets redacted unless --show-secrets), its status and conditions, the last lines its \
process wrote on stderr, and the recent events about it. Without a running controller, shows \
what the files alone say (spec and admission), and says so on stderr.

Examples:
  steward describe github
  steward describe clangd --kind lsp
  steward describe github --show-secrets")]
    Describe(DescribeArgs),

    /// Print what a server's process wrote on stderr
    #[command(long_about = "\
Print the stderr lines the running controller kept for a server's process (the last 1000 lines \
or 128 KiB per process). --previous prints the process before the current one (after a crash or \
a restart); -f keeps printing new lines, across restarts, until interrupted.

Examples:
  steward logs github
  steward logs github --previous
  steward logs github -f --tail 20")]
    Logs(LogsArgs),

    /// List what happened: starts, crashes, back-offs, approvals, reloads
    #[command(long_about = "\
List the running controller's recent events, oldest first, like `kubectl get events`: \
Normal or Warning, a reason (Started, Crashed, CrashLoopBackOff, PendingApproval, Reloaded…), \
the object (mcpserver/NAME, lspserver/NAME or workspace/NAME), and a message. A repeated event \
is listed once with a count. -w keeps printing new ones; -o json|yaml prints them as objects \
(one JSON object per line with -w).

Examples:
  steward events
  steward events -w
  steward events -o json | jq '.items[] | select(.type == \"Warning\")'")]
    Events(EventsArgs),

    /// List every tool: listed, filtered, quarantined; bytes and tokens
    #[command(long_about = "\
List every tool of the workspace's MCP servers as the agent endpoint sees it: listed (offered \
to agents, with the name they call it by), filtered (the entry's includeTools/excludeTools), \
quarantined (its definition changed since it was pinned: steward approve NAME --tools), or \
its server not Ready. Each row shows the size of the tool's definition in bytes and an \
estimate of its tokens (bytes / 4), and the last line the total an agent's context pays with \
--expose direct. With many servers, `steward mcp --expose search` lists two tools instead.

Examples:
  steward tools
  steward tools -o json | jq '.listed'")]
    Tools(ToolsArgs),

    /// Write the workspace's MCP servers as ToolHive operator resources
    #[command(long_about = "\
Write the workspace's admitted MCP servers as Kubernetes resources for the ToolHive operator \
(toolhive.stacklok.dev/v1beta1), one multi-document YAML, from the files alone (as `status \
--offline` sees them). One MCPGroup holds them and one VirtualMCPServer serves them together, \
prefixing tools with `{workload}__`, so agents keep the `server__tool` names `steward mcp` gives.

How each entry maps:
  docker run … IMAGE ARGS    MCPServer (stdio behind a streamable-http proxy), image and args
  npx / uvx PKG@VERSION      MCPServer with the image of --image NAME=REF; without it the server
                             is refused with the `thv build --tag REF npx://PKG@VERSION` to run
                             (an unpinned package is refused: pin a version)
  local script, /abs/path    refused: no image holds it
  httpUrl, url (SSE)         MCPServerEntry in the group (MCPRemoteProxy with --remote-proxy);
                             loopback, private and cluster-local URLs are refused
  env                        literals in env; ${VAR} references and credential-looking names in
                             a Secret stub each (no data) with the `kubectl create secret` line
  headers                    Authorization: Bearer → MCPExternalAuthConfig (bearerToken); any
                             other header → headerForward from a Secret
  includeTools/excludeTools  an MCPToolConfig allow-list; excludeTools needs the server's tool
                             list, read from the running controller (`steward run`); a comment
                             says where each allow-list came from
  timeout                    the VirtualMCPServer's operational.timeouts.perWorkload
  trust, cwd, oauth          dropped, with a comment saying why

Blocked servers are listed in a comment (--include-blocked exports them). Names become lowercase \
DNS labels of at most 46 characters (a stable hash suffix on collision), the original in the \
annotation steward.dev/server. No secret value is ever written.

Exit codes: 0 every admitted server exported; 1 some refused (one line each on stderr: server, \
reason, what to do), the others still written.

--check FILE validates a manifest (`-`: stdin) against the CRDs of ToolHive v0.44.0, built \
into steward (or the YAML files of the operator-crds chart in --crds DIR), as the API server \
would: types, enums, required fields, patterns, unknown fields, duplicate list keys; each \
problem on stdout with its document number and JSON path, exit 1 when there is one. CEL \
rules (x-kubernetes-validations) are not evaluated.

Examples:
  steward export --format toolhive --image github=ghcr.io/github/github-mcp-server:v1.0.0 --out mcp.yaml
  steward export --format toolhive --namespace agents --anonymous | kubectl apply -f -
  steward export --format toolhive --check mcp.yaml
  steward export --format toolhive | steward export --format toolhive --check -")]
    Export(ExportArgs),

    /// Stop and start servers once (they stay configured, unlike `stop`)
    #[command(long_about = "\
Restart servers: stop each one's process (or connection) and start it again once, keeping it \
desired, and wait until it is Ready or failed. A failed server in back-off is retried at once. \
Unlike `steward stop`, nothing is persisted. A blocked server (pending approval, stopped…) has \
nothing to restart.

As a config edit does, a Ready MCP server first finishes the tool calls in flight (bounded by \
the entry's `timeout`); new calls wait for the new process. A call is never sent twice: with \
--now the old process stops at once and its calls in flight are answered with an error saying \
the tool may or may not have run.

Examples:
  steward restart github
  steward restart --now github")]
    Restart(RestartArgs),

    /// Use the running language servers: hover, definition, diagnostics...
    #[command(long_about = "\
Ask the running controller's language servers. Positions are FILE:LINE:COL, 1-based like \
compiler output. The server is chosen by the file's extension (extensionToLanguage in .lsp.json, \
else the usual language of the extension matched against a server's `languages`). A document is \
opened on first use (didOpen), tracked, and sent didChange when the file changed on disk since; \
after a server restarts, every tracked document is opened again before the reload counts as done.

Examples:
  steward lsp hover src/main.c:12:5
  steward lsp diagnostics app.py
  steward lsp symbols app.py -o json
  steward lsp request --server clangd textDocument/foldingRange '{\"textDocument\":{\"uri\":\"file:///w/a.c\"}}'")]
    Lsp(LspArgs),

    /// Store, list, remove secrets, or move a literal credential into one
    #[command(long_about = crate::cli::secret::SECRET_ABOUT)]
    Secret(crate::cli::secret::SecretArgs),

    /// Sign in to remote servers that need OAuth (login, status, logout)
    #[command(long_about = crate::cli::auth::ABOUT)]
    Auth(crate::cli::auth::AuthArgs),

    /// Manage the servers' sandboxes: `prune` removes private homes no server uses
    #[command(long_about = crate::cli::sandbox::ABOUT)]
    Sandbox(crate::cli::sandbox::SandboxArgs),

    /// Search MCP registries for servers
    #[command(long_about = registry_args::SEARCH_ABOUT)]
    Search(registry_args::SearchArgs),

    /// Add a server from an MCP registry: pinned, locked, sandboxed, approved
    #[command(long_about = registry_args::ADD_ABOUT)]
    Add(registry_args::AddArgs),

    /// List servers added from a registry that have a newer version
    #[command(long_about = registry_args::OUTDATED_ABOUT)]
    Outdated(registry_args::OutdatedArgs),

    /// Update servers added from a registry to their latest version
    #[command(long_about = registry_args::UPDATE_ABOUT)]
    Update(registry_args::UpdateArgs),

    /// Check the installation, the workspace's files, servers and agents
    #[command(long_about = install_args::DOCTOR_ABOUT)]
    Doctor(DoctorArgs),

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(long_about = install_args::COMPLETIONS_ABOUT)]
    Completions(CompletionsArgs),

    /// Print or write the man pages
    #[command(long_about = install_args::MAN_ABOUT)]
    Man(ManArgs),
}

/// `steward lsp`.
#[derive(Debug, Args)]
pub struct LspArgs {
    /// Output: readable text (default) or the server's JSON answer
    #[arg(short = 'o', long = "output", value_enum, default_value_t = LspFormat::Text, global = true)]
    pub output: LspFormat,

    #[command(subcommand)]
    pub command: LspCommand,
}

/// Output of `steward lsp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LspFormat {
    Text,
    Json,
}

/// The `steward lsp` operations.
#[derive(Debug, Subcommand)]
pub enum LspCommand {
    /// Open (or refresh) a document on its server
    Open { file: PathBuf },
    /// Hover information at FILE:LINE:COL
    Hover { location: String },
    /// Where the symbol at FILE:LINE:COL is defined
    Definition { location: String },
    /// Every reference to the symbol at FILE:LINE:COL
    References { location: String },
    /// The document's symbols
    Symbols { file: PathBuf },
    /// The server's diagnostics for the document (waits briefly for them)
    Diagnostics { file: PathBuf },
    /// Send any request: a METHOD, with PARAMS as JSON if it takes any
    Request {
        /// The server (default: chosen by --file)
        #[arg(long)]
        server: Option<String>,
        /// Open this document first (and choose the server by it)
        #[arg(long)]
        file: Option<PathBuf>,
        method: String,
        params: Option<String>,
    },
}

/// Which kind of server, when an MCP server and a language server share a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    /// McpServer
    Mcp,
    /// LspServer
    Lsp,
}

impl KindArg {
    pub fn kind(self) -> ResourceKind {
        match self {
            KindArg::Mcp => ResourceKind::McpServer,
            KindArg::Lsp => ResourceKind::LspServer,
        }
    }
}

/// `steward describe`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// Server name
    #[arg(value_name = "NAME")]
    pub name: String,

    /// Which kind, when an MCP and a language server share the name (default: both)
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,

    /// Show env, headers, URLs and args as the server gets them, secrets included
    #[arg(long)]
    pub show_secrets: bool,

    #[command(flatten)]
    pub desired: DesiredArgs,
}

/// `steward logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Server name
    #[arg(value_name = "NAME")]
    pub name: String,

    /// Keep printing new lines (across restarts) until interrupted
    #[arg(long, short = 'f', conflicts_with = "previous")]
    pub follow: bool,

    /// The process before the current one
    #[arg(long, short = 'p')]
    pub previous: bool,

    /// Only the last N lines
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,

    /// Which kind, when an MCP and a language server share the name
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
}

/// `steward events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Keep printing new and repeated events until interrupted
    #[arg(long, short = 'w')]
    pub watch: bool,

    /// Output format (wide adds COUNT and FIRST SEEN)
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// `steward tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// `steward stop` / `steward start`.
#[derive(Debug, Args)]
pub struct NamesArgs {
    /// Server names
    #[arg(value_name = "NAME", required = true)]
    pub names: Vec<String>,
}

/// `steward restart`.
#[derive(Debug, clap::Args)]
pub struct RestartArgs {
    /// Server names
    #[arg(value_name = "NAME", required = true)]
    pub names: Vec<String>,
    /// Stop at once instead of letting the calls in flight finish
    #[arg(long)]
    pub now: bool,
}

/// Which servers' tool definitions are pinned (`--pin-tools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PinTools {
    /// Every server
    All,
    /// Only servers that need approval (from .mcp.json and .qwen/settings.json)
    Gated,
    /// None
    Off,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `steward mcp`: `steward run`'s options (used when it becomes the
/// controller) and the view of this client.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// What the agent lists: every tool (direct), search_tools and
    /// call_tool (search), run_code and describe_tools (code), or several
    /// (direct,code)
    #[arg(long, value_name = "MODE", default_value = "direct", value_parser = parse_expose)]
    pub expose: Expose,

    /// The longest tool or prompt name given to the agent (16-128)
    #[arg(long, value_name = "N", default_value_t = names::MAX_LEN, value_parser = parse_name_len)]
    pub max_name_len: usize,

    /// Serve one MCP server alone, under its own names (its tools,
    /// prompts and resources as the server names them)
    #[arg(long, value_name = "NAME", value_parser = parse_server, conflicts_with_all = ["expose", "max_name_len"])]
    pub server: Option<std::sync::Arc<str>>,
}

impl McpArgs {
    pub fn profile(&self) -> Profile {
        Profile {
            expose: self.expose,
            max_name_len: self.max_name_len,
            server: self.server.clone(),
        }
    }
}

fn parse_server(text: &str) -> Result<std::sync::Arc<str>, String> {
    profile::parse_server(text).map_err(|e| e.to_string())
}

fn parse_expose(text: &str) -> Result<Expose, String> {
    text.parse().map_err(|e: ProfileError| e.to_string())
}

fn parse_name_len(text: &str) -> Result<usize, String> {
    profile::parse_name_len(text).map_err(|e| e.to_string())
}

/// `steward run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub desired: DesiredArgs,

    /// Log format on stderr (filter with RUST_LOG, default "info")
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Coalescing window for file events, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 300)]
    pub debounce_ms: u64,

    /// How many reconciles run at once. Each is short: servers start, say hello
    /// and stop in their own tasks, so this does not bound how many start together
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub workers: usize,

    /// Every this many seconds, every server is checked again (level-triggered resync)
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub resync_secs: u64,

    /// First delay after a crash, in milliseconds (doubles up to 300 s; for tests)
    #[arg(long, value_name = "MS", default_value_t = 10_000, hide = true)]
    pub crash_backoff_ms: u64,

    /// First delay after a failed start, in milliseconds (doubles up to 60 s; for tests)
    #[arg(long, value_name = "MS", default_value_t = 500, hide = true)]
    pub start_backoff_ms: u64,

    /// How often the token stores are read for a server waiting for a
    /// sign-in, in milliseconds (for tests)
    #[arg(long, value_name = "MS", default_value_t = 60_000, hide = true)]
    pub auth_recheck_ms: u64,

    /// After the first read of the sources, create FILE and wait until it
    /// is removed (for tests of changes made while the controller starts)
    #[arg(long, value_name = "FILE", hide = true)]
    pub hold_after_read: Option<PathBuf>,

    /// Time between MCP pings, in milliseconds (0 disables them)
    #[arg(long, value_name = "MS", default_value_t = 15_000, hide = true)]
    pub ping_interval_ms: u64,

    /// Also serve the agent endpoint as streamable HTTP at http://ADDR/mcp
    /// (loopback unless --mcp-token-file is given)
    #[arg(long, value_name = "ADDR")]
    pub mcp_listen: Option<String>,

    /// Bearer token HTTP clients must send (a file only you can read, mode
    /// 0600); required to listen on a non-loopback address
    #[arg(long, value_name = "FILE", requires = "mcp_listen")]
    pub mcp_token_file: Option<PathBuf>,

    /// Serve Prometheus metrics at http://ADDR/metrics (loopback unless
    /// --metrics-token-file is given)
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,

    /// Bearer token scrapers must send (a file only you can read, mode
    /// 0600); required to listen on a non-loopback address
    #[arg(long, value_name = "FILE", requires = "metrics_listen")]
    pub metrics_token_file: Option<PathBuf>,

    /// Label tool-call metrics with the tool's name too (one series per
    /// tool: mind the cardinality)
    #[arg(long)]
    pub metrics_tool_labels: bool,

    /// Items per page of the agent endpoint's lists (for tests)
    #[arg(long, value_name = "N", default_value_t = 100, hide = true)]
    pub mcp_page_size: usize,

    /// The agent endpoint's list_changed coalescing window, in milliseconds (for tests)
    #[arg(long, value_name = "MS", default_value_t = 50, hide = true)]
    pub mcp_coalesce_ms: u64,

    /// How long an HTTP session with no open stream and no request lives, in milliseconds (for tests)
    #[arg(long, value_name = "MS", default_value_t = 300_000, hide = true)]
    pub mcp_http_idle_ms: u64,

    /// Pin the tool definitions each server offers when it first runs a
    /// configuration, and quarantine those that change without one (accept
    /// them with `steward approve NAME --tools`)
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = PinTools::All)]
    pub pin_tools: PinTools,

    /// When MCP servers start: `eager` starts every admitted server at once;
    /// `lazy` lists a server whose catalog is cached without starting it
    /// (phase Idle) until a call needs it
    #[arg(long = "start", value_enum, value_name = "WHEN", default_value_t = StartWhen::Eager)]
    pub start: StartWhen,

    /// Stop an MCP server no call has used for this long (e.g. `10m`); its
    /// cached catalog stays listed and the next call starts it again
    #[arg(long, value_name = "DURATION", value_parser = parse_idle_stop)]
    pub idle_stop: Option<Duration>,
}

/// When MCP servers start (`--start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StartWhen {
    /// Every admitted server, at once
    Eager,
    /// A server with a cached catalog, at its first call
    Lazy,
}

fn parse_idle_stop(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 10m, 90s)"))?;
    if d.is_zero() {
        return Err("must be more than zero (leave it out to never stop)".to_owned());
    }
    Ok(d)
}

/// Inputs that change the desired state; `steward run` takes the same ones,
/// so `status --offline` with them shows what `run` would admit.
#[derive(Debug, Clone, Default, Args)]
pub struct DesiredArgs {
    /// MCP servers from a file (relative to the workspace) or inline JSON
    /// ({"mcpServers": {...}}), highest precedence; repeatable
    #[arg(long = "mcp-config", value_name = "FILE_OR_JSON")]
    pub mcp_config: Vec<String>,

    /// Upper bound on which MCP servers may run (names or */? globs,
    /// comma-separated and/or repeated); an empty value allows none
    #[arg(long, value_name = "A,B")]
    pub allowed_mcp_server_names: Option<Vec<String>>,

    /// Upper bound on which language servers may run (like
    /// --allowed-mcp-server-names)
    #[arg(long, value_name = "A,B")]
    pub allowed_lsp_server_names: Option<Vec<String>>,

    /// Run no language server at all
    #[arg(long)]
    pub no_lsp: bool,
}

impl DesiredArgs {
    /// The loader/admission inputs these flags stand for.
    pub fn inputs(&self) -> Inputs {
        Inputs {
            mcp_config: self.mcp_config.clone(),
            cli: CliOptions {
                home: None,
                allowed_mcp: self.allowed_mcp_server_names.as_deref().map(split_names),
                allowed_lsp: self.allowed_lsp_server_names.as_deref().map(split_names),
                lsp_enabled: !self.no_lsp,
            },
        }
    }
}

/// Every comma-separated name of every occurrence; `""` contributes none, so
/// `--allowed-mcp-server-names ''` is the deny-all list `[]`.
pub fn split_names(values: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// `steward validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Files to check (format from the file name); default: every source of the workspace
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    #[command(flatten)]
    pub desired: DesiredArgs,
}

/// What `steward export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// ToolHive operator resources (toolhive.stacklok.dev/v1beta1)
    Toolhive,
}

/// `steward export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The format to write
    #[arg(long, value_enum)]
    pub format: ExportFormat,

    /// metadata.namespace of every resource (default: none, kubectl's current namespace)
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// The MCPGroup's and VirtualMCPServer's name (default: the workspace directory's name)
    #[arg(long = "name", value_name = "GROUP")]
    pub group: Option<String>,

    /// The container image of a stdio server; repeatable
    #[arg(long = "image", value_name = "SERVER=REF", value_parser = parse_image)]
    pub images: Vec<(String, String)>,

    /// Where to write the YAML (default or `-`: stdout)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Export blocked servers too (they are listed in a comment otherwise)
    #[arg(long)]
    pub include_blocked: bool,

    /// incomingAuth: anonymous on the VirtualMCPServer (default: oidc, with a placeholder MCPOIDCConfig to create)
    #[arg(long)]
    pub anonymous: bool,

    /// Remote servers as MCPRemoteProxy (a proxy in the cluster) instead of MCPServerEntry
    #[arg(long)]
    pub remote_proxy: bool,

    /// Validate the manifest FILE (`-`: stdin) against the CRDs instead of exporting
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,

    /// With --check: the CRDs' YAML files in DIR instead of the built-in ToolHive v0.44.0 ones
    #[arg(long, value_name = "DIR", requires = "check")]
    pub crds: Option<PathBuf>,

    #[command(flatten)]
    pub desired: DesiredArgs,
}

/// `SERVER=REF` of `--image`.
fn parse_image(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((server, image)) if !server.is_empty() && !image.is_empty() => {
            Ok((server.to_owned(), image.to_owned()))
        }
        _ => Err(format!("expected SERVER=IMAGE, got {value:?}")),
    }
}

/// `steward status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,

    /// Compute the status from the files alone (no controller needed)
    #[arg(long, conflicts_with = "watch")]
    pub offline: bool,

    /// Keep printing changes (needs a running controller)
    #[arg(long, short = 'w')]
    pub watch: bool,

    /// Show env, headers, URLs and args as the servers get them, secrets
    /// included (default: as written in the files, credentials redacted)
    #[arg(long)]
    pub show_secrets: bool,

    #[command(flatten)]
    pub desired: DesiredArgs,
}

/// `steward approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub decision: DecisionArgs,

    /// Accept the tool definitions the servers offer now (their quarantined
    /// tools are listed again), instead of approving the servers
    #[arg(long)]
    pub tools: bool,
}

/// `steward approve` / `steward reject`.
#[derive(Debug, Args)]
pub struct DecisionArgs {
    /// Server names (required unless --all; checked by the command, whose
    /// message names --all)
    #[arg(value_name = "NAME", conflicts_with = "all")]
    pub names: Vec<String>,

    /// Every gated server that needs this decision
    #[arg(long)]
    pub all: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn start_and_idle_stop_parse_on_run_and_mcp() {
        let run = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Command::Run(r)) => Ok((r.start, r.idle_stop)),
            Ok(Command::Mcp(m)) => Ok((m.run.start, m.run.idle_stop)),
            Ok(_) => unreachable!(),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(run(&["steward", "run"]), Ok((StartWhen::Eager, None)));
        assert_eq!(
            run(&["steward", "run", "--start", "lazy", "--idle-stop", "10m"]),
            Ok((StartWhen::Lazy, Some(Duration::from_secs(600))))
        );
        assert_eq!(
            run(&["steward", "mcp", "--start", "lazy", "--idle-stop", "90s"]),
            Ok((StartWhen::Lazy, Some(Duration::from_secs(90))))
        );
        let zero = run(&["steward", "run", "--idle-stop", "0s"]).unwrap_err();
        assert!(zero.contains("more than zero"), "{zero}");
        assert!(run(&["steward", "run", "--idle-stop", "soon"]).is_err());
        assert!(run(&["steward", "run", "--start", "never"]).is_err());
    }

    #[test]
    fn allow_list_flags_split_and_empty_means_deny_all() {
        let cli = Cli::try_parse_from([
            "steward",
            "status",
            "--allowed-mcp-server-names",
            "a,b",
            "--allowed-mcp-server-names",
            "c",
            "--allowed-lsp-server-names=",
        ])
        .unwrap();
        let Command::Status(args) = cli.command else {
            panic!("expected status")
        };
        let inputs = args.desired.inputs();
        assert_eq!(
            inputs.cli.allowed_mcp,
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(inputs.cli.allowed_lsp, Some(vec![]));
        assert!(inputs.cli.lsp_enabled);
    }

    #[test]
    fn absent_allow_list_flag_allows_all() {
        let cli = Cli::try_parse_from(["steward", "validate", "--no-lsp"]).unwrap();
        let Command::Validate(args) = cli.command else {
            panic!("expected validate")
        };
        let inputs = args.desired.inputs();
        assert_eq!(inputs.cli.allowed_mcp, None);
        assert!(!inputs.cli.lsp_enabled);
    }

    #[test]
    fn approve_takes_names_or_all_but_not_both() {
        // Neither: refused by the command itself, with a message naming --all.
        assert!(Cli::try_parse_from(["steward", "approve"]).is_ok());
        assert!(Cli::try_parse_from(["steward", "approve", "a", "--all"]).is_err());
        assert!(Cli::try_parse_from(["steward", "approve", "--all"]).is_ok());
        assert!(Cli::try_parse_from(["steward", "reject", "a", "b"]).is_ok());
    }
}
