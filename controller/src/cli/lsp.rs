//! `steward lsp`: send one query to the running controller's language
//! servers and print the answer (readable text, or the server's JSON).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use super::client::{need_controller, runtime};
use super::{CommandError, Io};
use crate::cli::args::{LspArgs, LspCommand, LspFormat};
use crate::control::client;
use crate::gateway::lsp::{LspOp, LspQuery, parse_location};
use crate::support::paths::Paths;

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    })
}

fn query(op: LspOp, file: Option<&Path>) -> LspQuery {
    LspQuery {
        op,
        file: file.map(absolute),
        line: None,
        column: None,
        server: None,
        method: None,
        params: None,
    }
}

fn at(op: LspOp, location: &str) -> LspQuery {
    let (file, line, column) = parse_location(location);
    LspQuery {
        line,
        column,
        ..query(op, Some(&file))
    }
}

pub fn run(paths: &Paths, args: LspArgs, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let q = match &args.command {
        LspCommand::Open { file } => query(LspOp::Open, Some(file)),
        LspCommand::Hover { location } => at(LspOp::Hover, location),
        LspCommand::Definition { location } => at(LspOp::Definition, location),
        LspCommand::References { location } => at(LspOp::References, location),
        LspCommand::Symbols { file } => query(LspOp::Symbols, Some(file)),
        LspCommand::Diagnostics { file } => query(LspOp::Diagnostics, Some(file)),
        LspCommand::Request {
            server,
            file,
            method,
            params,
        } => {
            let params = match params {
                Some(p) => {
                    Some(
                        serde_json::from_str::<Value>(p).map_err(|e| CommandError::Usage {
                            subcommand: "lsp",
                            message: format!("PARAMS is not valid JSON: {e}"),
                        })?,
                    )
                }
                None => None,
            };
            LspQuery {
                server: server.clone(),
                method: Some(method.clone()),
                params,
                ..query(LspOp::Request, file.as_deref())
            }
        }
    };
    let rt = runtime()?;
    let (_server, result) = rt
        .block_on(client::lsp(
            &paths.socket_path(),
            &q,
            Duration::from_secs(90),
        ))
        .map_err(|e| need_controller(paths, e))?;
    match args.output {
        LspFormat::Json => writeln!(
            io.out,
            "{}",
            serde_json::to_string_pretty(&result).map_err(std::io::Error::other)?
        )?,
        LspFormat::Text => write!(io.out, "{}", render(q.op, &result))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn uri_path(uri: &str) -> String {
    lsp_types::Url::parse(uri)
        .ok()
        .and_then(|u| u.to_file_path().ok())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| uri.to_owned())
}

fn location_line(loc: &Value) -> Option<String> {
    let uri = loc.get("uri").or_else(|| loc.get("targetUri"))?.as_str()?;
    let range = loc
        .get("range")
        .or_else(|| loc.get("targetSelectionRange"))?;
    let line = range["start"]["line"].as_u64()? + 1;
    let col = range["start"]["character"].as_u64()? + 1;
    Some(format!("{}:{line}:{col}", uri_path(uri)))
}

/// Readable text for an answer.
fn render(op: LspOp, result: &Value) -> String {
    let mut out = String::new();
    let list = |v: &Value| -> Vec<Value> {
        match v {
            Value::Array(a) => a.clone(),
            Value::Null => Vec::new(),
            other => vec![other.clone()],
        }
    };
    match op {
        LspOp::Hover => {
            let contents = &result["contents"];
            let text = match contents {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("value")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_owned)
                            .or_else(|| i.get("value").and_then(Value::as_str).map(str::to_owned))
                            .unwrap_or_default()
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => "no hover information".to_owned(),
            };
            out.push_str(&text);
            out.push('\n');
        }
        LspOp::Definition | LspOp::References => {
            let locs = list(result);
            if locs.is_empty() {
                out.push_str("no locations\n");
            }
            for loc in locs {
                if let Some(line) = location_line(&loc) {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
        }
        LspOp::Symbols => {
            fn walk(out: &mut String, symbols: &[Value], depth: usize) {
                for s in symbols {
                    let name = s["name"].as_str().unwrap_or("?");
                    let range = s
                        .get("selectionRange")
                        .or_else(|| s.get("range"))
                        .or_else(|| s.get("location").map(|l| &l["range"]));
                    let line = range
                        .and_then(|r| r["start"]["line"].as_u64())
                        .map_or(0, |l| l + 1);
                    out.push_str(&format!(
                        "{}{name} (kind {}) line {line}\n",
                        "  ".repeat(depth),
                        s["kind"]
                    ));
                    if let Some(children) = s.get("children").and_then(Value::as_array) {
                        walk(out, children, depth + 1);
                    }
                }
            }
            walk(&mut out, &list(result), 0);
            if out.is_empty() {
                out.push_str("no symbols\n");
            }
        }
        LspOp::Diagnostics => {
            let diags = list(result);
            if diags.is_empty() {
                out.push_str("no diagnostics\n");
            }
            for d in diags {
                let line = d["range"]["start"]["line"].as_u64().unwrap_or(0) + 1;
                let col = d["range"]["start"]["character"].as_u64().unwrap_or(0) + 1;
                let severity = match d["severity"].as_u64() {
                    Some(1) => "error",
                    Some(2) => "warning",
                    Some(3) => "info",
                    Some(4) => "hint",
                    _ => "diagnostic",
                };
                out.push_str(&format!(
                    "{line}:{col}: {severity}: {}\n",
                    d["message"].as_str().unwrap_or_default()
                ));
            }
        }
        LspOp::Open => {
            out.push_str(&format!(
                "opened {} (version {})\n",
                uri_path(result["uri"].as_str().unwrap_or_default()),
                result["version"]
            ));
        }
        LspOp::Request => {
            out.push_str(&serde_json::to_string_pretty(result).unwrap_or_default());
            out.push('\n');
        }
    }
    out
}
