//! A remote entry that signs in with OAuth (`oauth`), as ToolHive's
//! embedded authorization server: in the cluster each user signs in to
//! ToolHive, which sends them on to the server's own authorization server
//! (the *upstream provider*) and keeps that token to call the server with.
//!
//! - Behind the VirtualMCPServer (the default), the upstream provider goes
//!   to the VirtualMCPServer's `authServerConfig`, and the MCPServerEntry's
//!   `externalAuthConfigRef` names an MCPExternalAuthConfig of type
//!   `upstreamInject`: that provider's token on every request to it.
//! - As an MCPRemoteProxy (`--remote-proxy`), an MCPExternalAuthConfig of
//!   type `embeddedAuthServer` with that one provider, named by the proxy's
//!   `authServerRef` (ToolHive's field for it; `externalAuthConfigRef` with
//!   that type is kept only for older manifests); the proxy puts the
//!   provider's token on the requests it forwards.
//!
//! The provider is an `oauth2` one (MCP authorization servers need not be
//! OpenID providers): its endpoints come from the entry
//! (`oauth.authorizationUrl`, `oauth.tokenUrl`, `oauth.registrationUrl`, as
//! Qwen Code writes them), else from the user's last sign-in
//! ([`AuthServer`]); the client is the entry's `oauth.clientId` (its secret a
//! Secret reference), else one ToolHive registers (RFC 7591 `dcrConfig`).
//! No token, client secret or registration of this machine is written.

use super::*;

/// What the user's last sign-in to a server learned of its authorization
/// server (`steward auth login`), for an entry that names no endpoints.
/// Nothing in it is a credential.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthServer {
    pub issuer: String,
    /// None: a sign-in from before Steward kept it.
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    /// The resource the token is for (its protected resource metadata's).
    pub resource: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
}

/// The `oauth` keys the mapping reads; any other is noted as dropped.
const MAPPED: [&str; 9] = [
    "enabled",
    "clientId",
    "clientSecret",
    "authorizationUrl",
    "tokenUrl",
    "registrationUrl",
    "scopes",
    "redirectUri",
    "account",
];

/// Whether `spec` signs in with OAuth: an `oauth` object not switched off.
pub fn signs_in(spec: &McpServerSpec) -> bool {
    spec.oauth
        .as_ref()
        .is_some_and(|o| o.get("enabled").and_then(Value::as_bool) != Some(false))
}

/// One server's upstream provider and what could not be carried.
pub(super) struct Upstream {
    /// The name the MCPExternalAuthConfig's `upstreamInject` refers to.
    pub name: String,
    /// The `upstreamProviders[]` item.
    pub provider: Value,
    pub notes: Vec<String>,
}

/// The issuer of an embedded authorization server, a PLACEHOLDER: it is
/// the public URL agents reach `name` at, which only the cluster knows.
pub(super) fn placeholder_issuer(name: &str) -> String {
    format!("https://{name}.example.invalid")
}

/// The comment that says what to replace in an embedded authorization
/// server's documents.
pub(super) fn placeholder_note(name: &str, oidc: &str) -> String {
    format!(
        "PLACEHOLDER issuer {}: replace it (here, and in the oidcConfigRef's audience and resourceUrl) with the public https URL agents reach {name} at, and create the MCPOIDCConfig {oidc} with that issuer.",
        placeholder_issuer(name)
    )
}

fn string<'a>(oauth: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    oauth
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Why the cluster could not use `url` as an authorization server
/// endpoint, if it could not.
fn unusable_endpoint(url: &str) -> Option<String> {
    if !url.starts_with("https://") {
        return Some("is not https".to_owned());
    }
    unreachable_url(url).map(|_| "is not a public address".to_owned())
}

/// The upstream provider of `server`, if it signs in with OAuth (see the
/// module docs); its client secret becomes a Secret stub in `secrets`.
pub(super) fn upstream(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
    secrets: &mut Secrets<'_>,
) -> Result<Option<Upstream>, Refusal> {
    let spec = server.spec;
    let Some(oauth) = spec.oauth.as_ref().filter(|_| signs_in(spec)) else {
        return Ok(None);
    };
    if options.anonymous {
        return Err(refuse(
            server,
            "it signs in with OAuth, and ToolHive gives a server a user's OAuth token only behind its embedded authorization server, which needs the OIDC sign-in --anonymous turns off",
            "export without --anonymous, or leave the server out",
        ));
    }
    let known = server.auth_server;
    let endpoint = |key: &str, stored: Option<&str>| {
        string(oauth, key)
            .map(str::to_owned)
            .or(stored.map(str::to_owned))
    };
    let authorize = endpoint(
        "authorizationUrl",
        known.and_then(|k| k.authorization_endpoint.as_deref()),
    );
    let token = endpoint("tokenUrl", known.map(|k| k.token_endpoint.as_str()));
    let (Some(authorize), Some(token)) = (authorize, token) else {
        return Err(refuse(
            server,
            "it signs in with OAuth, and its authorization server's endpoints are unknown here (the entry names none and Steward has no sign-in to it that recorded them)",
            format!(
                "sign in once with `steward auth login {}` and export again, or write oauth.authorizationUrl and oauth.tokenUrl",
                server.name
            ),
        ));
    };
    for (what, url) in [("authorization", &authorize), ("token", &token)] {
        if let Some(why) = unusable_endpoint(url) {
            return Err(refuse(
                server,
                format!(
                    "its authorization server's {what} endpoint {url} {why}, and the cluster's ToolHive must reach it"
                ),
                "export only servers whose authorization server is at a public https address",
            ));
        }
    }

    let mut notes = Vec::new();
    let mut config = json!({
        "authorizationEndpoint": authorize,
        "tokenEndpoint": token,
    });
    match string(oauth, "clientId") {
        Some(client_id) => {
            config["clientId"] = json!(client_id);
            if let Some(written) = string(oauth, "clientSecret") {
                let secret =
                    secrets.add(server, workload, Slot::ClientSecret, Some(written), options);
                config["clientSecretRef"] = json!({ "name": secret, "key": "value" });
            }
            notes.push(format!(
                "The client {client_id} must allow ToolHive's redirect URI (by default {{resourceUrl}}/oauth/callback of the server's public URL) besides Steward's loopback one."
            ));
        }
        None => {
            let registration = string(oauth, "registrationUrl")
                .map(str::to_owned)
                .or_else(|| known.and_then(|k| k.registration_endpoint.clone()));
            let Some(registration) = registration else {
                return Err(refuse(
                    server,
                    "it signs in with a client Steward registers or describes (no oauth.clientId), and its authorization server offers no registration endpoint Steward knows of; ToolHive's upstream client is pre-registered or registered by RFC 7591, never a Client ID Metadata Document",
                    "register a client for the cluster and write it as oauth.clientId (its secret as oauth.clientSecret: \"${secret:NAME}\"), or write oauth.registrationUrl",
                ));
            };
            if let Some(why) = unusable_endpoint(&registration) {
                return Err(refuse(
                    server,
                    format!(
                        "its authorization server's registration endpoint {registration} {why}, and ToolHive registers its client there"
                    ),
                    "register a client for the cluster and write it as oauth.clientId",
                ));
            }
            config["dcrConfig"] = json!({ "registrationEndpoint": registration });
            if string(oauth, "clientSecret").is_some() {
                notes.push("Dropped: `oauth.clientSecret` (no oauth.clientId names its client; ToolHive registers its own).".to_owned());
            }
        }
    }

    let scopes: Vec<String> = match oauth.get("scopes").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        None => known.map(|k| k.scopes.clone()).unwrap_or_default(),
    };
    if !scopes.is_empty() {
        config["scopes"] = json!(scopes);
    }
    // RFC 8707: the token is for this server (MCP authorization servers ask).
    let resource = known
        .map(|k| k.resource.clone())
        .filter(|r| !r.is_empty())
        .or_else(|| {
            spec.as_written
                .http_url
                .clone()
                .or(spec.as_written.url.clone())
        });
    if let Some(resource) = resource {
        config["additionalAuthorizationParams"] = json!({ "resource": resource });
        notes.push("The `resource` (RFC 8707) is sent on the authorization request only: ToolHive's token request has no field for it.".to_owned());
    }

    if let Some(redirect) = string(oauth, "redirectUri") {
        if unusable_endpoint(redirect).is_none() {
            config["redirectUri"] = json!(redirect);
        } else {
            notes.push(format!(
                "Dropped: `oauth.redirectUri` {redirect} (an address on this machine; in the cluster the provider redirects to ToolHive, by default {{resourceUrl}}/oauth/callback)."
            ));
        }
    }
    if let Some(account) = string(oauth, "account") {
        notes.push(format!(
            "Dropped: `oauth.account` {account:?} (it picks one of this user's stored sign-ins; in the cluster every user signs in for themselves)."
        ));
    }
    for key in oauth.keys().filter(|k| !MAPPED.contains(&k.as_str())) {
        notes.push(format!(
            "Dropped: `oauth.{key}` (ToolHive's upstream provider has no field for it)."
        ));
    }
    let name = dns_label(workload, 63);
    Ok(Some(Upstream {
        provider: json!({ "name": name, "type": "oauth2", "oauth2Config": config }),
        name,
        notes,
    }))
}

/// The MCPExternalAuthConfig of an OAuth entry behind the VirtualMCPServer:
/// the token of its upstream provider on its requests.
pub(super) fn inject(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
    up: &Upstream,
) -> Document {
    Document {
        comments: vec![format!(
            "The token of upstream provider {} (the VirtualMCPServer's authServerConfig) on every request to {workload}.",
            up.name
        )],
        value: resource(
            "MCPExternalAuthConfig",
            &oauth_config_name(workload),
            Some(server.name),
            options,
            json!({ "type": "upstreamInject", "upstreamInject": { "providerName": up.name } }),
        ),
    }
}

/// The MCPExternalAuthConfig of an OAuth entry as an MCPRemoteProxy: an
/// embedded authorization server with that one provider.
pub(super) fn embedded(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
    up: &Upstream,
) -> Document {
    Document {
        comments: vec![
            format!(
                "The MCPRemoteProxy {workload}'s embedded authorization server: users sign in to it, it sends them on to upstream provider {} and puts that token on the requests it forwards.",
                up.name
            ),
            placeholder_note(workload, &proxy_oidc_name(workload)),
        ],
        value: resource(
            "MCPExternalAuthConfig",
            &oauth_config_name(workload),
            Some(server.name),
            options,
            json!({
                "type": "embeddedAuthServer",
                "embeddedAuthServer": {
                    "issuer": placeholder_issuer(workload),
                    "upstreamProviders": [up.provider],
                },
            }),
        ),
    }
}

/// The name of an OAuth entry's MCPExternalAuthConfig.
pub(super) fn oauth_config_name(workload: &str) -> String {
    format!("{workload}-oauth")
}

/// The MCPOIDCConfig an OAuth MCPRemoteProxy validates its users' tokens
/// with: its own embedded authorization server's, not the group's.
pub(super) fn proxy_oidc_name(workload: &str) -> String {
    format!("{workload}-oidc")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use steward_schema::resource::McpTransport;

    use super::*;

    fn spec(oauth: Value) -> McpServerSpec {
        let mut spec = McpServerSpec {
            transport: McpTransport::Http,
            http_url: Some("https://mcp.example.com/mcp".to_owned()),
            oauth: oauth.as_object().cloned(),
            ..Default::default()
        };
        spec.as_written.http_url = spec.http_url.clone();
        spec
    }

    fn options() -> Options {
        Options {
            group: "ws".to_owned(),
            ..Default::default()
        }
    }

    fn map(
        spec: &McpServerSpec,
        known: Option<&AuthServer>,
        options: &Options,
    ) -> (Result<Option<Upstream>, Refusal>, Vec<String>) {
        let server = Server {
            name: "gh",
            spec,
            blocked: None,
            tools: None,
            auth_server: known,
        };
        let taken = BTreeSet::new();
        let mut secrets = Secrets::new(&taken);
        let up = upstream(&server, "gh", options, &mut secrets);
        (up, secrets.lines)
    }

    #[test]
    fn a_pre_registered_client_keeps_its_id_and_its_secret_becomes_a_reference() {
        let spec = spec(json!({
            "enabled": true, "clientId": "Iv1.abc", "clientSecret": "${secret:gh-oauth}",
            "authorizationUrl": "https://github.com/login/oauth/authorize",
            "tokenUrl": "https://github.com/login/oauth/access_token",
            "scopes": ["repo", "read:org"],
            "redirectUri": "http://127.0.0.1:61234/callback", "account": "work",
            "audiences": ["https://mcp.example.com"],
        }));
        let (up, lines) = map(&spec, None, &options());
        let up = up.unwrap().unwrap();
        assert_eq!(up.name, "gh");
        assert_eq!(
            up.provider,
            json!({ "name": "gh", "type": "oauth2", "oauth2Config": {
                "authorizationEndpoint": "https://github.com/login/oauth/authorize",
                "tokenEndpoint": "https://github.com/login/oauth/access_token",
                "clientId": "Iv1.abc",
                "clientSecretRef": { "name": "gh-oauth", "key": "value" },
                "scopes": ["repo", "read:org"],
                "additionalAuthorizationParams": { "resource": "https://mcp.example.com/mcp" },
            }})
        );
        // The loopback redirect and the account stay here, said so.
        let notes = up.notes.join("\n");
        assert!(notes.contains("Dropped: `oauth.redirectUri`"), "{notes}");
        assert!(
            notes.contains("Dropped: `oauth.account` \"work\""),
            "{notes}"
        );
        assert!(notes.contains("Dropped: `oauth.audiences`"), "{notes}");
        assert!(!notes.contains("`oauth.scopes`"), "{notes}");
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("secret-tool lookup service steward name gh-oauth"));
    }

    #[test]
    fn without_a_client_id_toolhive_registers_from_the_last_sign_in() {
        let known = AuthServer {
            issuer: "https://auth.example.com".to_owned(),
            authorization_endpoint: Some("https://auth.example.com/authorize".to_owned()),
            token_endpoint: "https://auth.example.com/token".to_owned(),
            registration_endpoint: Some("https://auth.example.com/register".to_owned()),
            resource: "https://mcp.example.com/".to_owned(),
            scopes: vec!["mcp".to_owned(), "offline_access".to_owned()],
        };
        let spec = spec(json!({ "enabled": true, "clientSecret": "literal-secret" }));
        let (up, lines) = map(&spec, Some(&known), &options());
        let up = up.unwrap().unwrap();
        let config = &up.provider["oauth2Config"];
        assert_eq!(
            config["dcrConfig"],
            json!({ "registrationEndpoint": "https://auth.example.com/register" })
        );
        assert!(config.get("clientId").is_none() && config.get("clientSecretRef").is_none());
        assert_eq!(config["scopes"], json!(["mcp", "offline_access"]));
        assert_eq!(
            config["additionalAuthorizationParams"]["resource"],
            "https://mcp.example.com/"
        );
        assert!(lines.is_empty());
        assert!(!up.provider.to_string().contains("literal-secret"));
        assert!(
            up.notes
                .join("\n")
                .contains("Dropped: `oauth.clientSecret`")
        );
    }

    #[test]
    fn what_the_cluster_cannot_use_is_refused_with_the_fix() {
        let refused = |oauth: Value, known: Option<&AuthServer>, options: &Options| {
            let spec = spec(oauth);
            match map(&spec, known, options).0 {
                Err(r) => r.to_string(),
                Ok(_) => panic!("not refused"),
            }
        };
        let endpoints = json!({ "clientId": "c", "authorizationUrl": "https://a.example.com/a",
                                "tokenUrl": "https://a.example.com/t" });
        let anonymous = Options {
            anonymous: true,
            ..options()
        };
        assert!(refused(endpoints, None, &anonymous).contains("--anonymous"));
        // What each entry lacks, and what the refusal says.
        let cases = [
            (json!({ "clientId": "c" }), "`steward auth login gh`"),
            (
                json!({ "clientId": "c", "authorizationUrl": "http://a.example.com/a",
                        "tokenUrl": "https://a.example.com/t" }),
                "is not https",
            ),
            (
                json!({ "clientId": "c", "authorizationUrl": "https://127.0.0.1/a",
                        "tokenUrl": "https://127.0.0.1/t" }),
                "is not a public address",
            ),
            (
                json!({ "authorizationUrl": "https://a.example.com/a",
                        "tokenUrl": "https://a.example.com/t" }),
                "Client ID Metadata Document",
            ),
        ];
        for (oauth, says) in cases {
            let why = refused(oauth.clone(), None, &options());
            assert!(why.contains(says), "{oauth}: {why}");
        }
        // Switched off: not an OAuth entry.
        let spec = spec(json!({ "enabled": false }));
        assert!(map(&spec, None, &options()).0.unwrap().is_none());
    }
}
