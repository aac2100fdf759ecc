//! `GET /metrics` (`--metrics-listen`): the exposition of [`super::metrics`]
//! in the Prometheus text format, or in OpenMetrics when the scraper's
//! `Accept` asks for `application/openmetrics-text`.
//!
//! Guarded as the agent endpoint's HTTP is ([`crate::support::listen`]):
//! loopback by default, a bearer token (`--metrics-token-file`) for any
//! other address. On loopback the `Host` must be a loopback name, so a page
//! a browser loads from a rebound name cannot read it.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

use super::{OPENMETRICS_TEXT, PROMETHEUS_TEXT, metrics};
use crate::support::listen::{self, Guarded, ListenError};

/// The path of the exposition.
pub const PATH: &str = "/metrics";

/// A bound metrics endpoint, ready to serve.
#[derive(Debug)]
pub struct MetricsEndpoint {
    guarded: Guarded,
}

impl MetricsEndpoint {
    /// Bind `address`, checking the token rules first.
    pub async fn bind(address: &str, token_file: Option<&Path>) -> Result<Self, ListenError> {
        let guarded = listen::bind(address, token_file, "--metrics-token-file").await?;
        Ok(MetricsEndpoint { guarded })
    }

    /// The bound address (the port is known even when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.guarded.local_addr()
    }

    /// Serve scrapes until `cancel`.
    pub async fn serve(self, cancel: CancellationToken) {
        let Guarded {
            listener,
            token,
            loopback,
        } = self.guarded;
        let guard = Arc::new(Guard { token, loopback });
        loop {
            let (stream, peer) = tokio::select! {
                () = cancel.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept a metrics scrape");
                        // EMFILE and friends: back off instead of spinning.
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let guard = guard.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |request| {
                    let response = guard.respond(&request);
                    async move { Ok::<_, std::convert::Infallible>(response) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::select! {
                    result = connection => if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "metrics connection ended");
                    },
                    () = cancel.cancelled() => {}
                }
            });
        }
    }
}

/// Who may scrape.
#[derive(Debug)]
struct Guard {
    token: Option<Arc<str>>,
    loopback: bool,
}

fn plain(status: http::StatusCode, text: &str) -> http::Response<Full<Bytes>> {
    let mut response = http::Response::new(Full::new(Bytes::from(text.to_owned())));
    *response.status_mut() = status;
    response
}

/// Whether a `Host` header names this machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    matches!(name, "localhost" | "::1")
        || name
            .parse()
            .is_ok_and(|ip: std::net::Ipv4Addr| ip.is_loopback())
}

/// Whether `Accept` asks for OpenMetrics.
fn wants_openmetrics(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"))
}

impl Guard {
    fn respond<B>(&self, request: &http::Request<B>) -> http::Response<Full<Bytes>> {
        if request.uri().path() != PATH {
            return plain(
                http::StatusCode::NOT_FOUND,
                "not found: the metrics are at /metrics\n",
            );
        }
        if request.method() != http::Method::GET && request.method() != http::Method::HEAD {
            return plain(http::StatusCode::METHOD_NOT_ALLOWED, "use GET\n");
        }
        if self.loopback {
            let host = request
                .headers()
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok());
            if !host.is_some_and(loopback_host) {
                return plain(
                    http::StatusCode::FORBIDDEN,
                    "forbidden: the Host is not a loopback name\n",
                );
            }
        }
        if !listen::authorized(request.headers(), self.token.as_deref()) {
            let mut response = plain(http::StatusCode::UNAUTHORIZED, "unauthorized\n");
            response.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
            return response;
        }
        let openmetrics = wants_openmetrics(request.headers());
        match metrics().encode(openmetrics) {
            Ok(text) => {
                let mut response = http::Response::new(Full::new(Bytes::from(text)));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static(if openmetrics {
                        OPENMETRICS_TEXT
                    } else {
                        PROMETHEUS_TEXT
                    }),
                );
                response
            }
            Err(_) => plain(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                "encode the metrics: a collector failed\n",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, headers: &[(&str, &str)]) -> http::Request<()> {
        let mut request = http::Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap()
    }

    fn header(response: &http::Response<Full<Bytes>>, name: http::header::HeaderName) -> String {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    }

    #[test]
    fn loopback_hosts_are_recognized() {
        for host in [
            "localhost:9100",
            "127.0.0.1:1",
            "127.0.0.1",
            "[::1]:80",
            "localhost",
        ] {
            assert!(loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:80",
            "10.0.0.1:80",
            "[fe80::1]:80",
        ] {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn the_format_follows_accept_and_the_token_is_checked() {
        let open = Guard {
            token: None,
            loopback: true,
        };
        let host = ("Host", "127.0.0.1:9100");
        let text = open.respond(&get("/metrics", &[host]));
        assert_eq!(text.status(), http::StatusCode::OK);
        assert_eq!(header(&text, http::header::CONTENT_TYPE), PROMETHEUS_TEXT);
        let om = open.respond(&get(
            "/metrics",
            &[
                host,
                (
                    "Accept",
                    "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
                ),
            ],
        ));
        assert_eq!(header(&om, http::header::CONTENT_TYPE), OPENMETRICS_TEXT);
        assert_eq!(
            open.respond(&get("/other", &[host])).status(),
            http::StatusCode::NOT_FOUND
        );
        assert_eq!(
            open.respond(&get("/metrics", &[("Host", "evil.example")]))
                .status(),
            http::StatusCode::FORBIDDEN
        );

        let guarded = Guard {
            token: Some("s3cret".into()),
            loopback: false,
        };
        let refused = guarded.respond(&get("/metrics", &[("Host", "10.1.2.3:9100")]));
        assert_eq!(refused.status(), http::StatusCode::UNAUTHORIZED);
        assert_eq!(header(&refused, http::header::WWW_AUTHENTICATE), "Bearer");
        let served = guarded.respond(&get(
            "/metrics",
            &[
                ("Host", "10.1.2.3:9100"),
                ("Authorization", "Bearer s3cret"),
            ],
        ));
        assert_eq!(served.status(), http::StatusCode::OK);
    }
}
