//! Files the controller writes for other programs (approvals, OAuth tokens,
//! the stopped set, the instance record): always whole, never half-written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `path` with `suffix` appended to its file name (`a.json` + `.lock`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` atomically and durably: a private (0600)
/// temporary sibling is written and synced, renamed over `path`, and the
/// directory is synced, so a reader (or a crash) sees the old file or the new
/// one, never a mix. The temporary file is removed when anything fails.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let tmp = sibling(
        path,
        &format!(
            ".tmp.{}.{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ),
    );
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A file [`write_atomically`]-rewritten whole, off its writers' path: a
/// durable write takes ~10 ms, and a cold start changes the content from
/// every reconcile worker at once. Changes are [`Self::mark_dirty`]; writes
/// run on a blocking thread one at a time, each taking the content as it is
/// then, so the changes of one moment share one write and a later write
/// never carries older content.
#[derive(Debug)]
pub struct CoalescedFile {
    path: PathBuf,
    flags: std::sync::Mutex<Flags>,
    /// Held while the file is written.
    writing: std::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Flags {
    /// The content has changes not written yet.
    dirty: bool,
    /// A background write is on its way.
    flushing: bool,
}

impl CoalescedFile {
    pub fn new(path: PathBuf) -> CoalescedFile {
        CoalescedFile {
            path,
            flags: std::sync::Mutex::default(),
            writing: std::sync::Mutex::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The content changed: the next write writes it.
    pub fn mark_dirty(&self) {
        crate::support::sync::lock(&self.flags).dirty = true;
    }

    /// Write `content()` now if it changed since the last write (its
    /// directory made first). `content` may take the owner's locks.
    pub fn save(&self, content: impl FnOnce() -> Vec<u8>) -> io::Result<()> {
        let _writing = crate::support::sync::lock(&self.writing);
        if !std::mem::take(&mut crate::support::sync::lock(&self.flags).dirty) {
            return Ok(());
        }
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        write_atomically(&self.path, &content())
    }

    /// [`Self::save`] soon, on a blocking thread; without a runtime (unit
    /// tests), now. A failure is logged: `what` is kept in memory only.
    pub fn save_soon(
        self: &std::sync::Arc<Self>,
        content: impl Fn() -> Vec<u8> + Send + 'static,
        what: &'static str,
    ) {
        let warn = move |error: io::Error, path: &Path| {
            tracing::warn!(file = %path.display(), %error, "{what} are kept in memory only");
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            if let Err(error) = self.save(&content) {
                warn(error, &self.path);
            }
            return;
        };
        if std::mem::replace(&mut crate::support::sync::lock(&self.flags).flushing, true) {
            return;
        }
        let file = self.clone();
        runtime.spawn_blocking(move || {
            loop {
                if let Err(error) = file.save(&content) {
                    warn(error, &file.path);
                }
                let mut flags = crate::support::sync::lock(&file.flags);
                if !flags.dirty {
                    flags.flushing = false;
                    return;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_the_file_whole_and_private_leaving_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        fs::write(&path, "old").unwrap();
        write_atomically(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.json")]);
    }

    #[tokio::test]
    async fn coalesced_writes_end_with_the_last_content() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::sync::Arc::new(CoalescedFile::new(dir.path().join("sub/c.json")));
        let content = std::sync::Arc::new(std::sync::Mutex::new(0u32));
        for n in 1..=50 {
            *content.lock().unwrap() = n;
            file.mark_dirty();
            let content = content.clone();
            file.save_soon(
                move || content.lock().unwrap().to_string().into_bytes(),
                "test",
            );
        }
        // The shutdown path: whatever is still due is written now.
        file.save(|| content.lock().unwrap().to_string().into_bytes())
            .unwrap();
        let _flushed = file.writing.lock().unwrap();
        assert_eq!(fs::read_to_string(file.path()).unwrap(), "50");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("a.json");
        assert!(write_atomically(&missing, b"x").is_err());
    }
}
