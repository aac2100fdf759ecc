//! The HTTP client every remote MCP connection shares: reqwest over rustls
//! (ring), trusting the system's CA certificates plus those named by
//! `SSL_CERT_FILE` / `SSL_CERT_DIR`.
//!
//! OpenSSL (curl, Python) reads `SSL_CERT_FILE` as *the* CA file but still
//! searches the system certificate directories; rustls-native-certs, in
//! contrast, reads only the variables when they are set. We do what OpenSSL
//! users expect: a private CA added through the variables extends the system
//! roots instead of replacing them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;

/// How long a TCP connect may take (the handshake timeout bounds it too).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Keep-alive probes on idle connections, so a long-lived SSE stream to a
/// host that vanished does not stay half-open forever.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// CA bundles of the common distributions (Debian/Ubuntu/Arch, Fedora/RHEL,
/// openSUSE, CentOS 7, Alpine).
const SYSTEM_BUNDLES: [&str; 5] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The client could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// No CA certificate could be loaded from anywhere.
    #[error(
        "load CA certificates: none found in the system store or SSL_CERT_FILE/SSL_CERT_DIR{details}"
    )]
    NoRoots {
        /// `: ` and the load errors, if there were any.
        details: String,
    },
    /// reqwest refused the configuration.
    #[error("build the HTTP client: {0}")]
    Client(String),
}

/// Where CA certificates come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootSources {
    /// Load the system store (the default locations OpenSSL probes).
    pub system: bool,
    /// `SSL_CERT_FILE`: a PEM bundle.
    pub file: Option<PathBuf>,
    /// `SSL_CERT_DIR`: directories of PEM files (`:`-separated in the variable).
    pub dirs: Vec<PathBuf>,
}

impl RootSources {
    /// The system store plus `SSL_CERT_FILE` / `SSL_CERT_DIR` from the process
    /// environment.
    pub fn from_env() -> RootSources {
        RootSources {
            system: true,
            file: std::env::var_os("SSL_CERT_FILE")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            dirs: std::env::var_os("SSL_CERT_DIR")
                .map(|dirs| {
                    std::env::split_paths(&dirs)
                        .filter(|p| !p.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// The root store and what could not be loaded (for a log line). A file
/// named twice is read once, and a certificate found twice (the system
/// bundle and its hashed directory, say) is added once.
pub fn load_roots(sources: &RootSources) -> (RootCertStore, Vec<String>) {
    let mut certs: Vec<CertificateDer<'static>> = Vec::new();
    let mut errors = Vec::new();
    let mut files_read = Vec::new();
    let mut load = |file: Option<&Path>, dir: Option<&Path>| {
        if let Some(file) = file {
            let file = file.canonicalize().unwrap_or_else(|_| file.to_owned());
            if files_read.contains(&file) {
                return;
            }
            files_read.push(file);
        }
        let result = rustls_native_certs::load_certs_from_paths(file, dir);
        certs.extend(result.certs);
        errors.extend(result.errors.iter().map(ToString::to_string));
    };
    if sources.system {
        // The distribution's bundle, else the hashed certificate directories
        // (the same certificates, one file each).
        match SYSTEM_BUNDLES
            .iter()
            .map(Path::new)
            .find(|file| file.is_file())
        {
            Some(bundle) => load(Some(bundle), None),
            None => {
                for dir in openssl_probe::candidate_cert_dirs() {
                    load(None, Some(dir));
                }
            }
        }
    }
    if let Some(file) = &sources.file {
        load(Some(file), None);
    }
    for dir in &sources.dirs {
        load(None, Some(dir));
    }
    let mut seen = HashSet::new();
    certs.retain(|cert| seen.insert(cert.as_ref().to_vec()));
    let mut store = RootCertStore::empty();
    let (_added, ignored) = store.add_parsable_certificates(certs);
    if ignored > 0 {
        errors.push(format!("{ignored} certificates could not be parsed"));
    }
    (store, errors)
}

/// A reqwest client trusting the roots of `sources`.
pub fn build_client(sources: &RootSources) -> Result<reqwest::Client, TlsError> {
    build_client_with(sources, |builder| builder)
}

/// [`build_client`], with `adjust` changing the builder before it builds
/// (OAuth: no redirects, an overall timeout).
pub fn build_client_with(
    sources: &RootSources,
    adjust: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
) -> Result<reqwest::Client, TlsError> {
    let (roots, errors) = load_roots(sources);
    if roots.is_empty() {
        let details = if errors.is_empty() {
            String::new()
        } else {
            format!(": {}", errors.join("; "))
        };
        return Err(TlsError::NoRoots { details });
    }
    for error in &errors {
        tracing::warn!(%error, "a CA certificate source could not be read");
    }
    tracing::debug!(roots = roots.len(), "https roots loaded");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Client(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    adjust(
        reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_keepalive(TCP_KEEPALIVE),
    )
    .build()
    .map_err(|error| TlsError::Client(error.to_string()))
}

/// The process-wide client (built on first use from the environment): one
/// connection pool and one root store for every remote server. Use it for
/// any HTTP request: reqwest is built without a default crypto provider, so
/// a bare `reqwest::Client::new()` works only once this has run.
pub async fn shared_client() -> Result<reqwest::Client, TlsError> {
    static CLIENT: OnceLock<Result<reqwest::Client, TlsError>> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return client.clone();
    }
    // Reading a few hundred certificates takes tens of milliseconds: not on
    // a runtime worker.
    let init = || {
        CLIENT
            .get_or_init(|| {
                // For other clients in the process (rmcp's defaults among them).
                let _ = rustls::crypto::ring::default_provider().install_default();
                build_client(&RootSources::from_env())
            })
            .clone()
    };
    tokio::task::spawn_blocking(init)
        .await
        .unwrap_or_else(|error| Err(TlsError::Client(error.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_roots_load_on_this_machine() {
        let (roots, _errors) = load_roots(&RootSources {
            system: true,
            ..RootSources::default()
        });
        assert!(!roots.is_empty(), "no system CA certificates found");
    }

    #[test]
    fn the_system_roots_named_again_are_not_added_twice() {
        let system = RootSources {
            system: true,
            ..RootSources::default()
        };
        let (roots, _) = load_roots(&system);
        let bundle = SYSTEM_BUNDLES
            .iter()
            .map(PathBuf::from)
            .find(|file| file.is_file())
            .expect("a system CA bundle");
        // SSL_CERT_FILE naming the system bundle, as on this machine.
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy.pem");
        std::fs::copy(&bundle, &copy).unwrap();
        for file in [bundle, copy] {
            let again = RootSources {
                file: Some(file.clone()),
                ..system.clone()
            };
            assert_eq!(
                load_roots(&again).0.len(),
                roots.len(),
                "{}",
                file.display()
            );
        }
    }

    #[test]
    fn no_roots_at_all_is_an_error_naming_what_failed() {
        let error = build_client(&RootSources {
            system: false,
            file: Some(PathBuf::from("/nonexistent/steward-ca.pem")),
            dirs: Vec::new(),
        })
        .unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("load CA certificates: none found"),
            "{message}"
        );
        assert!(message.contains("/nonexistent/steward-ca.pem"), "{message}");
    }
}
