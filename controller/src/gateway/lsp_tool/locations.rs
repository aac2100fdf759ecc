//! goToDefinition, goToImplementation, findReferences and hover: what a
//! server knows at one position of a file.

use serde_json::{Value, json};

use super::args::{Args, Op};
use super::coordinates::Lines;
use super::shapes::{hover_text, locations_of};
use super::text::{place_line, plural, shown_of};
use super::{Answer, Call, Refused};

impl Call<'_> {
    pub(super) async fn locations(
        &self,
        op: Op,
        args: &Args,
        limit: usize,
    ) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let position = self.position(&doc, args.line, args.character)?;
        let (method, what) = match op {
            Op::Definition => ("textDocument/definition", "definition"),
            Op::Implementation => ("textDocument/implementation", "implementation"),
            _ => ("textDocument/references", "reference"),
        };
        let include_declaration = args.include_declaration.unwrap_or(false);
        let (raw, _) = self
            .ask(&route, &doc, method, &|uri| {
                let mut params = json!({ "textDocument": { "uri": uri }, "position": position });
                if op == Op::References {
                    params["context"] = json!({ "includeDeclaration": include_declaration });
                }
                params
            })
            .await?;
        let found = locations_of(&raw);
        let mut lines = Lines::default();
        let places: Vec<Value> = found
            .iter()
            .take(limit)
            .map(|(uri, range)| self.place(&mut lines, uri, range))
            .collect();
        let at = self.at(&doc, args, &route.server);
        let text = if places.is_empty() {
            format!("No {what} found at {at}.")
        } else {
            let mut text = format!(
                "{} at {at}{}:",
                plural(found.len(), what),
                shown_of(places.len(), found.len())
            );
            for place in &places {
                text.push('\n');
                text.push_str(&place_line(place));
            }
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": found.len(), "locations": places }),
        })
    }

    pub(super) async fn hover(&self, args: &Args) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let position = self.position(&doc, args.line, args.character)?;
        let (raw, uri) = self
            .ask(
                &route,
                &doc,
                "textDocument/hover",
                &|uri| json!({ "textDocument": { "uri": uri }, "position": position }),
            )
            .await?;
        let contents = hover_text(&raw["contents"]);
        let at = self.at(&doc, args, &route.server);
        let range = raw
            .get("range")
            .filter(|r| r.is_object())
            .map(|r| self.place(&mut Lines::default(), uri.as_str(), r));
        let text = if contents.trim().is_empty() {
            format!("No hover information at {at}.")
        } else {
            format!("Hover at {at}:\n{}", contents.trim())
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "contents": contents.trim(), "range": range }),
        })
    }
}
