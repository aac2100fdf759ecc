//! MCP bundles (MCPB): downloaded, checked against the registry's
//! `fileSha256` — a mismatch is refused before anything is unpacked or
//! written — and unpacked under [`bundles_root`]`/<server>/<sha256
//! prefix>/` (once: a bundle already unpacked there is reused). The entry
//! runs the manifest's `server.mcp_config` (or what `server.type` and
//! `entry_point` imply); its `user_config` values become questions.
//!
//! Not under `HOME_DIR/steward/`: the sandbox hides Steward's own state
//! from every server (product.md §9), so a bundle there could not run. The
//! user's data directory is readable by servers (a profile lists the
//! bundle's directory) and writable by none of them (§9's private homes).

use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use steward_schema::canonical::sha256_hex;
use steward_schema::registry::entry::Resolution;
use steward_schema::registry::inputs::{Question, Target};
use steward_schema::registry::server::{Input, Package};

use super::{ResolveError, Resolver};
use crate::registry::http::MAX_FILE;

/// The marker of a completely unpacked bundle (holds its sha256).
const DONE: &str = ".steward-unpacked";

/// Where bundles are unpacked: `$XDG_DATA_HOME/steward/bundles`, else
/// `~/.local/share/steward/bundles`, else (no home) under HOME_DIR.
pub fn bundles_root(
    xdg_data_home: Option<&str>,
    user_home: Option<&Path>,
    home_dir: &Path,
) -> PathBuf {
    match (xdg_data_home.filter(|d| d.starts_with('/')), user_home) {
        (Some(data), _) => Path::new(data).join("steward").join("bundles"),
        (None, Some(home)) => home.join(".local/share/steward/bundles"),
        (None, None) => home_dir.join("steward").join("bundles"),
    }
}

/// Where the bundle of `server` with digest `sha256` is unpacked.
pub fn bundle_dir(root: &Path, server: &str, sha256: &str) -> PathBuf {
    let safe: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    root.join(safe).join(&sha256[..16.min(sha256.len())])
}

/// Unpacks the zip `bytes` into `dir` (created), refusing entries that
/// would land outside it and symbolic links.
pub fn unpack(bytes: &[u8], dir: &Path) -> Result<(), String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("it is not a bundle (zip): {e}"))?;
    fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let mut total: u64 = 0;
    for i in 0..zip.len() {
        let mut file = zip.by_index(i).map_err(|e| e.to_string())?;
        let shown = file
            .name()
            .map_or_else(|_| format!("entry {i}"), |n| format!("{n:?}"));
        let Some(rel) = file.enclosed_name() else {
            return Err(format!("{shown} would be written outside the bundle"));
        };
        let mode = file.unix_mode().unwrap_or(0o644);
        if mode & 0o170000 == 0o120000 {
            return Err(format!(
                "{shown} is a symbolic link; bundles may not hold one"
            ));
        }
        let path = dir.join(rel);
        if file.is_dir() {
            fs::create_dir_all(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
            continue;
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        let mut data = Vec::new();
        (&mut file)
            .take(MAX_FILE as u64 + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("unpack {shown}: {e}"))?;
        total += data.len() as u64;
        if total > 2 * MAX_FILE as u64 {
            return Err("it unpacks to more than 1 GiB".to_owned());
        }
        fs::write(&path, &data).map_err(|e| format!("write {}: {e}", path.display()))?;
        let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
        fs::set_permissions(&path, fs::Permissions::from_mode(perm))
            .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    }
    Ok(())
}

/// What a bundle's manifest runs, and the questions of its `user_config`.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleCommand {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub questions: Vec<Question>,
}

/// The command of a manifest, and the questions of its `user_config`.
pub fn manifest_command(manifest: &Value) -> Result<BundleCommand, String> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let server = manifest
        .get("server")
        .ok_or("the manifest has no \"server\"")?;
    let config = server.get("mcp_config");
    let (command, args) = match config
        .and_then(|c| c.get("command"))
        .and_then(Value::as_str)
    {
        Some(command) => (
            command.to_owned(),
            strings(config.and_then(|c| c.get("args"))),
        ),
        None => {
            let entry = server.get("entry_point").and_then(Value::as_str).ok_or(
                "the manifest names neither server.mcp_config.command nor server.entry_point",
            )?;
            let path = format!("${{__dirname}}/{entry}");
            match server.get("type").and_then(Value::as_str) {
                Some("node") => ("node".to_owned(), vec![path]),
                Some("python") => ("python3".to_owned(), vec![path]),
                _ => (path, Vec::new()),
            }
        }
    };
    let env: BTreeMap<String, String> = config
        .and_then(|c| c.get("env"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    let mut questions = Vec::new();
    for (key, spec) in manifest
        .get("user_config")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let text = |k: &str| spec.get(k).and_then(Value::as_str).map(str::to_owned);
        let default = spec.get("default").and_then(|d| match d {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        });
        questions.push(Question {
            key: key.clone(),
            target: Target::Variable,
            input: Input {
                description: text("description").or_else(|| text("title")),
                is_required: spec
                    .get("required")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                is_secret: spec
                    .get("sensitive")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                default,
                format: match spec.get("type").and_then(Value::as_str) {
                    Some("number") => Some("number".to_owned()),
                    Some("boolean") => Some("boolean".to_owned()),
                    _ => None,
                },
                ..Input::default()
            },
            repeated: false,
        });
    }
    Ok(BundleCommand {
        command,
        args,
        env,
        questions,
    })
}

/// Downloads (or reuses), checks and unpacks the bundle of package `p`.
pub async fn resolve(
    r: &Resolver<'_>,
    server: &str,
    p: &Package,
) -> Result<(Resolution, Vec<Question>), ResolveError> {
    let what = format!("the bundle {}", p.identifier);
    let expected = p
        .file_sha256
        .as_deref()
        .map(str::to_ascii_lowercase)
        .ok_or_else(|| ResolveError::Unsupported {
            what: what.clone(),
            why: "the registry gives no fileSha256 for it, and Steward runs only bundles it can check".to_owned(),
        })?;
    let dir = bundle_dir(&r.bundles, server, &expected);
    let unpacked = fs::read_to_string(dir.join(DONE)).is_ok_and(|s| s.trim() == expected);
    if !unpacked {
        let bytes = r.download(&p.identifier).await?;
        let got = sha256_hex(&bytes);
        if got != expected {
            return Err(ResolveError::Integrity {
                what,
                expected,
                got,
            });
        }
        let unreadable = |why: String| ResolveError::Unreadable {
            what: what.clone(),
            why,
        };
        // Unpacked beside, then moved into place: never half a bundle.
        let partial = dir.with_extension("partial");
        let _ = fs::remove_dir_all(&partial);
        unpack(&bytes, &partial).map_err(|why| {
            let _ = fs::remove_dir_all(&partial);
            unreadable(why)
        })?;
        fs::write(partial.join(DONE), format!("{expected}\n"))
            .map_err(|e| unreadable(e.to_string()))?;
        let _ = fs::remove_dir_all(&dir);
        fs::rename(&partial, &dir).map_err(|e| unreadable(e.to_string()))?;
    }
    let manifest_path = dir.join("manifest.json");
    let manifest: Value = fs::read(&manifest_path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
        .map_err(|why| ResolveError::Unreadable {
            what: manifest_path.display().to_string(),
            why,
        })?;
    let BundleCommand {
        command,
        args,
        env,
        questions,
    } = manifest_command(&manifest).map_err(|why| ResolveError::Unreadable {
        what: manifest_path.display().to_string(),
        why,
    })?;
    Ok((
        Resolution::Mcpb {
            dir: dir.display().to_string(),
            command,
            args,
            env,
            sha256: expected,
        },
        questions,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write as _;

    fn zip_of(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut w = zip::ZipWriter::new(&mut out);
        for (name, data, mode) in files {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .unix_permissions(*mode);
            w.start_file(*name, opts).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap();
        out.into_inner()
    }

    #[test]
    fn a_bundle_unpacks_inside_its_directory_only() {
        let dir = tempfile::tempdir().unwrap();
        let good = zip_of(&[
            ("manifest.json", b"{}", 0o644),
            ("server/run", b"#!/bin/sh\n", 0o755),
        ]);
        unpack(&good, &dir.path().join("a")).unwrap();
        let run = dir.path().join("a/server/run");
        assert_eq!(
            fs::metadata(&run).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let evil = zip_of(&[("../escape", b"x", 0o644)]);
        let err = unpack(&evil, &dir.path().join("b")).unwrap_err();
        assert!(err.contains("outside"), "{err}");
        assert!(!dir.path().join("escape").exists());
    }

    #[test]
    fn bundles_go_to_the_user_s_data_directory() {
        let h = Path::new("/h/.qwen");
        assert_eq!(
            bundles_root(Some("/d"), Some(Path::new("/home/u")), h),
            Path::new("/d/steward/bundles")
        );
        assert_eq!(
            bundles_root(Some("relative"), Some(Path::new("/home/u")), h),
            Path::new("/home/u/.local/share/steward/bundles")
        );
        assert_eq!(
            bundles_root(None, None, h),
            Path::new("/h/.qwen/steward/bundles")
        );
        assert_eq!(
            bundle_dir(Path::new("/r"), "io.x/y z", "0123456789abcdef00"),
            Path::new("/r/io.x_y_z/0123456789abcdef")
        );
    }

    #[test]
    fn the_manifest_gives_the_command_and_its_questions() {
        let m = json!({"server": {"type": "node", "entry_point": "server/index.js",
                       "mcp_config": {"command": "node", "args": ["${__dirname}/server/index.js"],
                                      "env": {"API_KEY": "${user_config.api_key}"}}},
                       "user_config": {"api_key": {"type": "string", "title": "API key", "sensitive": true, "required": true},
                                       "depth": {"type": "number", "default": 3}}});
        let BundleCommand {
            command,
            args,
            env,
            questions: qs,
        } = manifest_command(&m).unwrap();
        assert_eq!(command, "node");
        assert_eq!(args, ["${__dirname}/server/index.js"]);
        assert_eq!(env["API_KEY"], "${user_config.api_key}");
        let key = qs.iter().find(|q| q.key == "api_key").unwrap();
        assert!(key.input.is_secret && key.input.is_required);
        let depth = qs.iter().find(|q| q.key == "depth").unwrap();
        assert_eq!(depth.input.default.as_deref(), Some("3"));
        let py = manifest_command(&json!({"server": {"type": "python", "entry_point": "main.py"}}))
            .unwrap();
        assert_eq!(
            (py.command.as_str(), py.args[0].as_str()),
            ("python3", "${__dirname}/main.py")
        );
        assert!(manifest_command(&json!({})).is_err());
    }
}
