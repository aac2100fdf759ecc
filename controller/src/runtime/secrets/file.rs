//! Steward's own store of secrets, for machines without a Secret Service:
//! `HOME_DIR/steward/secrets.json`, `{"version": 1, "secrets": {NAME:
//! value}}`, mode 0600 in a 0700 directory (the one the sandbox's `standard`
//! profile keeps servers away from). A write takes an advisory lock on
//! `secrets.json.lock`, reads the file under it, and replaces it atomically
//! (temporary sibling, fsync, rename), so two writers lose nothing and a
//! reader never sees half a file. A file that other users may read is
//! refused rather than used.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{BackendKind, SecretBackend, SecretError, SecretValue};
use crate::support::fs::{sibling, write_atomically};
use crate::support::paths::create_private_dir;

/// The file's format.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    secrets: BTreeMap<String, String>,
}

/// `HOME_DIR/steward/secrets.json`.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

fn failed(what: &str, path: &Path, error: impl std::fmt::Display) -> SecretError {
    SecretError::Unavailable(format!("{what} {}: {error}", path.display()))
}

impl FileStore {
    pub fn new(path: PathBuf) -> Self {
        FileStore { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The secrets stored now (none when the file does not exist).
    fn read(&self) -> Result<BTreeMap<String, String>, SecretError> {
        let path = &self.path;
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(failed("read", path, e)),
        };
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(failed(
                "read",
                path,
                format!(
                    "other users may read it (mode {:o}); run `chmod 600 {}` first",
                    meta.permissions().mode() & 0o777,
                    path.display()
                ),
            ));
        }
        let text = fs::read_to_string(path).map_err(|e| failed("read", path, e))?;
        let file: StoreFile = serde_json::from_str(&text)
            .map_err(|e| failed("read", path, format!("it is not a secrets file: {e}")))?;
        Ok(file.secrets)
    }

    /// Changes the stored secrets with `change`, under the lock.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, String>) -> T,
    ) -> Result<T, SecretError> {
        let path = &self.path;
        if let Some(dir) = path.parent() {
            create_private_dir(dir).map_err(|e| SecretError::Unavailable(e.to_string()))?;
        }
        let lock_path = sibling(path, ".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| failed("lock", &lock_path, e))?;
        lock.lock().map_err(|e| failed("lock", &lock_path, e))?;
        let mut secrets = self.read()?;
        let out = change(&mut secrets);
        let file = StoreFile {
            version: 1,
            secrets,
        };
        let mut text = serde_json::to_string_pretty(&file).expect("a JSON value always serializes");
        text.push('\n');
        write_atomically(path, text.as_bytes()).map_err(|e| failed("write", path, e))?;
        drop(lock);
        Ok(out)
    }
}

#[async_trait::async_trait]
impl SecretBackend for FileStore {
    fn kind(&self) -> BackendKind {
        BackendKind::File
    }

    async fn get(&self, name: &str) -> Result<Option<SecretValue>, SecretError> {
        Ok(self.read()?.remove(name).map(SecretValue::new))
    }

    async fn set(&self, name: &str, value: &SecretValue) -> Result<(), SecretError> {
        self.update(|secrets| {
            secrets.insert(name.to_owned(), value.expose().to_owned());
        })
    }

    async fn remove(&self, name: &str) -> Result<bool, SecretError> {
        if !self.read()?.contains_key(name) {
            return Ok(false);
        }
        self.update(|secrets| secrets.remove(name).is_some())
    }

    async fn names(&self) -> Result<Vec<String>, SecretError> {
        Ok(self.read()?.into_keys().collect())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[tokio::test]
    async fn values_round_trip_in_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().join("steward").join("secrets.json"));
        assert_eq!(store.get("a").await.unwrap(), None);
        store
            .set("a", &SecretValue::new("one".to_owned()))
            .await
            .unwrap();
        store
            .set("b.c-d", &SecretValue::new("two".to_owned()))
            .await
            .unwrap();
        assert_eq!(store.get("a").await.unwrap().unwrap().expose(), "one");
        assert_eq!(store.names().await.unwrap(), ["a", "b.c-d"]);
        let mode = fs::metadata(store.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = fs::metadata(store.path().parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert!(store.remove("a").await.unwrap());
        assert!(!store.remove("a").await.unwrap());
        assert_eq!(store.names().await.unwrap(), ["b.c-d"]);
    }

    #[tokio::test]
    async fn a_file_others_may_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.json");
        fs::write(&path, r#"{"version":1,"secrets":{"a":"x"}}"#).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let error = FileStore::new(path).get("a").await.unwrap_err();
        assert!(error.to_string().contains("chmod 600"), "{error}");
    }
}
