//! What `steward auth` commands share: the workspace's remote entry (its
//! secrets resolved), where tokens are kept, and telling the running
//! controllers that a sign-in changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use steward_schema::load::LoadMode;
use steward_schema::resource::{McpServerSpec, McpTransport};
use steward_schema::secrets as refs;

use super::{CommandError, Io};
use crate::control::{Request, client};
use crate::desired::offline::{Inputs, load_desired};
use crate::runtime::mcp::remote::oauth::OAuthEntry;
use crate::runtime::mcp::remote::oauth::store::OAuthStore;
use crate::runtime::mcp::remote::url_of;
use crate::runtime::secrets::{self, BackendKind};
use crate::support::paths::Paths;

pub(super) fn failed(message: impl Into<String>) -> CommandError {
    CommandError::Controller(message.into())
}

/// A remote entry of the workspace, its secrets resolved.
pub(super) struct Remote {
    pub name: String,
    pub spec: Arc<McpServerSpec>,
    pub url: String,
    pub oauth: OAuthEntry,
}

/// The remote entry `name` of the workspace (every source, admitted or not).
pub(super) fn remote(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    env: &BTreeMap<String, String>,
    name: &str,
) -> Result<(Remote, Option<String>), CommandError> {
    let (_, state) = load_desired(paths, &Inputs::default(), env, LoadMode::Lenient);
    let metadata_url = state.policy.oauth_client_metadata_url.clone();
    let Some(desired) = state.mcp.get(name) else {
        let remotes: Vec<&str> = state
            .mcp
            .iter()
            .filter(|(_, d)| d.spec.transport != McpTransport::Stdio)
            .map(|(n, _)| n.as_str())
            .collect();
        return Err(failed(format!(
            "sign in to {name}: no MCP server of that name in {} (remote servers here: {})",
            paths.workspace.display(),
            if remotes.is_empty() {
                "none".to_owned()
            } else {
                remotes.join(", ")
            }
        )));
    };
    if desired.spec.transport == McpTransport::Stdio {
        return Err(failed(format!(
            "sign in to {name}: it is not a remote server (it runs a command); only servers with an httpUrl or url sign in"
        )));
    }
    let spec = resolve(rt, paths, name, &desired.spec)?;
    let url = url_of(&spec).map_err(|e| failed(e.to_string()))?.to_owned();
    Ok((
        Remote {
            name: name.to_owned(),
            oauth: OAuthEntry::of(&spec),
            spec,
            url,
        },
        metadata_url,
    ))
}

/// `spec` with its `${secret:…}` references replaced.
pub(super) fn resolve(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    name: &str,
    spec: &Arc<McpServerSpec>,
) -> Result<Arc<McpServerSpec>, CommandError> {
    let names = refs::mcp_names(spec);
    if names.is_empty() {
        return Ok(spec.clone());
    }
    let backend = rt.block_on(secrets::open(&paths.home_dir));
    let mut values = BTreeMap::new();
    for secret in &names {
        match rt.block_on(backend.get(secret)) {
            Ok(Some(value)) => {
                values.insert(secret.clone(), value.expose().to_owned());
            }
            Ok(None) => {
                return Err(failed(format!(
                    "sign in to {name}: {}",
                    secrets::missing_message(std::slice::from_ref(secret))
                )));
            }
            Err(e) => return Err(failed(e.to_string())),
        }
    }
    let resolved = refs::resolve_mcp(spec, &|n| values.get(n).cloned())
        .map_err(|n| failed(format!("sign in to {name}: the secret {n} is not set")))?;
    Ok(Arc::new(resolved))
}

/// Where the store keeps tokens, for the user.
pub(super) fn kept_in(store: &OAuthStore) -> String {
    match store.kind() {
        BackendKind::SecretService => "the Secret Service (the desktop keyring)".to_owned(),
        BackendKind::File => format!(
            "{} (mode 0600; no Secret Service on the session bus)",
            store.where_kept()
        ),
    }
}

/// Tells every running controller of this HOME_DIR that the sign-in of
/// `resource` changed; says what each did.
pub(super) fn tell_controllers(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    resource: &str,
    account: &str,
    signed_out: bool,
    io: &mut Io<'_>,
) -> Result<(), CommandError> {
    let asked = Request::AuthChanged {
        resource: resource.to_owned(),
        account: account.to_owned(),
        signed_out,
    };
    for (socket, answer) in rt.block_on(client::tell_every_controller(paths, &asked)) {
        writeln!(
            io.out,
            "controller {}: {answer}",
            super::secret::controller_id(&socket)
        )?;
    }
    Ok(())
}
