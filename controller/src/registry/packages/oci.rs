//! OCI: an image reference pinned to its digest. A reference that carries
//! one is used as it is; otherwise the registry's manifest of the tag is
//! asked for its `Docker-Content-Digest` (the distribution API, with the
//! anonymous bearer token a public registry hands out on a 401).

use steward_schema::registry::entry::Resolution;

use super::{ResolveError, Resolver};

/// The manifest media types asked for (an index first: multi-platform).
const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// An image reference's parts: registry host, repository, tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    pub registry: String,
    pub repository: String,
    pub tag: String,
}

/// Parses `identifier` (`[host/]repo[:tag]`; Docker Hub's short names
/// expanded) with `version` as the tag when the identifier has none.
pub fn parse(identifier: &str, version: Option<&str>) -> Option<ImageRef> {
    let (name, tag) = match identifier.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n, Some(t.to_owned())),
        _ => (identifier, None),
    };
    let tag = tag.or_else(|| version.map(str::to_owned))?;
    let (registry, repository) = match name.split_once('/') {
        Some((host, rest)) if host.contains('.') || host.contains(':') || host == "localhost" => {
            (host.to_owned(), rest.to_owned())
        }
        _ => (
            "registry-1.docker.io".to_owned(),
            if name.contains('/') {
                name.to_owned()
            } else {
                format!("library/{name}")
            },
        ),
    };
    let registry = if registry == "docker.io" {
        "registry-1.docker.io".to_owned()
    } else {
        registry
    };
    Some(ImageRef {
        registry,
        repository,
        tag,
    })
}

/// A `WWW-Authenticate: Bearer realm=…,service=…,scope=…` challenge's token URL.
pub fn token_url(challenge: &str) -> Option<String> {
    let rest = challenge.trim().strip_prefix("Bearer ")?;
    let mut realm = None;
    let mut params = Vec::new();
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        let v = v.trim_matches('"');
        if k == "realm" {
            realm = Some(v.to_owned());
        } else {
            params.push(format!("{k}={}", crate::registry::client::encode(v)));
        }
    }
    let realm = realm?;
    Some(if params.is_empty() {
        realm
    } else {
        format!("{realm}?{}", params.join("&"))
    })
}

/// Resolves `identifier` (tag `version` if it has none) to `image@digest`.
pub async fn resolve(
    r: &Resolver<'_>,
    _base: Option<&str>,
    identifier: &str,
    version: Option<&str>,
) -> Result<Resolution, ResolveError> {
    if identifier.contains("@sha256:") {
        return Ok(Resolution::Oci {
            reference: identifier.to_owned(),
        });
    }
    let unsupported = |why: String| ResolveError::Unsupported {
        what: format!("oci {identifier}"),
        why,
    };
    let image = parse(identifier, version).ok_or_else(|| {
        unsupported("it names no tag and the registry gives no version".to_owned())
    })?;
    let http = r.http().ok_or_else(|| ResolveError::Offline {
        what: format!("the digest of {identifier}"),
    })?;
    let url = format!(
        "https://{}/v2/{}/manifests/{}",
        image.registry, image.repository, image.tag
    );
    let digest_of = |headers: &reqwest::header::HeaderMap| {
        headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (status, headers) = http.get_raw(&url, ACCEPT, &[]).await?;
    let digest = match status {
        200 => digest_of(&headers),
        401 => {
            let challenge = headers
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .and_then(token_url)
                .ok_or_else(|| {
                    unsupported(format!("{url} asks for credentials Steward does not have"))
                })?;
            let token: serde_json::Value = r
                .json(&image.registry, &challenge, "application/json")
                .await?;
            let token = token
                .get("token")
                .or_else(|| token.get("access_token"))
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| unsupported(format!("{challenge} gave no token")))?;
            let (status, headers) = http
                .get_raw(
                    &url,
                    ACCEPT,
                    &[("authorization", format!("Bearer {token}"))],
                )
                .await?;
            (status == 200).then(|| digest_of(&headers)).flatten()
        }
        other => return Err(unsupported(format!("{url} answered {other}"))),
    };
    let digest = digest.ok_or_else(|| unsupported(format!("{url} states no digest")))?;
    let name = identifier
        .rsplit_once(':')
        .filter(|(_, t)| !t.contains('/'))
        .map_or(identifier, |(n, _)| n);
    Ok(Resolution::Oci {
        reference: format!("{name}@{digest}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_as_docker_reads_them() {
        assert_eq!(
            parse("ghcr.io/x/y:1.0", None).unwrap(),
            ImageRef {
                registry: "ghcr.io".into(),
                repository: "x/y".into(),
                tag: "1.0".into()
            }
        );
        let hub = parse("mcp/filesystem", Some("1.0.2")).unwrap();
        assert_eq!(hub.registry, "registry-1.docker.io");
        assert_eq!(hub.repository, "mcp/filesystem");
        assert_eq!(
            parse("alpine:3", None).unwrap().repository,
            "library/alpine"
        );
        assert_eq!(
            parse("localhost:5000/a:b", None).unwrap().registry,
            "localhost:5000"
        );
        assert!(parse("x/y", None).is_none());
    }

    #[test]
    fn a_bearer_challenge_gives_the_token_url() {
        assert_eq!(
            token_url(r#"Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:x/y:pull""#)
                .unwrap(),
            "https://ghcr.io/token?service=ghcr.io&scope=repository%3Ax%2Fy%3Apull"
        );
        assert!(token_url("Basic realm=x").is_none());
    }
}
