//! What the runtime tests share: a [`Spawner`] whose exec shim is the real
//! `steward` program, and a bound on every wait.
//!
//! The runtime tests drive the controller's runtime (processes, MCP and LSP
//! connections) directly through its public API, without a controller.

use std::time::Duration;

use steward::runtime::process::Spawner;
use tokio::time::Instant;

/// Bound on every wait for something that should happen (generous: the
/// machine is shared and busy).
pub const SOON: Duration = Duration::from_secs(10);

/// The exec shim of the runtime tests' spawners: the real `steward` program
/// (this test binary has no shim mode).
pub const STEWARD: &str = env!("CARGO_BIN_EXE_steward-under-test");

/// A spawner with [`STEWARD`] as its exec shim.
pub fn spawner() -> Spawner {
    Spawner::with_exec_shim(STEWARD).expect("start the spawner thread")
}

/// Poll `condition` until it holds; fail after [`SOON`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + SOON;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
