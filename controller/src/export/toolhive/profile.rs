//! A server's permission profile as ToolHive's `permissionProfile`: the
//! built-ins `none` and `network` as ToolHive's builtins of the same name;
//! a custom profile (named or inline) as a ConfigMap holding its JSON,
//! which is ToolHive's permission-profile shape already; `standard` as
//! `network` (a container already keeps the host's credentials, other
//! processes and Steward out of reach; `network` keeps its outbound
//! network), and `off` as `network` too (ToolHive always runs a server in a
//! container), each with a comment saying so.

use steward_schema::resource::sandbox_in_force;
use steward_schema::sandbox::{Network, Resolved, Sandbox};

use super::*;

/// The key of the ConfigMap that holds a custom profile.
pub(super) const PROFILE_KEY: &str = "permissions.json";

/// `permissionProfile` of the MCPServer of `server` (workload `workload`),
/// the ConfigMap a custom profile needs, and what to say about it.
pub(super) fn permission_profile(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
) -> (Value, Option<Document>, Option<String>) {
    let sandbox = match sandbox_in_force(&server.spec.resolved_sandbox) {
        Resolved::Profile { sandbox, .. } => sandbox,
        // Admission keeps such a server from running; export says so too.
        Resolved::Unknown(why) => {
            return (
                builtin("none"),
                None,
                Some(format!(
                    "its sandbox profile is unknown ({why}); builtin none is used"
                )),
            );
        }
    };
    match sandbox.profile.as_str() {
        "none" | "network" => (builtin(&sandbox.profile), None, None),
        "standard" => (
            builtin("network"),
            None,
            Some(
                "sandbox standard: the container keeps the host's credential stores, other processes and Steward out of reach; builtin network keeps its outbound network"
                    .to_owned(),
            ),
        ),
        "off" => (
            builtin("network"),
            None,
            Some("sandbox off: ToolHive always runs a server in a container; builtin network is the widest builtin".to_owned()),
        ),
        custom => {
            let name = dns_label(&format!("{workload}-permissions"), MAX_NAME);
            let profile = toolhive_json(&sandbox);
            let mut value = resource("ConfigMap", &name, Some(server.name), options, Value::Null);
            value["apiVersion"] = Value::String("v1".to_owned());
            let map = value.as_object_mut().expect("an object");
            map.remove("spec");
            map.insert(
                "data".to_owned(),
                json!({ PROFILE_KEY: serde_json::to_string_pretty(&profile).unwrap_or_default() }),
            );
            let document = Document {
                comments: vec![format!(
                    "The permission profile \"{custom}\" of {}, in ToolHive's shape.",
                    server.name
                )],
                value,
            };
            (
                json!({ "type": "configmap", "name": name, "key": PROFILE_KEY }),
                Some(document),
                None,
            )
        }
    }
}

fn builtin(name: &str) -> Value {
    json!({ "type": "builtin", "name": name })
}

/// A custom profile in ToolHive's permission-profile shape (paths as
/// written; in the container, the workspace is its working directory).
fn toolhive_json(sandbox: &Sandbox) -> Value {
    let outbound = match &sandbox.network {
        Network::Unrestricted { ports } => {
            json!({ "insecure_allow_all": true, "allow_port": ports })
        }
        Network::Proxy { hosts, ports } => json!({ "allow_host": hosts, "allow_port": ports }),
        Network::None => json!({ "insecure_allow_all": false }),
    };
    json!({
        "read": sandbox.read,
        "write": sandbox.write,
        "network": { "outbound": outbound },
    })
}
