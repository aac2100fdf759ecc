//! The loopback redirect (RFC 8252 §7.3): where the browser lands after the
//! user approves, `http://127.0.0.1:PORT/callback`.
//!
//! - **A stable port.** The port is derived from the server's name and the
//!   authorization server's issuer ([`stable_port`]), so the redirect URI a
//!   client was registered with (dynamically, or by hand for a
//!   pre-registered client) stays the same from one sign-in to the next;
//!   `oauth.redirectUri` pins it instead. A port in use is an error that
//!   says so — another port would break the registration.
//! - **Each arrival is judged by the flow.** The listener hands every
//!   request on the callback path to the flow with a way to answer it
//!   ([`Arrival`]); the flow checks the state and answers with a page saying
//!   whether the sign-in worked. Anything else is a 404.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use sha2::{Digest as _, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Ports [`stable_port`] chooses from: above Linux's ephemeral range
/// (32768–60999), so an outgoing connection never holds one.
const PORTS: std::ops::Range<u16> = 61000..65535;

/// The callback path of a derived redirect URI.
pub const CALLBACK_PATH: &str = "/callback";

/// The loopback port for `server` signing in at `issuer`.
pub fn stable_port(server: &str, issuer: &str) -> u16 {
    let digest = Sha256::digest(format!("{server}\0{issuer}").as_bytes());
    let n = u16::from_be_bytes([digest[0], digest[1]]);
    PORTS.start + n % (PORTS.end - PORTS.start)
}

/// A redirect URI the listener can serve: loopback, `http`, with a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// As registered and sent.
    pub uri: String,
    pub port: u16,
    pub path: String,
}

/// Why a redirect URI cannot be listened on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectError {
    #[error(
        "use oauth.redirectUri {0:?}: Steward receives the code on a loopback address, so it must be http://127.0.0.1:PORT/PATH or http://localhost:PORT/PATH"
    )]
    NotLoopback(String),
    #[error(
        "listen for the sign-in on {uri}: port {port} is in use (another sign-in may be running); finish or stop it, or pin another port with oauth.redirectUri"
    )]
    PortInUse { uri: String, port: u16 },
    #[error("listen for the sign-in on {uri}: {reason}")]
    Bind { uri: String, reason: String },
}

impl Redirect {
    /// The derived redirect of `server` at `issuer`.
    pub fn derived(server: &str, issuer: &str) -> Redirect {
        let port = stable_port(server, issuer);
        Redirect {
            uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
            port,
            path: CALLBACK_PATH.to_owned(),
        }
    }

    /// A redirect pinned by `oauth.redirectUri`.
    pub fn pinned(uri: &str) -> Result<Redirect, RedirectError> {
        let bad = || RedirectError::NotLoopback(uri.to_owned());
        let url = url::Url::parse(uri).map_err(|_| bad())?;
        let loopback = match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        let port = url.port().ok_or_else(bad)?;
        if url.scheme() != "http" || !loopback || port == 0 {
            return Err(bad());
        }
        Ok(Redirect {
            uri: uri.to_owned(),
            port,
            path: match url.path() {
                "" => "/".to_owned(),
                path => path.to_owned(),
            },
        })
    }
}

/// One request on the callback path: the full URL it was for, and where
/// the page to answer with goes.
#[derive(Debug)]
pub struct Arrival {
    /// `http://127.0.0.1:PORT/callback?code=…&state=…`.
    pub url: String,
    pub answer: oneshot::Sender<Page>,
}

/// The page the browser is shown.
#[derive(Debug, Clone)]
pub struct Page {
    pub ok: bool,
    pub text: String,
}

/// A listener bound to a redirect URI; arrivals come in order.
#[derive(Debug)]
pub struct Listener {
    pub redirect: Redirect,
    pub arrivals: mpsc::Receiver<Arrival>,
    cancel: CancellationToken,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn html(status: http::StatusCode, page: &Page) -> http::Response<Full<Bytes>> {
    let escaped = page
        .text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let title = if page.ok {
        "Signed in"
    } else {
        "Sign-in failed"
    };
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Steward: {title}</title></head>\
         <body><h1>{title}</h1><p>{escaped}</p></body></html>\n"
    );
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// Binds `redirect`'s port on the loopback and serves it until the
/// listener is dropped.
pub async fn listen(redirect: Redirect) -> Result<Listener, RedirectError> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, redirect.port));
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => RedirectError::PortInUse {
                uri: redirect.uri.clone(),
                port: redirect.port,
            },
            _ => RedirectError::Bind {
                uri: redirect.uri.clone(),
                reason: e.to_string(),
            },
        })?;
    let (tx, arrivals) = mpsc::channel(8);
    let cancel = CancellationToken::new();
    let (path, port) = (redirect.path.clone(), redirect.port);
    let stop = cancel.clone();
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let (tx, path, stop) = (tx.clone(), path.clone(), stop.clone());
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |request: http::Request<_>| {
                    let (tx, path) = (tx.clone(), path.clone());
                    async move { Ok::<_, Infallible>(arrive(request, &path, port, &tx).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::select! {
                    _ = connection => {}
                    () = stop.cancelled() => {}
                }
            });
        }
    });
    Ok(Listener {
        redirect,
        arrivals,
        cancel,
    })
}

/// Answers one request: the callback path goes to the flow, the rest 404.
async fn arrive<B>(
    request: http::Request<B>,
    path: &str,
    port: u16,
    tx: &mpsc::Sender<Arrival>,
) -> http::Response<Full<Bytes>> {
    if request.method() != http::Method::GET || request.uri().path() != path {
        return html(
            http::StatusCode::NOT_FOUND,
            &Page {
                ok: false,
                text: "Nothing here: this is Steward's sign-in callback.".to_owned(),
            },
        );
    }
    let query = request
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let url = format!("http://127.0.0.1:{port}{path}{query}");
    let (answer, page) = oneshot::channel();
    if tx.send(Arrival { url, answer }).await.is_err() {
        return html(
            http::StatusCode::GONE,
            &Page {
                ok: false,
                text: "This sign-in is over; start it again from the terminal.".to_owned(),
            },
        );
    }
    match page.await {
        Ok(page) if page.ok => html(http::StatusCode::OK, &page),
        Ok(page) => html(http::StatusCode::BAD_REQUEST, &page),
        Err(_) => html(
            http::StatusCode::GONE,
            &Page {
                ok: false,
                text: "This sign-in is over; start it again from the terminal.".to_owned(),
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_stable_per_server_and_issuer() {
        let a = stable_port("github", "https://github.com/login/oauth");
        assert_eq!(a, stable_port("github", "https://github.com/login/oauth"));
        assert!(PORTS.contains(&a));
        assert_ne!(a, stable_port("linear", "https://github.com/login/oauth"));
        assert_eq!(
            Redirect::derived("github", "https://github.com/login/oauth").uri,
            format!("http://127.0.0.1:{a}/callback")
        );
    }

    #[test]
    fn a_pinned_redirect_must_be_loopback_http_with_a_port() {
        let r = Redirect::pinned("http://localhost:8765/oauth/cb").unwrap();
        assert_eq!((r.port, r.path.as_str()), (8765, "/oauth/cb"));
        for bad in [
            "https://127.0.0.1:8765/cb",
            "http://example.com:8765/cb",
            "http://127.0.0.1/cb",
            "not a url",
        ] {
            assert!(Redirect::pinned(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn arrivals_are_answered_by_the_flow_and_a_busy_port_is_named() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let redirect = Redirect::pinned(&format!("http://127.0.0.1:{port}/callback")).unwrap();
        let mut listener = listen(redirect.clone()).await.unwrap();
        let busy = listen(redirect).await.unwrap_err();
        assert!(
            matches!(busy, RedirectError::PortInUse { port: p, .. } if p == port),
            "{busy}"
        );
        let _ = rustls::crypto::ring::default_provider().install_default();
        let get = tokio::spawn(async move {
            let client = reqwest::Client::new();
            let missing = client
                .get(format!("http://127.0.0.1:{port}/favicon.ico"))
                .send()
                .await
                .unwrap();
            assert_eq!(missing.status(), 404);
            let response = client
                .get(format!("http://127.0.0.1:{port}/callback?code=c&state=s"))
                .send()
                .await
                .unwrap();
            (response.status(), response.text().await.unwrap())
        });
        let arrival = listener.arrivals.recv().await.unwrap();
        assert_eq!(
            arrival.url,
            format!("http://127.0.0.1:{port}/callback?code=c&state=s")
        );
        arrival
            .answer
            .send(Page {
                ok: true,
                text: "Signed in to <github>.".to_owned(),
            })
            .unwrap();
        let (status, text) = get.await.unwrap();
        assert_eq!(status, 200);
        assert!(text.contains("Signed in to &lt;github&gt;."), "{text}");
    }
}
