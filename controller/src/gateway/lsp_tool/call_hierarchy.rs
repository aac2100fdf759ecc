//! prepareCallHierarchy, incomingCalls and outgoingCalls: items go out in
//! this tool's coordinates, signed with their server and a revision of
//! their file, and come back checked (refused when their file changed).

use serde_json::{Value, json};

use super::args::{Args, Op, whole};
use super::coordinates::Lines;
use super::servers::request;
use super::shapes::as_list;
use super::text::{item_line, json_lines, place_line, plural, shown_of};
use super::{Answer, Call, Refused};

/// Call sites shown per call hierarchy entry in the text.
const CALL_SITES_SHOWN: usize = 3;

impl Call<'_> {
    pub(super) async fn prepare_call_hierarchy(
        &self,
        args: &Args,
        limit: usize,
    ) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let position = self.position(&doc, args.line, args.character)?;
        let (raw, _) = self
            .ask(
                &route,
                &doc,
                "textDocument/prepareCallHierarchy",
                &|uri| json!({ "textDocument": { "uri": uri }, "position": position }),
            )
            .await?;
        let all: Vec<&Value> = as_list(&raw);
        let mut lines = Lines::default();
        let items: Vec<Value> = all
            .iter()
            .take(limit)
            .filter_map(|item| self.item_out(&mut lines, item, &route.server))
            .collect();
        let at = self.at(&doc, args, &route.server);
        let text = if items.is_empty() {
            format!("No call hierarchy item at {at}.")
        } else {
            let mut text = format!("{} at {at}:", plural(all.len(), "call hierarchy item"));
            for item in &items {
                text.push('\n');
                text.push_str(&item_line(item));
            }
            text.push_str(
                "\nPass one of these items, unchanged, as callHierarchyItem to incomingCalls or outgoingCalls:\n",
            );
            text.push_str(&json_lines(items.iter()));
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "items": items }),
        })
    }

    pub(super) async fn calls(&self, op: Op, args: &Args, limit: usize) -> Result<Answer, Refused> {
        let given = match args.call_hierarchy_item.clone().unwrap_or_default() {
            // Some agents send the object as a JSON string.
            Value::String(s) => serde_json::from_str(&s).map_err(|e| {
                Refused(format!(
                    "callHierarchyItem is not a call hierarchy item: {e}"
                ))
            })?,
            other => other,
        };
        let server = args
            .server_name
            .clone()
            .or_else(|| given["serverName"].as_str().map(str::to_owned))
            .ok_or_else(|| {
                Refused(
                    "callHierarchyItem has no serverName: pass an item from prepareCallHierarchy, or name the server"
                        .to_owned(),
                )
            })?;
        let uri = given["uri"]
            .as_str()
            .ok_or_else(|| Refused("callHierarchyItem has no uri".to_owned()))?;
        let doc = self.document(uri)?;
        let route = self.route(Some(&server), Some(&doc.path))?;
        let item = self.item_in(&given, &doc, &server)?;
        let (method, key, noun) = match op {
            Op::IncomingCalls => ("callHierarchy/incomingCalls", "from", "caller"),
            _ => ("callHierarchy/outgoingCalls", "to", "callee"),
        };
        let (route_ref, doc_ref, item_ref) = (&route, &doc, &item);
        let raw = self
            .on(&route.server, |conn| async move {
                self.open(route_ref, &conn, doc_ref).await?;
                request(&conn, method, json!({ "item": item_ref })).await
            })
            .await?;
        let all = as_list(&raw);
        let mut lines = Lines::default();
        let mut calls = Vec::new();
        let mut text_lines = Vec::new();
        for call in all.iter().take(limit) {
            let Some(other) = self.item_out(&mut lines, &call[key], &route.server) else {
                continue;
            };
            // Call sites are in the caller: the other item's file for
            // incoming calls, this item's for outgoing ones.
            let sites_uri = match op {
                Op::IncomingCalls => call[key]["uri"].as_str().unwrap_or_default().to_owned(),
                _ => item["uri"].as_str().unwrap_or_default().to_owned(),
            };
            let sites: Vec<Value> = call["fromRanges"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| self.place(&mut lines, &sites_uri, r))
                .collect();
            let mut line = item_line(&other);
            for site in sites.iter().take(CALL_SITES_SHOWN) {
                line.push_str("\n    called at ");
                line.push_str(&place_line(site));
            }
            if sites.len() > CALL_SITES_SHOWN {
                line.push_str(&format!(
                    "\n    and {} more",
                    sites.len() - CALL_SITES_SHOWN
                ));
            }
            text_lines.push(line);
            calls.push(json!({ key: other, "fromRanges": sites }));
        }
        let target = format!(
            "{} ({}:{}:{})",
            given["name"].as_str().unwrap_or("?"),
            self.shown(&doc.path),
            whole(given["selectionRange"]["start"]["line"].as_f64()).unwrap_or(1),
            whole(given["selectionRange"]["start"]["character"].as_f64()).unwrap_or(1)
        );
        let text = if calls.is_empty() {
            format!("No {noun}s of {target} [{}].", route.server)
        } else {
            let heading = match op {
                Op::IncomingCalls => format!("{} of {target}", plural(all.len(), "caller")),
                _ => format!("{} called by {target}", plural(all.len(), "function")),
            };
            let items: Vec<&Value> = calls.iter().map(|c| &c[key]).collect();
            format!(
                "{heading} [{}]{}:\n{}\nTheir items, for further incomingCalls / outgoingCalls:\n{}",
                route.server,
                shown_of(calls.len(), all.len()),
                text_lines.join("\n"),
                json_lines(items.iter().copied())
            )
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": all.len(), "calls": calls }),
        })
    }
}
