//! The spawner thread: every child is forked from this one dedicated,
//! long-lived thread, because the kernel sends a child's parent-death signal
//! when the *thread* that created it exits. It lives while any
//! [`Spawner`](super::Spawner) clone or
//! [`ManagedProcess`](super::ManagedProcess) holds it, and never panics out
//! of its loop (a panic would kill every child it ever started).

use std::io;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::ThreadId;

use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use super::limits::short_of_descriptors;
use crate::runtime::procfs::send_signal;
use crate::runtime::reaper;

/// The handle of the spawner thread; dropping the last one ends the thread.
pub(super) struct SpawnerThread {
    requests: mpsc::Sender<SpawnRequest>,
    pub(super) thread: ThreadId,
    pub(super) exec_shim: PathBuf,
}

struct SpawnRequest {
    command: Command,
    runtime: tokio::runtime::Handle,
    reply: oneshot::Sender<io::Result<(Child, ThreadId)>>,
}

/// The spawner thread has stopped (it only stops when every handle is
/// dropped).
pub(super) struct Gone;

impl SpawnerThread {
    /// Starts the thread (`steward-spawner`); `exec_shim` is the executable
    /// every child starts as.
    pub(super) fn start(exec_shim: PathBuf) -> io::Result<SpawnerThread> {
        let (requests, inbox) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("steward-spawner".to_owned())
            .spawn(move || spawner_loop(&inbox))?;
        Ok(SpawnerThread {
            requests,
            thread: thread.thread().id(),
            exec_shim,
        })
    }

    /// Spawns `command` on the thread, its pipes and reaper registered with
    /// the caller's tokio runtime; the new pid is owned (see
    /// [`reaper::owned`]) before anyone can see it. Returns the child and the
    /// thread that forked it.
    pub(super) async fn spawn(
        &self,
        command: Command,
    ) -> Result<io::Result<(Child, ThreadId)>, Gone> {
        let (reply, replied) = oneshot::channel();
        self.requests
            .send(SpawnRequest {
                command,
                runtime: tokio::runtime::Handle::current(),
                reply,
            })
            .map_err(|_| Gone)?;
        replied.await.map_err(|_| Gone)
    }
}

fn spawner_loop(inbox: &mpsc::Receiver<SpawnRequest>) {
    // Ends when every Spawner and ManagedProcess is gone.
    while let Ok(SpawnRequest {
        mut command,
        runtime,
        reply,
    }) = inbox.recv()
    {
        // The child's pipes and reaper register with the caller's runtime.
        let _runtime = runtime.enter();
        let spawned = {
            // Held until the pid is recorded: the orphan reaper, which holds
            // it too, never sees the new child as someone else's.
            let mut owned = reaper::owned();
            // A panic must not end this thread: PDEATHSIG would kill every child.
            // Checked here, where spawns are serialized: parallel starts
            // cannot all pass the check and then take the reserve together.
            let spawned = if short_of_descriptors() {
                Err(io::Error::from_raw_os_error(libc::EMFILE))
            } else {
                std::panic::catch_unwind(AssertUnwindSafe(|| command.spawn()))
                    .unwrap_or_else(|_| Err(io::Error::other("process spawn panicked")))
            };
            if let Some(pid) = spawned.as_ref().ok().and_then(Child::id) {
                owned.push(pid as i32);
            }
            spawned.map(|child| (child, std::thread::current().id()))
        };
        if let Err(Ok((child, _))) = reply.send(spawned) {
            // The caller gave up waiting: nobody owns this child, so end it
            // (tokio reaps it; should the orphan reaper get there first,
            // nobody waits for that status anyway).
            if let Some(pid) = child.id() {
                let _ = send_signal(-(pid as i32), libc::SIGKILL);
                reaper::disown(pid as i32);
            }
        }
    }
}
