//! What `steward --version` says — the version, the commit the binary was
//! built from and the MCP protocol versions the agent endpoint speaks — and
//! the one clap command that carries it, shared by the parser, the
//! completions and the man pages.
//!
//! The commit reaches the library from the binary: `controller/build.rs`
//! gives `main.rs` a [`BuiltFrom`] (the git files it read, `include_str!`ed
//! there so that a commit recompiles `main.rs` only), which [`record`]s it
//! before [`crate::cli::main`] runs.

use std::sync::OnceLock;

use clap::CommandFactory;

use crate::cli::args::Cli;
use crate::gateway::session::protocol_versions;

/// The package version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where a binary's commit comes from (made by `controller/build.rs`).
#[derive(Debug, Clone, Copy)]
pub enum BuiltFrom {
    /// `$STEWARD_COMMIT` as the build was given it.
    Given(&'static str),
    /// The checkout's HEAD, the file holding the commit of the branch it
    /// names (a loose ref or packed-refs; empty when HEAD is detached) and
    /// that branch's ref name.
    Git {
        head: &'static str,
        refs: &'static str,
        name: &'static str,
    },
    /// Neither.
    Unknown,
}

impl BuiltFrom {
    /// The commit, 12 hex digits (or what the build was given).
    pub fn commit(self) -> Option<String> {
        let full = match self {
            BuiltFrom::Given(commit) => return Some(commit.to_owned()),
            BuiltFrom::Unknown => return None,
            BuiltFrom::Git { head, refs, name } => match head.trim().strip_prefix("ref: ") {
                None => Some(head.trim()),
                // A loose ref holds the hash alone; packed-refs lines are
                // `<hash> <name>`.
                Some(_) => refs.lines().map(str::trim).find_map(|line| {
                    match line.split_once(' ') {
                        None => Some(line),
                        Some((hash, of)) => (of == name).then_some(hash),
                    }
                    .filter(|hash| is_hash(hash))
                }),
            },
        }?;
        is_hash(full).then(|| full[..12].to_owned())
    }
}

fn is_hash(text: &str) -> bool {
    text.len() >= 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

static COMMIT: OnceLock<String> = OnceLock::new();

/// Record where this binary was built from (once, before parsing).
pub fn record(built_from: BuiltFrom) {
    let _ = COMMIT.set(built_from.commit().unwrap_or_else(|| "unknown".to_owned()));
}

/// The commit this binary was built from, or `unknown`.
pub fn commit() -> &'static str {
    COMMIT.get().map_or("unknown", String::as_str)
}

/// `0.1.0 (0123456789ab)`: `steward -V` and the man pages' footer.
pub fn short() -> &'static str {
    static SHORT: OnceLock<String> = OnceLock::new();
    SHORT.get_or_init(|| format!("{VERSION} ({})", commit()))
}

/// The MCP protocol versions `steward mcp` speaks, oldest first.
pub fn mcp_protocol_versions() -> Vec<&'static str> {
    protocol_versions().iter().map(|v| v.as_str()).collect()
}

/// `steward --version`: the version, then `commit …` and the protocol
/// versions of `steward mcp`, one per line.
pub fn long() -> &'static str {
    static LONG: OnceLock<String> = OnceLock::new();
    LONG.get_or_init(|| {
        format!(
            "{VERSION}\ncommit {}\nMCP protocol versions (steward mcp): {}",
            commit(),
            mcp_protocol_versions().join(", ")
        )
    })
}

/// What identifies this build: files generated from it (the editor schemas)
/// are written again when it changes.
pub fn build_id() -> String {
    format!("steward {VERSION} {}", commit())
}

/// The whole command line, with [`short`] and [`long`] as its versions.
pub fn command() -> clap::Command {
    Cli::command().version(short()).long_version(long())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOSE: &str = "0123456789abcdef0123456789abcdef01234567\n";
    const PACKED: &str = "# pack-refs with: peeled fully-peeled sorted
ffffffffffffffffffffffffffffffffffffffff refs/heads/other
0123456789abcdef0123456789abcdef01234567 refs/heads/main
";

    #[test]
    fn the_commit_is_read_from_a_loose_ref_packed_refs_or_a_detached_head() {
        let git = |head, refs| BuiltFrom::Git {
            head,
            refs,
            name: "refs/heads/main",
        };
        let want = Some("0123456789ab".to_owned());
        assert_eq!(git("ref: refs/heads/main\n", LOOSE).commit(), want);
        assert_eq!(git("ref: refs/heads/main\n", PACKED).commit(), want);
        assert_eq!(git(LOOSE, "").commit(), want);
        assert_eq!(git("ref: refs/heads/main\n", "").commit(), None);
        assert_eq!(git("garbage", "").commit(), None);
        assert_eq!(BuiltFrom::Given("v1.2").commit().as_deref(), Some("v1.2"));
        assert_eq!(BuiltFrom::Unknown.commit(), None);
    }
}
