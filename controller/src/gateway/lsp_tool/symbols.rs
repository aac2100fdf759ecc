//! documentSymbol and workspaceSymbol (with the references of the best
//! match), and the warm-up before workspaceSymbol: a server with no
//! document open through Steward first gets one file of the workspace it
//! handles, so it loads the project.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lsp_types::Url;
use serde_json::{Value, json};

use super::args::Args;
use super::coordinates::Lines;
use super::paths::Document;
use super::servers::request;
use super::shapes::{Symbol, flatten_symbols, locations_of, workspace_symbol};
use super::text::{place_line, plural, shown_of, symbol_line};
use super::{Answer, Call, Refused};
use crate::gateway::lsp::read;
use crate::runtime::lsp::LspConnection;

/// After a `workspaceSymbol` had to open a file first, how long before it
/// asks once more when the first answer was empty (the server was indexing).
const WARMUP_RETRY: Duration = Duration::from_millis(1500);
/// How deep `workspaceSymbol` looks for a file to open first.
const WARMUP_DEPTH: usize = 5;
/// Directories never searched for that file.
const SKIPPED_DIRS: [&str; 5] = ["node_modules", "dist", "build", "target", "out"];

impl Call<'_> {
    pub(super) async fn document_symbols(
        &self,
        args: &Args,
        limit: usize,
    ) -> Result<Answer, Refused> {
        let doc = self.document(args.file_path.as_deref().unwrap_or_default())?;
        let route = self.route(args.server_name.as_deref(), Some(&doc.path))?;
        let (raw, uri) = self
            .ask(
                &route,
                &doc,
                "textDocument/documentSymbol",
                &|uri| json!({ "textDocument": { "uri": uri } }),
            )
            .await?;
        let mut flat = Vec::new();
        flatten_symbols(
            &route.server,
            raw.as_array().map_or(&[][..], Vec::as_slice),
            uri.as_str(),
            None,
            0,
            &mut flat,
        );
        let mut lines = Lines::default();
        let symbols: Vec<Value> = flat
            .iter()
            .take(limit)
            .map(|s| self.symbol(&mut lines, s))
            .collect();
        let file = self.shown(&doc.path);
        let text = if symbols.is_empty() {
            format!("No symbols in {file} [{}].", route.server)
        } else {
            let mut text = format!(
                "{} in {file} [{}]{}:",
                plural(flat.len(), "symbol"),
                route.server,
                shown_of(symbols.len(), flat.len())
            );
            for (symbol, s) in symbols.iter().zip(&flat) {
                text.push('\n');
                text.push_str(&"  ".repeat(s.depth));
                text.push_str(&symbol_line(symbol));
            }
            text
        };
        Ok(Answer {
            text,
            data: json!({ "server": route.server, "total": flat.len(), "symbols": symbols }),
        })
    }

    pub(super) async fn workspace_symbols(
        &self,
        args: &Args,
        limit: usize,
    ) -> Result<Answer, Refused> {
        let query = args.query.clone().unwrap_or_default();
        let mut found: Vec<Symbol> = Vec::new();
        let mut failures = Vec::new();
        for server in self.servers(args.server_name.as_deref())? {
            let query = &query;
            let asked = self
                .on(&server, |conn| {
                    let server = server.clone();
                    async move {
                        let warmed = self.warm_up(&server, &conn).await;
                        let params = json!({ "query": query });
                        let mut raw = request(&conn, "workspace/symbol", params.clone()).await?;
                        let empty = raw.as_array().is_none_or(Vec::is_empty);
                        if empty && self.indexing_since(&server, &conn).await? {
                            raw = request(&conn, "workspace/symbol", params).await?;
                        } else if warmed && empty {
                            tokio::time::sleep(WARMUP_RETRY).await;
                            raw = request(&conn, "workspace/symbol", params).await?;
                        }
                        Ok(raw)
                    }
                })
                .await;
            match asked {
                Ok(raw) => {
                    for item in raw.as_array().into_iter().flatten() {
                        if let Some(symbol) = workspace_symbol(item, &server) {
                            found.push(symbol);
                        }
                    }
                }
                Err(Refused(why)) => failures.push(why),
            }
            if found.len() >= limit {
                break;
            }
        }
        if found.is_empty() && !failures.is_empty() {
            return Err(Refused(failures.join("; ")));
        }
        let mut lines = Lines::default();
        let symbols: Vec<Value> = found
            .iter()
            .take(limit)
            .map(|s| self.symbol(&mut lines, s))
            .collect();
        let mut text = if symbols.is_empty() {
            format!("No symbols match \"{query}\".")
        } else {
            let mut text = format!(
                "{} matching \"{query}\"{}:",
                plural(found.len(), "symbol"),
                shown_of(symbols.len(), found.len())
            );
            for symbol in &symbols {
                text.push('\n');
                text.push_str(&symbol_line(symbol));
                text.push_str(&format!(
                    " [{}]",
                    symbol["server"].as_str().unwrap_or_default()
                ));
            }
            text
        };
        for why in &failures {
            text.push_str(&format!("\n(skipped: {why})"));
        }
        // As Qwen Code does: the references of the best match.
        let mut references = Value::Null;
        if let Some(top) = found.first()
            && let Ok(path) = Url::parse(&top.uri).map(|u| u.to_file_path())
            && let Ok(path) = path
            && let Ok(doc) = self.document(&path.to_string_lossy())
            && let Ok(route) = self.route(Some(&top.server), Some(&doc.path))
        {
            let refs_limit = limit.clamp(5, 20);
            let start = &top.range["start"];
            let raw = self
                .ask(&route, &doc, "textDocument/references", &|uri| {
                    json!({ "textDocument": { "uri": uri }, "position": start,
                            "context": { "includeDeclaration": false } })
                })
                .await;
            if let Ok((raw, _)) = raw {
                let refs = locations_of(&raw);
                let places: Vec<Value> = refs
                    .iter()
                    .take(refs_limit)
                    .map(|(uri, range)| self.place(&mut lines, uri, range))
                    .collect();
                if !places.is_empty() {
                    text.push_str(&format!(
                        "\n{} of {}{}:",
                        plural(refs.len(), "reference"),
                        top.name,
                        shown_of(places.len(), refs.len())
                    ));
                    for place in &places {
                        text.push('\n');
                        text.push_str(&place_line(place));
                    }
                }
                references =
                    json!({ "symbol": top.name, "total": refs.len(), "locations": places });
            }
        }
        Ok(Answer {
            text,
            data: json!({ "query": query, "total": found.len(), "symbols": symbols, "topReferences": references }),
        })
    }

    /// Before `workspace/symbol` on a server that has no document open
    /// through Steward: open one file of the workspace it handles, so it
    /// loads the project. Returns whether it opened one.
    async fn warm_up(&self, server: &str, conn: &LspConnection) -> bool {
        if !self.gateway.lsp.tracked(server).is_empty() {
            return false;
        }
        let Some(spec) = self.snap.desired.lsp.get(server).map(|d| &d.spec) else {
            return false;
        };
        let mut extensions: Vec<String> = spec.extension_to_language.keys().cloned().collect();
        if extensions.is_empty() {
            extensions = spec
                .languages
                .iter()
                .flat_map(|l| usual_extensions(l))
                .map(|e| format!(".{e}"))
                .collect();
        }
        let Some(path) = find_file(&self.workspace, &extensions, WARMUP_DEPTH) else {
            return false;
        };
        let Ok(route) = self.route(Some(server), Some(&path)) else {
            return false;
        };
        let Ok(text) = read(&path) else {
            return false;
        };
        let doc = Document { path, text };
        match self.open(&route, conn, &doc).await {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(server, %e, "could not open a file before workspace/symbol");
                false
            }
        }
    }
}

/// Usual file extensions of a language id (for finding a file to open).
fn usual_extensions(language: &str) -> Vec<&'static str> {
    match language {
        "c" => vec!["c", "h"],
        "cpp" => vec!["cpp", "cc", "cxx", "hpp", "h"],
        "python" => vec!["py"],
        "typescript" => vec!["ts", "tsx"],
        "typescriptreact" => vec!["tsx"],
        "javascript" => vec!["js", "jsx", "mjs"],
        "javascriptreact" => vec!["jsx"],
        "shellscript" => vec!["sh", "bash"],
        "rust" => vec!["rs"],
        "go" => vec!["go"],
        "java" => vec!["java"],
        _ => Vec::new(),
    }
}

/// The first file (sorted, breadth-first, at most `depth` levels, hidden and
/// build directories skipped) whose extension is one of `extensions`.
fn find_file(root: &Path, extensions: &[String], depth: usize) -> Option<PathBuf> {
    let mut level = vec![root.to_owned()];
    for _ in 0..depth {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(std::fs::DirEntry::file_name);
            for entry in entries {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                        next.push(entry.path());
                    }
                } else if kind.is_file()
                    && let Some((_, ext)) = name.rsplit_once('.')
                    && extensions.contains(&format!(".{}", ext.to_lowercase()))
                {
                    return Some(entry.path());
                }
            }
        }
        level = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_file_is_found_breadth_first_skipping_build_dirs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("node_modules/x")).unwrap();
        std::fs::write(dir.path().join("node_modules/x/a.py"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join("src/deep/b.py"), "").unwrap();
        std::fs::write(dir.path().join("src/c.PY"), "").unwrap();
        let found = find_file(dir.path(), &[".py".to_owned()], 5).unwrap();
        assert_eq!(found, dir.path().join("src/c.PY"));
        assert_eq!(find_file(dir.path(), &[".py".to_owned()], 1), None);
    }
}
