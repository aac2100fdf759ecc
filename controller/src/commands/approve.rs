//! `steward approve` / `steward reject`: decide for gated MCP servers
//! (scopes `project` and `workspace`, product.md §3 gate 5). Each decision is
//! bound to the server's current `approvalHash` and recorded through
//! [`crate::approvals::record`] under the canonical workspace root. Every
//! name is checked before anything is written: one bad name writes nothing.

use std::collections::BTreeMap;
use std::process::ExitCode;

use steward_schema::admission::{self, ApprovalState};
use steward_schema::desired::DesiredState;
use steward_schema::formats::{ApprovalRecord, ApprovalStatus};
use steward_schema::load::LoadMode;
use steward_schema::resource::SourceState;

use super::{CommandError, Io};
use crate::approvals::{self, ApprovalsError};
use crate::offline::{self, Inputs};
use crate::paths::Paths;

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
                    ApprovalState::NotRequired | ApprovalState::Approved => false,
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
            return Err(DecisionError::Unknown {
                verb: verb.word(),
                name: name.clone(),
                workspace: state.workspace.display().to_string(),
                known: known_list(state),
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
    let chosen = decisions(verb, names, all, &state, &hint)?;
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
