//! The registry cache, under `HOME_DIR/steward/cache/registry/`: every
//! document a registry (or a package registry) answered, with the time it
//! was fetched, one file per URL in a directory per registry. `--offline`
//! and an unreachable registry answer from it, and say so with that time.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use steward_schema::canonical::sha256_hex;

use crate::support::fs::write_atomically;

/// One cached answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cached {
    pub url: String,
    /// RFC 3339.
    pub fetched_at: String,
    pub body: Value,
}

/// The cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache of HOME_DIR `home_dir`.
    pub fn new(home_dir: &Path) -> Cache {
        Cache {
            dir: home_dir.join("steward").join("cache").join("registry"),
        }
    }

    /// The directory of one registry: its host, readable, and a digest.
    fn registry_dir(&self, registry: &str) -> PathBuf {
        let host: String = url::Url::parse(registry)
            .ok()
            .and_then(|u| {
                u.host_str().map(|h| {
                    format!(
                        "{h}{}",
                        u.port().map(|p| format!("-{p}")).unwrap_or_default()
                    )
                })
            })
            .unwrap_or_else(|| "registry".to_owned())
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir
            .join(format!("{host}-{}", &sha256_hex(registry.as_bytes())[..12]))
    }

    fn file(&self, registry: &str, url: &str) -> PathBuf {
        self.registry_dir(registry)
            .join(format!("{}.json", &sha256_hex(url.as_bytes())[..32]))
    }

    /// Keeps `body`, fetched from `url` at `fetched_at`. Best effort: a
    /// cache that cannot be written is logged, never an error.
    pub fn put(&self, registry: &str, url: &str, fetched_at: &str, body: &Value) {
        let path = self.file(registry, url);
        let entry = Cached {
            url: url.to_owned(),
            fetched_at: fetched_at.to_owned(),
            body: body.clone(),
        };
        let text = serde_json::to_vec(&entry).expect("a cache entry serializes");
        let written = path
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|()| write_atomically(&path, &text));
        if let Err(error) = written {
            tracing::warn!(%error, path = %path.display(), "the registry cache was not written");
        }
    }

    /// The answer cached for `url`.
    pub fn get(&self, registry: &str, url: &str) -> Option<Cached> {
        let text = fs::read(self.file(registry, url)).ok()?;
        serde_json::from_slice::<Cached>(&text)
            .ok()
            .filter(|c| c.url == url)
    }

    /// Every answer cached for `registry`, newest first.
    pub fn all(&self, registry: &str) -> Vec<Cached> {
        let Ok(dir) = fs::read_dir(self.registry_dir(registry)) else {
            return Vec::new();
        };
        let mut out: Vec<Cached> = dir
            .flatten()
            .filter_map(|e| fs::read(e.path()).ok())
            .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
            .collect();
        out.sort_by(|a: &Cached, b| b.fetched_at.cmp(&a.fetched_at));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_kept_per_registry_and_url() {
        let home = tempfile::tempdir().unwrap();
        let cache = Cache::new(home.path());
        let (r1, r2) = ("http://127.0.0.1:1", "https://registry.example.com");
        cache.put(
            r1,
            "http://127.0.0.1:1/v0.1/servers",
            "2026-01-01T00:00:00Z",
            &json!({"a": 1}),
        );
        cache.put(
            r1,
            "http://127.0.0.1:1/v0.1/x",
            "2026-01-02T00:00:00Z",
            &json!({"b": 2}),
        );
        cache.put(
            r2,
            "https://registry.example.com/v0.1/servers",
            "2026-01-01T00:00:00Z",
            &json!(3),
        );
        let got = cache.get(r1, "http://127.0.0.1:1/v0.1/servers").unwrap();
        assert_eq!(got.body, json!({"a": 1}));
        assert!(cache.get(r1, "http://127.0.0.1:1/other").is_none());
        let all = cache.all(r1);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].fetched_at, "2026-01-02T00:00:00Z");
        assert_eq!(cache.all(r2).len(), 1);
    }
}
