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
    /// One WorkspaceStatus object, pretty-printed
    Json,
    /// The same object in YAML
    Yaml,
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
        Format::Table => render_table(status, now),
    })
}

/// The kubectl-style table, one row per item (empty string when none).
pub fn render_table(status: &WorkspaceStatus, now: SystemTime) -> String {
    let header = [
        "KIND", "NAME", "SOURCE", "PHASE", "REASON", "PID", "RESTARTS", "AGE",
    ];
    let rows: Vec<[String; 8]> = status.items.iter().map(|item| row(item, now)).collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count() + 3;
                text.push_str(cell);
                text.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header);
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        line(&cells);
    }
    out
}

fn row(item: &Item, now: SystemTime) -> [String; 8] {
    let meta = item.metadata();
    let status = item.status();
    let dash = || "-".to_owned();
    [
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
    ]
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
