//! Control requests (`status`, `reload`, `stop`, `start`, `restart`, LSP
//! queries…) answered on the event loop: each reads the current snapshot and
//! stores and at most enqueues keys, like every other event.

use tokio::sync::oneshot;

use super::*;

pub(super) fn handle_request(
    incoming: Incoming,
    shared: &Shared,
    tracker: &mut ReloadTracker,
    paths: &Paths,
) {
    let Incoming { request, reply } = incoming;
    match request {
        Request::Status | Request::StatusWithSecrets { .. } => {
            let show_secrets = matches!(request, Request::StatusWithSecrets { .. });
            let answer = shared.view.json(show_secrets);
            let _ = reply.send(match answer {
                Ok(json) => Ok(Reply::StatusJson(RawJson(json))),
                Err(e) => Err(format!("serialize the status: {e}")),
            });
        }
        Request::Watch => {
            let _ = reply.send(Err("watch is served on its own connection".to_owned()));
        }
        Request::Events { .. } => {
            let _ = reply.send(Ok(Reply::Events(shared.status.events().list())));
        }
        Request::Logs(query) => {
            let snap = shared.store.snapshot();
            let _ = reply.send(streams::read_logs(&snap, &shared.status, &query));
        }
        Request::Restart { names, now } => {
            let snap = shared.store.snapshot();
            let keys = match restartable(shared, &snap, &names) {
                Ok(keys) => keys,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            };
            let rx = tracker.waiter();
            tracker.begin("steward restart", &keys, snap.epoch, snap.key_iter());
            for key in &keys {
                let how = if now { Restart::Now } else { Restart::Graceful };
                shared.reconciler.request_restart(key, how);
                shared.status.events().record(
                    ObjectRef::server(key),
                    NewEvent::new(
                        EventType::Normal,
                        "Restarting",
                        "restart requested (steward restart)",
                    ),
                    &now_rfc3339(),
                );
                shared.queue.add(key.clone());
            }
            tokio::spawn(async move {
                let _ = reply.send(match rx.await {
                    Ok(summary) => Ok(Reply::Reload(summary)),
                    Err(_) => Err("the controller is shutting down".to_owned()),
                });
            });
        }
        Request::Reload => {
            // Secrets first: a value changed outside Steward is seen now.
            shared.refresh_secrets(&[], secrets::Then::Reload(reply));
        }
        Request::SecretsChanged { names } => {
            let snap = shared.store.snapshot();
            let asked: BTreeSet<String> = names.iter().cloned().collect();
            if secrets::keys_using(&snap, &asked).is_empty() {
                let _ = reply.send(Ok(Reply::Message(secrets::changed_message(
                    &names,
                    &BTreeSet::new(),
                ))));
                return;
            }
            shared.refresh_secrets(&[], secrets::Then::Changed { names, reply });
        }
        Request::AuthChanged {
            resource,
            account,
            signed_out,
        } => {
            let _ = reply.send(super::auth::changed(
                shared, &resource, &account, signed_out,
            ));
        }
        Request::SecretMove {
            file,
            server,
            field,
            name,
        } => {
            let extra = [name.clone()];
            let then = secrets::Then::Move {
                file,
                server,
                field,
                name,
                reply,
            };
            shared.refresh_secrets(&extra, then);
        }
        Request::Lsp(query) => {
            let snap = shared.store.snapshot();
            let status = shared.status.clone();
            let lsp = shared.lsp.clone();
            tokio::spawn(async move {
                let answer = lsp.query(&snap, &status, query).await;
                let _ = reply.send(answer.map(|(server, result)| Reply::Lsp { server, result }));
            });
        }
        Request::Stop { names } | Request::Start { names } if names.is_empty() => {
            let _ = reply.send(Err("change a server: name at least one".to_owned()));
        }
        Request::Stop { names } => {
            let _ = reply.send(set_stopped(shared, paths, &names, true));
        }
        Request::Start { names } => {
            let _ = reply.send(set_stopped(shared, paths, &names, false));
        }
        Request::AcceptTools { names, all } => {
            let _ = reply.send(accept_tools(shared, &names, all));
        }
        Request::Tools => {
            let _ = reply.send(Ok(Reply::Tools(shared.gateway.tool_rows())));
        }
    }
}

/// A refresh of the secrets is done: the servers whose values changed are
/// looked at again (backoff forgotten), then the request goes on.
pub(super) fn secrets_refreshed(
    refreshed: secrets::Refreshed,
    shared: &Shared,
    tracker: &mut ReloadTracker,
    paths: &Paths,
) {
    let secrets::Refreshed { changed, then } = refreshed;
    let snap = shared.store.snapshot();
    let rotated = secrets::keys_using(&snap, &changed);
    if !rotated.is_empty() {
        tracing::info!(secrets = ?changed, servers = ?rotated.iter().map(|k| &k.name).collect::<Vec<_>>(), "secrets changed");
    }
    match then {
        secrets::Then::Nothing | secrets::Then::Changed { .. } => {
            for key in &rotated {
                shared.reconciler.retry_now(key);
                shared.queue.add(key.clone());
            }
            if let secrets::Then::Changed { names, reply } = then {
                let _ = reply.send(Ok(Reply::Message(secrets::changed_message(
                    &names, &rotated,
                ))));
            }
        }
        secrets::Then::Reload(reply) => reload(shared, tracker, reply, &rotated),
        secrets::Then::Move {
            file,
            server,
            field,
            name,
            reply,
        } => {
            let answer = secret_move(shared, paths, &file, &server, &field, &name);
            if answer.is_ok() {
                reload(shared, tracker, oneshot::channel().0, &rotated);
            }
            let _ = reply.send(answer.map(Reply::Message));
        }
    }
}

/// `steward reload` (its secrets looked up again): every source read
/// again, the keys it changed and `rotated` reconciled.
fn reload(
    shared: &Shared,
    tracker: &mut ReloadTracker,
    reply: oneshot::Sender<Answer>,
    rotated: &BTreeSet<Key>,
) {
    let before = shared.store.snapshot();
    let applied = shared.store.reload_all();
    let rx = tracker.waiter();
    shared.apply_with(&before, &applied, tracker, "steward reload", rotated);
    if let Some(summary) = tracker.finish_if_done() {
        shared.status.set_last_reload(summary);
    } else {
        tracker.release_waiters_if_idle();
    }
    tokio::spawn(async move {
        let _ = reply.send(Ok(match rx.await {
            Ok(summary) => Reply::Reload(summary),
            Err(_) => Reply::Message("reload applied; nothing to reconcile".to_owned()),
        }));
    });
}

/// `steward secret move` in the controller: the file (and approval)
/// rewritten with the value the book now holds for `name`.
fn secret_move(
    shared: &Shared,
    paths: &Paths,
    file: &Path,
    server: &str,
    field: &str,
    name: &str,
) -> Result<String, String> {
    let field = steward_schema::secret_move::Field::parse(field).map_err(|e| e.to_string())?;
    let stored = match shared.secrets.get(name) {
        Some(crate::runtime::secrets::book::Lookup::Found(value)) => value,
        Some(crate::runtime::secrets::book::Lookup::Unavailable(why)) => return Err(why),
        _ => {
            return Err(format!(
                "read the secret {name} back: it is not set (store it first)"
            ));
        }
    };
    let moved = crate::desired::secret_move::commit(
        paths,
        file,
        server,
        &field,
        name,
        stored.expose(),
        &crate::support::paths::process_env(),
    )
    .map_err(|e| e.to_string())?;
    Ok(format!(
        "{field} of {server} in {} is now ${{secret:{name}}}{}",
        file.display(),
        if moved.approved {
            "; its approval was renewed"
        } else {
            ""
        }
    ))
}

/// Pin the definitions the named MCP servers (or, with `all`, every server
/// with quarantined ones) offer now, and enqueue them: their next
/// publication lists what was quarantined.
fn accept_tools(shared: &Shared, names: &[String], all: bool) -> Answer {
    let snap = shared.store.snapshot();
    let names = if all {
        shared.pins.quarantined_servers()
    } else if names.is_empty() {
        return Err("accept tools: name at least one server, or pass --all".to_owned());
    } else {
        names.to_vec()
    };
    // Every name checked before anything is pinned.
    let mut specs = Vec::new();
    for name in &names {
        let key = Key::mcp(name);
        match snap.get(&key) {
            Some(Desired::Mcp(d)) => specs.push((key, d.spec.clone())),
            _ => {
                let known: Vec<&str> = snap.desired.mcp.keys().map(String::as_str).collect();
                return Err(format!(
                    "accept the tools of {name}: no MCP server of that name is configured for {} (known: {})",
                    snap.desired.workspace.display(),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
    }
    let mut lines = Vec::new();
    for (key, spec) in &specs {
        let accepted = shared
            .pins
            .accept(&key.name, spec)
            .map_err(|e| e.to_string())?;
        if accepted.is_empty() {
            lines.push(format!(
                "{}: nothing to accept; every tool and prompt matches its pinned definition",
                key.name
            ));
            continue;
        }
        let what: Vec<String> = accepted.iter().map(|q| q.summary()).collect();
        lines.push(format!("{}: accepted {}", key.name, what.join(", ")));
        shared.queue.add(key.clone());
    }
    if lines.is_empty() {
        lines.push("nothing to accept: no server has quarantined tools".to_owned());
    }
    Ok(Reply::Message(lines.join("\n")))
}

/// The keys `names` stand for, if every one of them may be restarted: it
/// exists and is admitted (a blocked server has nothing to restart).
fn restartable(shared: &Shared, snap: &Snapshot, names: &[String]) -> Result<Vec<Key>, String> {
    if names.is_empty() {
        return Err("name at least one server".to_owned());
    }
    let keys = keys_named(snap, names, "restart")?;
    let stopped = shared.reconciler.stopped();
    for key in &keys {
        let name = &key.name;
        if stopped.contains(key) {
            return Err(format!(
                "restart {name}: it was stopped with `steward stop`; run `steward start {name}`"
            ));
        }
        if let Some(b) = snap.blocked(key) {
            return Err(format!(
                "restart {name}: it is not running, it is blocked ({}): {}",
                b.reason, b.message
            ));
        }
    }
    Ok(keys)
}

/// The keys of every server `names` name (of either kind), or why not.
fn keys_named(snap: &Snapshot, names: &[String], verb: &str) -> Result<Vec<Key>, String> {
    let mut keys = Vec::new();
    for name in names {
        let found: Vec<Key> = [Key::mcp(name), Key::lsp(name)]
            .into_iter()
            .filter(|k| snap.contains(k))
            .collect();
        if found.is_empty() {
            let known: Vec<String> = snap.keys().into_iter().map(|k| k.name).collect();
            // Read after "failed to".
            return Err(format!(
                "{verb} {name}: no server of that name is configured for {} (known: {})",
                snap.desired.workspace.display(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
        keys.extend(found);
    }
    Ok(keys)
}

fn set_stopped(shared: &Shared, paths: &Paths, names: &[String], stop: bool) -> Answer {
    let snap = shared.store.snapshot();
    let keys = keys_named(&snap, names, if stop { "stop" } else { "start" })?;
    for key in &keys {
        shared.reconciler.set_stopped(key, stop);
        shared.reconciler.retry_now(key);
        shared.queue.add(key.clone());
    }
    if let Err(e) = stopped::write(&paths.stopped_file(), &shared.reconciler.stopped()) {
        return Err(format!("persist the stopped servers: {e}"));
    }
    Ok(Reply::Message(format!(
        "{} {}",
        if stop { "stopped" } else { "started" },
        keys.iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}
