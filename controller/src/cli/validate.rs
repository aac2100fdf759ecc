//! `steward validate`: strict validation (the rules a hot reload applies) of
//! every source of the workspace, or of the files named on the command line
//! (their format chosen from the file name). Problems go to stdout, one
//! `path:line:col: message (at /pointer)` per line — warnings (what Qwen Code
//! tolerates) as `path:line:col: warning: message` — and the summary to
//! stderr. Exit 1 on errors; warnings alone exit 0.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use steward_schema::Diagnostic;
use steward_schema::load::{self, FileText, LoadMode, ParsedSource};
use steward_schema::resource::{SourceKind, SourceState};

use super::{CommandError, Io};
use crate::desired::offline::Inputs;
use crate::desired::sources;
use crate::support::paths::Paths;

/// The file names `validate FILE` understands.
pub const ACCEPTED_NAMES: &str = "settings.json, .mcp.json, mcp.json, *.mcp.json, .lsp.json, *.lsp.json, trustedFolders.json, mcpApprovals.json, qwen-extension.json";

/// A source format, as told by a file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Settings,
    McpJson,
    LspJson,
    TrustedFolders,
    Approvals,
    Extension,
}

/// The format of the file at `path`, from its name alone.
pub fn format_of(path: &Path) -> Option<FileFormat> {
    let name = path.file_name()?.to_str()?;
    Some(match name {
        "settings.json" => FileFormat::Settings,
        "trustedFolders.json" => FileFormat::TrustedFolders,
        "mcpApprovals.json" => FileFormat::Approvals,
        "qwen-extension.json" => FileFormat::Extension,
        "mcp.json" => FileFormat::McpJson,
        n if n.ends_with(".mcp.json") => FileFormat::McpJson,
        n if n.ends_with(".lsp.json") => FileFormat::LspJson,
        _ => return None,
    })
}

pub fn run(
    paths: &Paths,
    inputs: &Inputs,
    files: &[PathBuf],
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let cx = sources::context(paths, env, LoadMode::Strict);
    // What only the sources together can tell (a profile no settings
    // define, a literal credential under requireReferences): the entries
    // the merged desired state refuses, beyond what each source says.
    let mut across: Vec<String> = Vec::new();
    let checked: Vec<ParsedSource> = if files.is_empty() {
        let set = sources::load_all(paths, &inputs.mcp_config, &cx);
        let cli = steward_schema::desired::CliOptions {
            home: paths.user_home.clone(),
            ..inputs.cli.clone()
        };
        let state = steward_schema::desired::desired_state(
            &set,
            &paths.workspace,
            &cli,
            &sources::resolve_existing,
        );
        let said: BTreeSet<String> = set
            .iter()
            .flat_map(|s| s.diagnostics.iter().chain(&s.warnings))
            .map(ToString::to_string)
            .collect();
        across = state
            .invalid_mcp
            .values()
            .chain(state.invalid_lsp.values())
            .flat_map(|e| e.message.lines().map(str::to_owned).collect::<Vec<_>>())
            .filter(|line| !said.contains(line))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        // The workspace settings file is the user settings file when the
        // workspace is the home directory: check it once.
        let mut seen = BTreeSet::new();
        set.iter()
            .filter(|s| seen.insert(s.path.clone()))
            .cloned()
            .collect()
    } else {
        let mut formats = Vec::with_capacity(files.len());
        for file in files {
            let Some(format) = format_of(file) else {
                return Err(CommandError::Usage {
                    subcommand: "validate",
                    message: format!(
                        "cannot tell the format of {} from its name; the accepted names are: {ACCEPTED_NAMES}",
                        file.display()
                    ),
                });
            };
            formats.push(format);
        }
        files
            .iter()
            .zip(formats)
            .map(|(file, format)| load_file(file, format, paths, &cx))
            .collect()
    };

    let mut problems = 0usize;
    let mut warnings = 0usize;
    let mut bad_sources = 0usize;
    for source in &checked {
        if source.state == SourceState::Invalid {
            bad_sources += 1;
        }
        // Errors and warnings in file order.
        let mut lines: Vec<(&Diagnostic, bool)> = source
            .diagnostics
            .iter()
            .map(|d| (d, false))
            .chain(source.warnings.iter().map(|d| (d, true)))
            .collect();
        lines.sort_by_key(|(d, _)| (d.line.is_none(), d.line, d.column));
        for (d, warning) in lines {
            if warning {
                warnings += 1;
                let shown = Diagnostic {
                    message: format!("warning: {}", d.message),
                    ..d.clone()
                };
                writeln!(io.out, "{shown}")?;
            } else {
                problems += 1;
                writeln!(io.out, "{d}")?;
            }
        }
    }
    let files_across: BTreeSet<&str> = across.iter().filter_map(|l| l.split(':').next()).collect();
    bad_sources += files_across.len();
    for line in &across {
        problems += 1;
        writeln!(io.out, "{line}")?;
    }
    let noun = if files.is_empty() { "source" } else { "file" };
    let warned = if warnings > 0 {
        format!(", {warnings} warning{}", plural(warnings))
    } else {
        String::new()
    };
    if problems > 0 {
        writeln!(
            io.err,
            "{problems} problem{} in {bad_sources} of {} {noun}{}{warned}",
            plural(problems),
            checked.len(),
            plural(checked.len())
        )?;
        return Ok(ExitCode::from(1));
    }
    let absent = checked
        .iter()
        .filter(|s| s.state == SourceState::Absent)
        .count();
    write!(
        io.err,
        "ok: {} {noun}{} checked",
        checked.len(),
        plural(checked.len())
    )?;
    if files.is_empty() {
        write!(io.err, ", {absent} absent")?;
    }
    writeln!(io.err, "{warned}")?;
    Ok(ExitCode::SUCCESS)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Load one named file strictly. A file that does not exist is a problem here
/// (the user named it), not an empty source.
fn load_file(
    file: &Path,
    format: FileFormat,
    paths: &Paths,
    cx: &load::LoadContext<'_>,
) -> ParsedSource {
    let text = match sources::read_file(file) {
        FileText::Absent => {
            let kind = match format {
                FileFormat::Settings => SourceKind::UserSettings,
                FileFormat::McpJson => SourceKind::ProjectMcpJson,
                FileFormat::LspJson => SourceKind::LspJson,
                FileFormat::TrustedFolders => SourceKind::TrustedFolders,
                FileFormat::Approvals => SourceKind::Approvals,
                FileFormat::Extension => SourceKind::Extension,
            };
            return ParsedSource::invalid(
                kind,
                file,
                vec![Diagnostic::new(file, None, "", "the file does not exist")],
            );
        }
        text => text,
    };
    match format {
        FileFormat::Settings => load::load_settings(settings_kind(file, paths), file, &text, cx),
        FileFormat::McpJson => load::load_mcp_json(file, &text, cx),
        FileFormat::LspJson => load::load_lsp_json(file, &text, cx),
        FileFormat::TrustedFolders => load::load_trusted_folders(file, &text, cx),
        FileFormat::Approvals => load::load_approvals(file, &text, cx),
        FileFormat::Extension => {
            let dir = match file.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let dir = std::path::absolute(&dir).unwrap_or(dir);
            let read = |p: &Path| sources::read_file(p);
            load::load_extension(&dir, &text, &read, cx)
        }
    }
}

/// Which settings layer `file` is, when it is one of the workspace's (user
/// settings otherwise: the rules are the same for every layer).
fn settings_kind(file: &Path, paths: &Paths) -> SourceKind {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let Some(file) = canonical(file) else {
        return SourceKind::UserSettings;
    };
    [
        (&paths.workspace_settings, SourceKind::WorkspaceSettings),
        (&paths.system_defaults, SourceKind::SystemDefaults),
        (&paths.system_settings, SourceKind::SystemSettings),
    ]
    .into_iter()
    .find(|(p, _)| canonical(p).as_ref() == Some(&file))
    .map_or(SourceKind::UserSettings, |(_, kind)| kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_from_file_name() {
        let f = |s: &str| format_of(Path::new(s));
        assert_eq!(f("/x/.qwen/settings.json"), Some(FileFormat::Settings));
        assert_eq!(f(".mcp.json"), Some(FileFormat::McpJson));
        assert_eq!(f("mcp.json"), Some(FileFormat::McpJson));
        assert_eq!(f("extra.mcp.json"), Some(FileFormat::McpJson));
        assert_eq!(f(".lsp.json"), Some(FileFormat::LspJson));
        assert_eq!(f("go.lsp.json"), Some(FileFormat::LspJson));
        assert_eq!(f("trustedFolders.json"), Some(FileFormat::TrustedFolders));
        assert_eq!(f("mcpApprovals.json"), Some(FileFormat::Approvals));
        assert_eq!(f("ext/qwen-extension.json"), Some(FileFormat::Extension));
        assert_eq!(f("package.json"), None);
        assert_eq!(f("lsp.json"), None);
    }
}
