//! Adding servers from an MCP Registry (product.md §16): an input step
//! *before* `desired/`. It asks registries ([`client`], cached under
//! `HOME_DIR/steward/cache/registry/` by [`cache`], over [`http`]), learns
//! what the chosen artefact is from its own package registry
//! ([`packages`]), and *writes sources* — one `mcpServers` entry and the
//! lock file beside it ([`write`]). It never touches what runs: the
//! controller sees the edit like any other.
//!
//! What an entry says is decided purely by `steward_schema::registry`;
//! the commands (`cli/search.rs`, `cli/add.rs`, `cli/update.rs`) ask the
//! user and print.

pub mod cache;
pub mod client;
pub mod config;
pub mod http;
pub mod packages;
pub mod write;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use steward_schema::registry::entry::{Choice, package_label};
use steward_schema::registry::server::ServerDetail;

use self::http::HttpError;
use self::packages::ResolveError;
use self::write::WriteError;

/// Why a registry command failed. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("read steward.registries from {}: {why}", path.display())]
    Settings { path: PathBuf, why: String },
    #[error("{what}: no registry answered and nothing is cached:\n  {}", failures.join("\n  "))]
    Unreachable { what: String, failures: Vec<String> },
    #[error("find {what} in {registries}: no such server (try `steward search`)")]
    NotFound { what: String, registries: String },
    #[error(
        "add {what}: the registry {registry} marks it deleted{}; it is refused",
        if message.is_empty() { String::new() } else { format!(" ({message})") }
    )]
    Deleted {
        what: String,
        registry: String,
        message: String,
    },
    #[error("choose how to run {server}: {why}")]
    Choice { server: String, why: String },
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// What `--package` / `--remote` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// The first package that can run here, else the first remote.
    Auto,
    /// `--package N|TYPE`.
    Package(String),
    /// `--remote N|TYPE`.
    Remote(String),
}

/// The program that runs packages of `registry_type`, if any.
pub fn runner(registry_type: &str) -> Option<&'static str> {
    match registry_type {
        "npm" => Some("npx"),
        "pypi" => Some("uvx"),
        "nuget" => Some("dnx"),
        "oci" => Some("docker"),
        _ => None,
    }
}

/// Whether `program` is found on `path` (the command line's PATH).
pub fn on_path(program: &str, path: &OsStr) -> bool {
    crate::runtime::process::resolve_command(program, Path::new("/"), path).is_ok()
}

/// The way of running `detail` that `pick` names: a 1-based index or a
/// type. `Auto` picks the first package whose runner is on the PATH
/// (`available`), never OCI (it must be asked for: Docker runs outside the
/// sandbox), else the first remote.
pub fn choose(
    detail: &ServerDetail,
    pick: &Pick,
    available: &dyn Fn(&str) -> bool,
) -> Result<Choice, RegistryError> {
    let err = |why: String| RegistryError::Choice {
        server: detail.name.clone(),
        why,
    };
    let packages: Vec<String> = detail
        .packages
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}: {}", i + 1, package_label(p)))
        .collect();
    let remotes: Vec<String> = detail
        .remotes
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{}: {} {}", i + 1, r.kind, r.url.as_deref().unwrap_or("")))
        .collect();
    let listing = || {
        format!(
            "packages [{}], remotes [{}]",
            packages.join("; "),
            remotes.join("; ")
        )
    };
    let by = |sel: &str, count: usize, kind_of: &dyn Fn(usize) -> String| -> Option<usize> {
        match sel.parse::<usize>() {
            Ok(n) if n >= 1 && n <= count => Some(n - 1),
            Ok(_) => None,
            Err(_) => (0..count).find(|i| kind_of(*i).eq_ignore_ascii_case(sel)),
        }
    };
    match pick {
        Pick::Package(sel) => by(sel, detail.packages.len(), &|i| {
            detail.packages[i].registry_type.clone()
        })
        .map(Choice::Package)
        .ok_or_else(|| err(format!("it has no package {sel:?} ({})", listing()))),
        Pick::Remote(sel) => by(sel, detail.remotes.len(), &|i| {
            detail.remotes[i].kind.clone()
        })
        .map(Choice::Remote)
        .ok_or_else(|| err(format!("it has no remote {sel:?} ({})", listing()))),
        Pick::Auto => {
            let runnable = detail
                .packages
                .iter()
                .position(|p| match p.registry_type.as_str() {
                    "oci" => false,
                    "mcpb" => true,
                    t => runner(t).is_some_and(available),
                });
            if let Some(i) = runnable {
                return Ok(Choice::Package(i));
            }
            if !detail.remotes.is_empty() {
                return Ok(Choice::Remote(0));
            }
            let missing: Vec<String> = detail
                .packages
                .iter()
                .filter_map(|p| {
                    let r = runner(&p.registry_type)?;
                    (p.registry_type != "oci").then(|| format!("{r} (for {})", p.registry_type))
                })
                .collect();
            let why = if detail.packages.is_empty() {
                "it lists no package and no remote".to_owned()
            } else if detail.packages.iter().any(|p| p.registry_type == "oci") && missing.is_empty()
            {
                "its only package is an OCI image; ask for it with --package oci (Docker runs outside Steward's sandbox)".to_owned()
            } else {
                format!(
                    "none of its packages can run here: install {} or choose one with --package ({})",
                    if missing.is_empty() {
                        "its runner".to_owned()
                    } else {
                        missing.join(" or ")
                    },
                    listing()
                )
            };
            Err(err(why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detail() -> ServerDetail {
        serde_json::from_value(json!({"name": "a/b", "version": "1", "packages": [
            {"registryType": "oci", "identifier": "x/y:1"},
            {"registryType": "pypi", "identifier": "y", "version": "1"},
            {"registryType": "npm", "identifier": "z", "version": "1"}
        ], "remotes": [{"type": "sse", "url": "https://x/sse"}]}))
        .unwrap()
    }

    #[test]
    fn the_first_runnable_package_wins_and_oci_only_when_asked() {
        let d = detail();
        let only_npx = |p: &str| p == "npx";
        assert_eq!(
            choose(&d, &Pick::Auto, &only_npx).unwrap(),
            Choice::Package(2)
        );
        assert_eq!(
            choose(&d, &Pick::Auto, &|_| true).unwrap(),
            Choice::Package(1)
        );
        assert_eq!(
            choose(&d, &Pick::Auto, &|_| false).unwrap(),
            Choice::Remote(0)
        );
        assert_eq!(
            choose(&d, &Pick::Package("oci".into()), &|_| false).unwrap(),
            Choice::Package(0)
        );
        assert_eq!(
            choose(&d, &Pick::Package("2".into()), &|_| false).unwrap(),
            Choice::Package(1)
        );
        assert_eq!(
            choose(&d, &Pick::Remote("sse".into()), &|_| false).unwrap(),
            Choice::Remote(0)
        );
        let err = choose(&d, &Pick::Package("9".into()), &|_| true).unwrap_err();
        assert!(err.to_string().contains("1: oci x/y:1"), "{err}");
        let mut no_remote = d.clone();
        no_remote.remotes.clear();
        let err = choose(&no_remote, &Pick::Auto, &|_| false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("uvx (for pypi)") && err.contains("npx (for npm)"),
            "{err}"
        );
    }
}

/// What a command's output should say besides its answer (answers from the
/// cache and why, fallbacks): each text once, in order.
#[derive(Debug, Default)]
pub struct Notes(std::cell::RefCell<Vec<String>>);

impl Notes {
    /// Adds `text` unless it was said already.
    pub fn add(&self, text: String) {
        let mut notes = self.0.borrow_mut();
        if !notes.contains(&text) {
            notes.push(text);
        }
    }

    /// The notes so far, emptying the list.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}
