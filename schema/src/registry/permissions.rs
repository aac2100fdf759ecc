//! The sandbox of an entry added from a registry: the publisher's
//! permission profile when it publishes one (ToolHive's publisher metadata:
//! `_meta["io.modelcontextprotocol.registry/publisher-provided"]
//! ["io.github.stacklok"][<package identifier or remote URL>].permissions`,
//! in exactly the shape of Steward's `sandbox` key), else `none` — what the
//! package runner needs (its registry) the runtime adds by itself through
//! the egress proxy.
//!
//! ToolHive writes a domain and its subdomains as `.example.com` (squid's
//! convention); Steward writes `example.com` and `*.example.com`, so such a
//! host becomes both. `privileged` is never granted.

use serde_json::{Map, Value};

use super::server::PUBLISHER_META;
use crate::sandbox::{PermissionProfile, SandboxField, check_profile};

/// The publisher key of ToolHive's metadata.
pub const TOOLHIVE_META: &str = "io.github.stacklok";

/// Where an entry's sandbox came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxOrigin {
    /// The publisher's permission profile.
    Publisher,
    /// None published: `none` (plus what the runner needs).
    Default,
    /// The publisher's profile could not be used (why); `none` instead.
    Unusable(String),
    /// No sandbox applies (a remote server), or Docker (off, said why).
    NotApplicable,
}

/// The publisher's permission profile for `keys` (a package's identifier
/// and its versioned forms, or a remote's URL), looked up in each of
/// `metas` (the server's `_meta`, then the registry response's).
pub fn publisher_profile(
    metas: &[&Map<String, Value>],
    keys: &[String],
) -> Option<Result<PermissionProfile, String>> {
    let found = metas.iter().find_map(|meta| {
        let by_key = meta.get(PUBLISHER_META)?.get(TOOLHIVE_META)?.as_object()?;
        keys.iter()
            .find_map(|k| by_key.get(k))
            .and_then(|m| m.get("permissions"))
            .cloned()
    })?;
    Some(translate(&found))
}

/// ToolHive's profile as Steward's: hosts in Steward's syntax, checked.
fn translate(found: &Value) -> Result<PermissionProfile, String> {
    let mut value = found.clone();
    if let Some(hosts) = value
        .pointer_mut("/network/outbound/allow_host")
        .and_then(Value::as_array_mut)
    {
        let mut out: Vec<Value> = Vec::new();
        for h in hosts.iter() {
            match h.as_str() {
                Some(h) if h.starts_with('.') && h.len() > 1 => {
                    out.push(Value::String(h[1..].to_owned()));
                    out.push(Value::String(format!("*{h}")));
                }
                _ => out.push(h.clone()),
            }
        }
        *hosts = out;
    }
    if let Some(obj) = value.as_object_mut()
        && obj.get("privileged") == Some(&Value::Bool(true))
    {
        return Err("it asks for a privileged container, which Steward never grants".to_owned());
    }
    let profile: PermissionProfile = serde_json::from_value(value)
        .map_err(|e| format!("it is not a permission profile: {e}"))?;
    let problems = check_profile(&profile);
    if let Some((pointer, why)) = problems.first() {
        return Err(format!("{pointer}: {why}"));
    }
    Ok(profile)
}

/// The default profile of an entry without a published one.
pub fn default_field() -> SandboxField {
    SandboxField::Name("none".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_profile_of_the_package_is_found_and_translated() {
        let m = meta(json!({PUBLISHER_META: {TOOLHIVE_META: {
            "other": {"permissions": {"network": {"outbound": {"insecure_allow_all": true}}}},
            "@x/weather": {"permissions": {
                "read": ["~/data"],
                "network": {"outbound": {"allow_host": [".weather.com", "api.x.io"], "allow_port": [443]}}
            }}
        }}}));
        let p = publisher_profile(&[&Map::new(), &m], &["@x/weather".to_owned()])
            .unwrap()
            .unwrap();
        let out = p.network.unwrap().outbound.unwrap();
        assert_eq!(
            out.allow_host.unwrap(),
            ["weather.com", "*.weather.com", "api.x.io"]
        );
        assert_eq!(out.allow_port.unwrap(), [443]);
        assert_eq!(p.read.unwrap(), ["~/data"]);
        assert!(publisher_profile(&[&m], &["nope".to_owned()]).is_none());
    }

    #[test]
    fn a_profile_steward_cannot_use_says_why() {
        let m = meta(
            json!({PUBLISHER_META: {TOOLHIVE_META: {"k": {"permissions": {"privileged": true}}}}}),
        );
        assert!(
            publisher_profile(&[&m], &["k".to_owned()])
                .unwrap()
                .is_err()
        );
        let m = meta(json!({PUBLISHER_META: {TOOLHIVE_META: {"k": {"permissions":
            {"network": {"outbound": {"allow_host": ["https://x.com/"]}}}}}}}));
        let err = publisher_profile(&[&m], &["k".to_owned()])
            .unwrap()
            .unwrap_err();
        assert!(err.contains("allow_host/0"), "{err}");
    }
}
