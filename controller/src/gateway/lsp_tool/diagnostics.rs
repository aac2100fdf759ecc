//! diagnostics, workspaceDiagnostics and codeActions: what the servers
//! report about documents (pulled when a server offers it, else what it
//! publishes) and the actions they offer for a range — listed, never
//! applied.

use std::time::Duration;

use lsp_types::Url;
use serde_json::{Value, json};

use super::args::{Args, whole};
use super::coordinates::Lines;
use super::servers::request;
use super::shapes::{as_list, overlaps};
use super::text::{action_lines, diagnostic_line, plural, shown_of, tally};
use super::{Answer, Call, Refused};
use crate::gateway::lsp::{DIAGNOSTICS_WAIT, LspError, read};
use crate::runtime::lsp::LspConnection;

/// How long `diagnostics` waits for a document's first publication (a
/// server analyses a new file slowly; later ones take [`DIAGNOSTICS_WAIT`]).
const FIRST_DIAGNOSTICS_WAIT: Duration = Duration::from_secs(15);

impl Call<'_> {
    pub(super) async fn diagnostics(&self, args: &Args) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let (route_ref, doc_ref) = (&route, &doc);
        let (diagnostics, uri) = self
            .on(&route.server, |conn| async move {
                let uri = self.open(route_ref, &conn, doc_ref).await?.uri;
                Ok((document_diagnostics(&conn, &uri).await?, uri))
            })
            .await?;
        let file = self.shown(&doc.path);
        let mut lines = Lines::default();
        let Some(diagnostics) = diagnostics else {
            return Ok(Answer {
                text: format!(
                    "{} has not reported diagnostics for {file} yet (it may still be analysing it); call again shortly.",
                    route.server
                ),
                data: json!({ "server": route.server, "path": file, "diagnostics": Value::Null }),
            });
        };
        let shown: Vec<Value> = diagnostics
            .iter()
            .map(|d| self.diagnostic(&mut lines, uri.as_str(), d, &route.server))
            .collect();
        let text = if shown.is_empty() {
            format!("No diagnostics for {file} [{}].", route.server)
        } else {
            let mut text = format!("{} in {file} [{}]:", tally(&shown), route.server);
            for d in &shown {
                text.push('\n');
                text.push_str(&diagnostic_line(d));
            }
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "path": file, "diagnostics": shown }),
        })
    }

    pub(super) async fn workspace_diagnostics(
        &self,
        args: &Args,
        limit: usize,
    ) -> Result<Answer, Refused> {
        let mut files: Vec<Value> = Vec::new();
        let mut failures = Vec::new();
        let mut lines = Lines::default();
        let mut total_files = 0;
        for server in self.servers(args.server_name.as_deref())? {
            let server_ref = &server;
            let found = self
                .on(&server, |conn| async move {
                    self.collect_workspace_diagnostics(server_ref, &conn).await
                })
                .await;
            match found {
                Ok(found) => {
                    for (uri, diagnostics) in found {
                        if diagnostics.is_empty() {
                            continue;
                        }
                        total_files += 1;
                        if files.len() >= limit {
                            continue;
                        }
                        let shown: Vec<Value> = diagnostics
                            .iter()
                            .map(|d| self.diagnostic(&mut lines, &uri, d, &server))
                            .collect();
                        files.push(json!({
                            "path": self.uri_shown(&uri),
                            "server": server,
                            "diagnostics": shown,
                        }));
                    }
                }
                Err(Refused(why)) => failures.push(why),
            }
        }
        if files.is_empty() && !failures.is_empty() {
            return Err(Refused(failures.join("; ")));
        }
        let all: Vec<Value> = files
            .iter()
            .flat_map(|f| f["diagnostics"].as_array().cloned().unwrap_or_default())
            .collect();
        let mut text = if files.is_empty() {
            "No diagnostics in the documents the language servers know.".to_owned()
        } else {
            let mut text = format!(
                "{} in {}{}:",
                tally(&all),
                plural(total_files, "file"),
                shown_of(files.len(), total_files)
            );
            for file in &files {
                text.push_str(&format!(
                    "\n{} [{}]:",
                    file["path"].as_str().unwrap_or_default(),
                    file["server"].as_str().unwrap_or_default()
                ));
                for d in file["diagnostics"].as_array().into_iter().flatten() {
                    text.push('\n');
                    text.push_str(&diagnostic_line(d));
                }
            }
            text
        };
        for why in &failures {
            text.push_str(&format!("\n(skipped: {why})"));
        }
        Ok(Answer {
            text,
            data: json!({ "totalFiles": total_files, "files": files }),
        })
    }

    /// Every document `server` knows through Steward, refreshed from disk,
    /// with its diagnostics (pulled when the server offers workspace
    /// diagnostics, else what it published).
    async fn collect_workspace_diagnostics(
        &self,
        server: &str,
        conn: &LspConnection,
    ) -> Result<Vec<(String, Vec<Value>)>, LspError> {
        let tracked = self.gateway.lsp.tracked(server);
        let mut synced = Vec::new();
        for (uri, language) in tracked {
            let Ok(path) = uri.to_file_path() else {
                continue;
            };
            let Ok(text) = read(&path) else {
                continue;
            };
            self.gateway
                .lsp
                .open(server, conn, &path, &language, text)
                .await?;
            synced.push(uri);
        }
        let pull = conn.capabilities()["diagnosticProvider"]["workspaceDiagnostics"] == json!(true);
        if pull {
            let raw = request(
                conn,
                "workspace/diagnostic",
                json!({ "previousResultIds": [] }),
            )
            .await?;
            return Ok(raw["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|report| {
                    let uri = report["uri"].as_str()?.to_owned();
                    let items = report["items"].as_array()?.clone();
                    let inside = Url::parse(&uri)
                        .ok()
                        .and_then(|u| u.to_file_path().ok())
                        .is_some_and(|p| p.starts_with(&self.workspace));
                    inside.then_some((uri, items))
                })
                .collect());
        }
        let waits = synced.iter().map(|uri| async move {
            let fresh = conn.wait_for_diagnostics(uri, DIAGNOSTICS_WAIT).await;
            let diagnostics = fresh.or_else(|| conn.diagnostics(uri)).unwrap_or_default();
            (
                uri.to_string(),
                diagnostics
                    .iter()
                    .filter_map(|d| serde_json::to_value(d).ok())
                    .collect::<Vec<Value>>(),
            )
        });
        Ok(futures::future::join_all(waits).await)
    }

    pub(super) async fn code_actions(&self, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let start = self.position(&doc, args.line, args.character)?;
        let end = self.position(
            &doc,
            args.end_line.or(args.line),
            args.end_character.or(args.character),
        )?;
        let range = json!({ "start": start, "end": end });
        let given = args.diagnostics.clone();
        let only = args.code_action_kinds.clone();
        let (route_ref, doc_ref, range_ref, given_ref, only_ref) =
            (&route, &doc, &range, &given, &only);
        let raw = self
            .on(&route.server, |conn| async move {
                let uri = self.open(route_ref, &conn, doc_ref).await?.uri;
                let known: Vec<Value> = conn
                    .diagnostics(&uri)
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|d| serde_json::to_value(d).ok())
                    .collect();
                let diagnostics = match given_ref {
                    Some(given) => given
                        .iter()
                        .map(|d| self.diagnostic_in(doc_ref, d, &known))
                        .collect(),
                    None => known
                        .into_iter()
                        .filter(|d| overlaps(&d["range"], range_ref))
                        .collect::<Vec<_>>(),
                };
                let mut context = json!({ "diagnostics": diagnostics, "triggerKind": 1 });
                if let Some(only) = only_ref {
                    context["only"] = json!(only);
                }
                request(
                    &conn,
                    "textDocument/codeAction",
                    json!({ "textDocument": { "uri": uri }, "range": range_ref, "context": context }),
                )
                .await
            })
            .await?;
        let all = as_list(&raw);
        let mut lines = Lines::default();
        let actions: Vec<Value> = all
            .iter()
            .take(limit)
            .map(|a| self.action(&mut lines, a))
            .collect();
        let at = format!(
            "{}:{}:{}-{}:{} [{}]",
            self.shown(&doc.path),
            whole(args.line).unwrap_or(1),
            whole(args.character).unwrap_or(1),
            whole(args.end_line.or(args.line)).unwrap_or(1),
            whole(args.end_character.or(args.character)).unwrap_or(1),
            route.server
        );
        let text = if actions.is_empty() {
            format!("No code actions at {at}.")
        } else {
            let mut text = format!(
                "{} at {at}{}:",
                plural(all.len(), "code action"),
                shown_of(actions.len(), all.len())
            );
            for (n, action) in actions.iter().enumerate() {
                text.push_str(&format!("\n{}. {}", n + 1, action_lines(action)));
            }
            text.push_str("\nSteward does not apply them: make the edits yourself.");
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": all.len(), "actions": actions }),
        })
    }
}

/// A document's diagnostics: pulled when the server offers it, else the
/// ones it publishes after this sync (`None`: nothing came in time).
async fn document_diagnostics(
    conn: &LspConnection,
    uri: &Url,
) -> Result<Option<Vec<Value>>, LspError> {
    if !conn.capabilities()["diagnosticProvider"].is_null() {
        let raw = request(
            conn,
            "textDocument/diagnostic",
            json!({ "textDocument": { "uri": uri } }),
        )
        .await?;
        return Ok(Some(raw["items"].as_array().cloned().unwrap_or_default()));
    }
    let wait = if conn.diagnostics(uri).is_some() {
        DIAGNOSTICS_WAIT
    } else {
        FIRST_DIAGNOSTICS_WAIT
    };
    let published = conn
        .wait_for_diagnostics(uri, wait)
        .await
        .or_else(|| conn.diagnostics(uri));
    Ok(published.map(|list| {
        list.iter()
            .filter_map(|d| serde_json::to_value(d).ok())
            .collect()
    }))
}
