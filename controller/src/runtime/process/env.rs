//! The env and command policy of a spawn: which config env keys reach the
//! child ([`ENV_DENYLIST`], [`sanitize_env`]) and which file a command names
//! ([`resolve_command`]: a bare name is looked up in the controller's `PATH`,
//! never the config's).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::SpawnError;

/// Env keys a config may not set (compared case-insensitively): they inject
/// code into the server or redirect its libraries.
pub const ENV_DENYLIST: [&str; 6] = [
    "NODE_OPTIONS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
];

/// Child env: config env without [`ENV_DENYLIST`] keys (any case), and
/// without entries that are not one `KEY=value` pair: an empty key, or a key
/// holding `=` or NUL (`"LD_PRELOAD=/x/evil.so:"` would reach the child as
/// `LD_PRELOAD=/x/evil.so:=<value>`, and a NUL cuts the key short), or a
/// value holding NUL. The denylist is checked on the key the child would
/// see, the part before any `=` or NUL. Returns the env to overlay and the
/// keys dropped, in config order, for the caller to report.
pub fn sanitize_env(
    config_env: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut kept = BTreeMap::new();
    let mut dropped = Vec::new();
    for (key, value) in config_env {
        let real_key = key.split(['=', '\0']).next().unwrap_or_default();
        let malformed = real_key.is_empty() || real_key.len() != key.len() || value.contains('\0');
        if malformed
            || ENV_DENYLIST
                .iter()
                .any(|denied| real_key.eq_ignore_ascii_case(denied))
        {
            dropped.push(key.clone());
        } else {
            kept.insert(key.clone(), value.clone());
        }
    }
    (kept, dropped)
}

/// Absolute path of the file to execute. A bare name (no `/`) is looked up in
/// `search_path` — the controller's `PATH`, never the config's, so a config
/// cannot shadow a command by prepending its own directory. Empty and relative
/// `PATH` entries are skipped. A name with `/` is taken relative to `cwd`.
pub fn resolve_command(
    program: &str,
    cwd: &Path,
    search_path: &OsStr,
) -> Result<PathBuf, SpawnError> {
    if program.is_empty() {
        return Err(SpawnError::EmptyCommand);
    }
    let not_executable = |path: PathBuf, reason: String| SpawnError::NotExecutable {
        command: program.to_owned(),
        path,
        reason,
    };
    if program.contains('/') {
        // `components` drops interior `.` segments: `./x` reads as `<cwd>/x`.
        let path: PathBuf = cwd.join(program).components().collect();
        return match check_executable(&path) {
            Ok(()) => Ok(path),
            Err(None) => Err(SpawnError::CommandNotFound {
                command: program.to_owned(),
                searched: path.display().to_string(),
            }),
            Err(Some(reason)) => Err(not_executable(path, reason)),
        };
    }
    // Like execvp: a match that cannot be run is remembered, the search goes
    // on, and it is reported only when nothing better turns up.
    let mut first_unusable = None;
    for dir in std::env::split_paths(search_path) {
        if !dir.is_absolute() {
            continue;
        }
        let path = dir.join(program);
        match check_executable(&path) {
            Ok(()) => return Ok(path),
            Err(None) => {}
            Err(Some(reason)) => {
                first_unusable.get_or_insert((path, reason));
            }
        }
    }
    match first_unusable {
        Some((path, reason)) => Err(not_executable(path, reason)),
        None => Err(SpawnError::CommandNotFound {
            command: program.to_owned(),
            searched: format!("PATH {}", search_path.to_string_lossy()),
        }),
    }
}

/// `Err(None)`: nothing there; `Err(Some(reason))`: there but not runnable.
fn check_executable(path: &Path) -> Result<(), Option<String>> {
    match fs::metadata(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Err(None),
        Err(error) => Err(Some(error.to_string())),
        Ok(meta) if meta.is_dir() => Err(Some("it is a directory".to_owned())),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => {
            Err(Some("no execute permission".to_owned()))
        }
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::runtime::process::testing::write_executable;

    #[test]
    fn sanitize_env_drops_keys_with_an_equals_sign_or_nul_and_values_with_nul() {
        let env = BTreeMap::from([
            ("LD_PRELOAD=/x/evil.so:".to_owned(), "x".to_owned()),
            ("ld_preload\0tail".to_owned(), "/x/evil.so".to_owned()),
            ("GOOD=x".to_owned(), "y".to_owned()),
            ("=".to_owned(), "x".to_owned()),
            (String::new(), "x".to_owned()),
            ("NUL_VALUE".to_owned(), "a\0b".to_owned()),
            ("OK".to_owned(), "a=b".to_owned()),
        ]);
        let (kept, dropped) = sanitize_env(&env);
        assert_eq!(kept, BTreeMap::from([("OK".to_owned(), "a=b".to_owned())]));
        assert_eq!(dropped.len(), 6, "{dropped:?}");
    }

    #[test]
    fn sanitize_env_drops_denylisted_keys_in_any_case() {
        let env = BTreeMap::from([
            ("Ld_PreLoad".to_owned(), "/tmp/x.so".to_owned()),
            ("node_options".to_owned(), "--require x".to_owned()),
            ("LD_LIBRARY_PATH".to_owned(), "/x".to_owned()),
            ("ld_audit".to_owned(), "x".to_owned()),
            ("DYLD_INSERT_LIBRARIES".to_owned(), "x".to_owned()),
            ("dyld_library_path".to_owned(), "x".to_owned()),
            ("PATH".to_owned(), "/opt/bin".to_owned()),
            ("LD_PRELOADX".to_owned(), "kept".to_owned()),
            ("TOKEN".to_owned(), "t".to_owned()),
        ]);
        let (kept, dropped) = sanitize_env(&env);
        assert_eq!(
            dropped,
            [
                "DYLD_INSERT_LIBRARIES",
                "LD_LIBRARY_PATH",
                "Ld_PreLoad",
                "dyld_library_path",
                "ld_audit",
                "node_options"
            ]
        );
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            ["LD_PRELOADX", "PATH", "TOKEN"]
        );
        assert_eq!(kept["PATH"], "/opt/bin");
    }

    #[test]
    fn resolve_bare_name_searches_only_the_given_path() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        write_executable(&a.join("tool"), 0o644); // not executable: skipped
        write_executable(&b.join("tool"), 0o755);
        let search =
            std::env::join_paths(["", "relative/dir", a.to_str().unwrap(), b.to_str().unwrap()])
                .unwrap();
        let found = resolve_command("tool", Path::new("/"), &search).unwrap();
        assert_eq!(found, b.join("tool"));

        let error = resolve_command("nope-steward", Path::new("/"), &search).unwrap_err();
        assert!(
            matches!(error, SpawnError::CommandNotFound { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("nope-steward") && message.contains(b.to_str().unwrap()),
            "{message}"
        );
    }

    #[test]
    fn resolve_reports_not_executable_and_directories_distinctly() {
        let dir = tempfile::tempdir().unwrap();
        write_executable(&dir.path().join("plain"), 0o644);
        fs::create_dir(dir.path().join("adir")).unwrap();
        let search = dir.path().as_os_str();

        let error = resolve_command("plain", Path::new("/"), search).unwrap_err();
        assert!(
            matches!(&error, SpawnError::NotExecutable { reason, .. } if reason.contains("permission")),
            "{error:?}"
        );
        let error = resolve_command("adir", Path::new("/"), search).unwrap_err();
        assert!(
            matches!(&error, SpawnError::NotExecutable { reason, .. } if reason.contains("directory")),
            "{error:?}"
        );
        let error = resolve_command("./adir", dir.path(), OsStr::new("")).unwrap_err();
        assert!(
            matches!(error, SpawnError::NotExecutable { .. }),
            "{error:?}"
        );
        assert!(matches!(
            resolve_command("", dir.path(), search),
            Err(SpawnError::EmptyCommand)
        ));
    }

    #[test]
    fn resolve_path_with_slash_is_relative_to_cwd_and_ignores_path() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("bin")).unwrap();
        write_executable(&dir.path().join("bin/tool"), 0o755);
        let found = resolve_command("bin/tool", dir.path(), OsStr::new("/usr/bin")).unwrap();
        assert_eq!(found, dir.path().join("bin/tool"));
        let dotted = resolve_command("./bin/./tool", dir.path(), OsStr::new("")).unwrap();
        assert_eq!(dotted, dir.path().join("bin/tool"), "`.` segments dropped");
        assert_eq!(
            resolve_command("/bin/sh", dir.path(), OsStr::new("")).unwrap(),
            Path::new("/bin/sh")
        );
        let error = resolve_command("bin/missing", dir.path(), OsStr::new("/usr/bin")).unwrap_err();
        assert!(
            matches!(error, SpawnError::CommandNotFound { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("bin/missing"), "{error}");
    }
}
