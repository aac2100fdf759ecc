//! `steward completions SHELL` and `steward man`: shell completion scripts
//! (`clap_complete`) and man pages (`clap_mangen`), generated from the clap
//! definitions the parser itself uses ([`version::command`]) — never
//! written by hand. The Debian package ships both, made by the binary it
//! packages (`controller/assets/build-deb`); after `cargo install`, these
//! two commands install them.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap_mangen::Man;

use super::install_args::{CompletionsArgs, ManArgs};
use super::{CommandError, Io, version};

/// `steward completions SHELL`.
pub fn completions(args: &CompletionsArgs, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let mut cmd = version::command();
    clap_complete::generate(args.shell, &mut cmd, "steward", io.out);
    io.out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `steward man [--out DIR]`.
pub fn man(args: &ManArgs, io: &mut Io<'_>) -> Result<ExitCode, CommandError> {
    let Some(dir) = &args.out else {
        page(version::command()).render(io.out)?;
        return Ok(ExitCode::SUCCESS);
    };
    for path in write_pages(dir)? {
        writeln!(io.out, "{}", path.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Write steward.1 and a page per visible command, recursively, to `dir`;
/// the paths written.
pub fn write_pages(dir: &Path) -> Result<Vec<PathBuf>, CommandError> {
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source: io::Error| CommandError::WriteFile { path, source }
    };
    std::fs::create_dir_all(dir).map_err(failed(dir))?;
    let mut root = version::command().disable_help_subcommand(true);
    root.build();
    let mut written = Vec::new();
    let mut pending = vec![root];
    while let Some(cmd) = pending.pop() {
        pending.extend(cmd.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
        let man = page(cmd);
        let path = dir.join(man.get_filename());
        let mut text = Vec::new();
        man.render(&mut text)?;
        std::fs::write(&path, text).map_err(failed(&path))?;
        written.push(path);
    }
    written.sort();
    Ok(written)
}

/// The page of `cmd`: section 1 of the Steward manual, its source the
/// version of this build (no date, so the same build makes the same pages).
fn page(cmd: clap::Command) -> Man {
    Man::new(cmd)
        .source(format!("steward {}", version::short()))
        .manual("Steward Manual")
}
