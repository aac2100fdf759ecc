//! What the process tests share: a shell spec, a spawner, polling, reading
//! a child's stdout, and the cleanup of processes a test remembers.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::ChildStdout;
use tokio::time::Instant;

use super::managed::poll_until;
use super::{ManagedProcess, ProcessSpec, Spawner};
use crate::runtime::procfs::{ProcStat, read_stat, signal_tracked};

/// Deadline for conditions that should hold quickly (generous: the
/// machine is shared and busy).
pub(super) const SOON: Duration = Duration::from_secs(10);

pub(super) fn sh(script: &str) -> ProcessSpec {
    ProcessSpec {
        program: "/bin/sh".to_owned(),
        args: vec!["-c".to_owned(), script.to_owned()],
        ..ProcessSpec::default()
    }
}

pub(super) fn spawner() -> Spawner {
    Spawner::new().expect("start the spawner thread")
}

pub(super) async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    assert!(
        poll_until(Instant::now() + SOON, &mut condition).await,
        "timed out waiting until {what}"
    );
}

/// Kills remembered test processes that are still alive when the test
/// ends, pass or fail.
#[derive(Default)]
pub(super) struct Cleanup(Vec<ProcStat>);

impl Cleanup {
    pub(super) fn track(&mut self, pid: i32) -> ProcStat {
        let stat = read_stat(pid).unwrap_or_else(|| panic!("process {pid} is not running"));
        self.0.push(stat);
        stat
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for process in &self.0 {
            signal_tracked(process, libc::SIGKILL);
        }
    }
}

pub(super) fn lines_of(process: &mut ManagedProcess) -> tokio::io::Lines<BufReader<ChildStdout>> {
    BufReader::new(process.take_stdout().expect("stdout")).lines()
}

pub(super) async fn next_line(lines: &mut tokio::io::Lines<BufReader<ChildStdout>>) -> String {
    tokio::time::timeout(SOON, lines.next_line())
        .await
        .expect("timed out reading a line")
        .expect("read stdout")
        .expect("stdout ended early")
}

pub(super) async fn read_all(process: &mut ManagedProcess) -> String {
    let mut out = String::new();
    let mut stdout = process.take_stdout().expect("stdout");
    tokio::time::timeout(SOON, stdout.read_to_string(&mut out))
        .await
        .expect("timed out reading stdout")
        .expect("read stdout");
    out
}

pub(super) fn comm(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

pub(super) fn write_executable(path: &Path, mode: u32) {
    fs::write(path, "#!/bin/sh\nexit 0\n").expect("write file");
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}
