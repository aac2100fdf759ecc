//! A remote server (`httpUrl`, `url`) as an `MCPServerEntry` or an
//! `MCPRemoteProxy`: its URL as the operator accepts it, its headers as
//! Secret stubs.

use super::*;

/// Why the operator would refuse `url` as a `remoteUrl`, if it would.
pub(super) fn unreachable_url(url: &str) -> Option<String> {
    let parsed = match url::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Some(format!("its URL does not parse ({e})")),
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return Some(format!(
            "its URL's scheme {} is not http or https",
            parsed.scheme()
        ));
    }
    let private = match parsed.host() {
        None => true,
        Some(url::Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            d == "localhost"
                || d.ends_with(".localhost")
                || d.ends_with(".cluster.local")
                || d.ends_with(".cluster.local.")
        }
        Some(url::Host::Ipv4(ip)) => is_private(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_private(IpAddr::V6(ip)),
    };
    private.then(|| {
        "its URL is a loopback, private-range or cluster-local address, which the ToolHive operator refuses as a remoteUrl".to_owned()
    })
}

pub(super) fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_private() || v4.is_link_local() || v4.is_unspecified()
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_private(IpAddr::V4(v4)))
        }
    }
}

/// `Bearer ` at the start of a header value (as written).
pub(super) fn strip_bearer(value: &str) -> Option<&str> {
    let v = value.trim_start();
    (v.len() > 7 && v[..7].eq_ignore_ascii_case("bearer ")).then(|| v[7..].trim())
}

pub(super) fn remote(
    server: &Server<'_>,
    workload: &str,
    options: &Options,
    allow: Option<(Vec<String>, String)>,
    mut comments: Vec<String>,
    taken: &BTreeSet<String>,
) -> Result<Converted, Refusal> {
    let spec = server.spec;
    let (url, written) = match spec.transport {
        McpTransport::Http => (
            spec.http_url.as_deref(),
            spec.as_written.http_url.as_deref(),
        ),
        _ => (spec.url.as_deref(), spec.as_written.url.as_deref()),
    };
    let (Some(_), Some(written)) = (url, written) else {
        return Err(refuse(
            server,
            "its URL is unknown",
            "give the entry a literal httpUrl or url",
        ));
    };
    if redact::has_reference(written) || redact::redact_url(written) != written {
        return Err(refuse(
            server,
            "its URL holds a ${VAR} reference or a credential, and a remoteUrl is stored in plain text",
            "move the credential to a header (it becomes a Secret)",
        ));
    }
    if let Some(reason) = unreachable_url(written) {
        return Err(refuse(
            server,
            reason,
            "export only servers the cluster can reach at a public address, or run this one in the cluster as a stdio server",
        ));
    }
    let transport = match spec.transport {
        McpTransport::Sse => "sse",
        _ => "streamable-http",
    };

    let mut secrets = Secrets::new(taken);
    let mut documents = Vec::new();
    let mut from_secret = Vec::new();
    let mut auth_ref = None;
    let written_headers = spec.as_written.headers.clone().unwrap_or_default();
    for name in spec.headers.iter().flat_map(|h| h.keys()) {
        let written = written_headers.get(name).map(String::as_str);
        let bearer = name
            .eq_ignore_ascii_case("authorization")
            .then(|| written.and_then(strip_bearer))
            .flatten();
        if let (Some(token), None) = (bearer, &auth_ref) {
            let secret = secrets.add(server, workload, Slot::Bearer, Some(token), options);
            let auth = format!("{workload}-bearer");
            documents.push(Document {
                comments: vec![format!("The {name}: Bearer header, its token in the Secret {secret}.")],
                value: resource(
                    "MCPExternalAuthConfig",
                    &auth,
                    Some(server.name),
                    options,
                    json!({ "type": "bearerToken", "bearerToken": { "tokenSecretRef": { "name": secret, "key": "token" } } }),
                ),
            });
            auth_ref = Some(auth);
        } else {
            // Any header value may be a credential (status redacts them all).
            let secret = secrets.add(server, workload, Slot::Header(name), written, options);
            from_secret.push(
                json!({ "headerName": name, "valueSecretRef": { "name": secret, "key": "value" } }),
            );
        }
    }

    let upstream = oauth::upstream(server, workload, options, &mut secrets)?;
    if upstream.is_some() && auth_ref.is_some() {
        return Err(refuse(
            server,
            "it has both an Authorization: Bearer header and oauth, and ToolHive sends a server one credential",
            "keep either the header or oauth",
        ));
    }

    let mut body = json!({
        "remoteUrl": written,
        "transport": transport,
        "groupRef": { "name": options.group },
    });
    if let Some(auth) = &auth_ref {
        body["externalAuthConfigRef"] = json!({ "name": auth });
    }
    let mut provider = None;
    if let Some(up) = upstream {
        comments.extend(up.notes.iter().cloned());
        let auth = oauth::oauth_config_name(workload);
        if options.remote_proxy {
            documents.push(oauth::embedded(server, workload, options, &up));
            body["authServerRef"] = json!({ "kind": "MCPExternalAuthConfig", "name": auth });
        } else {
            documents.push(oauth::inject(server, workload, options, &up));
            body["externalAuthConfigRef"] = json!({ "name": auth });
            provider = Some(up.provider);
        }
    }
    if !from_secret.is_empty() {
        body["headerForward"] = json!({ "addHeadersFromSecret": from_secret });
    }
    let mut entry_tool_config = false;
    if let Some(list) = allow {
        if options.remote_proxy {
            body["toolConfigRef"] = json!({ "name": tool_config_name(workload) });
        } else {
            // An MCPServerEntry has no toolConfigRef: the VirtualMCPServer applies it.
            entry_tool_config = true;
        }
        documents.push(tool_config(server, workload, options, list));
    }
    let kind = if options.remote_proxy {
        if body.get("authServerRef").is_some() {
            // Its users' tokens come from its own embedded authorization
            // server, for its own URL.
            let url = format!("{}/mcp", oauth::placeholder_issuer(workload));
            body["oidcConfigRef"] = json!({ "name": oauth::proxy_oidc_name(workload),
                                            "audience": url, "resourceUrl": url });
        } else if !options.anonymous {
            body["oidcConfigRef"] =
                json!({ "name": oidc_config_name(&options.group), "audience": workload });
        }
        "MCPRemoteProxy"
    } else {
        "MCPServerEntry"
    };
    let mut all = secrets.stubs;
    all.extend(documents);
    all.push(Document {
        comments,
        value: resource(kind, workload, Some(server.name), options, body),
    });
    Ok(Converted {
        documents: all,
        secret_names: secrets.names,
        secret_lines: secrets.lines,
        entry_tool_config,
        upstream: provider,
    })
}
