//! PyPI: the entry point `uvx --from <id>==<version>` runs, read from the
//! distribution's own metadata — the `[console_scripts]` of the wheel's
//! `entry_points.txt` — never guessed from its name. The wheel is found in
//! the package's simple index (PEP 503 HTML or PEP 691 JSON), downloaded,
//! checked against the sha256 the index states, and read. What it told is
//! kept in the cache (a version's wheel never changes), so the same version
//! resolves again without a download, and offline.

use std::io::Read as _;

use serde_json::{Value, json};
use steward_schema::canonical::sha256_hex;
use steward_schema::registry::entry::{PYPI_DEFAULT, Resolution, simple_index};

use super::{Options, ResolveError, Resolver};
use crate::registry::http::MAX_JSON;

/// PEP 503's normalized name: lowercase, runs of `-_.` as one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut dash = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            dash = true;
        } else {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// One file of a simple index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFile {
    pub filename: String,
    pub url: String,
    pub sha256: Option<String>,
}

/// The files of a simple index page (`text` from `page_url`), HTML or JSON.
pub fn index_files(text: &str, page_url: &str) -> Vec<IndexFile> {
    let join = |href: &str| {
        url::Url::parse(page_url)
            .and_then(|u| u.join(href))
            .map(String::from)
            .unwrap_or_else(|_| href.to_owned())
    };
    if let Ok(doc) = serde_json::from_str::<Value>(text) {
        return doc
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| {
                Some(IndexFile {
                    filename: f.get("filename")?.as_str()?.to_owned(),
                    url: join(f.get("url")?.as_str()?),
                    sha256: f
                        .pointer("/hashes/sha256")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                })
            })
            .collect();
    }
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    while let Some(start) = lower[at..].find("<a ") {
        let tag_start = at + start;
        let Some(tag_len) = lower[tag_start..].find('>') else {
            break;
        };
        let tag = &text[tag_start..tag_start + tag_len];
        let body_start = tag_start + tag_len + 1;
        let body_len = lower[body_start..].find("</a>").unwrap_or(0);
        let filename = unescape(text[body_start..body_start + body_len].trim());
        at = body_start + body_len;
        let Some(href) = attribute(tag, "href") else {
            continue;
        };
        let href = unescape(&href);
        let (path, fragment) = href.split_once('#').unwrap_or((&href, ""));
        out.push(IndexFile {
            filename,
            url: join(path),
            sha256: fragment.strip_prefix("sha256=").map(str::to_owned),
        });
    }
    out
}

/// An HTML attribute's value (`name="v"` or `name='v'`).
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name) {
        let at = from + i;
        let before_ok = at == 0 || lower.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = tag[at + name.len()..].trim_start();
        if before_ok && let Some(rest) = rest.strip_prefix('=') {
            let rest = rest.trim_start();
            let quote = rest.chars().next()?;
            if quote == '"' || quote == '\'' {
                let end = rest[1..].find(quote)?;
                return Some(rest[1..1 + end].to_owned());
            }
            return Some(rest.split_whitespace().next()?.to_owned());
        }
        from = at + name.len();
    }
    None
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The wheel of `name` `version` to read, among `files`: a pure-Python one
/// (`none-any`) first.
pub fn pick_wheel<'f>(files: &'f [IndexFile], name: &str, version: &str) -> Option<&'f IndexFile> {
    let want = normalize(name);
    let wheels: Vec<&IndexFile> = files
        .iter()
        .filter(|f| {
            let Some(stem) = f.filename.strip_suffix(".whl") else {
                return false;
            };
            let mut parts = stem.split('-');
            let (Some(dist), Some(ver)) = (parts.next(), parts.next()) else {
                return false;
            };
            normalize(dist) == want && ver == version
        })
        .collect();
    wheels
        .iter()
        .find(|f| f.filename.ends_with("-none-any.whl"))
        .or_else(|| wheels.first())
        .copied()
}

/// The `[console_scripts]` of an `entry_points.txt`, in order.
pub fn console_scripts(text: &str) -> Vec<String> {
    let mut in_section = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == "[console_scripts]";
        } else if in_section
            && !line.is_empty()
            && !line.starts_with('#')
            && !line.starts_with(';')
            && let Some((name, _)) = line.split_once('=')
        {
            out.push(name.trim().to_owned());
        }
    }
    out
}

/// The console scripts declared by the wheel `bytes`.
pub fn wheel_scripts(bytes: &[u8]) -> Result<Vec<String>, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("it is not a wheel (zip): {e}"))?;
    let name = zip
        .file_names()
        .filter_map(Result::ok)
        .map(|n| n.into_owned())
        .find(|n| n.ends_with(".dist-info/entry_points.txt") && n.matches('/').count() == 1);
    let Some(name) = name else {
        return Ok(Vec::new());
    };
    let mut text = String::new();
    zip.by_name(&name)
        .map_err(|e| e.to_string())?
        .take(MAX_JSON as u64)
        .read_to_string(&mut text)
        .map_err(|e| format!("{name} is not text: {e}"))?;
    Ok(console_scripts(&text))
}

/// Which script to run: the one asked for, the only one, or the one named
/// like the package.
pub fn choose(
    scripts: &[String],
    package: &str,
    asked: Option<&str>,
) -> Result<String, ResolveError> {
    let error = |why: &str| ResolveError::EntryPoint {
        package: package.to_owned(),
        why: why.to_owned(),
        scripts: if scripts.is_empty() {
            "none".to_owned()
        } else {
            scripts.join(", ")
        },
    };
    if let Some(asked) = asked {
        return scripts
            .iter()
            .find(|s| *s == asked)
            .cloned()
            .ok_or_else(|| error(&format!("it declares no console script {asked:?}")));
    }
    match scripts {
        [] => Err(error("its wheel declares no console script to run")),
        [only] => Ok(only.clone()),
        many => many
            .iter()
            .find(|s| normalize(s) == normalize(package))
            .cloned()
            .ok_or_else(|| error("it declares several, none named like the package")),
    }
}

/// Resolves PyPI package `name`==`version` from the index under `base`.
pub async fn resolve(
    r: &Resolver<'_>,
    base: Option<&str>,
    name: &str,
    version: &str,
    options: &Options,
) -> Result<Resolution, ResolveError> {
    let base = base.unwrap_or(PYPI_DEFAULT).trim_end_matches('/');
    let index = simple_index(base);
    let key = format!("pypi:{index}/{}=={version}", normalize(name));
    let known = r.recall(base, &key);
    let (scripts, file, sha256) = match known {
        Some(v) => (
            v["scripts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect(),
            v["file"].as_str().unwrap_or_default().to_owned(),
            v["sha256"].as_str().map(str::to_owned),
        ),
        None => {
            let Some(http) = r.http() else {
                return Err(ResolveError::Offline {
                    what: format!("the entry point of PyPI {name}=={version}"),
                });
            };
            let page_url = format!("{index}/{}/", normalize(name));
            let answer = http
                .get(
                    &page_url,
                    "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
                    &[],
                    MAX_JSON,
                )
                .await?;
            let text = String::from_utf8_lossy(&answer.body);
            let files = index_files(&text, &page_url);
            let wheel = pick_wheel(&files, name, version).ok_or_else(|| {
                let versions = files.iter().filter(|f| f.filename.ends_with(".whl")).count();
                ResolveError::NoVersion {
                    package: format!("PyPI {name}"),
                    version: version.to_owned(),
                    hint: format!(
                        "{page_url} lists {} files, {versions} wheels, none of {version} (Steward reads the entry point from a wheel)",
                        files.len()
                    ),
                }
            })?;
            let bytes = r.download(&wheel.url).await?;
            let got = sha256_hex(&bytes);
            if let Some(expected) = &wheel.sha256
                && !expected.eq_ignore_ascii_case(&got)
            {
                return Err(ResolveError::Integrity {
                    what: wheel.filename.clone(),
                    expected: expected.clone(),
                    got,
                });
            }
            let scripts = wheel_scripts(&bytes).map_err(|why| ResolveError::Unreadable {
                what: wheel.filename.clone(),
                why,
            })?;
            let sha256 = wheel.sha256.clone().or_else(|| {
                r.note(format!(
                    "{page_url} states no sha256 of {}; the lock records the one computed here",
                    wheel.filename
                ));
                Some(got)
            });
            r.remember(
                base,
                &key,
                &json!({"scripts": scripts, "file": wheel.filename, "sha256": sha256}),
            );
            (scripts, wheel.filename.clone(), sha256)
        }
    };
    let entry_point = choose(&scripts, name, options.entry_point.as_deref())?;
    Ok(Resolution::Pypi {
        entry_point,
        file,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize_as_pep_503_says() {
        assert_eq!(normalize("Friendly_Bard..x"), "friendly-bard-x");
        assert_eq!(normalize("mcp-server-time"), "mcp-server-time");
    }

    #[test]
    fn html_and_json_indexes_list_their_files() {
        let html = r#"<html><body>
<a href="../../files/clock_server-1.0.0-py3-none-any.whl#sha256=ab12" data-requires-python="&gt;=3.9">clock_server-1.0.0-py3-none-any.whl</a><br/>
<a href='https://f/clock-server-1.0.0.tar.gz'>clock-server-1.0.0.tar.gz</a>
</body></html>"#;
        let files = index_files(html, "http://127.0.0.1:9/simple/clock-server/");
        assert_eq!(files.len(), 2);
        assert_eq!(
            files[0].url,
            "http://127.0.0.1:9/files/clock_server-1.0.0-py3-none-any.whl"
        );
        assert_eq!(files[0].sha256.as_deref(), Some("ab12"));
        assert_eq!(files[1].sha256, None);
        let json = r#"{"files": [{"filename": "x-2-py3-none-any.whl", "url": "x.whl", "hashes": {"sha256": "cd"}}]}"#;
        let files = index_files(json, "http://h/simple/x/");
        assert_eq!(files[0].url, "http://h/simple/x/x.whl");
        assert_eq!(
            pick_wheel(&files, "X", "2").unwrap().sha256.as_deref(),
            Some("cd")
        );
        assert!(pick_wheel(&files, "x", "3").is_none());
    }

    #[test]
    fn the_entry_point_comes_from_the_metadata() {
        let text = "[gui_scripts]\nnope = a:b\n\n[console_scripts]\ntick-tock = clock.main:run\n# c\nother=x:y\n";
        let scripts = console_scripts(text);
        assert_eq!(scripts, ["tick-tock", "other"]);
        assert!(choose(&scripts, "clock-server", None).is_err());
        assert_eq!(
            choose(&scripts, "clock-server", Some("other")).unwrap(),
            "other"
        );
        assert_eq!(
            choose(&scripts[..1], "clock-server", None).unwrap(),
            "tick-tock"
        );
        let named = ["a".to_owned(), "clock_server".to_owned()];
        assert_eq!(
            choose(&named, "clock-server", None).unwrap(),
            "clock_server"
        );
        assert!(choose(&[], "x", None).is_err());
    }
}
