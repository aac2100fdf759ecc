//! NuGet: the package hash of the exact version, as the feed states it —
//! the service index's registration resource, the version's registration
//! leaf, its catalog entry's `packageHash` (written `sha512-<base64>`, as
//! npm writes integrity). A version the feed does not have is refused.

use serde_json::Value;
use steward_schema::registry::entry::Resolution;

use super::{ResolveError, Resolver};
use crate::registry::http::HttpError;

/// NuGet's public feed.
pub const NUGET_DEFAULT: &str = "https://api.nuget.org";

/// The service index of a feed whose base URL is `base`.
pub fn service_index(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(".json") {
        base.to_owned()
    } else {
        format!("{base}/v3/index.json")
    }
}

/// The registration base URL of a service index (the plain resource:
/// the others are gzip-encoded).
pub fn registrations(index: &Value) -> Option<String> {
    let resources = index.get("resources")?.as_array()?;
    let of = |want: &str| {
        resources.iter().find_map(|r| {
            let kind = r.get("@type")?.as_str()?;
            (kind == want).then(|| r.get("@id")?.as_str().map(str::to_owned))?
        })
    };
    of("RegistrationsBaseUrl")
        .or_else(|| of("RegistrationsBaseUrl/3.4.0"))
        .or_else(|| of("RegistrationsBaseUrl/Versioned"))
}

/// Resolves NuGet package `id`@`version` from the feed at `base`.
pub async fn resolve(
    r: &Resolver<'_>,
    base: Option<&str>,
    id: &str,
    version: &str,
) -> Result<Resolution, ResolveError> {
    let base = base.unwrap_or(NUGET_DEFAULT).trim_end_matches('/');
    let index_url = service_index(base);
    let index = r.json(base, &index_url, "application/json").await?;
    let reg = registrations(&index).ok_or_else(|| ResolveError::Unreadable {
        what: index_url.clone(),
        why: "it names no RegistrationsBaseUrl resource".to_owned(),
    })?;
    let leaf_url = format!(
        "{}/{}/{}.json",
        reg.trim_end_matches('/'),
        id.to_lowercase(),
        version.to_lowercase()
    );
    let leaf = match r.json(base, &leaf_url, "application/json").await {
        Err(ResolveError::Http(HttpError::Status { status: 404, .. })) => {
            return Err(ResolveError::NoVersion {
                package: format!("NuGet {id}"),
                version: version.to_owned(),
                hint: format!("{leaf_url} is not there"),
            });
        }
        other => other?,
    };
    let catalog = match leaf.get("catalogEntry") {
        Some(Value::String(url)) => r.json(base, url, "application/json").await?,
        Some(entry @ Value::Object(_)) => entry.clone(),
        _ => Value::Null,
    };
    let integrity = catalog
        .get("packageHash")
        .and_then(Value::as_str)
        .map(|hash| {
            let algo = catalog
                .get("packageHashAlgorithm")
                .and_then(Value::as_str)
                .unwrap_or("SHA512")
                .to_lowercase();
            format!("{algo}-{hash}")
        });
    Ok(Resolution::Nuget { integrity })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_feed_s_registration_resource_is_found() {
        assert_eq!(
            service_index("https://api.nuget.org"),
            "https://api.nuget.org/v3/index.json"
        );
        assert_eq!(
            service_index("https://f/x/index.json"),
            "https://f/x/index.json"
        );
        let index = json!({"resources": [
            {"@id": "https://r/gz/", "@type": "RegistrationsBaseUrl/3.6.0"},
            {"@id": "https://r/plain/", "@type": "RegistrationsBaseUrl"}
        ]});
        assert_eq!(registrations(&index).as_deref(), Some("https://r/plain/"));
        assert_eq!(registrations(&json!({})), None);
    }
}
