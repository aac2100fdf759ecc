//! Which registries to ask: `--registry URL` (repeatable) when given, else
//! `steward.registries` from the settings layers the workspace does not
//! control (system defaults < user < system settings; a later layer's list
//! replaces an earlier one's), else the official MCP Registry.

use std::path::{Path, PathBuf};

use serde_json::Value;
use steward_schema::load::FileText;
use steward_schema::registry::server::OFFICIAL_REGISTRY;

use super::RegistryError;
use crate::desired::sources::read_file;
use crate::support::paths::Paths;

/// The registries to ask, in order, and where the list came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registries {
    pub urls: Vec<String>,
    /// `--registry`, the settings file it came from, or `default`.
    pub from: String,
}

/// A base URL as compared and shown: no trailing slash.
pub fn normalize(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

/// The list in force for `paths`, `flags` being `--registry` values.
pub fn registries(paths: &Paths, flags: &[String]) -> Result<Registries, RegistryError> {
    if !flags.is_empty() {
        let urls = flags
            .iter()
            .map(|u| check(u, Path::new("--registry")))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Registries {
            urls,
            from: "--registry".to_owned(),
        });
    }
    let mut found: Option<(Vec<String>, PathBuf)> = None;
    for file in [
        &paths.system_defaults,
        &paths.user_settings,
        &paths.system_settings,
    ] {
        if let Some(list) = layer(file)? {
            found = Some((list, file.clone()));
        }
    }
    match found {
        Some((urls, file)) if !urls.is_empty() => Ok(Registries {
            urls,
            from: file.display().to_string(),
        }),
        Some((_, file)) => Err(RegistryError::Settings {
            path: file,
            why: "steward.registries is empty: list at least one registry, or remove the key for the official one".to_owned(),
        }),
        None => Ok(Registries {
            urls: vec![OFFICIAL_REGISTRY.to_owned()],
            from: "default".to_owned(),
        }),
    }
}

/// `steward.registries` of one settings file, if it sets it.
fn layer(path: &Path) -> Result<Option<Vec<String>>, RegistryError> {
    let bad = |why: String| RegistryError::Settings {
        path: path.to_path_buf(),
        why,
    };
    let text = match read_file(path) {
        FileText::Text(text) => text,
        FileText::Absent => return Ok(None),
        FileText::Unreadable(why) => return Err(bad(why)),
        FileText::NotUtf8(_) => return Err(bad("it is not UTF-8 text".to_owned())),
    };
    let doc = steward_schema::jsonc::parse(&text).map_err(|e| bad(e.to_string()))?;
    let Some(value) = doc.value.pointer("/steward/registries") else {
        return Ok(None);
    };
    let Value::Array(items) = value else {
        return Err(bad("steward.registries must be a list of URLs".to_owned()));
    };
    items
        .iter()
        .map(|item| match item {
            Value::String(url) => check(url, path),
            other => Err(bad(format!(
                "steward.registries holds {other}, which is not a URL string"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn check(url: &str, from: &Path) -> Result<String, RegistryError> {
    match url::Url::parse(url.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(normalize(url)),
        _ => Err(RegistryError::Settings {
            path: from.to_path_buf(),
            why: format!("{url:?} is not an http(s) URL of a registry"),
        }),
    }
}
