//! The agent endpoint's HTTP sessions, kept across controller restarts.
//!
//! A streamable-HTTP client holds an `Mcp-Session-Id` for as long as it is
//! connected; a new controller (an upgrade, `steward run` restarted) would
//! answer it 404 and the client would have to start over. Each session's
//! `initialize` parameters are kept in
//! `HOME_DIR/steward/<workspace>/httpSessions.json` (0600, replaced whole),
//! with when it was last heard from; rmcp's session store hook replays the
//! handshake for a known id the next controller has not seen, so the client
//! goes on as if nothing happened. A session closed by its client (DELETE)
//! or by the idle rule is forgotten; one not heard from for the idle time
//! is not restored.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::model::InitializeRequestParams;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use serde::{Deserialize, Serialize};

use crate::support::fs::CoalescedFile;
use crate::support::sync::lock;

/// The version of the file format; a file of another version is empty.
const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    initialize: InitializeRequestParams,
    /// Milliseconds since the Unix epoch.
    last_seen_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    #[serde(default)]
    sessions: BTreeMap<String, Entry>,
}

/// The persisted sessions (see the module doc).
#[derive(Debug)]
pub struct HttpSessions {
    disk: Arc<CoalescedFile>,
    idle: Duration,
    entries: Arc<Mutex<BTreeMap<String, Entry>>>,
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl HttpSessions {
    /// The sessions in `path` not idle for longer than `idle`; a file that
    /// cannot be read is no sessions (and a log line).
    pub fn load(path: PathBuf, idle: Duration) -> HttpSessions {
        let entries = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
                Ok(file) if file.version == VERSION => file.sessions,
                Ok(_) => BTreeMap::new(),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "the HTTP sessions of the last controller are unreadable; their clients must reconnect");
                    BTreeMap::new()
                }
            },
            Err(_) => BTreeMap::new(),
        };
        let sessions = HttpSessions {
            disk: Arc::new(CoalescedFile::new(path)),
            idle,
            entries: Arc::new(Mutex::new(entries)),
        };
        sessions.expire(SystemTime::now());
        sessions
    }

    fn expire(&self, now: SystemTime) {
        let limit = millis(now).saturating_sub(self.idle.as_millis() as u64);
        lock(&self.entries).retain(|_, e| e.last_seen_ms >= limit);
    }

    /// How many sessions a restarted controller would accept.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn content(entries: &Mutex<BTreeMap<String, Entry>>) -> Vec<u8> {
        let file = File {
            version: VERSION,
            sessions: lock(entries).clone(),
        };
        serde_json::to_vec_pretty(&file).expect("sessions serialize")
    }

    /// The sessions changed: write them soon, off the caller's path.
    fn save(&self) {
        self.disk.mark_dirty();
        let entries = self.entries.clone();
        self.disk.save_soon(
            move || Self::content(&entries),
            "the HTTP sessions (their clients must reconnect after a restart)",
        );
    }

    /// Write now what is still due (at shutdown).
    pub fn flush(&self) {
        if let Err(error) = self.disk.save(|| Self::content(&self.entries)) {
            tracing::warn!(file = %self.disk.path().display(), %error, "the HTTP sessions are not kept; their clients must reconnect after a restart");
        }
    }

    /// Record when the sessions in `seen` were last heard from, forget
    /// `closed` ones, and write the file if anything changed.
    pub fn update(&self, seen: &[(String, SystemTime)], closed: &[String]) {
        let mut changed = false;
        {
            let mut entries = lock(&self.entries);
            for (id, at) in seen {
                if let Some(entry) = entries.get_mut(id) {
                    let at = millis(*at);
                    if at > entry.last_seen_ms {
                        entry.last_seen_ms = at;
                        changed = true;
                    }
                }
            }
            for id in closed {
                changed |= entries.remove(id).is_some();
            }
        }
        if changed {
            self.save();
        }
    }
}

#[async_trait::async_trait]
impl SessionStore for HttpSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        self.expire(SystemTime::now());
        Ok(lock(&self.entries)
            .get(session_id)
            .map(|e| SessionState::new(e.initialize.clone())))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        lock(&self.entries).insert(
            session_id.to_owned(),
            Entry {
                initialize: state.initialize_params.clone(),
                last_seen_ms: millis(SystemTime::now()),
            },
        );
        self.save();
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        if lock(&self.entries).remove(session_id).is_some() {
            self.save();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientCapabilities, Implementation};
    use std::os::unix::fs::PermissionsExt as _;

    fn state() -> SessionState {
        SessionState::new(InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("agent", "1.0"),
        ))
    }

    #[tokio::test]
    async fn a_stored_session_is_known_to_the_next_controller_until_idle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("httpSessions.json");
        let first = HttpSessions::load(path.clone(), Duration::from_secs(300));
        first.store("abc", &state()).await.unwrap();
        first.flush();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let next = HttpSessions::load(path.clone(), Duration::from_secs(300));
        let loaded = next.load("abc").await.unwrap().expect("restorable");
        assert_eq!(loaded.initialize_params.client_info.name, "agent");
        assert!(next.load("other").await.unwrap().is_none());

        // Not heard from for longer than the idle time: not restored.
        let old = SystemTime::now() - Duration::from_secs(600);
        lock(&next.entries).get_mut("abc").unwrap().last_seen_ms = millis(old);
        next.save();
        next.flush();
        let later = HttpSessions::load(path, Duration::from_secs(300));
        assert!(later.load("abc").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_closed_session_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("httpSessions.json");
        let sessions = HttpSessions::load(path.clone(), Duration::from_secs(300));
        sessions.store("a", &state()).await.unwrap();
        sessions.store("b", &state()).await.unwrap();
        sessions.delete("a").await.unwrap();
        sessions.update(&[], &["b".to_owned()]);
        sessions.flush();
        assert!(HttpSessions::load(path, Duration::from_secs(300)).is_empty());
    }

    #[test]
    fn an_unreadable_file_is_no_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("httpSessions.json");
        std::fs::write(&path, "{not json").unwrap();
        assert!(HttpSessions::load(path, Duration::from_secs(300)).is_empty());
    }
}
