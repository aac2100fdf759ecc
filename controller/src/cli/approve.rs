//! `steward approve` / `steward reject`: decide for gated MCP servers
//! (scopes `project` and `workspace`: servers from files the workspace
//! controls run only once approved for their current configuration). Each decision is
//! bound to the server's current `approvalHash` and recorded through
//! [`crate::desired::approvals::record`] under the canonical workspace root. Every
//! name is checked before anything is written: one bad name writes nothing.
//!
//! `steward approve NAME --tools` is another decision: accept the tool
//! definitions a server offers now in place of its quarantined ones
//! (`gateway::pins`). Only the running controller has seen them, so it is a
//! control request, and the approvals file is never written for it.

use std::collections::BTreeMap;
use std::process::ExitCode;

use steward_schema::admission::{self, ApprovalState};
use steward_schema::desired::DesiredState;
use steward_schema::formats::{ApprovalRecord, ApprovalStatus, SandboxApproval};
use steward_schema::load::LoadMode;
use steward_schema::resource::SourceState;
use steward_schema::resource::sandbox_in_force;
use steward_schema::sandbox::Resolved;

use super::client::{REQUEST_TIMEOUT, need_controller, runtime};
use super::{CommandError, Io};
use crate::control::client;
use crate::desired::approvals::{self, ApprovalsError};
use crate::desired::offline::{self, Inputs};
use crate::support::paths::Paths;

/// Which decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Approve,
    Reject,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Approve => "approve",
            Verb::Reject => "reject",
        }
    }

    fn status(self) -> ApprovalStatus {
        match self {
            Verb::Approve => ApprovalStatus::Approved,
            Verb::Reject => ApprovalStatus::Rejected,
        }
    }
}

/// Why a decision was refused. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error(
        "{verb} {name}: no MCP server of that name is configured for {workspace}; {known}{hint}"
    )]
    Unknown {
        verb: &'static str,
        name: String,
        workspace: String,
        /// The servers that need approval, after `did you mean "x"? ` when
        /// one of them is close.
        known: String,
        hint: String,
    },
    #[error(
        "{verb} {name}: it comes from {source_kind} (scope {scope}) and needs no approval; only servers from .mcp.json (scope project) and .qwen/settings.json (scope workspace) do"
    )]
    NotGated {
        verb: &'static str,
        name: String,
        source_kind: String,
        scope: String,
    },
    #[error(
        "{verb} {name}: it is a language server; only MCP servers from .mcp.json or .qwen/settings.json need approval"
    )]
    LanguageServer { verb: &'static str, name: String },
    #[error(transparent)]
    Store(#[from] ApprovalsError),
}

/// `(name, approvalHash)` of every gated server, by name.
fn gated(state: &DesiredState) -> Vec<(&str, &str)> {
    state
        .mcp
        .iter()
        .filter(|(_, d)| d.spec.scope.is_gated())
        .map(|(name, d)| (name.as_str(), d.spec.approval_hash.as_str()))
        .collect()
}

fn known_list(state: &DesiredState) -> String {
    let names: Vec<&str> = gated(state).into_iter().map(|(n, _)| n).collect();
    if names.is_empty() {
        "no server here needs approval".to_owned()
    } else {
        format!("the servers that need approval are: {}", names.join(", "))
    }
}

/// The decisions `names` (or `--all`) stand for, after checking every name.
fn decisions(
    verb: Verb,
    names: &[String],
    all: bool,
    state: &DesiredState,
    invalid_hint: &str,
) -> Result<Vec<(String, String, ApprovalStatus)>, DecisionError> {
    let status = verb.status();
    if all {
        return Ok(state
            .mcp
            .iter()
            .filter(|(name, d)| {
                match admission::approval_state(name, &d.spec, &state.approvals) {
                    ApprovalState::NotRequired => false,
                    // Approved, unless its sandbox widened since.
                    ApprovalState::Approved => {
                        verb == Verb::Approve
                            && admission::sandbox_widened(name, &d.spec, state).is_some()
                    }
                    // approve: everything not approved for its current hash;
                    // reject: only what is undecided.
                    ApprovalState::Pending => true,
                    ApprovalState::Rejected => verb == Verb::Approve,
                }
            })
            .map(|(name, d)| (name.clone(), d.spec.approval_hash.clone(), status))
            .collect());
    }
    let mut out: Vec<(String, String, ApprovalStatus)> = Vec::new();
    for name in names {
        if out.iter().any(|(n, _, _)| n == name) {
            continue;
        }
        let Some(d) = state.mcp.get(name) else {
            if state.lsp.contains_key(name) {
                return Err(DecisionError::LanguageServer {
                    verb: verb.word(),
                    name: name.clone(),
                });
            }
            let gated_names: Vec<&str> = gated(state).into_iter().map(|(n, _)| n).collect();
            return Err(DecisionError::Unknown {
                verb: verb.word(),
                name: name.clone(),
                workspace: state.workspace.display().to_string(),
                known: match did_you_mean(name, &gated_names) {
                    Some(close) => format!("did you mean \"{close}\"? {}", known_list(state)),
                    None => known_list(state),
                },
                hint: invalid_hint.to_owned(),
            });
        };
        if !d.spec.scope.is_gated() {
            return Err(DecisionError::NotGated {
                verb: verb.word(),
                name: name.clone(),
                source_kind: d.source.to_string(),
                scope: serde_json::to_value(d.spec.scope)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            });
        }
        out.push((name.clone(), d.spec.approval_hash.clone(), status));
    }
    Ok(out)
}

/// The candidate closest to `name` by edit distance, if it is close: at
/// most a third of the name's length (at least 1), as a typo would be.
fn did_you_mean<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(name, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance, with a transposition counting as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

fn short(hash: &str) -> &str {
    hash.get(..8).unwrap_or(hash)
}

pub fn run(
    paths: &Paths,
    verb: Verb,
    names: &[String],
    all: bool,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    // Gated servers come only from the workspace's files; command-line
    // inputs play no part in what an approval binds to.
    let (set, mut state) = offline::load_desired(paths, &Inputs::default(), env, LoadMode::Lenient);
    let invalid: Vec<String> = [&set.mcp_json, &set.workspace_settings]
        .into_iter()
        .filter(|s| s.state == SourceState::Invalid)
        .map(|s| s.path.display().to_string())
        .collect();
    let hint = if invalid.is_empty() {
        String::new()
    } else {
        format!(
            " (entries with problems are left out: {}; run `steward validate`)",
            invalid.join(", ")
        )
    };
    if names.is_empty() && !all {
        return Err(CommandError::Usage {
            subcommand: verb.word(),
            message: format!(
                "name the servers to {0}, or pass --all to {0} every server that needs it",
                verb.word()
            ),
        });
    }
    let chosen = match decisions(verb, names, all, &state, &hint) {
        Ok(chosen) => chosen,
        // An unknown name is a usage error (exit 2), as the help says.
        Err(e @ DecisionError::Unknown { .. }) => {
            return Err(CommandError::Usage {
                subcommand: verb.word(),
                message: e.to_string(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    if chosen.is_empty() {
        writeln!(
            io.err,
            "nothing to {}: {}",
            verb.word(),
            match verb {
                Verb::Approve =>
                    "every gated server is already approved for its current configuration",
                Verb::Reject => "no gated server is pending a decision",
            }
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    approvals::record(&paths.approvals, &paths.workspace, &chosen).map_err(DecisionError::from)?;
    // The profile each approval is given for, in Steward's own file.
    let bindings: Vec<(String, SandboxApproval)> = chosen
        .iter()
        .filter(|(_, _, status)| *status == ApprovalStatus::Approved)
        .filter_map(|(name, hash, _)| {
            let d = state.mcp.get(name)?;
            match sandbox_in_force(&d.spec.resolved_sandbox) {
                Resolved::Profile { sandbox, .. } => Some((
                    name.clone(),
                    SandboxApproval {
                        approval_hash: hash.clone(),
                        sandbox,
                    },
                )),
                Resolved::Unknown(_) => None,
            }
        })
        .collect();
    if !bindings.is_empty() {
        approvals::record_sandboxes(&paths.sandbox_approvals, &paths.workspace, &bindings)
            .map_err(DecisionError::from)?;
        state.sandbox_approvals.extend(bindings);
    }

    for (name, hash, status) in &chosen {
        writeln!(
            io.out,
            "{} {name} (hash {}…)",
            approvals::status_word(*status),
            short(hash)
        )?;
        state.approvals.insert(
            name.clone(),
            ApprovalRecord {
                hash: hash.clone(),
                status: *status,
            },
        );
    }
    // An approval lifts only the approval gate: say when another one still holds.
    if verb == Verb::Approve {
        for (name, _, _) in &chosen {
            if let Some(d) = state.mcp.get(name)
                && let Some(blocked) = admission::admit_mcp(name, &d.spec, &state)
            {
                writeln!(
                    io.err,
                    "note: {name} is still blocked ({}): {}",
                    blocked.reason, blocked.message
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `steward approve NAME... --tools` (or `--all --tools`): the running
/// controller, which alone has seen the definitions the servers offer now,
/// pins them in place of the quarantined ones.
pub fn accept_tools(
    paths: &Paths,
    names: &[String],
    all: bool,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    if names.is_empty() && !all {
        return Err(CommandError::Usage {
            subcommand: "approve",
            message: "name the servers whose tools to accept, or pass --all --tools".to_owned(),
        });
    }
    let rt = runtime()?;
    let message = rt
        .block_on(client::accept_tools(
            &paths.socket_path(),
            names,
            all,
            REQUEST_TIMEOUT,
        ))
        .map_err(|e| need_controller(paths, e))?;
    writeln!(io.out, "{message}")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_suggests_a_close_name_only() {
        let names = ["time", "github", "filesystem"];
        assert_eq!(did_you_mean("tiem", &names), Some("time"));
        assert_eq!(did_you_mean("githb", &names), Some("github"));
        assert_eq!(did_you_mean("filesytsem", &names), Some("filesystem"));
        assert_eq!(did_you_mean("slack", &names), None);
        assert_eq!(did_you_mean("x", &[]), None);
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_substitutions_and_swaps() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("abc", "abd"), 1);
        assert_eq!(edit_distance("abc", "acb"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
