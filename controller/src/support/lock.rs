//! One controller per workspace: an exclusive advisory lock on a file under
//! HOME_DIR (never in the workspace) that also records the holder's pid, so
//! a second `steward run` can say who is already running — and, once the
//! holder has begun to stop, that it is stopping (`PID stopping`), so a
//! `steward run` started right after it (a restart) can wait for it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "start: another controller (pid {pid}) is {} for {workspace}",
        if *stopping { "still stopping" } else { "already running" }
    )]
    Held {
        pid: String,
        workspace: PathBuf,
        /// The holder has begun to stop: it will let go soon.
        stopping: bool,
    },
    #[error("take the controller lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Held for the controller's lifetime; released on drop (and by the kernel
/// if the process dies).
#[derive(Debug)]
pub struct ControllerLock {
    _file: File,
    path: PathBuf,
}

impl ControllerLock {
    pub fn acquire(path: &Path, workspace: &Path) -> Result<Self, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        // Made before the mode was set (or under another umask).
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut content = String::new();
                let _ = file.read_to_string(&mut content);
                let mut words = content.split_whitespace();
                return Err(LockError::Held {
                    pid: words.next().unwrap_or("unknown").to_owned(),
                    workspace: workspace.to_path_buf(),
                    stopping: words.next() == Some(STOPPING),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(ControllerLock {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Say in the lock file that this controller has begun to stop (best
    /// effort: a reader that misses it sees a running controller).
    pub fn announce_stopping(&self) {
        use std::os::unix::fs::FileExt as _;
        let _ = self
            ._file
            .write_at(format!("{} {STOPPING}", std::process::id()).as_bytes(), 0);
    }
}

/// The word after the pid in the lock file of a controller that is stopping.
const STOPPING: &str = "stopping";

/// Whether the process the lock file `path` names (the last controller to
/// take it) is still alive: it holds the lock until it exits. Read without
/// locking, so that it never stands in the way of a controller starting.
pub fn holder_alive(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|content| content.split_whitespace().next()?.parse::<u32>().ok())
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_names_the_first_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/controller.lock");
        let first = ControllerLock::acquire(&path, Path::new("/ws")).unwrap();
        let err = ControllerLock::acquire(&path, Path::new("/ws")).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        assert!(
            matches!(
                err,
                LockError::Held {
                    stopping: false,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(holder_alive(&path));
        first.announce_stopping();
        let err = ControllerLock::acquire(&path, Path::new("/ws")).unwrap_err();
        assert!(
            matches!(&err, LockError::Held { stopping: true, pid, .. } if *pid == std::process::id().to_string()),
            "{err:?}"
        );
        assert!(holder_alive(&path), "the pid is still read");
        drop(first);
        let second = ControllerLock::acquire(&path, Path::new("/ws")).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            std::process::id().to_string(),
            "a new holder writes its pid alone"
        );
        drop(second);
    }
}
