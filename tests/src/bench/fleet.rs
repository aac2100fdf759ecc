//! The fleet of fake servers of `steward-bench` and its settings file.

use super::*;

pub struct Fleet {
    pub fake: PathBuf,
    pub records: PathBuf,
    pub names: Vec<String>,
    /// Extra env per server (the edits).
    pub extra: Vec<BTreeMap<String, String>>,
    /// Each server's fake config (name and record file are set from the fleet).
    pub configs: Vec<FakeMcpConfig>,
    /// Servers whose config goes in `args` (`--config=<json>`) rather than env.
    pub config_in_args: BTreeSet<usize>,
    /// `mcp.excluded` of the settings file.
    pub excluded: BTreeSet<String>,
    /// `dev` of some servers' entries.
    pub dev: BTreeMap<usize, Value>,
}

impl Fleet {
    /// `n` servers, each a fake with config `base`.
    pub fn with(fake: &Path, records: &Path, n: usize, base: &FakeMcpConfig) -> Fleet {
        let width = n.saturating_sub(1).to_string().len().max(3);
        let mut fleet = Fleet {
            fake: fake.to_path_buf(),
            records: records.to_path_buf(),
            names: Vec::new(),
            extra: Vec::new(),
            configs: Vec::new(),
            config_in_args: BTreeSet::new(),
            excluded: BTreeSet::new(),
            dev: BTreeMap::new(),
        };
        for i in 0..n {
            fleet.push(&format!("s{i:0width$}"), base);
        }
        fleet
    }

    /// Add a server named `name` with config `base`; returns its index.
    pub fn push(&mut self, name: &str, base: &FakeMcpConfig) -> usize {
        self.names.push(name.to_owned());
        self.extra.push(BTreeMap::new());
        self.configs.push(FakeMcpConfig {
            name: name.to_owned(),
            record: Some(self.records.join(format!("{name}.jsonl"))),
            ..base.clone()
        });
        self.names.len() - 1
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn record(&self, i: usize) -> PathBuf {
        self.records.join(format!("{}.jsonl", self.names[i]))
    }

    pub fn env_of(&self, i: usize) -> BTreeMap<String, String> {
        let mut env = self.extra[i].clone();
        if !self.config_in_args.contains(&i) {
            env.insert(fake_mcp::CONFIG_ENV.to_owned(), self.configs[i].to_json());
        }
        env
    }

    pub fn entry(&self, i: usize, reordered: bool) -> String {
        let mut cmd = serde_json::to_string(&self.fake.to_string_lossy()).unwrap_or_default();
        if self.config_in_args.contains(&i) {
            let arg = format!("--config={}", self.configs[i].to_json());
            cmd = format!("{cmd}, \"args\": {}", json!([arg]));
        }
        let env = self.env_of(i);
        if let Some(dev) = self.dev.get(&i) {
            cmd = format!("{cmd}, \"dev\": {dev}");
        }
        if reordered {
            // Same meaning: keys of the entry and of env in another order.
            let env: Vec<String> = env
                .iter()
                .rev()
                .map(|(k, v)| format!("{}: {}", json!(k), json!(v)))
                .collect();
            format!(
                "{{ \"env\": {{ {} }},\n      \"command\": {cmd} }}",
                env.join(", ")
            )
        } else {
            format!("{{\"command\":{cmd},\"env\":{}}}", json!(env))
        }
    }

    /// `{"mcpServers": {...}}`; `reordered`: servers in reverse order, keys
    /// reordered, other whitespace — the same configuration.
    pub fn content(&self, reordered: bool) -> String {
        let mut items: Vec<String> = (0..self.len())
            .map(|i| format!("{}: {}", json!(self.names[i]), self.entry(i, reordered)))
            .collect();
        if reordered {
            items.reverse();
            format!(
                "{{\n  \"mcpServers\": {{\n    {}\n  }}{}\n}}\n",
                items.join(",\n    "),
                self.excluded_json()
            )
        } else {
            format!(
                "{{\"mcpServers\":{{{}}}{}}}",
                items.join(","),
                self.excluded_json()
            )
        }
    }

    /// `,"mcp":{"excluded":[...]}` when some server is excluded.
    pub fn excluded_json(&self) -> String {
        if self.excluded.is_empty() {
            String::new()
        } else {
            format!(",\"mcp\":{}", json!({ "excluded": self.excluded }))
        }
    }

    pub fn set(&mut self, i: usize, key: &str, value: &str) {
        self.extra[i].insert(key.to_owned(), value.to_owned());
    }

    /// Pids of the "start" events of server `i`, in order.
    pub fn starts_of(&self, i: usize) -> Vec<u32> {
        read_record(&self.record(i))
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.event == "start")
            .map(|e| e.pid)
            .collect()
    }

    pub fn start_counts(&self) -> Vec<usize> {
        (0..self.len()).map(|i| self.starts_of(i).len()).collect()
    }

    /// The server a stream of edits hits at step `k` (spread over the fleet).
    pub fn target(&self, k: usize) -> usize {
        (k * 7 + 3) % self.len()
    }
}

/// Write `content` to `path` by rename; returns the instant right before
/// the rename (the clock start of an edit).
pub fn write_by_rename(path: &Path, content: &str, seq: u64) -> Result<Instant> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_file_name(format!(
        ".{}.bench{seq}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::write(&tmp, content).with_context(|| format!("write {}", tmp.display()))?;
    let t0 = Instant::now();
    std::fs::rename(&tmp, path).with_context(|| format!("rename onto {}", path.display()))?;
    Ok(t0)
}

/// Per-edit churn accounting from the record files.
pub struct Churn {
    pub counts: Vec<usize>,
    /// Restarts of servers that were not the edit's target.
    pub unchanged_restarts: usize,
    /// Which servers restarted without being edited.
    pub offenders: BTreeSet<String>,
    pub target_restarts: Vec<usize>,
}

impl Churn {
    pub fn new(fleet: &Fleet) -> Churn {
        Churn {
            counts: fleet.start_counts(),
            unchanged_restarts: 0,
            offenders: BTreeSet::new(),
            target_restarts: Vec::new(),
        }
    }

    /// Close the window of an edit that targeted `targets`.
    pub fn close(&mut self, fleet: &Fleet, targets: &[usize]) {
        let now = fleet.start_counts();
        let mut target = 0;
        for (i, (&a, &b)) in self.counts.iter().zip(&now).enumerate() {
            let d = b.saturating_sub(a);
            if targets.contains(&i) {
                target += d;
            } else if d > 0 {
                self.unchanged_restarts += d;
                self.offenders.insert(fleet.names[i].clone());
            }
        }
        self.target_restarts.push(target);
        self.counts = now;
    }

    pub fn json(&self) -> Value {
        json!({
            "unchangedRestarts": self.unchanged_restarts,
            "unchangedRestarted": self.offenders,
            "editedServerRestarts": self.target_restarts.iter().sum::<usize>(),
            "editsWithoutARestartOfTheEditedServer":
                self.target_restarts.iter().filter(|r| **r == 0).count(),
        })
    }
}

/// Whether fake `pid` answered a `tools/list` (the controller's handshake is done or nearly).
pub fn answered_tools_list(events: &[fake_mcp::RecordEvent], pid: u32) -> bool {
    let ids: Vec<&Value> = events
        .iter()
        .filter(|e| e.pid == pid && e.event == "recv" && e.method() == Some("tools/list"))
        .filter_map(|e| e.message.get("id"))
        .collect();
    events.iter().any(|e| {
        e.pid == pid
            && e.event == "send"
            && e.message.get("result").is_some()
            && e.message.get("id").is_some_and(|id| ids.contains(&id))
    })
}

/// Wait (polling the record file every ms) until server `idx` runs a
/// process that is not in `prev` and has answered `tools/list`. Returns when
/// the new process was first seen, and when it had answered.
pub fn wait_new_process(
    fleet: &Fleet,
    idx: usize,
    prev: &[u32],
    listed: bool,
) -> Result<(Instant, Instant)> {
    let deadline = Instant::now() + DEADLINE;
    let mut seen = None;
    while Instant::now() < deadline {
        let events = read_record(&fleet.record(idx)).unwrap_or_default();
        let new = events
            .iter()
            .find(|e| e.event == "start" && !prev.contains(&e.pid))
            .map(|e| e.pid);
        if let Some(pid) = new {
            let now = Instant::now();
            let first = *seen.get_or_insert(now);
            if !listed || answered_tools_list(&events, pid) {
                return Ok((first, now));
            }
        }
        // The polling interval of the record file (a free read for the controller).
        std::thread::sleep(Duration::from_millis(1));
    }
    bail!("{} was not restarted within {DEADLINE:?}", fleet.names[idx])
}
