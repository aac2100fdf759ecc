//! Processes Steward did not start itself but must not leak: descendants of
//! its servers that escaped their process group and outlived them.
//!
//! - **Every server carries a mark.** The [`Spawner`](super::process::Spawner)
//!   gives each server the env var [`SERVER_MARK_VAR`] =
//!   `<controller instance>.<spawn serial>`, which whatever it starts
//!   inherits. The instance (boot id, controller pid, controller start time)
//!   is unique, so a mark never matches a stranger, whatever pids were
//!   reused since.
//! - **Child subreaper.** `steward run` calls [`become_subreaper`]: an
//!   orphaned descendant (a `setsid` daemon whose server exited) is handed
//!   to the controller instead of init. When a server stops, its orphans —
//!   children of the controller it does not own, carrying the server's mark —
//!   are killed with it; at shutdown, every such orphan is.
//! - **Reap everything handed over, steal nothing.** Tokio reaps each server
//!   leader it spawned (by pid). [`Spawner::reap_orphans`](super::process::Spawner::reap_orphans) reaps the other zombie
//!   children only, holding the set of owned pids, which the spawner thread
//!   also holds from `posix_spawn` until the new pid is in it: a leader's
//!   exit status is never taken from tokio.
//! - **A killed predecessor's leftovers.** A SIGKILLed controller's servers
//!   die of their parent-death signal, but members of their groups and
//!   escaped descendants do not. The controller records its instance beside
//!   the workspace lock; the next one finds the processes still carrying the
//!   dead instance's mark ([`clean_up_predecessor`]) and kills them.

use std::fs;
use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::procfs::{
    ProcStat, children_of, descendants, is_alive, proc_pids, read_stat, send_signal,
};
use crate::support::sync::lock;

/// The env var holding a server's mark.
pub const SERVER_MARK_VAR: &str = "STEWARD_SERVER";

/// How long killed orphans may take to die.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Pids of the leaders not yet reaped by tokio, whatever
/// [`Spawner`](super::process::Spawner) started them: every other child of
/// this process is an orphan to reap.
static OWNED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// The set of owned pids, locked. The spawner thread holds it from the spawn
/// until the new pid is in it, and the reaper while it looks at the
/// children: a new child is never taken for someone else's.
pub(super) fn owned() -> MutexGuard<'static, Vec<i32>> {
    lock(&OWNED)
}

/// `pid` was reaped by tokio (or given up on): no longer ours to protect.
pub(super) fn disown(pid: i32) {
    owned().retain(|p| *p != pid);
}

/// This controller's instance: `<boot id>-<pid>-<start time>`, unique
/// across pid reuse and reboots.
pub fn instance() -> &'static str {
    static INSTANCE: OnceLock<String> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        let pid = std::process::id() as i32;
        let start = read_stat(pid).map_or(0, |s| s.start);
        let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let boot: String = boot.trim().chars().filter(|c| *c != '-').take(12).collect();
        format!("{boot}-{pid}-{start}")
    })
}

/// The mark of this controller's `serial`th spawn.
pub fn mark(serial: u64) -> String {
    format!("{}.{serial}", instance())
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphaned
/// descendants are re-parented to it, and it must reap them
/// ([`Spawner::reap_orphans`](super::process::Spawner::reap_orphans)).
#[allow(unsafe_code)]
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag by value and
    // changes only an attribute of the calling process.
    #[cfg(target_os = "linux")]
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The mark in `pid`'s environment, if any.
fn mark_of(pid: i32) -> Option<String> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{SERVER_MARK_VAR}=");
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// Children of this process that it did not spawn itself (orphans handed
/// to it), with their state.
fn unowned_children(owned: &[i32]) -> Vec<ProcStat> {
    children_of(std::process::id() as i32)
        .unwrap_or_default()
        .into_iter()
        .filter(|pid| !owned.contains(pid))
        .filter_map(read_stat)
        .collect()
}

/// Reaps every zombie child this process does not own; returns their pids.
#[allow(unsafe_code)]
pub(super) fn reap_unowned() -> Vec<i32> {
    // Held throughout: a pid spawned meanwhile is owned before it shows up.
    let owned = owned();
    let mut reaped = Vec::new();
    for child in unowned_children(&owned).iter().filter(|c| !c.is_live()) {
        let mut status = 0;
        // SAFETY: waitpid on one pid, writing one int into `status`.
        if unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG) } == child.pid {
            reaped.push(child.pid);
        }
    }
    reaped
}

/// Live orphans handed to this process whose mark is `mark` (any mark of
/// ours, or none, when `mark` is `None`), with all their descendants.
pub(super) fn orphans(mark: Option<&str>) -> Vec<ProcStat> {
    let children = unowned_children(&owned());
    let mut found = Vec::new();
    for child in children.into_iter().filter(ProcStat::is_live) {
        if mark.is_some_and(|m| mark_of(child.pid).as_deref() != Some(m)) {
            continue;
        }
        found.extend(descendants(child.pid));
        found.push(child);
    }
    found
}

/// SIGKILLs `processes` (each checked against its start time first), waits
/// (bounded) until none is alive and reaps those that were ours. Returns
/// whether all are gone.
pub(super) async fn kill(processes: &[ProcStat]) -> bool {
    for process in processes {
        kill_one(process);
    }
    let deadline = Instant::now() + KILL_WAIT;
    loop {
        reap_unowned();
        if processes.iter().all(|p| !is_alive(p)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn kill_one(process: &ProcStat) {
    if is_alive(process) {
        let _ = send_signal(process.pid, libc::SIGKILL);
    }
}

/// On start: kill what a killed predecessor left behind, then record this
/// instance in `record` (beside the workspace lock, which the caller
/// holds). The predecessor's instance is read from `record`; a clean
/// shutdown removes the record ([`forget_instance`]), so normally there is
/// nothing to look for. Returns the pids killed.
pub fn clean_up_predecessor(record: &Path) -> io::Result<Vec<u32>> {
    let previous = match fs::read_to_string(record) {
        Ok(text) => Some(text.trim().to_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let mut killed = Vec::new();
    if let Some(previous) = previous.filter(|p| !p.is_empty() && p != instance()) {
        let prefix = format!("{previous}.");
        let me = std::process::id() as i32;
        let leftovers: Vec<ProcStat> = proc_pids()
            .filter(|pid| *pid != me)
            .filter(|pid| mark_of(*pid).is_some_and(|m| m.starts_with(&prefix)))
            .filter_map(read_stat)
            .filter(ProcStat::is_live)
            .collect();
        for process in &leftovers {
            kill_one(process);
            killed.push(process.pid as u32);
        }
    }
    crate::support::fs::write_atomically(record, instance().as_bytes())?;
    Ok(killed)
}

/// On a clean shutdown: nothing is left behind, so the next controller need
/// not look.
pub fn forget_instance(record: &Path) {
    if fs::read_to_string(record).is_ok_and(|text| text.trim() == instance()) {
        let _ = fs::remove_file(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instance_is_stable_and_names_this_process() {
        let pid = std::process::id();
        assert_eq!(instance(), instance());
        assert!(instance().contains(&format!("-{pid}-")), "{}", instance());
        assert!(mark(7).starts_with(instance()) && mark(7).ends_with(".7"));
    }

    #[test]
    fn a_process_without_the_mark_has_none() {
        assert_eq!(mark_of(std::process::id() as i32), None);
        assert_eq!(mark_of(i32::MAX), None);
    }

    #[tokio::test]
    async fn the_predecessors_marked_processes_are_killed_and_only_they() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("ws.instance");
        let dead = "0123456789ab-1-1";
        fs::write(&record, dead).unwrap();
        let spawn = |mark: &str| {
            std::process::Command::new("sleep")
                .arg("1000")
                .env(SERVER_MARK_VAR, mark)
                .spawn()
                .unwrap()
        };
        let mut leftover = spawn(&format!("{dead}.3"));
        let mut stranger = spawn("fedcba987654-1-1.3");
        // Wait for the marks to be visible (after exec).
        let deadline = Instant::now() + Duration::from_secs(10);
        while mark_of(stranger.id() as i32).is_none() || mark_of(leftover.id() as i32).is_none() {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let killed = clean_up_predecessor(&record).unwrap();
        assert_eq!(killed, [leftover.id()]);
        assert!(leftover.wait().unwrap().signal().is_some());
        assert!(
            stranger.try_wait().unwrap().is_none(),
            "a stranger was killed"
        );
        assert_eq!(fs::read_to_string(&record).unwrap(), instance());
        // Ours now: nothing to clean.
        assert!(clean_up_predecessor(&record).unwrap().is_empty());
        forget_instance(&record);
        assert!(!record.exists());
        stranger.kill().unwrap();
        stranger.wait().unwrap();
    }

    use std::os::unix::process::ExitStatusExt as _;
}
