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
    let path = target_binary(name);
    build_if("steward-tests", name, &path, |path| !path.exists());
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// The `steward` executable next to this test binary: the exec shim for the
/// unit tests' spawners (this harness has no shim mode). Built with cargo
/// when it is missing or older than the sources of the shim, which a lib-only
/// test run does not rebuild.
pub(crate) fn steward_exe() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let path = target_binary("steward");
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let shim_sources = [
            "src/main.rs",
            "src/cli/mod.rs",
            "src/runtime/process/shim.rs",
            "src/runtime/process/limits.rs",
        ];
        let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
        build_if("steward", "steward", &path, |path| match modified(path) {
            None => true,
            Some(built) => shim_sources.iter().any(|source| {
                modified(&crate_dir.join(source)).is_some_and(|edited| edited > built)
            }),
        });
        assert!(path.exists(), "{} is missing", path.display());
        path
    })
    .clone()
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the controller crate is in the workspace")
}

/// `target/<profile>/<name>`, the directory above this test binary's.
fn target_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join(name)))
        .unwrap_or_else(|| workspace().join("target/debug").join(name))
}

/// `cargo build -p <package> --bin <bin>` for the profile `path` is in, if
/// `needed(path)`; one build at a time.
fn build_if(package: &str, bin: &str, path: &Path, needed: impl Fn(&Path) -> bool) {
    static BUILD: OnceLock<Mutex<()>> = OnceLock::new();
    if !needed(path) {
        return;
    }
    let _one_build_at_a_time = crate::support::sync::lock(BUILD.get_or_init(|| Mutex::new(())));
    if !needed(path) {
        return;
    }
    let profile = match path.parent().and_then(Path::file_name) {
        Some(dir) if dir == "debug" => "dev".to_owned(),
        Some(dir) => dir.to_string_lossy().into_owned(),
        None => "dev".to_owned(),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["build", "--profile", &profile, "-p", package, "--bin", bin])
        .current_dir(workspace())
        .status()
        .unwrap_or_else(|error| panic!("run cargo build for {bin}: {error}"));
    assert!(status.success(), "building {bin} failed");
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

/// Messages with `method` the fake received, in order.
pub(crate) fn received(path: &Path, method: &str) -> Vec<Value> {
    record(path)
        .into_iter()
        .filter(|event| event["event"] == "recv" && event["message"]["method"] == method)
        .map(|event| event["message"].clone())
        .collect()
}
