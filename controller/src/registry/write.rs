//! What `steward add` and `steward update` write: one entry of the
//! `mcpServers` object of `.mcp.json` (or of the user's `settings.json`),
//! added or replaced with every other byte of the file kept (comments,
//! order, formatting — jsonc-parser's syntax tree), and the lock file
//! beside it. Both written atomically, modes kept; a file that is not
//! valid JSON with comments is never written over.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use jsonc_parser::cst::CstRootNode;
use serde_json::{Map, Value};
use steward_schema::load::FileText;
use steward_schema::registry::lock::{self, LockError, LockFile};

use crate::desired::sources::read_file;
use crate::support::fs::write_atomically;
use crate::support::jsonc_edit;
use crate::support::paths::Paths;

/// Why a file could not be written. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("read {}: {why}", path.display())]
    Read { path: PathBuf, why: String },
    #[error(
        "edit {}: it is not valid JSON with comments ({why}); fix it (steward validate) and run the command again",
        path.display()
    )]
    Syntax { path: PathBuf, why: String },
    #[error("edit {}: {why}", path.display())]
    Shape { path: PathBuf, why: String },
    #[error("{}: {source}", path.display())]
    Lock { path: PathBuf, source: LockError },
    #[error("write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// Where an entry goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The workspace's `.mcp.json` (approval-gated).
    Workspace,
    /// The user's `settings.json`.
    User,
}

/// The file an entry of `scope` is written to, and its lock file.
pub fn files(paths: &Paths, scope: Scope) -> (PathBuf, PathBuf) {
    let file = match scope {
        Scope::Workspace => paths.mcp_json.clone(),
        Scope::User => paths.user_settings.clone(),
    };
    let lock = lock_beside(&file);
    (file, lock)
}

/// The lock file beside `file`.
pub fn lock_beside(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    file.with_file_name(lock::lock_name(&name))
}

fn read_text(path: &Path) -> Result<Option<String>, WriteError> {
    match read_file(path) {
        FileText::Text(text) => Ok(Some(text)),
        FileText::Absent => Ok(None),
        FileText::Unreadable(why) => Err(WriteError::Read {
            path: path.to_path_buf(),
            why,
        }),
        FileText::NotUtf8(pos) => Err(WriteError::Read {
            path: path.to_path_buf(),
            why: format!("it is not UTF-8 text (at {}:{})", pos.line, pos.column),
        }),
    }
}

/// The order an entry's keys are written in: what runs first.
const KEY_ORDER: [&str; 8] = [
    "command",
    "args",
    "env",
    "httpUrl",
    "url",
    "headers",
    "sandbox",
    "description",
];

/// `entry` as the CST editor takes it, its keys in [`KEY_ORDER`] (others
/// after, as they come).
fn ordered(entry: &Map<String, Value>) -> jsonc_parser::cst::CstInputValue {
    let rank = |k: &str| {
        KEY_ORDER
            .iter()
            .position(|o| *o == k)
            .unwrap_or(KEY_ORDER.len())
    };
    let mut keys: Vec<&String> = entry.keys().collect();
    keys.sort_by_key(|k| rank(k));
    jsonc_parser::cst::CstInputValue::Object(
        keys.into_iter()
            .map(|k| (k.clone(), jsonc_edit::input(&entry[k])))
            .collect(),
    )
}

/// `text` with `mcpServers.<name>` set to `entry` (added last, or replaced
/// in place), everything else as it was. `None`: the file is absent.
pub fn set_entry(
    text: Option<&str>,
    name: &str,
    entry: &Map<String, Value>,
    path: &Path,
) -> Result<String, WriteError> {
    let text = text.filter(|t| !t.trim().is_empty()).unwrap_or("{}\n");
    let shape = |why: &str| WriteError::Shape {
        path: path.to_path_buf(),
        why: why.to_owned(),
    };
    // What Qwen Code reads: comments, no trailing commas.
    let root =
        CstRootNode::parse(text, &jsonc_edit::options(false)).map_err(|e| WriteError::Syntax {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
    let object = match root.value() {
        None => root.object_value_or_set(),
        Some(v) => v
            .as_object()
            .ok_or_else(|| shape("it is not a JSON object"))?,
    };
    let value = ordered(entry);
    match object.get("mcpServers") {
        None => {
            object.append(
                "mcpServers",
                jsonc_parser::cst::CstInputValue::Object(vec![(name.to_owned(), value)]),
            );
        }
        Some(prop) => {
            let servers = prop
                .object_value()
                .ok_or_else(|| shape("its \"mcpServers\" is not an object"))?;
            match servers.get(name) {
                Some(existing) => existing.set_value(value),
                None => {
                    servers.append(name, value);
                }
            }
        }
    }
    let mut out = root.to_string();
    if text.ends_with('\n') && !out.ends_with('\n') {
        out.push('\n');
    }
    // Never write what the next reader would refuse.
    steward_schema::jsonc::parse(&out).map_err(|e| WriteError::Syntax {
        path: path.to_path_buf(),
        why: format!("the edit would not parse: {e}"),
    })?;
    Ok(out)
}

/// Writes `text` to `path` atomically, keeping its mode (new files 0644;
/// a user's settings file 0600 when new).
pub fn write_file(path: &Path, text: &str, new_mode: u32) -> Result<(), WriteError> {
    let mode = fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(new_mode);
    let failed = |source| WriteError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(failed)?;
    }
    write_atomically(path, text.as_bytes()).map_err(failed)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(failed)
}

/// The entry `name` set in the file at `path` (read now), written back.
pub fn write_entry(path: &Path, name: &str, entry: &Map<String, Value>) -> Result<(), WriteError> {
    let text = read_text(path)?;
    let out = set_entry(text.as_deref(), name, entry, path)?;
    write_file(path, &out, 0o644)
}

/// The lock file at `path` (empty when absent).
pub fn read_lock(path: &Path) -> Result<LockFile, WriteError> {
    let text = read_text(path)?.unwrap_or_default();
    lock::parse(&text).map_err(|source| WriteError::Lock {
        path: path.to_path_buf(),
        source,
    })
}

/// The lock file at `path` with `name`'s record set (other records kept).
pub fn write_lock(path: &Path, name: &str, record: lock::Locked) -> Result<(), WriteError> {
    let mut file = read_lock(path)?;
    file.servers.insert(name.to_owned(), record);
    write_file(path, &lock::render(&file), 0o644)
}

/// The entries of `mcpServers` in the file at `path`, as written.
pub fn entries(path: &Path) -> Result<Map<String, Value>, WriteError> {
    let Some(text) = read_text(path)? else {
        return Ok(Map::new());
    };
    let doc = steward_schema::jsonc::parse(&text).map_err(|e| WriteError::Syntax {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    Ok(doc
        .value
        .get("mcpServers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> Map<String, Value> {
        json!({"command": "npx", "args": ["--yes", "x@1.0.0"], "env": {"K": "${secret:w.K}"}})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn the_rest_of_the_file_keeps_every_byte() {
        let text = "{\n  // my servers\n  \"mcpServers\": {\n    /* the first */\n    \"a\": {\"command\": \"a\"} // trailing note\n  },\n  \"other\": [1, 2]\n}\n";
        let out = set_entry(Some(text), "w", &entry(), Path::new(".mcp.json")).unwrap();
        let head = "{\n  // my servers\n  \"mcpServers\": {\n    /* the first */\n    \"a\": {\"command\": \"a\"}";
        assert!(out.starts_with(head), "{out}");
        assert!(out.contains("// trailing note"), "{out}");
        assert!(out.ends_with("  },\n  \"other\": [1, 2]\n}\n"), "{out}");
        let parsed = steward_schema::jsonc::parse(&out).unwrap().value;
        assert_eq!(parsed["mcpServers"]["w"], Value::Object(entry()));
        assert_eq!(parsed["mcpServers"]["a"], json!({"command": "a"}));
        // Setting it again replaces it in place.
        let mut changed = entry();
        changed.insert("args".into(), json!(["--yes", "x@2.0.0"]));
        let again = set_entry(Some(&out), "w", &changed, Path::new(".mcp.json")).unwrap();
        let parsed = steward_schema::jsonc::parse(&again).unwrap().value;
        assert_eq!(parsed["mcpServers"]["w"]["args"][1], "x@2.0.0");
        assert!(again.starts_with(head));
    }

    #[test]
    fn absent_and_empty_files_and_files_without_servers() {
        for text in [None, Some(""), Some("{}"), Some("{ \"$schema\": \"x\" }")] {
            let out = set_entry(text, "w", &entry(), Path::new("f")).unwrap();
            let parsed = steward_schema::jsonc::parse(&out).unwrap().value;
            assert_eq!(
                parsed["mcpServers"]["w"]["command"], "npx",
                "{text:?} -> {out}"
            );
        }
        let err = |t: &str| set_entry(Some(t), "w", &entry(), Path::new("f")).unwrap_err();
        assert!(matches!(err("{\"a\": 1,}"), WriteError::Syntax { .. }));
        assert!(matches!(err("[]"), WriteError::Shape { .. }));
        assert!(matches!(
            err("{\"mcpServers\": []}"),
            WriteError::Shape { .. }
        ));
    }

    #[test]
    fn the_lock_sits_beside_its_file() {
        assert_eq!(
            lock_beside(Path::new("/w/.mcp.json")),
            Path::new("/w/.mcp.lock.json")
        );
        assert_eq!(
            lock_beside(Path::new("/h/.qwen/settings.json")),
            Path::new("/h/.qwen/settings.lock.json")
        );
    }
}
