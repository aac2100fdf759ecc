//! Rendering for people and programs: a `WorkspaceStatus` as pretty JSON,
//! YAML (the same object) or a kubectl-style table; the events table; the
//! `describe` view of one server. Pure: the caller decides where the text
//! goes.

use std::time::{Duration, SystemTime};

use steward_schema::resource::{DevSpec, DevStatus, Item, SourceState, WorkspaceStatus};

use crate::observe::events::Event;
use crate::observe::logs::LogChunk;

/// `-o` of `steward status` and `steward events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// kubectl-style columns
    #[default]
    Table,
    /// The table with more columns (status: MESSAGE; events: COUNT, FIRST SEEN)
    Wide,
    /// One document (WorkspaceStatus, EventList), pretty-printed
    Json,
    /// The same document in YAML
    Yaml,
}

impl Format {
    /// Whether this is one of the tables (for people) rather than a document.
    pub fn is_table(self) -> bool {
        matches!(self, Format::Table | Format::Wide)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("render the status as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("render the status as YAML: {0}")]
    Yaml(#[from] yaml_serde::Error),
}

/// `status` in `format`, ending with a newline. `now` is used for AGE.
pub fn render(
    status: &WorkspaceStatus,
    format: Format,
    now: SystemTime,
) -> Result<String, OutputError> {
    Ok(match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(status)?;
            s.push('\n');
            s
        }
        Format::Yaml => yaml_serde::to_string(status)?,
        Format::Table | Format::Wide => render_table(status, format == Format::Wide, now),
    })
}

/// The kubectl-style table, one row per item (empty string when none);
/// `wide` adds the MESSAGE column.
pub fn render_table(status: &WorkspaceStatus, wide: bool, now: SystemTime) -> String {
    let rows = rows(status, wide, now);
    if rows.is_empty() {
        return String::new();
    }
    let mut table = Table::new(header(wide));
    table.fit(&rows);
    let mut out = table.header_line();
    for r in &rows {
        out.push_str(&table.line(r));
    }
    out
}

/// The header of the status table.
pub fn header(wide: bool) -> Vec<String> {
    let mut h = vec![
        "KIND", "NAME", "SOURCE", "PHASE", "REASON", "PID", "RESTARTS", "AGE",
    ];
    if wide {
        h.push("SANDBOX");
        h.push("MESSAGE");
    }
    h.into_iter().map(str::to_owned).collect()
}

/// One row per item of `status`, in item order.
pub fn rows(status: &WorkspaceStatus, wide: bool, now: SystemTime) -> Vec<Vec<String>> {
    status
        .items
        .iter()
        .map(|item| row(item, wide, now))
        .collect()
}

/// Widths of the table columns that can hold only a known set of values
/// (the widest value each): a table that is watched (`status --watch`,
/// `events -w`) starts at these, so rows printed later (a `Starting`
/// becoming `CrashLoopBackOff`) stay under the header printed first.
const WATCH_MIN_WIDTHS: [(&str, usize); 9] = [
    ("KIND", "LspServer".len()),
    ("SOURCE", "WorkspaceSettings".len()),
    ("PHASE", "Starting".len()),
    ("REASON", "MaxRestartsExceeded".len()),
    // pid_max on Linux is at most 4194304.
    ("PID", 7),
    ("AGE", "10h59m".len()),
    ("LAST SEEN", "10m59s (x99 over 10h59m)".len()),
    ("TYPE", "Warning".len()),
    ("OBJECT", "mcpserver/".len() + 16),
];

/// Column widths for aligned text; the last column is never padded.
#[derive(Debug, Clone)]
pub struct Table {
    pub header: Vec<String>,
    widths: Vec<usize>,
}

impl Table {
    /// Columns as wide as their header.
    pub fn new(header: Vec<String>) -> Self {
        let widths = header.iter().map(|h| h.chars().count()).collect();
        Table { header, widths }
    }

    /// A table to watch: the columns of known values start at their widest
    /// (see `WATCH_MIN_WIDTHS`).
    pub fn for_watch(header: Vec<String>) -> Self {
        let mut table = Table::new(header);
        for (w, h) in table.widths.iter_mut().zip(&table.header) {
            if let Some((_, min)) = WATCH_MIN_WIDTHS.iter().find(|(name, _)| name == h) {
                *w = (*w).max(*min);
            }
        }
        table
    }

    /// Widen the columns to hold `rows` (never narrows).
    pub fn fit(&mut self, rows: &[Vec<String>]) {
        for r in rows {
            for (w, cell) in self.widths.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }

    /// The header line.
    pub fn header_line(&self) -> String {
        self.line(&self.header)
    }

    /// One line: cells padded to their column, three spaces apart.
    pub fn line(&self, cells: &[String]) -> String {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            text.push_str(cell);
            if i + 1 < cells.len() {
                let width = self.widths.get(i).copied().unwrap_or(0);
                let pad = width.saturating_sub(cell.chars().count()) + 3;
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        let mut line = text.trim_end().to_owned();
        line.push('\n');
        line
    }
}

fn row(item: &Item, wide: bool, now: SystemTime) -> Vec<String> {
    let meta = item.metadata();
    let status = item.status();
    let dash = || "-".to_owned();
    let mut cells = vec![
        item.kind().to_string(),
        meta.name.clone(),
        meta.source.to_string(),
        format!("{:?}", status.phase),
        status.reason.map_or_else(dash, |r| r.to_string()),
        status.pid.map_or_else(dash, |p| p.to_string()),
        status.restarts.to_string(),
        status
            .started_at
            .as_deref()
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .map_or_else(dash, |started| {
                age(now.duration_since(started).unwrap_or_default())
            }),
    ];
    if wide {
        // The profile, and how much of it this kernel enforces when not all.
        cells.push(
            status
                .sandbox
                .as_ref()
                .map_or_else(dash, |b| match b.enforcement {
                    steward_schema::resource::Enforcement::Full => b.profile.clone(),
                    other => format!("{} ({other:?})", b.profile),
                }),
        );
        cells.push(
            status
                .message
                .as_deref()
                .and_then(|m| m.lines().find(|l| !l.trim().is_empty()))
                .map_or_else(dash, |l| l.trim().to_owned()),
        );
    }
    cells
}

/// One `Name:  value` line of `describe` (a value's further lines aligned
/// under its first).
fn field(out: &mut String, indent: usize, name: &str, value: &str) {
    let label = format!("{:indent$}{name}:", "");
    let mut lines = value.lines();
    let first = lines.next().unwrap_or("");
    out.push_str(format!("{label:<24}{first}").trim_end());
    out.push('\n');
    for more in lines {
        out.push_str(format!("{:24}{more}", "").trim_end());
        out.push('\n');
    }
}

/// The `Sandbox:` block of `describe`: the profile in force, how fully it
/// is enforced and what is missing, the network, the paths it reads and
/// writes beyond the base, and what the egress proxy refused.
fn describe_sandbox(out: &mut String, b: &steward_schema::resource::SandboxStatus) {
    out.push_str("Sandbox:\n");
    field(out, 2, "Profile", &b.profile);
    let enforcement = match b.missing.is_empty() {
        true => format!("{:?} (Landlock ABI {})", b.enforcement, b.abi),
        false => format!(
            "{:?} (Landlock ABI {}): {}",
            b.enforcement,
            b.abi,
            b.missing.join("; ")
        ),
    };
    field(out, 2, "Enforcement", &enforcement);
    let network = match b.hosts.is_empty() {
        true => format!("{:?}", b.network),
        false => format!("{:?}: {}", b.network, b.hosts.join(", ")),
    };
    field(out, 2, "Network", &network);
    let paths = |p: &[String]| {
        if p.is_empty() {
            "<none>".to_owned()
        } else {
            p.join("\n")
        }
    };
    field(out, 2, "Reads", &paths(&b.read));
    field(out, 2, "Writes", &paths(&b.write));
    if let Some(home) = &b.home {
        field(out, 2, "Home", home);
    }
    if !b.pinned.is_empty() {
        field(out, 2, "Pinned (read-only)", &paths(&b.pinned));
    }
    field(out, 2, "Egress Denied", &b.egress_denied.to_string());
    for note in &b.notes {
        field(out, 2, "Note", note);
    }
}

/// kubectl's short human durations: `45s`, `3m20s`, `42m`, `5h3m`, `30h`, `3d4h`, `12d`, `2y30d`.
pub fn age(d: Duration) -> String {
    let s = d.as_secs();
    let (m, h, day) = (s / 60, s / 3600, s / 86_400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            rest => format!("{m}m{rest}s"),
        },
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            rest => format!("{h}h{rest}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if day < 8 => match h % 24 {
            0 => format!("{day}d"),
            rest => format!("{day}d{rest}h"),
        },
        _ if day < 365 * 2 => format!("{day}d"),
        _ => match day % 365 {
            0 => format!("{}y", day / 365),
            rest => format!("{}y{rest}d", day / 365),
        },
    }
}

// ---- events ----------------------------------------------------------------

/// An `EventList` document (`steward events -o json|yaml`).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventList<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub items: &'a [Event],
}

impl<'a> EventList<'a> {
    pub fn new(items: &'a [Event]) -> Self {
        EventList {
            api_version: steward_schema::resource::API_VERSION,
            kind: "EventList",
            items,
        }
    }
}

/// The header of the events table; `wide` adds COUNT and FIRST SEEN.
pub fn event_header(wide: bool) -> Vec<String> {
    let mut h = vec!["LAST SEEN", "TYPE", "REASON", "OBJECT"];
    if wide {
        h.extend(["COUNT", "FIRST SEEN"]);
    }
    h.push("MESSAGE");
    h.into_iter().map(str::to_owned).collect()
}

/// How long ago `rfc3339` was, kubectl-style (`-` when unreadable).
fn ago(rfc3339: &str, now: SystemTime) -> String {
    humantime::parse_rfc3339_weak(rfc3339).map_or_else(
        |_| "-".to_owned(),
        |t| age(now.duration_since(t).unwrap_or_default()),
    )
}

/// LAST SEEN, as `kubectl describe` shows a repeated event: `5s (x3 over 2m)`.
fn last_seen(e: &Event, now: SystemTime) -> String {
    let last = ago(&e.last_timestamp, now);
    if e.count > 1 {
        format!(
            "{last} (x{} over {})",
            e.count,
            ago(&e.first_timestamp, now)
        )
    } else {
        last
    }
}

/// One row of the events table.
pub fn event_row(e: &Event, wide: bool, now: SystemTime) -> Vec<String> {
    let mut cells = vec![
        if wide {
            ago(&e.last_timestamp, now)
        } else {
            last_seen(e, now)
        },
        e.type_.as_str().to_owned(),
        e.reason.clone(),
        e.involved_object.display(),
    ];
    if wide {
        cells.push(e.count.to_string());
        cells.push(ago(&e.first_timestamp, now));
    }
    cells.push(e.message.clone());
    cells
}

/// The events table (empty string when there are none).
pub fn render_events(events: &[Event], wide: bool, now: SystemTime) -> String {
    if events.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = events.iter().map(|e| event_row(e, wide, now)).collect();
    let mut table = Table::new(event_header(wide));
    table.fit(&rows);
    let mut out = table.header_line();
    for r in &rows {
        out.push_str(&table.line(r));
    }
    out
}

// ---- describe ----------------------------------------------------------------

/// What `describe` knows of a server's stderr.
#[derive(Debug, Clone)]
pub enum StderrView {
    /// The lines kept for its current process.
    Lines(LogChunk),
    /// Why there are none to show.
    Note(String),
}

/// `steward describe` of one item, kubectl-style. `events` is `None` when
/// there is no controller to ask.
/// The `Dev:` section of `describe`: what is watched, the last build and
/// its last lines, the reloads.
fn describe_dev(
    out: &mut String,
    dev: &DevSpec,
    status: Option<&DevStatus>,
    field: &dyn Fn(&mut String, usize, &str, &str),
) {
    out.push_str("Dev:\n");
    field(out, 2, "Watch", &dev.watch.join("\n"));
    field(out, 2, "In", &dev.cwd);
    field(out, 2, "Build", dev.build.as_deref().unwrap_or("<none>"));
    let Some(status) = status else {
        field(out, 2, "Watching", "<not yet>");
        return;
    };
    let watching = match (&status.message, status.watching) {
        (Some(why), _) => format!("no: {why}"),
        (None, true) => format!("yes ({} files)", status.files),
        (None, false) => "no".to_owned(),
    };
    field(out, 2, "Watching", &watching);
    field(out, 2, "Reloads", &status.reloads.to_string());
    let last = match (&status.last_build, status.building) {
        (_, true) => "running now".to_owned(),
        (Some(b), false) => format!("{:?} in {} ms at {}", b.result, b.duration_ms, b.at),
        (None, false) => "<none>".to_owned(),
    };
    field(out, 2, "Last Build", &last);
    if let Some(b) = status.last_build.as_ref().filter(|b| !b.tail.is_empty()) {
        out.push_str("  Last Build Output:\n");
        for line in &b.tail {
            out.push_str(format!("    {line}").trim_end());
            out.push('\n');
        }
    }
}

pub fn render_describe(
    item: &Item,
    events: Option<&[Event]>,
    stderr: &StderrView,
    now: SystemTime,
) -> Result<String, OutputError> {
    let meta = item.metadata();
    let status = item.status();
    let none = "<none>";
    let mut out = String::new();
    field(&mut out, 0, "Name", &meta.name);
    field(&mut out, 0, "Kind", &item.kind().to_string());
    field(&mut out, 0, "Source", meta.source.as_str());
    field(&mut out, 0, "Generation", &meta.generation.to_string());

    out.push_str("Spec:\n");
    let spec = match item {
        Item::McpServer(s) => yaml_serde::to_string(&s.spec)?,
        Item::LspServer(s) => yaml_serde::to_string(&s.spec)?,
    };
    for line in spec.lines() {
        out.push_str(&format!("  {line}\n"));
    }

    out.push_str("Status:\n");
    let list = |v: &Option<Vec<String>>| match v {
        Some(v) if !v.is_empty() => v.join(", "),
        Some(_) => none.to_owned(),
        None => none.to_owned(),
    };
    let or_none = |v: Option<String>| v.unwrap_or_else(|| none.to_owned());
    field(&mut out, 2, "Phase", &format!("{:?}", status.phase));
    field(
        &mut out,
        2,
        "Reason",
        &or_none(status.reason.map(|r| r.to_string())),
    );
    field(&mut out, 2, "Message", &or_none(status.message.clone()));
    field(
        &mut out,
        2,
        "PID",
        &or_none(status.pid.map(|p| p.to_string())),
    );
    field(&mut out, 2, "Restarts", &status.restarts.to_string());
    field(
        &mut out,
        2,
        "Started",
        &or_none(
            status
                .started_at
                .as_ref()
                .map(|t| format!("{t} ({} ago)", ago(t, now))),
        ),
    );
    field(
        &mut out,
        2,
        "Next Retry",
        &or_none(status.next_retry_at.clone()),
    );
    field(
        &mut out,
        2,
        "Observed Generation",
        &or_none(status.observed_generation.map(|g| g.to_string())),
    );
    match item {
        Item::McpServer(_) => {
            field(&mut out, 2, "Tools", &list(&status.tools));
            field(&mut out, 2, "Prompts", &list(&status.prompts));
            // What changed since each definition was pinned, in full.
            let held: Vec<String> = [
                ("tool", &status.tools_quarantined),
                ("prompt", &status.prompts_quarantined),
            ]
            .into_iter()
            .flat_map(|(noun, held)| {
                held.iter()
                    .map(move |q| format!("{noun} {}: {}", q.name, q.changes.join("; ")))
            })
            .collect();
            if !held.is_empty() {
                let accept = format!("(accept: steward approve {} --tools)", meta.name);
                field(
                    &mut out,
                    2,
                    "Quarantined",
                    &[held, vec![accept]].concat().join("\n"),
                );
            }
        }
        Item::LspServer(_) => {
            let caps = status
                .capabilities
                .as_ref()
                .and_then(|c| c.as_object())
                .map(|o| o.keys().cloned().collect::<Vec<_>>());
            field(&mut out, 2, "Capabilities", &list(&caps));
        }
    }
    if let Some(sandbox) = &status.sandbox {
        describe_sandbox(&mut out, sandbox);
    }

    let dev = match item {
        Item::McpServer(s) => s.spec.dev.as_ref(),
        Item::LspServer(s) => s.spec.dev.as_ref(),
    };
    if let Some(dev) = dev {
        describe_dev(&mut out, dev, status.dev.as_ref(), &field);
    }

    if status.conditions.is_empty() {
        field(&mut out, 0, "Conditions", none);
    } else {
        out.push_str("Conditions:\n");
        let rows: Vec<Vec<String>> = status
            .conditions
            .iter()
            .map(|c| {
                vec![
                    c.type_.clone(),
                    format!("{:?}", c.status),
                    c.reason.clone().unwrap_or_else(|| "-".to_owned()),
                    c.last_transition_time.clone(),
                    c.message
                        .as_deref()
                        .and_then(|m| m.lines().next())
                        .unwrap_or("-")
                        .to_owned(),
                ]
            })
            .collect();
        let header = ["TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"]
            .map(str::to_owned)
            .to_vec();
        indented_table(&mut out, header, &rows);
    }

    match stderr {
        StderrView::Lines(chunk) if !chunk.lines.is_empty() => {
            out.push_str(&format!("Last Stderr Lines (pid {}):\n", chunk.pid));
            for line in &chunk.lines {
                out.push_str(format!("  {line}").trim_end());
                out.push('\n');
            }
        }
        StderrView::Lines(chunk) => field(
            &mut out,
            0,
            "Last Stderr Lines",
            &format!("{none} (pid {} wrote nothing)", chunk.pid),
        ),
        StderrView::Note(note) => field(
            &mut out,
            0,
            "Last Stderr Lines",
            &format!("{none} ({note})"),
        ),
    }

    match events {
        Some(events) if !events.is_empty() => {
            out.push_str("Events:\n");
            let rows: Vec<Vec<String>> = events
                .iter()
                .map(|e| {
                    vec![
                        last_seen(e, now),
                        e.type_.as_str().to_owned(),
                        e.reason.clone(),
                        e.message.clone(),
                    ]
                })
                .collect();
            let header = ["LAST SEEN", "TYPE", "REASON", "MESSAGE"]
                .map(str::to_owned)
                .to_vec();
            indented_table(&mut out, header, &rows);
        }
        Some(_) => field(&mut out, 0, "Events", none),
        None => field(
            &mut out,
            0,
            "Events",
            &format!("{none} (no controller is running)"),
        ),
    }
    Ok(out)
}

fn indented_table(out: &mut String, header: Vec<String>, rows: &[Vec<String>]) {
    let mut table = Table::new(header);
    table.fit(rows);
    out.push_str("  ");
    out.push_str(&table.header_line());
    for r in rows {
        out.push_str("  ");
        out.push_str(&table.line(r));
    }
}

/// One `warning: …` line per problem of every `Invalid` source (shown on
/// stderr after the table, where the sources are not listed).
pub fn source_warnings(status: &WorkspaceStatus) -> Vec<String> {
    status
        .sources
        .iter()
        .filter(|s| s.state == SourceState::Invalid)
        .flat_map(|s| {
            let text = s
                .error
                .clone()
                .unwrap_or_else(|| format!("{}: invalid", s.path));
            text.lines()
                .map(|l| format!("warning: {l}"))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Now" of the snapshots below.
    fn now() -> SystemTime {
        humantime::parse_rfc3339("2025-06-01T12:00:00Z").unwrap()
    }

    fn event(
        reason: &str,
        type_: crate::observe::events::EventType,
        count: u32,
        first: &str,
        last: &str,
        message: &str,
    ) -> Event {
        Event {
            type_,
            reason: reason.to_owned(),
            involved_object: crate::observe::events::ObjectRef {
                kind: "McpServer".to_owned(),
                name: "github".to_owned(),
            },
            message: message.to_owned(),
            count,
            first_timestamp: first.to_owned(),
            last_timestamp: last.to_owned(),
            resource_version: 1,
        }
    }

    fn events() -> Vec<Event> {
        use crate::observe::events::EventType::{Normal, Warning};
        vec![
            event(
                "Starting",
                Normal,
                3,
                "2025-06-01T11:50:00Z",
                "2025-06-01T11:58:00Z",
                "starting the server",
            ),
            event(
                "CrashLoopBackOff",
                Warning,
                2,
                "2025-06-01T11:52:00Z",
                "2025-06-01T11:57:30Z",
                "the server exited (exit code 1)",
            ),
            event(
                "Started",
                Normal,
                1,
                "2025-06-01T11:58:01Z",
                "2025-06-01T11:58:01Z",
                "ready (pid 4321, 2 tools)",
            ),
        ]
    }

    #[test]
    fn events_table_snapshot() {
        insta::assert_snapshot!(
            "events_table",
            format!(
                "{}--- wide\n{}",
                render_events(&events(), false, now()),
                render_events(&events(), true, now())
            )
        );
    }

    #[test]
    fn describe_snapshot() {
        let item: Item = serde_json::from_value(serde_json::json!({
            "kind": "McpServer",
            "apiVersion": "steward.dev/v1alpha1",
            "metadata": {"name": "github", "source": "ProjectMcpJson", "generation": 2},
            "spec": {
                "transport": "stdio", "scope": "project", "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
                "configHash": "c0ffee", "approvalHash": "a11ce"
            },
            "status": {
                "phase": "Ready", "reason": null, "message": null, "pid": 4321, "restarts": 2,
                "observedGeneration": 2, "observedHash": "c0ffee",
                "tools": ["create_issue", "search_code"], "prompts": [],
                "nextRetryAt": null, "startedAt": "2025-06-01T11:58:01Z",
                "conditions": [
                    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": null,
                     "lastTransitionTime": "2025-06-01T11:50:00Z"},
                    {"type": "Ready", "status": "True", "reason": "Ready", "message": null,
                     "lastTransitionTime": "2025-06-01T11:58:01Z"}
                ]
            }
        }))
        .unwrap();
        let stderr = StderrView::Lines(LogChunk {
            pid: 4321,
            started_at: "2025-06-01T11:58:00Z".to_owned(),
            lines: vec!["GitHub MCP Server running on stdio".to_owned()],
            dropped: 0,
            last_seq: 7,
        });
        let text = render_describe(&item, Some(&events()), &stderr, now()).unwrap();
        let offline = render_describe(
            &item,
            None,
            &StderrView::Note("no controller is running".to_owned()),
            now(),
        )
        .unwrap();
        let tail = offline.split_once("Last Stderr").map_or("", |(_, t)| t);
        insta::assert_snapshot!(
            "describe",
            format!("{text}--- offline tail\nLast Stderr{tail}")
        );
    }

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (12 * 86_400, "12d"),
            (800 * 86_400, "2y70d"),
        ];
        for (secs, want) in cases {
            assert_eq!(age(Duration::from_secs(secs)), want, "{secs}s");
        }
    }
}
