//! npm: the version's `dist` from the package's packument (`GET
//! <registry>/<name>`, a scoped name's `/` encoded): its integrity and
//! tarball, as npm states them. A version npm does not have is refused.

use serde_json::Value;
use steward_schema::registry::entry::{NPM_DEFAULT, Resolution};

use super::{ResolveError, Resolver};

/// npm's packument URL of `name` under `base`.
pub fn packument_url(base: &str, name: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        name.replace('/', "%2F")
    )
}

/// The integrity npm states (`dist.integrity`, else `sha1-` of the shasum
/// in hex as npm writes it) and the tarball of `version` in `packument`.
pub fn dist_of(packument: &Value, name: &str, version: &str) -> Result<Resolution, ResolveError> {
    let Some(dist) = packument.pointer(&format!("/versions/{}/dist", pointer_escape(version)))
    else {
        let latest = packument
            .pointer("/dist-tags/latest")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        return Err(ResolveError::NoVersion {
            package: format!("npm {name}"),
            version: version.to_owned(),
            hint: format!("its latest is {latest}"),
        });
    };
    let integrity = dist
        .get("integrity")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            dist.get("shasum")
                .and_then(Value::as_str)
                .map(|s| format!("sha1:{s}"))
        });
    Ok(Resolution::Npm {
        integrity,
        tarball: dist
            .get("tarball")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Resolves npm package `name`@`version` from `base` (npmjs by default).
pub async fn resolve(
    r: &Resolver<'_>,
    base: Option<&str>,
    name: &str,
    version: &str,
) -> Result<Resolution, ResolveError> {
    let base = base.unwrap_or(NPM_DEFAULT).trim_end_matches('/');
    let url = packument_url(base, name);
    let packument = r.json(base, &url, "application/json").await?;
    dist_of(&packument, name, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_version_dist_is_taken_as_npm_states_it() {
        let p = json!({"dist-tags": {"latest": "2.0.0"}, "versions": {
            "1.0.0": {"dist": {"integrity": "sha512-abc", "tarball": "http://r/x/-/x-1.0.0.tgz"}},
            "0.1.0": {"dist": {"shasum": "deadbeef"}}
        }});
        assert_eq!(
            dist_of(&p, "x", "1.0.0").unwrap(),
            Resolution::Npm {
                integrity: Some("sha512-abc".into()),
                tarball: Some("http://r/x/-/x-1.0.0.tgz".into())
            }
        );
        assert!(matches!(
            dist_of(&p, "x", "0.1.0").unwrap(),
            Resolution::Npm { integrity: Some(i), .. } if i == "sha1:deadbeef"
        ));
        let err = dist_of(&p, "x", "3.0.0").unwrap_err().to_string();
        assert!(
            err.contains("3.0.0") && err.contains("latest is 2.0.0"),
            "{err}"
        );
        assert_eq!(packument_url("http://r/", "@s/p"), "http://r/@s%2Fp");
    }
}
