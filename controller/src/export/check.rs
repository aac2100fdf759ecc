//! Checking a multi-document manifest against CustomResourceDefinitions the
//! way the API server would with kubectl's strict field validation: each
//! document's `apiVersion`/`kind` picks a CRD version, whose
//! `openAPIV3Schema` is applied as JSON Schema (types, enums, required
//! fields, patterns, bounds), with unknown fields refused where the schema
//! does not preserve them, list-map keys unique, and `metadata.name` a DNS
//! subdomain. The CRDs' CEL rules (`x-kubernetes-validations`) are not
//! evaluated. Core `v1` Secrets and ConfigMaps get the checks of their
//! metadata; a kind no CRD defines is reported as not checked.
//!
//! The CRDs are ToolHive [`TOOLHIVE_VERSION`]'s, built into the binary
//! ([`Crds::embedded`]), or any directory of CRD files ([`Crds::load`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// Why the CRDs or the manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parse {path} as YAML: {source}")]
    Yaml {
        path: PathBuf,
        source: yaml_serde::Error,
    },
    #[error("compile the schema of {kind} {version} from {path}: {message}")]
    Schema {
        kind: String,
        version: String,
        path: PathBuf,
        message: String,
    },
    #[error("find a CustomResourceDefinition in {0}")]
    NoCrds(PathBuf),
}

/// The structural schemas of every served version of some CRDs.
pub struct Crds {
    /// By (group, version, kind).
    schemas: BTreeMap<(String, String, String), jsonschema::Validator>,
    /// By (group, version, kind): the list-map keys at each schema location.
    list_maps: BTreeMap<(String, String, String), Value>,
}

impl std::fmt::Debug for Crds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crds")
            .field("kinds", &self.schemas.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One problem, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based, in file order (empty documents not counted).
    pub document: usize,
    /// `Kind/name` as far as known.
    pub object: String,
    /// A JSON path (`.spec.env[0].name`), `.` for the document.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "document {} ({}): {}: {}",
            self.document, self.object, self.path, self.message
        )
    }
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub documents: usize,
    pub problems: Vec<Problem>,
    /// Documents of a kind no CRD defines (`document N (Kind/name)`).
    pub unchecked: Vec<String>,
}

fn documents(text: &str, path: &Path) -> Result<Vec<Value>, CheckError> {
    let mut out = Vec::new();
    for doc in yaml_serde::Deserializer::from_str(text) {
        let value = Value::deserialize(doc).map_err(|source| CheckError::Yaml {
            path: path.to_owned(),
            source,
        })?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// `schema` as the API server applies it: `nullable` admits null,
/// int-or-string admits both, and an object that lists its properties
/// (and does not preserve unknown fields) admits no other.
fn structural(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        map.remove("type");
    }
    if map.get("nullable") == Some(&Value::Bool(true))
        && let Some(Value::String(t)) = map.get("type").cloned()
    {
        map.insert("type".to_owned(), serde_json::json!([t, "null"]));
    }
    if map.contains_key("properties")
        && !map.contains_key("additionalProperties")
        && map.get("x-kubernetes-preserve-unknown-fields") != Some(&Value::Bool(true))
    {
        map.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(props)) = map.get_mut(key) {
            props.values_mut().for_each(structural);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(v) = map.get_mut(key) {
            structural(v);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(vs)) = map.get_mut(key) {
            vs.iter_mut().for_each(structural);
        }
    }
}

/// The ToolHive release whose CRDs `steward` carries.
pub const TOOLHIVE_VERSION: &str = "v0.44.0";

/// ToolHive's CRDs as `steward` carries them: copies of the release's
/// `deploy/charts/operator-crds/files/crds/` (provenance and licence in
/// `controller/assets/toolhive/README.md`).
const EMBEDDED: [(&str, &str); 7] = [
    (
        "MCPExternalAuthConfig.yaml",
        include_str!("../../assets/toolhive/v0.44.0/crds/MCPExternalAuthConfig.yaml"),
    ),
    (
        "MCPGroup.yaml",
        include_str!("../../assets/toolhive/v0.44.0/crds/MCPGroup.yaml"),
    ),
    (
        "MCPRemoteProxy.yaml",
        include_str!("../../assets/toolhive/v0.44.0/crds/MCPRemoteProxy.yaml"),
    ),
    (
        "MCPServer.yaml",
        include_str!("../../assets/toolhive/v0.44.0/crds/MCPServer.yaml"),
    ),
    (
        "MCPServerEntry.yaml",
        include_str!("../../assets/toolhive/v0.44.0/crds/MCPServerEntry.yaml"),
    ),
    (
        "MCPToolConfig.yaml",
        include_str!("../../assets/toolhive/v0.44.0/crds/MCPToolConfig.yaml"),
    ),
    (
        "VirtualMCPServer.yaml",
        include_str!("../../assets/toolhive/v0.44.0/crds/VirtualMCPServer.yaml"),
    ),
];

impl Crds {
    /// The CRDs of ToolHive [`TOOLHIVE_VERSION`], built into `steward`.
    pub fn embedded() -> Result<Crds, CheckError> {
        let origin = PathBuf::from(format!("(built-in ToolHive {TOOLHIVE_VERSION} CRDs)"));
        Crds::from_files(
            EMBEDDED
                .iter()
                .map(|(name, text)| (origin.join(name), (*text).to_owned())),
            &origin,
        )
    }

    /// Every CRD in the `*.yaml` / `*.yml` files of `dir`.
    pub fn load(dir: &Path) -> Result<Crds, CheckError> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|source| CheckError::Read {
                path: dir.to_owned(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        paths.sort();
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let text = std::fs::read_to_string(&path).map_err(|source| CheckError::Read {
                path: path.clone(),
                source,
            })?;
            files.push((path, text));
        }
        Crds::from_files(files, dir)
    }

    /// Every CRD in `files` (path, text); `origin` names them all in errors.
    fn from_files(
        files: impl IntoIterator<Item = (PathBuf, String)>,
        origin: &Path,
    ) -> Result<Crds, CheckError> {
        let mut crds = Crds {
            schemas: BTreeMap::new(),
            list_maps: BTreeMap::new(),
        };
        for (path, text) in files {
            for doc in documents(&text, &path)? {
                if doc["kind"] != "CustomResourceDefinition" {
                    continue;
                }
                let group = doc["spec"]["group"].as_str().unwrap_or_default().to_owned();
                let kind = doc["spec"]["names"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                for version in doc["spec"]["versions"].as_array().into_iter().flatten() {
                    if version["served"] != Value::Bool(true) {
                        continue;
                    }
                    let name = version["name"].as_str().unwrap_or_default().to_owned();
                    let raw = version["schema"]["openAPIV3Schema"].clone();
                    let mut schema = raw.clone();
                    structural(&mut schema);
                    let validator = jsonschema::options()
                        .with_draft(jsonschema::Draft::Draft4)
                        .should_validate_formats(false)
                        .build(&schema)
                        .map_err(|e| CheckError::Schema {
                            kind: kind.clone(),
                            version: name.clone(),
                            path: path.clone(),
                            message: e.to_string(),
                        })?;
                    let key = (group.clone(), name, kind.clone());
                    crds.list_maps.insert(key.clone(), raw);
                    crds.schemas.insert(key, validator);
                }
            }
        }
        if crds.schemas.is_empty() {
            return Err(CheckError::NoCrds(origin.to_owned()));
        }
        Ok(crds)
    }

    /// Check the manifest `text` (read from `path`, for messages).
    pub fn check(&self, text: &str, path: &Path) -> Result<Report, CheckError> {
        let docs = documents(text, path)?;
        let mut report = Report {
            documents: docs.len(),
            ..Report::default()
        };
        for (i, doc) in docs.iter().enumerate() {
            let index = i + 1;
            let kind = doc["kind"].as_str().unwrap_or("?");
            let object = format!("{kind}/{}", doc["metadata"]["name"].as_str().unwrap_or("?"));
            let mut problem = |path: String, message: String| {
                report.problems.push(Problem {
                    document: index,
                    object: object.clone(),
                    path,
                    message,
                });
            };
            let (Some(api_version), Some(kind)) =
                (doc["apiVersion"].as_str(), doc["kind"].as_str())
            else {
                problem(
                    ".".to_owned(),
                    "apiVersion and kind are required".to_owned(),
                );
                continue;
            };
            check_name(&doc["metadata"], &mut problem);
            let (group, version) = match api_version.split_once('/') {
                Some((g, v)) => (g, v),
                None => ("", api_version),
            };
            if group.is_empty() && version == "v1" && matches!(kind, "Secret" | "ConfigMap") {
                for key in ["data", "stringData"] {
                    if let Some(map) = doc[key].as_object()
                        && let Some((k, _)) = map.iter().find(|(_, v)| !v.is_string())
                    {
                        problem(format!(".{key}.{k}"), "must be a string".to_owned());
                    }
                }
                continue;
            }
            let key = (group.to_owned(), version.to_owned(), kind.to_owned());
            let Some(validator) = self.schemas.get(&key) else {
                if self.schemas.keys().any(|(g, _, k)| g == group && k == kind) {
                    problem(
                        ".apiVersion".to_owned(),
                        format!("the CRD of {kind} serves no version {version}"),
                    );
                } else {
                    report
                        .unchecked
                        .push(format!("document {index} ({object})"));
                }
                continue;
            };
            for error in validator.iter_errors(doc) {
                problem(json_path(error.instance_path().as_str()), error.to_string());
            }
            list_map_keys(&self.list_maps[&key], doc, "", &mut problem);
        }
        Ok(report)
    }
}

/// `metadata.name`: required, a DNS subdomain (the API server's rule for
/// every kind here).
fn check_name(metadata: &Value, problem: &mut impl FnMut(String, String)) {
    match metadata["name"].as_str() {
        None => problem(".metadata.name".to_owned(), "is required".to_owned()),
        Some(name) => {
            let ok = !name.is_empty()
                && name.len() <= 253
                && name.split('.').all(|l| {
                    !l.is_empty()
                        && l.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                });
            if !ok {
                problem(
                    ".metadata.name".to_owned(),
                    format!(
                        "{name:?} is not a DNS subdomain (lowercase alphanumerics, '-' and '.', at most 253)"
                    ),
                );
            }
        }
    }
}

/// A JSON pointer as a JSON path: `/spec/env/0/name` → `.spec.env[0].name`.
pub fn json_path(pointer: &str) -> String {
    if pointer.is_empty() {
        return ".".to_owned();
    }
    let mut out = String::new();
    for part in pointer.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        if part.chars().all(|c| c.is_ascii_digit()) && !part.is_empty() {
            out.push_str(&format!("[{part}]"));
        } else if part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push('.');
            out.push_str(&part);
        } else {
            out.push_str(&format!("[{part:?}]"));
        }
    }
    out
}

/// Duplicate keys in `x-kubernetes-list-type: map` (and `set`) lists,
/// which the API server refuses.
fn list_map_keys(
    schema: &Value,
    value: &Value,
    pointer: &str,
    problem: &mut impl FnMut(String, String),
) {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties");
            for (k, v) in map {
                let sub = props.and_then(|p| p.get(k)).or(extra);
                if let Some(sub) = sub {
                    list_map_keys(sub, v, &format!("{pointer}/{k}"), problem);
                }
            }
        }
        Value::Array(items) => {
            let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|ks| ks.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let id = match list_type {
                    Some("map") => Value::Array(keys.iter().map(|k| item[*k].clone()).collect()),
                    Some("set") => item.clone(),
                    _ => Value::Null,
                };
                if !id.is_null() && !seen.insert(id.to_string()) {
                    problem(
                        json_path(&format!("{pointer}/{i}")),
                        format!(
                            "duplicate entry {id} (x-kubernetes-list-type: {})",
                            list_type.unwrap_or_default()
                        ),
                    );
                }
                if let Some(sub) = schema.get("items") {
                    list_map_keys(sub, item, &format!("{pointer}/{i}"), problem);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths() {
        assert_eq!(json_path(""), ".");
        assert_eq!(json_path("/spec/env/0/name"), ".spec.env[0].name");
        assert_eq!(
            json_path("/metadata/labels/app.kubernetes.io~1name"),
            ".metadata.labels[\"app.kubernetes.io/name\"]"
        );
    }
}
