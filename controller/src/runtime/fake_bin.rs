//! Test support: where the fake servers of the `steward-tests` crate are.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

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
