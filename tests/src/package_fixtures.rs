//! Packages for the tests' own registries, built for real: an npm package
//! packed by the real `npm pack` (its integrity as npm computes it) with
//! its packument, a wheel with a `RECORD` and an `entry_points.txt` and
//! the PEP 503 page that lists it, an MCP bundle (zip with a manifest).

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use steward_schema::canonical::sha256_hex;

use crate::registry_fixture::RegistryFixture;

/// The MCP server (Node) of the npm package and the bundle.
pub const NODE_SERVER: &str = include_str!("../fixtures/registry/mcp-server.js");
/// The MCP server (Python) of the wheel.
pub const PYTHON_SERVER: &str = include_str!("../fixtures/registry/clock_fixture.py");

/// An npm package as `npm pack` made it.
#[derive(Debug, Clone)]
pub struct Packed {
    pub tarball: Vec<u8>,
    pub integrity: String,
    pub shasum: String,
}

/// `npm pack` of a package `name`@`version` whose bin `bin` runs
/// [`NODE_SERVER`], in a scratch directory under `scratch`.
pub fn npm_pack(scratch: &Path, name: &str, version: &str, bin: &str) -> Packed {
    let dir = scratch.join(format!("pack-{}-{version}", name.replace('/', "_")));
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let package = json!({"name": name, "version": version, "bin": {bin: "server.js"},
                         "files": ["server.js"], "license": "MIT"});
    std::fs::write(dir.join("package.json"), package.to_string()).unwrap();
    std::fs::write(dir.join("server.js"), NODE_SERVER).unwrap();
    let run = Command::new("npm")
        .args(["pack", "--json", "--pack-destination"])
        .arg(&out)
        .current_dir(&dir)
        .env("npm_config_cache", scratch.join("npm-cache"))
        .env("npm_config_update_notifier", "false")
        .output()
        .expect("run npm pack (npm is a real peer: install Node.js)");
    assert!(
        run.status.success(),
        "npm pack failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: Value = serde_json::from_slice(&run.stdout).expect("npm pack --json");
    let filename = report[0]["filename"].as_str().unwrap();
    Packed {
        tarball: std::fs::read(out.join(filename)).unwrap(),
        integrity: report[0]["integrity"].as_str().unwrap().to_owned(),
        shasum: report[0]["shasum"].as_str().unwrap().to_owned(),
    }
}

/// Publishes `name`'s versions (`(version, bin, packed)`) to the fixture's
/// npm registry under `/npm/`: the packument and each tarball.
pub fn publish_npm(reg: &RegistryFixture, name: &str, versions: &[(&str, &str, &Packed)]) {
    let mut by_version = serde_json::Map::new();
    for (version, bin, packed) in versions {
        let file = format!(
            "/npm/{name}/-/{}-{version}.tgz",
            name.rsplit('/').next().unwrap()
        );
        reg.put_file(&file, "application/octet-stream", packed.tarball.clone());
        by_version.insert(
            (*version).to_owned(),
            json!({"name": name, "version": version, "bin": {*bin: "server.js"},
                   "dist": {"tarball": format!("{}{file}", reg.url()),
                            "integrity": packed.integrity, "shasum": packed.shasum}}),
        );
    }
    let latest = versions.last().map(|v| v.0).unwrap_or("0.0.0");
    let packument = json!({"name": name, "dist-tags": {"latest": latest}, "versions": by_version});
    let path = format!("/npm/{}", name.replace('/', "%2F"));
    reg.put_file(
        &path,
        "application/json",
        packument.to_string().into_bytes(),
    );
}

/// Base64 (`url_safe`: the URL-safe alphabet without padding, as wheels'
/// RECORD files write digests).
pub fn base64(bytes: &[u8], url_safe: bool) -> String {
    let table: &[u8; 64] = if url_safe {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(table[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
        if !url_safe {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn zip_of(files: &[(String, Vec<u8>, u32)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    for (name, data, mode) in files {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(*mode);
        w.start_file(name.as_str(), opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap();
    out.into_inner()
}

/// A wheel.
#[derive(Debug, Clone)]
pub struct Wheel {
    pub filename: String,
    pub bytes: Vec<u8>,
    pub sha256: String,
}

/// The pure-Python wheel of distribution `clock-fixture` `version`: module
/// `clock_fixture` ([`PYTHON_SERVER`]) and console script `script`.
pub fn clock_wheel(version: &str, script: &str) -> Wheel {
    let dist_info = format!("clock_fixture-{version}.dist-info");
    let mut files: Vec<(String, Vec<u8>, u32)> = vec![
        (
            "clock_fixture/__init__.py".to_owned(),
            PYTHON_SERVER.replace("@VERSION@", version).into_bytes(),
            0o644,
        ),
        (
            format!("{dist_info}/METADATA"),
            format!("Metadata-Version: 2.1\nName: clock-fixture\nVersion: {version}\nSummary: a test server\n")
                .into_bytes(),
            0o644,
        ),
        (
            format!("{dist_info}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: steward-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec(),
            0o644,
        ),
        (
            format!("{dist_info}/entry_points.txt"),
            format!("[console_scripts]\n{script} = clock_fixture:main\n").into_bytes(),
            0o644,
        ),
    ];
    let mut record = String::new();
    for (name, data, _) in &files {
        record.push_str(&format!(
            "{name},sha256={},{}\n",
            base64(&hex_bytes(&sha256_hex(data)), true),
            data.len()
        ));
    }
    record.push_str(&format!("{dist_info}/RECORD,,\n"));
    files.push((format!("{dist_info}/RECORD"), record.into_bytes(), 0o644));
    let bytes = zip_of(&files);
    Wheel {
        filename: format!("clock_fixture-{version}-py3-none-any.whl"),
        sha256: sha256_hex(&bytes),
        bytes,
    }
}

/// Publishes `wheels` of `clock-fixture` to the fixture's PEP 503 index
/// under `/pypi/simple/` (files under `/files/`).
pub fn publish_pypi(reg: &RegistryFixture, wheels: &[&Wheel]) {
    let mut page = String::from("<!DOCTYPE html>\n<html><body>\n");
    for w in wheels {
        let path = format!("/files/{}", w.filename);
        reg.put_file(&path, "application/octet-stream", w.bytes.clone());
        page.push_str(&format!(
            "<a href=\"../../../files/{}#sha256={}\">{}</a><br/>\n",
            w.filename, w.sha256, w.filename
        ));
    }
    page.push_str("</body></html>\n");
    reg.put_file(
        "/pypi/simple/clock-fixture/",
        "text/html",
        page.into_bytes(),
    );
}

/// An MCP bundle running [`NODE_SERVER`] with `node`, its `user_config`
/// asking for `WEATHER_KEY` (sensitive); `(bytes, sha256)`.
pub fn node_bundle(name: &str, version: &str) -> (Vec<u8>, String) {
    let manifest = json!({
        "manifest_version": "0.2", "name": name, "version": version,
        "server": {"type": "node", "entry_point": "server/server.js",
                   "mcp_config": {"command": "node", "args": ["${__dirname}/server/server.js"],
                                  "env": {"WEATHER_KEY": "${user_config.weather_key}"}}},
        "user_config": {"weather_key": {"type": "string", "title": "Weather key",
                                        "sensitive": true, "required": true}}
    });
    let package = json!({"name": name, "version": version});
    let bytes = zip_of(&[
        (
            "manifest.json".to_owned(),
            manifest.to_string().into_bytes(),
            0o644,
        ),
        (
            "server/server.js".to_owned(),
            NODE_SERVER.as_bytes().to_vec(),
            0o755,
        ),
        (
            "server/package.json".to_owned(),
            package.to_string().into_bytes(),
            0o644,
        ),
    ]);
    let sha = sha256_hex(&bytes);
    (bytes, sha)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        assert_eq!(base64(b"foobar", false), "Zm9vYmFy");
        assert_eq!(base64(b"fooba", false), "Zm9vYmE=");
        assert_eq!(base64(b"f", false), "Zg==");
        assert_eq!(base64(&[0xfb, 0xff], true), "-_8");
    }
}
