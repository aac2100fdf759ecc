//! Secrets in the event loop. Which servers use which `${secret:NAME}` is
//! desired state ([`users`]); what each name holds is the book's
//! ([`SecretBook`]), refreshed in a task of its own ([`refresh`]) — at
//! start, on `steward reload` (a change made outside Steward, say with
//! `secret-tool`, is seen then), when `steward secret set|rm` says names
//! changed, and for names a config edit newly references. A finished
//! refresh comes back to the loop as [`Refreshed`]: the keys using a name
//! whose value changed are enqueued (their backoff forgotten), and the
//! request that asked for it goes on ([`Then`]). Reconcile compares the
//! fingerprint of the values an instance got with the book's, so exactly
//! the servers whose values changed restart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use std::path::Path;

use steward_schema::admission::Blocked;
use steward_schema::resource::{Phase, Reason};
use steward_schema::secrets as refs;
use tokio::sync::{mpsc, oneshot};

use crate::control::Answer;
use crate::desired::snapshot::{Desired, Key, Snapshot};
use crate::engine::instance::InstanceSpec;
use crate::observe::status::StatusStore;
use crate::runtime::secrets::book::SecretBook;
use crate::runtime::secrets::{self, Unresolved};

/// What an instance would run: the spec with its secrets resolved, and the
/// fingerprint of that (see [`crate::runtime::secrets`]).
pub(crate) struct Runnable {
    pub(crate) spec: InstanceSpec,
    /// Equal for equal values given to the server, however written.
    pub(crate) effective: String,
}

/// The spec the server of `key` gets, its `${secret:NAME}` references
/// replaced by what the book holds — or why it cannot run now.
pub(crate) fn runnable(
    book: &SecretBook,
    workspace: &Path,
    key: &Key,
    desired: &Desired<'_>,
) -> Result<Runnable, Unresolved> {
    Ok(match desired {
        Desired::Mcp(d) => {
            let r = secrets::resolve_mcp(book, &d.spec, workspace)?;
            Runnable {
                spec: InstanceSpec::Mcp(r.spec),
                effective: r.effective_hash,
            }
        }
        Desired::Lsp(d) => {
            let r = secrets::resolve_lsp(book, &key.name, &d.spec)?;
            Runnable {
                spec: InstanceSpec::Lsp(r.spec),
                effective: r.effective_hash,
            }
        }
    })
}

/// The gate a server's secrets close: `SecretMissing` (with the commands
/// that set them) or `SecretUnavailable`; none while not looked up yet.
pub(crate) fn blocked(why: &Unresolved) -> Option<Blocked> {
    match why {
        Unresolved::Pending => None,
        Unresolved::Missing(names) => Some(Blocked {
            reason: Reason::SecretMissing,
            message: secrets::missing_message(names),
        }),
        Unresolved::Unavailable(message) => Some(Blocked {
            reason: Reason::SecretUnavailable,
            message: message.clone(),
        }),
    }
}

/// What to do once a refresh is done.
#[derive(Debug)]
pub(super) enum Then {
    /// Nothing more (names a config edit added).
    Nothing,
    /// `steward reload`: reload every source, answer with its summary.
    Reload(oneshot::Sender<Answer>),
    /// `steward secret set|rm`: answer which servers restart.
    Changed {
        names: Vec<String>,
        reply: oneshot::Sender<Answer>,
    },
    /// `steward secret move`: rewrite the file (and the approval), reload.
    Move {
        file: PathBuf,
        server: String,
        field: String,
        name: String,
        reply: oneshot::Sender<Answer>,
    },
}

/// A refresh done: the names whose look-up changed, and what comes next.
#[derive(Debug)]
pub(super) struct Refreshed {
    pub(super) changed: BTreeSet<String>,
    pub(super) then: Then,
}

/// Each secret name the desired state references, and the servers using it.
pub(super) fn users(snap: &Snapshot) -> BTreeMap<String, BTreeSet<Key>> {
    let mut users: BTreeMap<String, BTreeSet<Key>> = BTreeMap::new();
    for (name, d) in &snap.desired.mcp {
        for secret in refs::mcp_names(&d.spec) {
            users.entry(secret).or_default().insert(Key::mcp(name));
        }
    }
    for (name, d) in &snap.desired.lsp {
        for secret in refs::lsp_names(&d.spec) {
            users.entry(secret).or_default().insert(Key::lsp(name));
        }
    }
    users
}

/// The servers that use any of `names`.
pub(super) fn keys_using(snap: &Snapshot, names: &BTreeSet<String>) -> BTreeSet<Key> {
    users(snap)
        .into_iter()
        .filter(|(name, _)| names.contains(name))
        .flat_map(|(_, keys)| keys)
        .collect()
}

/// Looks `names` up again in a task; the loop gets [`Refreshed`] on `done`.
/// Names outside `keep` and `names` are forgotten.
pub(super) fn refresh(
    book: &Arc<SecretBook>,
    names: BTreeSet<String>,
    keep: BTreeSet<String>,
    then: Then,
    done: &mpsc::UnboundedSender<Refreshed>,
) {
    let book = book.clone();
    let done = done.clone();
    tokio::spawn(async move {
        let changed = book.refresh(&names, &keep).await;
        let _ = done.send(Refreshed { changed, then });
    });
}

/// What the user must do for servers that wait on a secret: one line per
/// server, with the command (said at start and after each reload).
pub(super) fn user_actions(snap: &Snapshot, status: &StatusStore) -> Vec<String> {
    let mut lines = Vec::new();
    for key in snap.key_iter() {
        let Some(s) = status.get(key) else {
            continue;
        };
        if s.phase != Phase::Blocked {
            continue;
        }
        if let Some(Reason::SecretMissing | Reason::SecretUnavailable) = s.reason {
            lines.push(format!(
                "server {} waits for its secrets: {}",
                key.name,
                s.message.as_deref().unwrap_or_default()
            ));
        }
    }
    lines
}

/// The answer to `steward secret set|rm` once the names were looked up.
pub(super) fn changed_message(names: &[String], restarting: &BTreeSet<Key>) -> String {
    let list = names.join(", ");
    if restarting.is_empty() {
        format!("no running server of this workspace gets a new value of {list}")
    } else {
        let servers: Vec<&str> = restarting.iter().map(|k| k.name.as_str()).collect();
        format!(
            "{list} changed: restarting the servers that use it: {}",
            servers.join(", ")
        )
    }
}
