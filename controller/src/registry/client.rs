//! The `/v0.1` client: search (`GET /v0.1/servers?search=&version=latest`,
//! following `metadata.nextCursor`) and one version of one server (`GET
//! /v0.1/servers/{name}/versions/{version|latest}`, the name URL-encoded),
//! over every registry in order. Each answer is cached; with `--offline`,
//! or when a registry cannot be reached or answers an error or something
//! that is not a registry document, the cache answers instead — the exact
//! URL's answer, else any cached document that holds the server — and a
//! note says which registry, why, and the time of the cached answer.

use std::time::SystemTime;

use serde::de::DeserializeOwned;
use serde_json::Value;
use steward_schema::registry::server::{ServerList, ServerResponse, Status};

use super::RegistryError;
use super::cache::Cache;
use super::http::{Http, HttpError, MAX_JSON};
use crate::observe::clock::rfc3339;

/// How many servers one page asks for.
const PAGE: usize = 100;

/// A server version found in a registry.
#[derive(Debug, Clone)]
pub struct Found {
    /// The registry's base URL.
    pub registry: String,
    pub response: ServerResponse,
}

/// Asks registries; remembers what the user should be told.
pub struct Client<'a> {
    http: Option<&'a Http>,
    cache: Cache,
    now: SystemTime,
    notes: super::Notes,
}

enum Fetched {
    Fresh(Value),
    /// From the cache: why, and the time it was fetched.
    Cached(Value, String, String),
    NotFound,
    Failed(String),
}

/// `s` percent-encoded as one path segment or query value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl<'a> Client<'a> {
    /// A client of `http` (`None`: `--offline`) caching into `cache`.
    pub fn new(http: Option<&'a Http>, cache: Cache, now: SystemTime) -> Client<'a> {
        Client {
            http,
            cache,
            now,
            notes: Default::default(),
        }
    }

    /// What the output should say (answers from the cache, and why).
    pub fn take_notes(&self) -> Vec<String> {
        self.notes.take()
    }

    fn note(&self, text: String) {
        self.notes.add(text);
    }

    /// Whether requests are made at all.
    pub fn offline(&self) -> bool {
        self.http.is_none()
    }

    async fn fetch(&self, registry: &str, url: &str) -> Fetched {
        let from_cache = |why: String| match self.cache.get(registry, url) {
            Some(c) => Fetched::Cached(c.body, why, c.fetched_at),
            None => Fetched::Failed(why),
        };
        let Some(http) = self.http else {
            return from_cache("--offline".to_owned());
        };
        match http.get(url, "application/json", &[], MAX_JSON).await {
            Ok(answer) => match serde_json::from_slice::<Value>(&answer.body) {
                Ok(body) => {
                    self.cache.put(registry, url, &rfc3339(self.now), &body);
                    Fetched::Fresh(body)
                }
                Err(e) => from_cache(format!("its answer to {url} is not JSON ({e})")),
            },
            Err(HttpError::Status { status: 404, .. }) => Fetched::NotFound,
            Err(e) => from_cache(e.to_string()),
        }
    }

    fn typed<T: DeserializeOwned>(
        &self,
        registry: &str,
        url: &str,
        fetched: Fetched,
    ) -> Result<Option<T>, String> {
        let (body, cached) = match fetched {
            Fetched::Fresh(body) => (body, None),
            Fetched::Cached(body, why, at) => (body, Some((why, at))),
            Fetched::NotFound => return Ok(None),
            Fetched::Failed(why) => return Err(why),
        };
        match serde_json::from_value::<T>(body) {
            Ok(value) => {
                if let Some((why, at)) = cached {
                    self.note(cached_note(registry, &why, &at));
                }
                Ok(Some(value))
            }
            Err(e) => {
                let why = format!("its answer to {url} is not a registry document ({e})");
                match self.cache.get(registry, url) {
                    Some(c) if cached.is_none() => {
                        let value = serde_json::from_value::<T>(c.body).map_err(|_| why.clone())?;
                        self.note(cached_note(registry, &why, &c.fetched_at));
                        Ok(Some(value))
                    }
                    _ => Err(why),
                }
            }
        }
    }

    /// Up to `limit` latest versions matching `query` in each registry (the
    /// first registry wins a name). Deleted versions are left out.
    pub async fn search(
        &self,
        registries: &[String],
        query: &str,
        limit: usize,
    ) -> Result<Vec<Found>, RegistryError> {
        let mut out: Vec<Found> = Vec::new();
        let mut failures = Vec::new();
        for registry in registries {
            match self.search_one(registry, query, limit).await {
                Ok(found) => {
                    for f in found {
                        if !out
                            .iter()
                            .any(|o| o.response.server.name == f.response.server.name)
                        {
                            out.push(f);
                        }
                    }
                }
                Err(why) => failures.push(format!("{registry}: {why}")),
            }
        }
        if out.is_empty() && failures.len() == registries.len() && !failures.is_empty() {
            return Err(RegistryError::Unreachable {
                what: format!("search for {query:?}"),
                failures,
            });
        }
        for f in failures {
            self.note(format!("registry {f} (left out)"));
        }
        Ok(out)
    }

    async fn search_one(
        &self,
        registry: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Found>, String> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!(
                "{registry}/v0.1/servers?search={}&version=latest&limit={}",
                encode(query),
                PAGE.min(limit.max(1))
            );
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={}", encode(c)));
            }
            let fetched = self.fetch(registry, &url).await;
            let page: ServerList = match self.typed(registry, &url, fetched) {
                Ok(Some(page)) => page,
                Ok(None) => return Err(format!("{url} answered 404: is this an MCP registry?")),
                // A page we cannot get: the cache's servers, if it has any.
                Err(why) if out.is_empty() => {
                    let found = self.scan(registry, &why, |s| matches(s, query));
                    if found.is_empty() {
                        return Err(why);
                    }
                    return Ok(found.into_iter().take(limit).collect());
                }
                Err(why) => {
                    self.note(format!(
                        "registry {registry}: {why}; the results stop there"
                    ));
                    break;
                }
            };
            for r in page.servers {
                if r.status() != Status::Deleted && out.len() < limit {
                    out.push(Found {
                        registry: registry.to_owned(),
                        response: r,
                    });
                }
            }
            cursor = page
                .metadata
                .and_then(|m| m.next_cursor)
                .filter(|c| !c.is_empty());
            if cursor.is_none() || out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Servers of `registry`'s cached documents that `keep`, newest answer
    /// first, one per name and version; noted as answered from the cache.
    fn scan(
        &self,
        registry: &str,
        why: &str,
        keep: impl Fn(&ServerResponse) -> bool,
    ) -> Vec<Found> {
        let mut out: Vec<Found> = Vec::new();
        let mut oldest: Option<String> = None;
        for cached in self.cache.all(registry) {
            let responses: Vec<ServerResponse> =
                match serde_json::from_value::<ServerList>(cached.body.clone()) {
                    Ok(list) if cached.body.get("servers").is_some() => list.servers,
                    _ => serde_json::from_value::<ServerResponse>(cached.body)
                        .into_iter()
                        .collect(),
                };
            for r in responses.into_iter().filter(|r| keep(r)) {
                let same = |o: &Found| {
                    o.response.server.name == r.server.name
                        && o.response.server.version == r.server.version
                };
                if !out.iter().any(same) {
                    oldest = Some(cached.fetched_at.clone());
                    out.push(Found {
                        registry: registry.to_owned(),
                        response: r,
                    });
                }
            }
        }
        if let Some(at) = oldest {
            self.note(cached_note(registry, why, &at));
        }
        out
    }

    /// Version `version` (`None`: the latest) of server `name`: the first
    /// registry that has it. A deleted version is refused; a registry that
    /// cannot answer is skipped (its cache answering, if it can).
    pub async fn get(
        &self,
        registries: &[String],
        name: &str,
        version: Option<&str>,
    ) -> Result<Found, RegistryError> {
        let mut failures = Vec::new();
        for registry in registries {
            let base = format!(
                "{registry}/v0.1/servers/{}/versions/{}",
                encode(name),
                encode(version.unwrap_or("latest"))
            );
            let fetched = self.fetch(registry, &base).await;
            match self.typed::<ServerResponse>(registry, &base, fetched) {
                Ok(Some(r)) => return self.found(registry, r, name),
                Ok(None) => {
                    // Deleted versions are hidden unless asked for: ask, to
                    // say why it cannot be added.
                    let url = format!("{base}?include_deleted=true");
                    let fetched = self.fetch(registry, &url).await;
                    if let Ok(Some(r)) = self.typed::<ServerResponse>(registry, &url, fetched) {
                        return self.found(registry, r, name);
                    }
                }
                Err(why) => {
                    let mut hits = self.scan(registry, &why, |r| {
                        r.server.name == name
                            && match version {
                                Some(v) => r.server.version == v,
                                None => r.official().is_latest != Some(false),
                            }
                    });
                    if hits.is_empty() {
                        failures.push(format!("{registry}: {why}"));
                        continue;
                    }
                    let r = hits.remove(0).response;
                    return self.found(registry, r, name);
                }
            }
        }
        let what = match version {
            Some(v) => format!("{name}@{v}"),
            None => name.to_owned(),
        };
        if failures.is_empty() {
            Err(RegistryError::NotFound {
                what,
                registries: registries.join(", "),
            })
        } else {
            Err(RegistryError::Unreachable {
                what: format!("find {what}"),
                failures,
            })
        }
    }

    fn found(&self, registry: &str, r: ServerResponse, name: &str) -> Result<Found, RegistryError> {
        if r.status() == Status::Deleted {
            return Err(RegistryError::Deleted {
                what: format!("{name}@{}", r.server.version),
                registry: registry.to_owned(),
                message: r.official().status_message.unwrap_or_default(),
            });
        }
        Ok(Found {
            registry: registry.to_owned(),
            response: r,
        })
    }
}

/// Whether a server matches a search (its name or title, ignoring case).
fn matches(r: &ServerResponse, query: &str) -> bool {
    let q = query.to_lowercase();
    r.status() != Status::Deleted
        && (r.server.name.to_lowercase().contains(&q)
            || r.server
                .title
                .as_deref()
                .is_some_and(|t| t.to_lowercase().contains(&q)))
}

fn cached_note(registry: &str, why: &str, at: &str) -> String {
    if why == "--offline" {
        format!("registry {registry}: --offline; answered from the cache of {at}")
    } else {
        format!("registry {registry} could not answer ({why}); answered from the cache of {at}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_versions_are_one_path_segment() {
        assert_eq!(encode("io.github.x/weather"), "io.github.x%2Fweather");
        assert_eq!(encode("1.0.0+build"), "1.0.0%2Bbuild");
        assert_eq!(encode("a b"), "a%20b");
    }
}
