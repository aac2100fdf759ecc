//! Cleanup registry of `steward-bench`: what to stop if the bench is
//! interrupted, and the temp roots whose fakes are killed when they drop.

use super::*;

#[derive(Debug, Clone)]
pub enum Live {
    /// A process we spawned; `group`: it leads its own process group.
    Proc { pid: i32, group: bool },
    /// A records dir: every fake that recorded a start there.
    Records(PathBuf),
    /// A temp dir to remove.
    Dir(PathBuf),
}

pub static LIVE: Mutex<Vec<(u64, Live)>> = Mutex::new(Vec::new());
pub static NEXT_ID: Mutex<u64> = Mutex::new(0);

pub fn register(l: Live) -> u64 {
    let mut n = NEXT_ID.lock().unwrap_or_else(|e| e.into_inner());
    *n += 1;
    let id = *n;
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).push((id, l));
    id
}

pub fn unregister(id: u64) {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(i, _)| *i != id);
}

pub fn install_signal_cleanup() {
    let spawned = std::thread::Builder::new()
        .name("bench-signals".into())
        .spawn(|| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                use tokio::signal::unix::{SignalKind, signal};
                let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::hangup()),
                ) else {
                    std::future::pending::<()>().await;
                    return;
                };
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                    _ = hup.recv() => {}
                }
            });
            eprintln!("steward-bench: interrupted; stopping every process it started");
            cleanup_all();
            std::process::exit(130);
        });
    if let Err(e) = spawned {
        eprintln!("steward-bench: no signal cleanup thread: {e}");
    }
}

pub fn cleanup_all() {
    let live: Vec<Live> = LIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .map(|(_, l)| l)
        .collect();
    let procs: Vec<(i32, bool)> = live
        .iter()
        .filter_map(|l| match l {
            Live::Proc { pid, group } => Some((*pid, *group)),
            _ => None,
        })
        .collect();
    for &(pid, group) in &procs {
        signal(if group { -pid } else { pid }, libc::SIGTERM);
    }
    let _ = poll(Duration::from_secs(5), Duration::from_millis(20), || {
        let gone = procs.iter().all(|&(pid, _)| !alive(pid as u32));
        if gone { Ok(()) } else { Err(()) }
    });
    for &(pid, group) in &procs {
        signal(if group { -pid } else { pid }, libc::SIGKILL);
    }
    for l in &live {
        if let Live::Records(dir) = l {
            kill_recorded_fakes(dir);
        }
    }
    for l in &live {
        if let Live::Dir(dir) = l {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// SIGKILL every fake that recorded a start in `dir` and still runs (its
/// command line is checked, so a reused pid is never hit). Returns how many.
pub fn kill_recorded_fakes(dir: &Path) -> usize {
    let mut killed = 0;
    for pid in steward_tests::harness::recorded_pids(dir) {
        if alive(pid) && is_fake(pid) {
            signal(pid as i32, libc::SIGKILL);
            killed += 1;
        }
    }
    killed
}

pub fn is_fake(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("fake-mcp-server"))
        .unwrap_or(false)
}

/// A temp root (harness [`Env`]) whose fakes are killed when it drops.
pub struct GuardedEnv {
    pub env: Env,
    pub ids: Vec<u64>,
}

impl GuardedEnv {
    pub fn new() -> GuardedEnv {
        let env = Env::new();
        let ids = vec![
            register(Live::Dir(env.root.path().to_path_buf())),
            register(Live::Records(env.records())),
        ];
        GuardedEnv { env, ids }
    }

    /// Wait (bounded) until every recorded fake has exited; kill the rest.
    /// Returns how many had to be killed.
    pub fn reap_fakes(&self) -> usize {
        let dir = self.env.records();
        let gone = poll(Duration::from_secs(10), Duration::from_millis(20), || {
            let gone = steward_tests::harness::recorded_pids(&dir)
                .into_iter()
                .all(|p| !alive(p) || !is_fake(p));
            if gone { Ok(()) } else { Err(()) }
        });
        match gone {
            Ok(()) => 0,
            Err(()) => kill_recorded_fakes(&dir),
        }
    }
}

impl Drop for GuardedEnv {
    fn drop(&mut self) {
        kill_recorded_fakes(&self.env.records());
        for id in &self.ids {
            unregister(*id);
        }
    }
}
