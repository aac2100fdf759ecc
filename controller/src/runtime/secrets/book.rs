//! The controller's book of secrets: for each name its desired state
//! references, what the last look-up found. Reconcile reads it without
//! waiting; [`SecretBook::refresh`] looks names up again (in a task of the
//! caller's) and says which of them changed, so that exactly the servers
//! using those are looked at again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Mutex;

use super::{BackendKind, LOOKUP_TIMEOUT, SecretError, SecretValue};
use crate::support::sync::lock;

/// What a look-up of one name found.
#[derive(Debug, Clone)]
pub enum Lookup {
    Found(SecretValue),
    /// Not set in the store that answered.
    Missing,
    /// The store could not say (a locked keyring): the message says what to do.
    Unavailable(String),
}

impl Lookup {
    /// Whether two look-ups give a server the same thing (a new message
    /// about the same failure is no change).
    fn same(&self, other: &Lookup) -> bool {
        match (self, other) {
            (Lookup::Found(a), Lookup::Found(b)) => a == b,
            (Lookup::Missing, Lookup::Missing) => true,
            (Lookup::Unavailable(_), Lookup::Unavailable(_)) => true,
            _ => false,
        }
    }
}

/// The last look-up of every referenced name.
#[derive(Debug)]
pub struct SecretBook {
    home_dir: PathBuf,
    lookups: Mutex<BTreeMap<String, Lookup>>,
    /// The store that answered the last refresh.
    backend: Mutex<Option<BackendKind>>,
}

impl SecretBook {
    pub fn new(home_dir: PathBuf) -> Self {
        SecretBook {
            home_dir,
            lookups: Mutex::new(BTreeMap::new()),
            backend: Mutex::new(None),
        }
    }

    /// What the last look-up of `name` found; `None`: never looked up.
    pub fn get(&self, name: &str) -> Option<Lookup> {
        lock(&self.lookups).get(name).cloned()
    }

    /// The names looked up so far.
    pub fn known(&self) -> BTreeSet<String> {
        lock(&self.lookups).keys().cloned().collect()
    }

    /// The store that answered the last refresh.
    pub fn backend(&self) -> Option<BackendKind> {
        *lock(&self.backend)
    }

    /// Look `names` up again (names no longer referenced are forgotten
    /// when `keep` says so) and return those whose look-up changed.
    pub async fn refresh(
        &self,
        names: &BTreeSet<String>,
        keep: &BTreeSet<String>,
    ) -> BTreeSet<String> {
        let mut found = BTreeMap::new();
        if !names.is_empty() {
            let backend = super::open(&self.home_dir).await;
            *lock(&self.backend) = Some(backend.kind());
            for name in names {
                let lookup = match tokio::time::timeout(LOOKUP_TIMEOUT, backend.get(name)).await {
                    Ok(Ok(Some(value))) => Lookup::Found(value),
                    Ok(Ok(None)) => Lookup::Missing,
                    Ok(Err(error)) => Lookup::Unavailable(error.to_string()),
                    Err(_) => Lookup::Unavailable(
                        SecretError::Unavailable(format!(
                            "read the secret {name}: the {} did not answer within {}",
                            match backend.kind() {
                                BackendKind::SecretService => "Secret Service",
                                BackendKind::File => "file store",
                            },
                            humantime::format_duration(LOOKUP_TIMEOUT)
                        ))
                        .to_string(),
                    ),
                };
                if let Lookup::Unavailable(message) = &lookup {
                    tracing::warn!(secret = %name, %message, "could not read a secret");
                }
                found.insert(name.clone(), lookup);
            }
        }
        let mut changed = BTreeSet::new();
        let mut lookups = lock(&self.lookups);
        lookups.retain(|name, _| keep.contains(name) || names.contains(name));
        for (name, lookup) in found {
            let same = lookups.get(&name).is_some_and(|old| old.same(&lookup));
            if !same {
                changed.insert(name.clone());
            }
            lookups.insert(name, lookup);
        }
        let values: BTreeMap<String, String> = lookups
            .iter()
            .filter_map(|(name, l)| match l {
                Lookup::Found(v) => Some((name.clone(), v.expose().to_owned())),
                _ => None,
            })
            .collect();
        drop(lookups);
        crate::support::scrub::remember(&values);
        changed
    }
}
