//! Rendering a `WorkspaceStatus` for people and programs: pretty JSON, YAML
//! (the same object), or a kubectl-style table. Pure: the caller decides
//! where the text goes.

use std::time::{Duration, SystemTime};

use steward_schema::resource::{Item, SourceState, WorkspaceStatus};

/// `-o` of `steward status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// kubectl-style columns: KIND NAME SOURCE PHASE REASON PID RESTARTS AGE
    #[default]
    Table,
    /// The table with a MESSAGE column (the first line of status.message)
    Wide,
    /// One WorkspaceStatus object, pretty-printed
    Json,
    /// The same object in YAML
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
    let mut out = table.line(&table.header.clone());
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

/// Widths of the status table columns that can hold only a known set of
/// values (the widest value each): a `--watch` table starts at these, so
/// rows printed later (a `Starting` becoming `CrashLoopBackOff`) stay under
/// the header printed first.
const WATCH_MIN_WIDTHS: [(&str, usize); 6] = [
    ("KIND", "LspServer".len()),
    ("SOURCE", "WorkspaceSettings".len()),
    ("PHASE", "Starting".len()),
    ("REASON", "MaxRestartsExceeded".len()),
    // pid_max on Linux is at most 4194304.
    ("PID", 7),
    ("AGE", "10h59m".len()),
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

    /// The status table for `--watch`: the enum columns start at their
    /// widest value (see [`WATCH_MIN_WIDTHS`]).
    pub fn for_watch(wide: bool) -> Self {
        let mut table = Table::new(header(wide));
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
