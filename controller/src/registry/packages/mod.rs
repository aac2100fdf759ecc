//! What `steward add` learns about the chosen artefact from its own
//! registry before it writes anything: npm's integrity of the exact version
//! ([`npm`]), a PyPI distribution's entry point from the wheel's metadata
//! ([`pypi`]), NuGet's package hash ([`nuget`]), an image's digest
//! ([`oci`]), an MCP bundle downloaded, checked against its `fileSha256`
//! and unpacked ([`bundle`]). Package metadata is cached like registry
//! answers, so an artefact resolved once resolves again offline.

pub mod bundle;
pub mod npm;
pub mod nuget;
pub mod oci;
pub mod pypi;

use std::path::PathBuf;
use std::time::SystemTime;

use serde_json::Value;
use steward_schema::registry::entry::{Choice, Resolution, package_label};
use steward_schema::registry::inputs::Question;
use steward_schema::registry::server::ServerDetail;

use super::cache::Cache;
use super::http::{Http, HttpError, MAX_FILE, MAX_JSON};
use crate::observe::clock::rfc3339;

/// Why an artefact cannot be resolved. Messages read after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("find version {version} of {package}: its registry does not have it ({hint})")]
    NoVersion {
        package: String,
        version: String,
        hint: String,
    },
    #[error("resolve {what} offline: it was never fetched (run without --offline once)")]
    Offline { what: String },
    #[error(
        "check {what}: its sha256 is {got}, and the registry says {expected}; nothing was written (the file may have been tampered with)"
    )]
    Integrity {
        what: String,
        expected: String,
        got: String,
    },
    #[error("read {what}: {why}")]
    Unreadable { what: String, why: String },
    #[error(
        "choose the entry point of {package}: {why} (console scripts: {scripts}); name one with --entry-point"
    )]
    EntryPoint {
        package: String,
        why: String,
        scripts: String,
    },
    #[error("run package {what}: {why}")]
    Unsupported { what: String, why: String },
}

/// Fetches package metadata and files for one command.
pub struct Resolver<'a> {
    http: Option<&'a Http>,
    cache: Cache,
    now: SystemTime,
    /// Where bundles are unpacked ([`bundle::bundles_root`]).
    pub bundles: PathBuf,
    notes: crate::registry::Notes,
}

/// What the user chose about the artefact.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// PyPI: the console script to run.
    pub entry_point: Option<String>,
}

impl<'a> Resolver<'a> {
    pub fn new(http: Option<&'a Http>, cache: Cache, now: SystemTime, bundles: PathBuf) -> Self {
        Resolver {
            http,
            cache,
            now,
            bundles,
            notes: Default::default(),
        }
    }

    /// What the output should say.
    pub fn take_notes(&self) -> Vec<String> {
        self.notes.take()
    }

    fn note(&self, text: String) {
        self.notes.add(text);
    }

    /// A JSON document of `registry` at `url`, cached; from the cache (said
    /// so) when offline or when the registry cannot answer.
    pub async fn json(
        &self,
        registry: &str,
        url: &str,
        accept: &str,
    ) -> Result<Value, ResolveError> {
        let cached = |why: String| match self.cache.get(registry, url) {
            Some(c) => {
                self.note(format!(
                    "{registry}: {why}; used the cached answer of {}",
                    c.fetched_at
                ));
                Some(c.body)
            }
            None => None,
        };
        let Some(http) = self.http else {
            return cached("--offline".to_owned()).ok_or_else(|| ResolveError::Offline {
                what: url.to_owned(),
            });
        };
        match http.get(url, accept, &[], MAX_JSON).await {
            Ok(answer) => match serde_json::from_slice::<Value>(&answer.body) {
                Ok(body) => {
                    self.cache.put(registry, url, &rfc3339(self.now), &body);
                    Ok(body)
                }
                Err(e) => Err(ResolveError::Unreadable {
                    what: url.to_owned(),
                    why: format!("it is not JSON ({e})"),
                }),
            },
            Err(e @ HttpError::Status { status: 404, .. }) => Err(e.into()),
            Err(e) => cached(e.to_string()).ok_or(ResolveError::Http(e)),
        }
    }

    /// A file's bytes (never cached; refused offline).
    pub async fn download(&self, url: &str) -> Result<Vec<u8>, ResolveError> {
        let http = self.http.ok_or_else(|| ResolveError::Offline {
            what: url.to_owned(),
        })?;
        Ok(http.get(url, "*/*", &[], MAX_FILE).await?.body)
    }

    /// Keeps a small derived document (what a download told us), so it
    /// resolves again offline.
    fn remember(&self, registry: &str, key: &str, value: &Value) {
        self.cache.put(registry, key, &rfc3339(self.now), value);
    }

    fn recall(&self, registry: &str, key: &str) -> Option<Value> {
        self.cache.get(registry, key).map(|c| c.body)
    }

    fn http(&self) -> Option<&'a Http> {
        self.http
    }
}

/// Resolves the artefact of `choice`; an MCP bundle also brings the
/// questions of its `user_config`.
pub async fn resolve(
    r: &Resolver<'_>,
    detail: &ServerDetail,
    choice: Choice,
    options: &Options,
) -> Result<(Resolution, Vec<Question>), ResolveError> {
    let Choice::Package(i) = choice else {
        return Ok((Resolution::Remote, Vec::new()));
    };
    let p = &detail.packages[i];
    let version = p.version.as_deref().filter(|v| !v.is_empty());
    let need_version = || {
        version.ok_or_else(|| ResolveError::Unsupported {
            what: package_label(p),
            why: "the registry gives no exact version for it (Steward pins exact versions)"
                .to_owned(),
        })
    };
    let base = p.registry_base_url.as_deref();
    match p.registry_type.as_str() {
        "npm" => Ok((
            npm::resolve(r, base, &p.identifier, need_version()?).await?,
            Vec::new(),
        )),
        "pypi" => Ok((
            pypi::resolve(r, base, &p.identifier, need_version()?, options).await?,
            Vec::new(),
        )),
        "nuget" => Ok((
            nuget::resolve(r, base, &p.identifier, need_version()?).await?,
            Vec::new(),
        )),
        "oci" => Ok((
            oci::resolve(r, base, &p.identifier, version).await?,
            Vec::new(),
        )),
        "mcpb" => bundle::resolve(r, &detail.name, p).await,
        other => Err(ResolveError::Unsupported {
            what: package_label(p),
            why: format!("Steward does not know how to run {other} packages"),
        }),
    }
}
