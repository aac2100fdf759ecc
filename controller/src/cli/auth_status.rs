//! `steward auth status` and `steward auth logout`: what each remote server
//! of the workspace is signed in with (never the token itself), and
//! forgetting it.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;
use steward_schema::load::LoadMode;
use steward_schema::resource::{Item, McpTransport, Reason};

use super::auth_entry::{failed, kept_in, remote, resolve, tell_controllers};
use super::output::{self, Format, Table};
use super::{CommandError, Io};
use crate::control::client;
use crate::desired::offline::{Inputs, load_desired};
use crate::runtime::mcp::remote::oauth::store::{OAuthStore, TokenRecord, now_secs};
use crate::runtime::mcp::remote::oauth::{OAuthEntry, qwen};
use crate::runtime::mcp::remote::url_of;
use crate::support::paths::Paths;

/// One remote server's sign-in.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    name: String,
    /// `SignedIn`, `Refreshable` (expired, refreshed on use), `Expired`,
    /// `NeedsMoreScope`, `NeedsSignIn` (the controller says so),
    /// `NotSignedIn`.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<String>,
    /// The entry's `oauth.account` ("" for the default).
    account: String,
    scopes: Vec<String>,
    /// RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    /// `keyring`, the file store's path, or Qwen Code's token file.
    #[serde(skip_serializing_if = "Option::is_none")]
    kept_in: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AuthStatus {
    items: Vec<Row>,
}

fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

fn state_of(record: &TokenRecord, now: u64) -> &'static str {
    if !record.wanted_scopes.is_empty() {
        "NeedsMoreScope"
    } else if record.remaining(now).is_some_and(|left| left <= 0) {
        if record.refresh_token.is_some() {
            "Refreshable"
        } else {
            "Expired"
        }
    } else {
        "SignedIn"
    }
}

pub(super) fn status(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    env: &BTreeMap<String, String>,
    format: Format,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let (_, state) = load_desired(paths, &Inputs::default(), env, LoadMode::Lenient);
    let store = rt.block_on(OAuthStore::open(&paths.home_dir));
    // What the running controller (if any) says of each server.
    let live: BTreeMap<String, Option<Reason>> = rt
        .block_on(client::status(
            &paths.socket_path(),
            false,
            Duration::from_secs(5),
        ))
        .map(|s| {
            s.items
                .into_iter()
                .filter_map(|item| match item {
                    Item::McpServer(m) => Some((m.metadata.name, m.status.reason)),
                    Item::LspServer(_) => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let now = now_secs();
    let mut rows = Vec::new();
    for (name, desired) in &state.mcp {
        if desired.spec.transport == McpTransport::Stdio {
            continue;
        }
        // A secret that is missing leaves the URL as written.
        let spec = resolve(rt, paths, name, &desired.spec).unwrap_or_else(|_| desired.spec.clone());
        let Ok(url) = url_of(&spec) else { continue };
        let account = OAuthEntry::of(&spec).account;
        let record = rt
            .block_on(store.token_for(url, &account))
            .map_err(|e| failed(e.to_string()))?;
        let row = match record {
            Some(record) => Row {
                name: name.clone(),
                state: state_of(&record, now),
                issuer: Some(record.issuer.clone()),
                resource: Some(record.resource.clone()),
                account,
                scopes: record.scopes.clone(),
                expires_at: record.expires_at.map(rfc3339),
                kept_in: Some(store.where_kept()),
            },
            None => {
                let qwen = qwen::credential(&paths.home_dir, name).ok().flatten();
                match qwen {
                    Some(credential) => Row {
                        name: name.clone(),
                        state: if credential.token.expired(now.saturating_mul(1000)) {
                            "Expired"
                        } else {
                            "SignedIn"
                        },
                        issuer: None,
                        resource: None,
                        account,
                        scopes: Vec::new(),
                        expires_at: credential
                            .token
                            .expires_at
                            .as_ref()
                            .and_then(serde_json::Number::as_u64)
                            .map(|ms| rfc3339(ms / 1000)),
                        kept_in: Some(paths.home_dir.join(qwen::TOKENS_FILE).display().to_string()),
                    },
                    None => Row {
                        name: name.clone(),
                        state: match live.get(name) {
                            Some(Some(Reason::AuthRequired)) => "NeedsSignIn",
                            _ => "NotSignedIn",
                        },
                        issuer: None,
                        resource: None,
                        account,
                        scopes: Vec::new(),
                        expires_at: None,
                        kept_in: None,
                    },
                }
            }
        };
        rows.push(row);
    }
    let doc = AuthStatus { items: rows };
    match format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&doc).map_err(output::OutputError::from)?;
            text.push('\n');
            io.out.write_all(text.as_bytes())?;
        }
        Format::Yaml => {
            let text = yaml_serde::to_string(&doc).map_err(output::OutputError::from)?;
            io.out.write_all(text.as_bytes())?;
        }
        Format::Table | Format::Wide => {
            let dash = |s: Option<&String>| s.cloned().unwrap_or_else(|| "-".to_owned());
            let cells: Vec<Vec<String>> = doc
                .items
                .iter()
                .map(|r| {
                    vec![
                        r.name.clone(),
                        r.state.to_owned(),
                        dash(r.issuer.as_ref()),
                        if r.account.is_empty() {
                            "-".to_owned()
                        } else {
                            r.account.clone()
                        },
                        if r.scopes.is_empty() {
                            "-".to_owned()
                        } else {
                            r.scopes.join(" ")
                        },
                        dash(r.expires_at.as_ref()),
                        dash(r.kept_in.as_ref()),
                    ]
                })
                .collect();
            let mut table = Table::new(
                [
                    "NAME", "STATE", "ISSUER", "ACCOUNT", "SCOPES", "EXPIRES", "KEPT IN",
                ]
                .map(String::from)
                .to_vec(),
            );
            table.fit(&cells);
            let mut out = table.header_line();
            for r in &cells {
                out.push_str(&table.line(r));
            }
            if cells.is_empty() {
                out = "no remote servers in this workspace\n".to_owned();
            }
            io.out.write_all(out.as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn logout(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    env: &BTreeMap<String, String>,
    name: &str,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let (remote, _) = remote(rt, paths, env, name)?;
    let store = rt.block_on(OAuthStore::open(&paths.home_dir));
    let removed = rt
        .block_on(store.remove_tokens(&remote.url, &remote.oauth.account))
        .map_err(|e| failed(e.to_string()))?;
    if removed.is_empty() {
        return Err(failed(format!(
            "sign out of {name}: Steward holds no token for it{}",
            if qwen::credential(&paths.home_dir, name)
                .ok()
                .flatten()
                .is_some()
            {
                " (its token is Qwen Code's: sign out in Qwen Code)"
            } else {
                ""
            }
        )));
    }
    for record in &removed {
        writeln!(
            io.out,
            "signed out of {name} at {} (removed from {})",
            record.issuer,
            kept_in(&store)
        )?;
        tell_controllers(rt, paths, &record.resource, &record.account, true, io)?;
    }
    Ok(ExitCode::SUCCESS)
}
