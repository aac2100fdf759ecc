//! The command-line definitions of the commands that install Steward and
//! check it: `doctor`, `completions`, `man`, and `schema` (with
//! `--editor`). Parsing only, like [`crate::cli::args`], which uses them;
//! kept apart so that the commands' files need not import the whole
//! command line.

use std::path::PathBuf;

use clap::Args;
use clap::builder::PossibleValuesParser;
use steward_schema::schemas;

use crate::cli::output::Format;

/// `steward schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which schema (default: all)
    #[arg(value_name = "NAME", value_parser = schema_names(), conflicts_with = "editor")]
    pub name: Option<String>,

    /// Write the schema files to DIR (created if needed) instead of stdout
    #[arg(long, value_name = "DIR", conflicts_with = "editor")]
    pub out: Option<PathBuf>,

    /// Print the EDITOR settings that associate every source file with its
    /// schema (written under HOME_DIR/steward/schemas/)
    #[arg(long, value_enum, value_name = "EDITOR")]
    pub editor: Option<Editor>,

    /// With --editor: merge the settings into the workspace's
    /// .vscode/settings.json, keeping its comments and other settings
    #[arg(long, requires = "editor")]
    pub write: bool,
}

/// The editors `--editor` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Editor {
    /// VS Code's `json.schemas`, which every editor embedding its JSON
    /// language service reads too (Zed, Neovim with vscode-json-languageserver)
    Vscode,
}

fn schema_names() -> PossibleValuesParser {
    let mut names: Vec<&'static str> = schemas::NAMES.iter().map(|(name, _)| *name).collect();
    names.push("all");
    PossibleValuesParser::new(names)
}

/// `steward completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to print the completion script of
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `steward man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write steward.1 and one page per command (steward-status.1, …) to DIR
    /// (created if needed) instead of printing steward(1)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub const COMPLETIONS_ABOUT: &str = "\
Print the completion script of SHELL on stdout, generated from steward's own command line. The \
Debian package installs the bash, zsh and fish ones; after `cargo install`, install one yourself.

Examples:
  steward completions bash > ~/.local/share/bash-completion/completions/steward
  steward completions zsh > ~/.zfunc/_steward        # with fpath+=(~/.zfunc) before compinit
  steward completions fish > ~/.config/fish/completions/steward.fish";

pub const MAN_ABOUT: &str = "\
Print the man page steward(1) as roff, or with --out write it and one page per command \
(steward-run(1), steward-status(1), steward-lsp-hover(1), …), generated from steward's own command \
line. The Debian package installs them; after `cargo install`, write them where man looks.

Examples:
  steward man --out ~/.local/share/man/man1 && man steward-doctor
  steward man | man -l -";

/// `steward doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Output format (json and yaml: one DoctorReport object)
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

pub const DOCTOR_ABOUT: &str = "\
Check what Steward needs, one line each: this binary and its version (and whether `steward` on \
PATH is it), HOME_DIR and whether it is writable, every source file of the workspace and whether \
it is valid, the controller (running? its pid and socket), the kernel's sandbox support (Landlock \
ABI), each configured server's command (found on PATH?), and each agent — claude, qwen, gemini, \
codex — found on PATH and whether `steward mcp` is registered with it (read from its \
configuration files, never written).

Each check is ok, info, warning or error; a warning or an error says what to do. Exits 1 when \
there is an error (something needs you), else 0.

Examples:
  steward doctor
  steward doctor -o json | jq '.checks[] | select(.status == \"error\")'";
