//! The servers the user stopped (`steward stop`), persisted under HOME_DIR
//! so that a stop outlives the controller: `{"servers": [{"kind", "name"}]}`.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::desired::snapshot::Key;

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoppedFile {
    #[serde(default)]
    servers: Vec<Key>,
}

/// The stopped set in `path` (empty when the file is absent or unreadable).
pub(super) fn read(path: &Path) -> BTreeSet<Key> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return BTreeSet::new();
    };
    serde_json::from_str::<StoppedFile>(&text)
        .map(|f| f.servers.into_iter().collect())
        .unwrap_or_default()
}

/// Replaces the stopped set in `path`.
pub(super) fn write(path: &Path, keys: &BTreeSet<Key>) -> std::io::Result<()> {
    let file = StoppedFile {
        servers: keys.iter().cloned().collect(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
    crate::support::fs::write_atomically(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stopped_set_round_trips_in_its_file_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("steward").join("stopped.json");
        let keys: BTreeSet<Key> = [Key::mcp("db"), Key::lsp("py")].into_iter().collect();
        write(&path, &keys).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"servers": [
                {"kind": "McpServer", "name": "db"},
                {"kind": "LspServer", "name": "py"}
            ]})
        );
        assert_eq!(read(&path), keys);
        assert!(read(&dir.path().join("absent.json")).is_empty());
    }
}
