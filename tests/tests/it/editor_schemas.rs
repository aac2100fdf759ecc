//! `steward schema --editor vscode --write`, proven with VS Code's own JSON
//! language server (npm `vscode-langservers-extracted`, the real peer): the
//! test writes the settings, hands their `json.schemas` to the server as
//! VS Code's JSON extension does (`workspace/didChangeConfiguration`, the
//! server loading `file:` schemas itself), opens source files as VS Code
//! opens a `.json` file (language `json`, where a comment is an error
//! unless the schema allows it) and asks for diagnostics (pull, as VS Code
//! does), completions and hovers over LSP.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;

use serde_json::{Value, json};
use steward_tests::harness::{DEADLINE, Env};

use crate::common::peer;

/// The JSON language server over stdio: requests wait for their answer
/// (at most [`DEADLINE`]) while the server's own requests are answered.
struct JsonServer {
    child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    next_id: i64,
    /// `workspace/configuration` answers: the `json` section.
    settings: Value,
}

impl JsonServer {
    fn start(root: &Path, settings: Value) -> JsonServer {
        let bin = peer(
            "vscode-langservers-extracted",
            "node_modules/.bin/vscode-json-language-server",
        );
        let mut child = Command::new(bin)
            .arg("--stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start vscode-json-language-server");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(n) = line.strip_prefix("Content-Length:") {
                        length = n.trim().parse::<usize>().ok();
                    }
                }
                let mut body = vec![0; length.expect("a Content-Length header")];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let message: Value = serde_json::from_slice(&body).expect("JSON-RPC message");
                if tx.send(message).is_err() {
                    return;
                }
            }
        });
        let mut server = JsonServer {
            child,
            stdin,
            messages,
            next_id: 0,
            settings,
        };
        let root_uri = uri(root);
        server.request(
            "initialize",
            json!({
                "processId": std::process::id(),
                "rootUri": root_uri,
                "workspaceFolders": [{"uri": root_uri, "name": "ws"}],
                "capabilities": {
                    "workspace": {"configuration": true},
                    "textDocument": {
                        "completion": {"completionItem": {"snippetSupport": true}},
                        "hover": {"contentFormat": ["markdown", "plaintext"]},
                        "diagnostic": {"dynamicRegistration": false}
                    }
                },
                // As VS Code's JSON extension: the server reads file: schemas.
                "initializationOptions": {"handledSchemaProtocols": ["file"], "provideFormatter": false}
            }),
        );
        server.notify("initialized", json!({}));
        let section = server.settings.clone();
        server.notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"json": section}}),
        );
        server
    }

    fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        write!(self.stdin, "Content-Length: {}\r\n\r\n", body.len()).unwrap();
        self.stdin.write_all(&body).unwrap();
        self.stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = std::time::Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let message = self
                .messages
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to {method} ({e})"));
            match (message.get("id"), message.get("method")) {
                (Some(got), None) if *got == json!(id) => {
                    assert!(message.get("error").is_none(), "{method} failed: {message}");
                    return message["result"].clone();
                }
                (Some(their_id), Some(their_method)) => {
                    let result = match their_method.as_str() {
                        Some("workspace/configuration") => {
                            let items = message["params"]["items"].as_array().map_or(0, Vec::len);
                            Value::Array(vec![self.settings.clone(); items])
                        }
                        _ => Value::Null,
                    };
                    let answer = json!({"jsonrpc": "2.0", "id": their_id, "result": result});
                    self.send(&answer);
                }
                _ => {} // notifications: logs, pushed diagnostics
            }
        }
    }

    fn open(&mut self, path: &Path, text: &str) -> String {
        let uri = uri(path);
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "json", "version": 1, "text": text}}),
        );
        uri
    }

    fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let report = self.request(
            "textDocument/diagnostic",
            json!({"textDocument": {"uri": uri}}),
        );
        report["items"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for JsonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// 0-based (line, character) of the first `needle` in `text`.
fn position(text: &str, needle: &str) -> (u64, u64) {
    let at = text.find(needle).expect("needle in text");
    let before = &text[..at];
    let line = before.matches('\n').count();
    let column = before.rsplit('\n').next().unwrap().chars().count();
    (line as u64, column as u64)
}

/// `steward schema --editor vscode --write` in `sb`'s workspace; the
/// `json.schemas` it wrote to `.vscode/settings.json`, as the `json`
/// settings section VS Code's JSON extension sends.
fn editor_settings(sb: &Env) -> Value {
    let run = sb.run(&["schema", "--editor", "vscode", "--write"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = sb.ws.join(".vscode/settings.json");
    assert_eq!(run.stdout.trim(), written.display().to_string());
    let text = std::fs::read_to_string(&written).unwrap();
    let settings = steward_schema::jsonc::parse(&text).unwrap().value;
    let schemas = settings["json.schemas"].clone();
    assert!(schemas.as_array().is_some_and(|a| !a.is_empty()), "{text}");
    json!({"schemas": schemas, "validate": {"enable": true}})
}

/// The editor schema steward wrote for `name`.
fn written_schema(sb: &Env, name: &str) -> Value {
    let path = sb.home.join(format!("steward/schemas/{name}.schema.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn hover_text(hover: &Value) -> String {
    let contents = &hover["contents"];
    let parts: Vec<Value> = match contents {
        Value::Array(parts) => parts.clone(),
        other => vec![other.clone()],
    };
    parts
        .iter()
        .map(|p| match p {
            Value::String(s) => s.clone(),
            other => other["value"].as_str().unwrap_or_default().to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn vscode_json_language_server_uses_the_editor_schemas() {
    let sb = Env::new();
    let settings = editor_settings(&sb);
    let mut server = JsonServer::start(&sb.ws, settings);

    // A misspelt key: a diagnostic at that key's line and column.
    let mcp_text = "{\n  \"mcpServers\": {\n    \"x\": {\n      \"comand\": \"npx\",\n      \"args\": []\n    }\n  }\n}\n";
    let mcp = server.open(&sb.write(".mcp.json", mcp_text), mcp_text);
    let diagnostics = server.diagnostics(&mcp);
    let (line, column) = position(mcp_text, "\"comand\"");
    let at_key: Vec<&Value> = diagnostics
        .iter()
        .filter(|d| d["range"]["start"] == json!({"line": line, "character": column}))
        .collect();
    assert!(
        at_key
            .iter()
            .any(|d| d["message"].as_str().unwrap_or_default().contains("comand")),
        "no diagnostic naming `comand` at {line}:{column}: {diagnostics:#?}"
    );

    // Completion inside an entry: every key an entry may have.
    let entry_text = "{\n  \"mcpServers\": {\n    \"x\": {\n      \n    }\n  }\n}\n";
    let entry_path = sb.root.path().join("completion/.mcp.json");
    std::fs::create_dir_all(entry_path.parent().unwrap()).unwrap();
    let entry = server.open(&entry_path, entry_text);
    let completion = server.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": entry}, "position": {"line": 3, "character": 6}}),
    );
    let items = completion
        .get("items")
        .cloned()
        .unwrap_or(completion.clone());
    let offered: BTreeSet<String> = items
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["label"].as_str().map(str::to_owned))
        .collect();
    let schema = written_schema(&sb, "mcp-json");
    let keys: BTreeSet<String> = schema["$defs"]["McpServerEntry"]["properties"]
        .as_object()
        .expect("an entry's properties")
        .keys()
        .cloned()
        .collect();
    // `sandbox` is expected once the schema has it (the sandbox work adds it).
    let mut expected = vec!["command", "args", "env"];
    if keys.contains("sandbox") {
        expected.push("sandbox");
    }
    for key in expected {
        assert!(offered.contains(key), "{key} not offered: {offered:?}");
    }
    let missing: Vec<&String> = keys.difference(&offered).collect();
    assert!(
        missing.is_empty(),
        "schema keys not offered: {missing:?} (offered {offered:?})"
    );

    // Hover on excludeTools: its description.
    let settings_text = "{\n  // the servers of this workspace\n  \"mcpServers\": {\n    /* the clock */\n    \"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\"], \"excludeTools\": [\"convert_time\"]}\n  },\n  \"mcp\": {\"excluded\": [\"old\"]},\n  \"ui\": {\"theme\": \"GitHub\"}\n}\n";
    let settings_uri = server.open(
        &sb.write(".qwen/settings.json", settings_text),
        settings_text,
    );
    let (line, column) = position(settings_text, "excludeTools");
    let hover = server.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": settings_uri}, "position": {"line": line, "character": column + 2}}),
    );
    let description =
        schema["$defs"]["McpServerEntry"]["properties"]["excludeTools"]["description"]
            .as_str()
            .expect("excludeTools is described")
            .to_owned();
    // The server shows Markdown, punctuation escaped.
    let shown = hover_text(&hover).replace('\\', "");
    assert!(
        shown.contains(&description),
        "hover {shown:?} lacks {description:?}"
    );

    // Valid files with comments: no diagnostic at all.
    assert_eq!(server.diagnostics(&settings_uri), Vec::<Value>::new());
    let lsp_text = "{\n  // C and C++\n  \"clangd\": {\n    \"command\": \"clangd\", /* from apt */\n    \"args\": [\"--background-index\"],\n    \"extensionToLanguage\": {\".c\": \"c\", \".h\": \"c\"}\n  }\n}\n";
    let lsp = server.open(&sb.write(".lsp.json", lsp_text), lsp_text);
    assert_eq!(server.diagnostics(&lsp), Vec::<Value>::new());
    // ... and a comment is still the only thing allowed beyond JSON, as in
    // the loaders: a trailing comma is an error.
    let comma_text = "{\n  \"clangd\": {\"command\": \"clangd\"},\n}\n";
    let comma_path = sb.root.path().join("comma/.lsp.json");
    std::fs::create_dir_all(comma_path.parent().unwrap()).unwrap();
    let comma = server.open(&comma_path, comma_text);
    assert!(
        !server.diagnostics(&comma).is_empty(),
        "a trailing comma passed"
    );
}

/// HOME_DIR's files are found where they are: the harness's QWEN_HOME is
/// not named `.qwen`, so only the absolute patterns can match them.
#[test]
fn files_under_home_dir_get_their_schemas() {
    let sb = Env::new();
    let settings = editor_settings(&sb);
    let mut server = JsonServer::start(&sb.ws, settings);

    let user_text =
        "{\n  // mine\n  \"mcpServers\": {\"a\": {\"command\": \"a\", \"enviroment\": {}}}\n}\n";
    let user = server.open(&sb.write_home("settings.json", user_text), user_text);
    let diagnostics = server.diagnostics(&user);
    let (line, column) = position(user_text, "\"enviroment\"");
    assert!(
        diagnostics
            .iter()
            .any(|d| d["range"]["start"] == json!({"line": line, "character": column})),
        "{diagnostics:#?}"
    );

    let trust_text = "{\n  \"/src/app\": \"TRUST_EVERYTHING\"\n}\n";
    let trust = server.open(
        &sb.write_home("trustedFolders.json", trust_text),
        trust_text,
    );
    let diagnostics = server.diagnostics(&trust);
    assert!(!diagnostics.is_empty(), "an unknown trust level passed");

    let approvals_text = "{\n  // written by steward approve\n  \"/src/app\": {\"srv\": {\"hash\": \"ab\", \"status\": \"approved\"}}\n}\n";
    let approvals = server.open(
        &sb.write_home("mcpApprovals.json", approvals_text),
        approvals_text,
    );
    assert_eq!(server.diagnostics(&approvals), Vec::<Value>::new());
}
