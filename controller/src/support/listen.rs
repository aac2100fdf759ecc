//! TCP listeners guarded by a bearer token: the rule every HTTP endpoint of
//! the controller follows (`--mcp-listen`, `--metrics-listen`). Loopback
//! needs nothing; any other address needs a token, read from a file only
//! its owner can read; a request is let in only with
//! `Authorization: Bearer <token>` (compared in constant time).

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::TcpListener;

/// Why a guarded listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("parse the listen address {0:?}: expected HOST:PORT such as 127.0.0.1:7331")]
    Address(String),
    #[error(
        "listen on {address}: it is not a loopback address, so clients must authenticate; pass {flag} FILE (a file readable only by you that holds the bearer token)"
    )]
    NeedsToken {
        address: SocketAddr,
        flag: &'static str,
    },
    #[error("read the token file {path}: {source}")]
    TokenRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "use the token file {path}: other users can read it (mode {mode:o}); run `chmod 600 {path}`"
    )]
    TokenMode { path: PathBuf, mode: u32 },
    #[error("use the token file {0}: it is empty")]
    TokenEmpty(PathBuf),
    #[error("listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
}

/// A bound listener and the token its clients must present.
#[derive(Debug)]
pub struct Guarded {
    pub listener: TcpListener,
    /// `None`: loopback without a token file, anyone local may connect.
    pub token: Option<Arc<str>>,
    pub loopback: bool,
}

impl Guarded {
    /// The bound address (the port is known even when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound TCP listener has an address")
    }
}

/// Bind `address`, checking the token rules first; `flag` is the option
/// that names the token file (for the error).
pub async fn bind(
    address: &str,
    token_file: Option<&Path>,
    flag: &'static str,
) -> Result<Guarded, ListenError> {
    let addr: SocketAddr = match address.parse() {
        Ok(addr) => addr,
        Err(_) => tokio::net::lookup_host(address)
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| ListenError::Address(address.to_owned()))?,
    };
    let loopback = addr.ip().is_loopback();
    let token = match token_file {
        Some(path) => Some(read_token(path)?.into()),
        None if loopback => None,
        None => {
            return Err(ListenError::NeedsToken {
                address: addr,
                flag,
            });
        }
    };
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind {
            address: address.to_owned(),
            source,
        })?;
    Ok(Guarded {
        listener,
        token,
        loopback,
    })
}

/// Whether `headers` carry the bearer `token` (always, when there is none).
pub fn authorized(headers: &http::HeaderMap, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|p| constant_time_eq(p.as_bytes(), token.as_bytes()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn read_token(path: &Path) -> Result<String, ListenError> {
    let meta = std::fs::metadata(path).map_err(|source| ListenError::TokenRead {
        path: path.to_owned(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(ListenError::TokenMode {
            path: path.to_owned(),
            mode,
        });
    }
    let text = std::fs::read_to_string(path).map_err(|source| ListenError::TokenRead {
        path: path.to_owned(),
        source,
    })?;
    let token = text.trim().to_owned();
    if token.is_empty() {
        return Err(ListenError::TokenEmpty(path.to_owned()));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_non_loopback_address_needs_a_token_file_named_by_its_flag() {
        let error = bind("0.0.0.0:0", None, "--metrics-token-file")
            .await
            .unwrap_err();
        assert!(matches!(error, ListenError::NeedsToken { .. }), "{error}");
        assert!(error.to_string().contains("--metrics-token-file"));
    }

    #[tokio::test]
    async fn a_token_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "secret\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = bind("0.0.0.0:0", Some(&path), "--x").await.unwrap_err();
        assert!(
            matches!(error, ListenError::TokenMode { mode: 0o644, .. }),
            "{error}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let guarded = bind("127.0.0.1:0", Some(&path), "--x").await.unwrap();
        assert_eq!(guarded.token.as_deref(), Some("secret"));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[test]
    fn only_the_right_bearer_is_authorized() {
        let mut headers = http::HeaderMap::new();
        assert!(authorized(&headers, None));
        assert!(!authorized(&headers, Some("s3cret")));
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer nope"),
        );
        assert!(!authorized(&headers, Some("s3cret")));
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(authorized(&headers, Some("s3cret")));
    }
}
