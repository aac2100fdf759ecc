//! `steward schema --editor vscode [--write]`: the JSON Schemas of the
//! source formats, written under `HOME_DIR/steward/schemas/` (a user's
//! workspace has no `crds-like-specs/` to point at; written again by the
//! next `steward schema --editor` or `steward run` of another build), and
//! VS Code's `json.schemas` setting
//! that associates each source file with its schema — printed, or merged
//! into the workspace's `.vscode/settings.json` keeping that file's
//! comments, its other settings and the user's own associations.
//!
//! The same setting works in every editor that embeds VS Code's JSON
//! language service (`vscode-json-languageserver`: Zed, Neovim, Helix…);
//! `tests/tests/it/editor_schemas.rs` drives that server with it.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::{Value, json};
use steward_schema::schemas;

use super::install_args::Editor;
use super::schema::to_text;
use super::{CommandError, Io, version};
use crate::support::fs::write_atomically;
use crate::support::jsonc_edit::{self, input};
use crate::support::paths::Paths;

/// The file, beside the schemas, naming the build that wrote them.
const STAMP: &str = "steward-build.txt";

/// The setting VS Code reads the associations from.
pub const SETTING: &str = "json.schemas";

/// Each source format an editor opens: its schema and the file patterns
/// (VS Code's `fileMatch`: a pattern matches at the end of a path) that
/// name it wherever HOME_DIR is.
const SOURCES: &[(&str, &[&str])] = &[
    ("settings", &[".qwen/settings.json"]),
    ("mcp-json", &[".mcp.json"]),
    ("lsp-json", &[".lsp.json"]),
    ("extension", &["qwen-extension.json"]),
    ("approvals", &[".qwen/mcpApprovals.json"]),
    ("trusted-folders", &[".qwen/trustedFolders.json"]),
];

#[derive(Debug, thiserror::Error)]
pub enum EditorError {
    #[error("write the editor schemas to {}: {source}", path.display())]
    WriteSchema { path: PathBuf, source: io::Error },
    #[error("read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("merge into {}: it is not valid JSON with comments ({message}); fix it or remove it", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("merge into {}: its {SETTING:?} is not a list; fix it or remove it", path.display())]
    NotAList { path: PathBuf },
    #[error("merge into {}: it is not a JSON object; fix it or remove it", path.display())]
    NotAnObject { path: PathBuf },
    #[error("write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// Where the editor schemas live.
pub fn schemas_dir(paths: &Paths) -> PathBuf {
    paths.home_dir.join("steward").join("schemas")
}

/// Whether `dir` holds every editor schema, written by this build.
pub fn is_current(dir: &Path) -> bool {
    fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s.trim() == version::build_id())
        && SOURCES
            .iter()
            .all(|(name, _)| dir.join(file_name(name)).is_file())
}

/// Write the editor schemas to `dir` unless this build already did;
/// whether it wrote them.
pub fn ensure_schemas(dir: &Path) -> Result<bool, EditorError> {
    if is_current(dir) {
        return Ok(false);
    }
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EditorError::WriteSchema { path, source }
    };
    fs::create_dir_all(dir).map_err(failed(dir))?;
    for (name, _) in SOURCES {
        let schema = schemas::by_name(name).expect("every editor source has a schema");
        let path = dir.join(file_name(name));
        write_atomically(&path, to_text(&schema).as_bytes()).map_err(failed(&path))?;
    }
    // Last: a stamp names a complete set.
    let stamp = dir.join(STAMP);
    write_atomically(&stamp, format!("{}\n", version::build_id()).as_bytes())
        .map_err(failed(&stamp))?;
    Ok(true)
}

/// At the start of `steward run`: the editor schemas the user installed
/// (`steward schema --editor`) written again when another build of steward
/// wrote them — an upgrade reaches the editor without a step of its own.
/// Best effort: a failure is logged, never fatal.
pub fn refresh_if_installed(workspace: &Path) {
    let env = crate::support::paths::process_env();
    let Ok(paths) = Paths::resolve(workspace, &env) else {
        return; // the controller reports an unusable workspace itself
    };
    let dir = schemas_dir(&paths);
    if !dir.is_dir() {
        return;
    }
    match ensure_schemas(&dir) {
        Ok(true) => tracing::info!(dir = %dir.display(), "wrote the editor schemas of this build"),
        Ok(false) => {}
        Err(error) => tracing::warn!(%error, "the editor schemas were not updated"),
    }
}

fn file_name(name: &str) -> &'static str {
    schemas::NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, file)| *file)
        .expect("editor sources are named schemas")
}

/// `json.schemas`: one `{fileMatch, url}` per source format. Beside the
/// patterns by name, the absolute paths of files that live elsewhere
/// (a `QWEN_HOME` not named `.qwen`, the system settings, `QWEN_CODE_*`).
pub fn associations(paths: &Paths) -> Value {
    let dir = schemas_dir(paths);
    let elsewhere = |name: &str| -> Vec<&Path> {
        match name {
            "settings" => vec![
                &paths.user_settings,
                &paths.system_settings,
                &paths.system_defaults,
            ],
            "approvals" => vec![&paths.approvals],
            "trusted-folders" => vec![&paths.trusted_folders],
            _ => Vec::new(),
        }
        .into_iter()
        .map(PathBuf::as_path)
        .collect()
    };
    let entries: Vec<Value> = SOURCES
        .iter()
        .map(|(name, patterns)| {
            let mut file_match: Vec<String> = patterns.iter().map(|p| (*p).to_owned()).collect();
            for path in elsewhere(name) {
                let covered = patterns.iter().any(|p| path.ends_with(p));
                let text = path.to_string_lossy().into_owned();
                if !covered && !file_match.contains(&text) {
                    file_match.push(text);
                }
            }
            json!({"fileMatch": file_match, "url": file_url(&dir.join(file_name(name)))})
        })
        .collect();
    Value::Array(entries)
}

fn file_url(path: &Path) -> String {
    url::Url::from_file_path(path)
        .map(String::from)
        .unwrap_or_else(|()| format!("file://{}", path.display()))
}

/// Whether an association points into our schema directory.
fn is_ours(entry: &Value, dir_url: &str) -> bool {
    entry
        .get("url")
        .and_then(Value::as_str)
        .is_some_and(|url| url.starts_with(dir_url))
}

/// `text` (a `.vscode/settings.json`) with `json.schemas` holding `ours`
/// in place of our earlier associations: every comment, every other
/// setting and every other association kept as written.
pub fn merge_settings(
    text: &str,
    ours: &Value,
    dir_url: &str,
    path: &Path,
) -> Result<String, EditorError> {
    let options = jsonc_edit::options(true);
    let root = CstRootNode::parse(text, &options).map_err(|e| EditorError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let object = match root.value() {
        None => root.object_value_or_set(),
        Some(value) => value.as_object().ok_or_else(|| EditorError::NotAnObject {
            path: path.to_path_buf(),
        })?,
    };
    let new: Vec<CstInputValue> = ours.as_array().into_iter().flatten().map(input).collect();
    match object.get(SETTING) {
        None => {
            object.append(SETTING, CstInputValue::Array(new));
        }
        Some(prop) => {
            let list = prop.array_value().ok_or_else(|| EditorError::NotAList {
                path: path.to_path_buf(),
            })?;
            for element in list.elements() {
                let value = element.to_serde_value().unwrap_or(Value::Null);
                if is_ours(&value, dir_url) {
                    element.remove();
                }
            }
            for value in new {
                list.append(value);
            }
        }
    }
    let mut out = root.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Merge the associations into `WS/.vscode/settings.json` (created when
/// absent, its permissions kept when present).
fn write_settings(paths: &Paths, ours: &Value) -> Result<PathBuf, EditorError> {
    let path = paths.workspace.join(".vscode").join("settings.json");
    let (text, mode) = match fs::read_to_string(&path) {
        Ok(text) => {
            let mode = fs::metadata(&path).map(|m| m.permissions().mode() & 0o7777);
            (text, mode.unwrap_or(0o644))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => (String::new(), 0o644),
        Err(source) => return Err(EditorError::Read { path, source }),
    };
    let dir_url = file_url(&schemas_dir(paths)) + "/";
    let merged = merge_settings(&text, ours, &dir_url, &path)?;
    let failed = |source| EditorError::Write {
        path: path.clone(),
        source,
    };
    fs::create_dir_all(path.parent().expect("a file in .vscode")).map_err(failed)?;
    write_atomically(&path, merged.as_bytes()).map_err(failed)?;
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(failed)?;
    Ok(path)
}

/// `steward schema --editor EDITOR [--write]`.
pub fn run(
    paths: &Paths,
    editor: Editor,
    write: bool,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let Editor::Vscode = editor;
    let dir = schemas_dir(paths);
    if ensure_schemas(&dir)? {
        writeln!(io.err, "wrote the schemas to {}", dir.display())?;
    }
    let ours = associations(paths);
    if write {
        let path = write_settings(paths, &ours)?;
        writeln!(io.out, "{}", path.display())?;
    } else {
        let setting = json!({ SETTING: ours });
        io.out.write_all(to_text(&setting).as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "file:///h/.qwen/steward/schemas/";

    fn ours() -> Value {
        json!([{"fileMatch": [".mcp.json"], "url": format!("{DIR}mcp-json.schema.json")}])
    }

    fn merged(text: &str) -> String {
        merge_settings(text, &ours(), DIR, Path::new("settings.json")).unwrap()
    }

    #[test]
    fn an_empty_or_absent_file_gets_the_setting_alone() {
        for text in ["", "{}", "{ }\n"] {
            let out = merged(text);
            let value: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(value, json!({SETTING: ours()}), "{text:?} -> {out}");
        }
    }

    #[test]
    fn comments_other_settings_and_other_associations_are_kept() {
        let text = r#"{
  // the editor font
  "editor.fontSize": 14, /* big */
  "json.schemas": [
    // mine
    {"fileMatch": ["x.json"], "url": "https://example.com/x.json"},
    {"fileMatch": [".mcp.json"], "url": "file:///h/.qwen/steward/schemas/old.schema.json"},
  ],
}
"#;
        let out = merged(text);
        for kept in [
            "// the editor font",
            "/* big */",
            "// mine",
            "\"editor.fontSize\": 14",
            "https://example.com/x.json",
        ] {
            assert!(out.contains(kept), "{kept} lost:\n{out}");
        }
        assert!(!out.contains("old.schema.json"), "{out}");
        assert_eq!(out.matches("mcp-json.schema.json").count(), 1, "{out}");
        // Merging again changes nothing.
        assert_eq!(merged(&out), out);
    }

    #[test]
    fn a_file_that_cannot_hold_the_setting_is_refused() {
        let err = |text| merge_settings(text, &ours(), DIR, Path::new("s.json")).unwrap_err();
        assert!(matches!(err("{\"a\": }"), EditorError::Parse { .. }));
        assert!(matches!(err("[1]"), EditorError::NotAnObject { .. }));
        assert!(matches!(
            err("{\"json.schemas\": {}}"),
            EditorError::NotAList { .. }
        ));
    }
}
