//! `steward schema`: print or write the JSON Schemas of
//! `steward_schema::schemas` (one by name, or all of them); with `--editor`,
//! the editor's settings that use them ([`super::editor`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value};
use steward_schema::schemas;

use super::{CommandError, Io};

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("create the directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Pretty JSON with a trailing newline (the form of the committed files).
pub fn to_text(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).expect("a JSON value always serializes");
    text.push('\n');
    text
}

/// `(name, file name, schema)` for `name`, or for every schema when `all`.
/// `None` for an unknown name.
pub fn selected(name: &str) -> Option<Vec<(&'static str, &'static str, Value)>> {
    schemas::NAMES
        .iter()
        .filter(|(n, _)| name == "all" || *n == name)
        .map(|(n, file)| Some((*n, *file, schemas::by_name(n)?)))
        .collect::<Option<Vec<_>>>()
        .filter(|v| !v.is_empty())
}

/// Write the selected schemas to `dir` (created if needed); the paths written.
pub fn write_all(name: &str, dir: &Path) -> Result<Vec<PathBuf>, SchemaError> {
    fs::create_dir_all(dir).map_err(|source| SchemaError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for (_, file, schema) in selected(name).unwrap_or_default() {
        let path = dir.join(file);
        fs::write(&path, to_text(&schema)).map_err(|source| SchemaError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

pub fn run(
    name: Option<&str>,
    out: Option<&Path>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let name = name.unwrap_or("all");
    let Some(chosen) = selected(name) else {
        let names: Vec<&str> = schemas::NAMES.iter().map(|(n, _)| *n).collect();
        return Err(CommandError::Usage {
            subcommand: "schema",
            message: format!(
                "unknown schema '{name}'; the names are: {}, all",
                names.join(", ")
            ),
        });
    };
    if let Some(dir) = out {
        for path in write_all(name, dir)? {
            writeln!(io.out, "{}", path.display())?;
        }
    } else if name == "all" {
        let all: Map<String, Value> = chosen
            .into_iter()
            .map(|(n, _, schema)| (n.to_owned(), schema))
            .collect();
        io.out.write_all(to_text(&Value::Object(all)).as_bytes())?;
    } else {
        for (_, _, schema) in chosen {
            io.out.write_all(to_text(&schema).as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
