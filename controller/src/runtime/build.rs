//! Running a server's build command (`dev.build`): `sh -c BUILD` in
//! `dev.cwd`, with the server's environment, started by the [`Spawner`] as
//! every server process is — its own process group, the parent-death
//! signal, the permission profile it is given, stopped by signalling the
//! group and reaped — so no build outlives a stop, a timeout or the
//! controller.
//!
//! Its stdout and stderr, line by line, go to a [`StderrSink`] (the
//! server's log) and into a bounded tail the report keeps. The runtime only
//! runs it and says how it ended; what a failure means is the engine's.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::runtime::process::{ExitInfo, ProcessSpec, Spawner, StderrSink};
use crate::runtime::sandbox::SandboxRequest;
use crate::support::sync::lock;

/// Output lines a report keeps.
pub const BUILD_TAIL_LINES: usize = 20;
/// SIGTERM → SIGKILL grace when a build is stopped.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// After the build exits, how long its output may take to end (a
/// descendant still holding the pipes is then stopped with the group).
const OUTPUT_SETTLE: Duration = Duration::from_secs(1);

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSpec {
    /// A shell command line (`sh -c`).
    pub command: String,
    pub cwd: PathBuf,
    /// The server's environment from its entry (the spawner's policy applies).
    pub env: BTreeMap<String, String>,
    /// Bound on the whole build.
    pub timeout: Duration,
    /// The permission profile it runs under (`None`: none).
    pub sandbox: Option<SandboxRequest>,
}

/// How a build ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildEnd {
    /// It exited (or was killed by a signal not ours).
    Exited(ExitInfo),
    /// It ran past its timeout and was stopped.
    TimedOut,
    /// It could not be started (why, reading after "failed to").
    NotStarted(String),
}

/// What one build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildReport {
    pub end: BuildEnd,
    pub duration: Duration,
    /// Its last lines of output, stdout and stderr as they came.
    pub tail: Vec<String>,
    pub pid: Option<u32>,
}

impl BuildReport {
    /// It exited with code 0.
    pub fn succeeded(&self) -> bool {
        matches!(self.end, BuildEnd::Exited(ExitInfo { code: Some(0), .. }))
    }

    /// How it ended, in words (`exited with code 2`, `timed out after 10s`).
    pub fn describe(&self) -> String {
        match &self.end {
            BuildEnd::Exited(info) => info.to_string(),
            BuildEnd::TimedOut => format!(
                "ran longer than its timeout ({}) and was stopped",
                humantime::format_duration(Duration::from_secs(self.duration.as_secs()))
            ),
            BuildEnd::NotStarted(why) => format!("could not start: {why}"),
        }
    }
}

/// Forwards each line to the log and keeps the last ones.
struct Tee {
    log: Arc<dyn StderrSink>,
    tail: Mutex<VecDeque<String>>,
}

impl Tee {
    fn keep(&self, line: &str) {
        let mut tail = lock(&self.tail);
        if tail.len() == BUILD_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line.to_owned());
    }

    fn tail(&self) -> Vec<String> {
        lock(&self.tail).iter().cloned().collect()
    }
}

impl StderrSink for Tee {
    fn started(&self, pid: u32) {
        self.log.started(pid);
    }

    fn line(&self, pid: u32, line: &str) {
        self.keep(line);
        self.log.line(pid, line);
    }
}

/// Runs `spec` to its end, or until `cancel` (then `None`: the build was
/// stopped and reaped, nothing of it runs). Output goes to `log`.
pub async fn run(
    spawner: &Spawner,
    spec: &BuildSpec,
    log: Arc<dyn StderrSink>,
    cancel: &CancellationToken,
) -> Option<BuildReport> {
    let began = Instant::now();
    let tee = Arc::new(Tee {
        log,
        tail: Mutex::new(VecDeque::new()),
    });
    let process_spec = ProcessSpec {
        program: "sh".to_owned(),
        args: vec!["-c".to_owned(), spec.command.clone()],
        env: spec.env.clone(),
        cwd: Some(spec.cwd.clone()),
        sandbox: spec.sandbox.clone(),
    };
    let spawned = spawner
        .with_stderr_sink(tee.clone())
        .spawn(&process_spec)
        .await;
    let mut process = match spawned {
        Ok(process) => process,
        Err(error) => {
            let why = error.to_string();
            tee.keep(&why);
            return Some(BuildReport {
                end: BuildEnd::NotStarted(why),
                duration: began.elapsed(),
                tail: tee.tail(),
                pid: None,
            });
        }
    };
    let pid = process.pid();
    // Nothing to read from us: stdin closed at once.
    drop(process.take_stdin());
    let stdout = process.take_stdout().map(|stdout| {
        let tee = tee.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tee.line(pid, &line);
            }
        })
    });
    let deadline = began + spec.timeout;
    let end = tokio::select! {
        info = process.exited() => Some(BuildEnd::Exited(info)),
        () = tokio::time::sleep_until(deadline) => Some(BuildEnd::TimedOut),
        () = cancel.cancelled() => None,
    };
    if matches!(end, Some(BuildEnd::Exited(_))) {
        // The last lines, unless a descendant keeps the pipes open.
        let mut eof = process.stderr_eof();
        let settle = Instant::now() + OUTPUT_SETTLE;
        let _ = tokio::time::timeout_at(settle, eof.wait_for(|done| *done)).await;
        if let Some(reader) = stdout {
            let _ = tokio::time::timeout_at(settle, reader).await;
        }
    }
    // Whatever it left in its group (or holding its pipes) goes with it.
    let report = process.stop(STOP_GRACE).await;
    if !report.clean {
        tracing::warn!(command = %spec.command, pid, "the build left processes behind; they were killed");
    }
    let end = end?;
    Some(BuildReport {
        end,
        duration: began.elapsed(),
        tail: tee.tail(),
        pid: Some(pid),
    })
}
