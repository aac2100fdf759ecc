//! The command-line definitions of the registry commands: `search`, `add`,
//! `outdated`, `update`. Parsing only, like [`crate::cli::args`], which
//! uses them.

use std::time::Duration;

use clap::Args;

use crate::cli::output::Format;

/// Where the registry commands ask.
#[derive(Debug, Clone, Args)]
pub struct RegistryOptions {
    /// Ask this MCP registry (a base URL serving /v0.1; repeat for several,
    /// asked in order). Replaces steward.registries of the user and system
    /// settings, whose default is the official registry
    #[arg(long = "registry", value_name = "URL")]
    pub registries: Vec<String>,

    /// Answer from the cache under HOME_DIR/steward/cache/registry/ only
    /// (registries and package registries are not asked)
    #[arg(long)]
    pub offline: bool,

    /// How long one request to a registry may take
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = humantime::parse_duration)]
    pub registry_timeout: Duration,
}

/// `steward search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for (a substring of the servers' names)
    pub query: String,

    /// At most this many servers
    #[arg(long, default_value_t = 30)]
    pub limit: usize,

    /// Output format (wide adds the registry and the description)
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,

    #[command(flatten)]
    pub registry: RegistryOptions,
}

/// Where `steward add` writes the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AddScope {
    /// The workspace's .mcp.json (approved by this command unless --no-approve)
    Workspace,
    /// HOME_DIR/settings.json (every workspace; no approval needed)
    User,
}

/// What `add` and `update` share: how values and secrets are given, and
/// whether to write.
#[derive(Debug, Clone, Args)]
pub struct ApplyOptions {
    /// Read secret values as KEY=VALUE lines from stdin (never from the
    /// command line)
    #[arg(long)]
    pub secrets_stdin: bool,

    /// Print the plan and write nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Accept the plan without asking
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Do not approve the entry (it stays PendingApproval until `steward
    /// approve NAME`)
    #[arg(long)]
    pub no_approve: bool,
}

/// `steward add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The server's registry name, optionally with an exact version:
    /// io.github.example/weather or io.github.example/weather@1.2.3
    #[arg(value_name = "NAME[@VERSION]")]
    pub server: String,

    /// The entry's name in mcpServers (default: the part of NAME after its /)
    #[arg(long = "as", value_name = "LOCAL")]
    pub local: Option<String>,

    /// Where to write the entry
    #[arg(long, value_enum, default_value_t = AddScope::Workspace)]
    pub scope: AddScope,

    /// Run this package: its number in the plan's list (1-based) or its type
    /// (npm, pypi, nuget, oci, mcpb). OCI images run only when asked
    #[arg(long, value_name = "N|TYPE", conflicts_with = "remote")]
    pub package: Option<String>,

    /// Connect to this remote instead: its number (1-based) or its type
    /// (streamable-http, sse)
    #[arg(long, value_name = "N|TYPE")]
    pub remote: Option<String>,

    /// A value the entry asks for: an environment variable, header, named
    /// argument (its flag without dashes), positional argument (its
    /// valueHint) or template variable; repeat for repeated arguments.
    /// Secrets are refused here: give them at the prompt or with
    /// --secrets-stdin
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,

    /// PyPI: the console script to run when the distribution declares
    /// several
    #[arg(long, value_name = "NAME")]
    pub entry_point: Option<String>,

    #[command(flatten)]
    pub apply: ApplyOptions,

    #[command(flatten)]
    pub registry: RegistryOptions,
}

/// `steward outdated`.
#[derive(Debug, Args)]
pub struct OutdatedArgs {
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,

    #[command(flatten)]
    pub registry: RegistryOptions,
}

/// `steward update`.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The entries to update (default: every entry added from a registry
    /// with a newer version)
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,

    #[command(flatten)]
    pub apply: ApplyOptions,

    #[command(flatten)]
    pub registry: RegistryOptions,
}

pub const SEARCH_ABOUT: &str = "\
Search the MCP registries for servers whose name contains QUERY: the latest version of each, \
with its title, the transports it offers, its package types, and whether its publisher publishes \
permissions (a profile `steward add` makes the entry's sandbox). Registries are asked in order \
(--registry, else steward.registries of the user and system settings, else the official \
https://registry.modelcontextprotocol.io), pages followed; deleted servers are left out, \
deprecated ones marked.

Every answer is cached under HOME_DIR/steward/cache/registry/ with its time: with --offline, or \
when a registry cannot be reached or answers an error, the cache answers and a note on stderr \
says so.

Examples:
  steward search github
  steward search weather -o json
  steward search time --registry https://registry.example.com --offline";

pub const ADD_ABOUT: &str = "\
Add a server from an MCP registry to the workspace's .mcp.json (or, with --scope user, to \
HOME_DIR/settings.json): one exact version, run with an argv and no shell — npm: npx --yes \
ID@VERSION; PyPI: uvx --from ID==VERSION ENTRY-POINT (the entry point read from the wheel); \
NuGet: dnx ID@VERSION --yes --; OCI (only with --package oci): docker run -i --rm IMAGE@DIGEST; \
MCPB: the bundle downloaded, checked against its fileSha256 and unpacked under \
$XDG_DATA_HOME/steward/bundles/ (~/.local/share/…: servers may read it, none may write it); a remote (--remote): httpUrl or url with its headers.

The plan is printed first — the argv, the package, its version and integrity, the environment \
and headers, the secrets, the sandbox, the files written — and asked about (--yes accepts it, \
--dry-run only prints it). Values come from --set KEY=VALUE, else the publisher's value, else \
its default; a required value without one is asked for, or is an error when nobody can be asked. \
Secrets (isSecret) are asked without echo or read as KEY=VALUE lines with --secrets-stdin, \
stored where `steward secret set` stores them, and written as ${secret:NAME} (NAME: \
LOCAL.KEY). The sandbox is the publisher's permission profile when it publishes one, else \
none (a package runner still reaches its registry through the egress proxy).

The entry is written with the rest of the file untouched (comments, order, formatting); the \
lock file beside it (.mcp.lock.json, settings.lock.json) records the registry, name, version, \
the artefact's integrity and the argv; the entry is approved (the plan was accepted) unless \
--no-approve. A running controller starts it. Deleted versions are refused; deprecated ones \
are added with a warning.

Examples:
  steward add io.github.example/weather
  steward add io.github.example/weather@1.2.3 --as weather --set UNITS=metric
  printf 'WEATHER_KEY=%s\\n' \"$KEY\" | steward add io.github.example/weather --secrets-stdin --yes
  steward add io.github.example/weather --remote 1 --dry-run
  steward add io.github.example/tool --scope user --package pypi";

pub const OUTDATED_ABOUT: &str = "\
List the entries added from a registry (the lock files beside .mcp.json and the user's \
settings.json) whose registry has a newer version, with what updating would change: the argv \
or URL, environment variables and headers added or removed, secrets added, and whether the \
sandbox widens. An entry edited by hand since it was added is marked.

Examples:
  steward outdated
  steward outdated -o json";

pub const UPDATE_ABOUT: &str = "\
Update entries added from a registry to their registry's latest version: the pinned version, \
the argv and the lock file are rewritten, with the values given before. A change that widens \
the sandbox or adds a secret shows the plan and asks again (--yes accepts it); the approval \
follows the new configuration only when the update is accepted and the entry was approved \
before. Without NAME, every outdated entry.

Examples:
  steward update
  steward update weather --dry-run
  steward update weather --yes";
