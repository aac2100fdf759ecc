//! Test support shared by the runtime tests: where the fake servers of the
//! `steward-tests` crate are, and how to read what they recorded.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// Bound on every wait for something that should happen.
pub(crate) const SOON: Duration = Duration::from_secs(10);

/// `target/<profile>/<name>` next to this test binary (which lives in
/// `target/<profile>/deps/`), built once with cargo if it is missing.
pub(crate) fn fake_binary(name: &'static str) -> PathBuf {
    static BUILD: OnceLock<Mutex<()>> = OnceLock::new();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the controller crate is in the workspace");
    let path = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join(name)))
        .unwrap_or_else(|| workspace.join("target/debug").join(name));
    if !path.exists() {
        let _one_build_at_a_time = BUILD.get_or_init(|| Mutex::new(())).lock();
        if !path.exists() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["build", "-p", "steward-tests", "--bin", name])
                .current_dir(workspace)
                .status()
                .expect("run cargo build for a fake server");
            assert!(status.success(), "building {name} failed");
        }
    }
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// Alive and not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat.rsplit_once(") ")?.1.chars().next()? != 'Z'))
        .unwrap_or(false)
}

/// Poll `condition` until it holds; fail after [`SOON`].
pub(crate) async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + SOON;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A fake's record file: one JSON object per line.
pub(crate) fn record(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The pid the fake recorded at its start.
pub(crate) fn recorded_pid(path: &Path) -> u32 {
    record(path)
        .iter()
        .find(|event| event["event"] == "start")
        .and_then(|event| event["pid"].as_u64())
        .expect("the fake recorded its start") as u32
}

/// Messages with `method` the fake received, in order.
pub(crate) fn received(path: &Path, method: &str) -> Vec<Value> {
    record(path)
        .into_iter()
        .filter(|event| event["event"] == "recv" && event["message"]["method"] == method)
        .map(|event| event["message"].clone())
        .collect()
}
