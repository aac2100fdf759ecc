//! The workspace as the files alone describe it: load every source, merge
//! the desired state, run admission, and assemble the `WorkspaceStatus`
//! without a controller (`steward status --offline`). Loading
//! is lenient, as on a cold start of `steward run` with the same flags; the
//! live controller starts from the same function and overlays its runtime
//! part (phase, pid, restarts, `removed`).

use std::collections::BTreeMap;
use std::time::SystemTime;

use steward_schema::admission;
use steward_schema::desired::{self, CliOptions, DesiredState, SourceSet};
use steward_schema::load::LoadMode;
use steward_schema::resource::{API_VERSION, ControllerStatus, WorkspaceStatus};

use crate::desired::sources;
use crate::observe::clock::rfc3339;
use crate::support::paths::Paths;

/// The command-line inputs that shape the desired state (`run`, `status`,
/// `validate` take the same flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// `--mcp-config` values, in command-line order.
    pub mcp_config: Vec<String>,
    /// Allow-list upper bounds and `--no-lsp`.
    pub cli: CliOptions,
}

impl Default for Inputs {
    fn default() -> Self {
        Inputs {
            mcp_config: Vec::new(),
            cli: CliOptions {
                home: None,
                allowed_mcp: None,
                allowed_lsp: None,
                lsp_enabled: true,
            },
        }
    }
}

/// Load every source with `mode` and merge them into the desired state.
pub fn load_desired(
    paths: &Paths,
    inputs: &Inputs,
    env: &BTreeMap<String, String>,
    mode: LoadMode,
) -> (SourceSet, DesiredState) {
    let cx = sources::context(paths, env, mode);
    let set = sources::load_all(paths, &inputs.mcp_config, &cx);
    let cli = CliOptions {
        home: paths.user_home.clone(),
        ..inputs.cli.clone()
    };
    let state = desired::desired_state(&set, &paths.workspace, &cli, &sources::resolve_existing);
    (set, state)
}

/// The status of a desired state and its sources as admission alone sees it.
pub fn status_of(set: &SourceSet, state: &DesiredState, now: SystemTime) -> WorkspaceStatus {
    WorkspaceStatus {
        api_version: API_VERSION.to_owned(),
        kind: "WorkspaceStatus".to_owned(),
        workspace: state.workspace.to_string_lossy().into_owned(),
        controller: ControllerStatus {
            running: false,
            pid: None,
            trusted: state.policy.trusted,
            lsp_enabled: state.lsp_enabled,
            started_at: None,
            last_reload: None,
            conditions: Vec::new(),
            gateway: None,
        },
        sources: set.iter().map(sources::source_status).collect(),
        items: admission::admission_items(state, &rfc3339(now)),
        removed: Vec::new(),
    }
}

/// The full `WorkspaceStatus` from the files alone (cold-start semantics):
/// `controller.running: false`, every source (absent ones included), every
/// resource with its admission (`Blocked` + reason, or `Pending`).
pub fn offline_status(
    paths: &Paths,
    inputs: &Inputs,
    env: &BTreeMap<String, String>,
    now: SystemTime,
) -> WorkspaceStatus {
    let (set, state) = load_desired(paths, inputs, env, LoadMode::Lenient);
    status_of(&set, &state, now)
}
