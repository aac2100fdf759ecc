//! The HTTP transports on 127.0.0.1 (HTTPS with `tls`): streamable HTTP at
//! `/mcp`, the legacy HTTP+SSE transport at `/sse` and `/messages`, and a
//! fake OAuth token endpoint at `/token`.

use super::*;

pub async fn serve_http(server: Arc<Server>, port_file: &Path) -> std::io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", server.config.http_port.unwrap_or(0))).await?;
    let port = listener.local_addr()?.port();
    let tls = match &server.config.tls {
        Some(files) => Some(tls_acceptor(files)?),
        None => None,
    };
    // Rename is atomic: a reader sees either no file or the whole port.
    let tmp = port_file.with_extension("tmp");
    std::fs::write(&tmp, port.to_string())?;
    std::fs::rename(&tmp, port_file)?;
    loop {
        let (socket, _) = listener.accept().await?;
        let server = server.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _ = match tls {
                Some(acceptor) => match acceptor.accept(socket).await {
                    Ok(stream) => serve_connection(server, stream).await,
                    Err(err) => {
                        server.record_now("tls-error", json!(err.to_string()));
                        Ok(())
                    }
                },
                None => serve_connection(server, socket).await,
            };
        });
    }
}

/// A made-up CA (written to `ca_file`) and a server certificate it issued.
pub fn tls_acceptor(tls: &TlsConfig) -> std::io::Result<tokio_rustls::TlsAcceptor> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let fail = |error: rcgen::Error| std::io::Error::other(error.to_string());
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "fake-mcp-server test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(fail)?)
        .map_err(fail)?;
    let key = KeyPair::generate().map_err(fail)?;
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .map_err(fail)?
        .signed_by(&key, &ca)
        .map_err(fail)?;
    let tmp = tls.ca_file.with_extension("tmp");
    std::fs::write(&tmp, ca.pem())?;
    std::fs::rename(&tmp, &tls.ca_file)?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(std::io::Error::other)?
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)
    .map_err(std::io::Error::other)?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

pub struct HttpRequest {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without its query.
    pub fn route(&self) -> &str {
        self.path.split('?').next().unwrap_or_default()
    }

    /// A query parameter (no percent-decoding: our ids need none).
    pub fn query(&self, key: &str) -> Option<&str> {
        let (_, query) = self.path.split_once('?')?;
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

pub struct HttpResponse {
    pub status: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn empty(status: &'static str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn json(status: &'static str, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }
}

/// HTTP/1.1 with keep-alive; bodies must carry Content-Length (as reqwest's
/// JSON bodies do); a chunked request body closes the connection.
pub async fn serve_connection<S>(server: Arc<Server>, socket: S) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, mut writer) = tokio::io::split(socket);
    let mut reader = BufReader::new(reader);
    loop {
        let Some(request) = read_request(&mut reader).await? else {
            return Ok(());
        };
        let route = request.route().to_owned();
        if route == "/token" {
            let response = match &server.config.token_endpoint {
                Some(endpoint) if request.method == "POST" => {
                    token_response(&server, endpoint, &request)
                }
                _ => HttpResponse::empty("404 Not Found"),
            };
            write_response(&mut writer, response).await?;
            continue;
        }
        if !matches!(route.as_str(), "/mcp" | "/sse" | "/messages") {
            write_response(&mut writer, HttpResponse::empty("404 Not Found")).await?;
            continue;
        }
        if let Err(response) = check_bearer(&server, &request) {
            write_response(&mut writer, response).await?;
            continue;
        }
        let response = match (route.as_str(), request.method.as_str()) {
            ("/mcp", "POST") => handle_post(&server, &request).await,
            ("/mcp", "GET") => match check_session(&server, request.header("mcp-session-id")) {
                Ok(()) => return serve_sse(&server, &mut writer).await,
                Err(response) => response,
            },
            ("/mcp", "DELETE") => match check_session(&server, request.header("mcp-session-id")) {
                Ok(()) => {
                    let id = request.header("mcp-session-id").unwrap_or_default();
                    server.sessions.lock().expect("sessions lock").remove(id);
                    HttpResponse::empty("200 OK")
                }
                Err(response) => response,
            },
            ("/sse", "GET") => return serve_legacy_sse(&server, &mut writer).await,
            ("/messages", "POST") => handle_legacy_post(&server, &request),
            _ => HttpResponse {
                headers: vec![("Allow", "GET, POST, DELETE".into())],
                ..HttpResponse::empty("405 Method Not Allowed")
            },
        };
        write_response(&mut writer, response).await?;
    }
}

pub async fn read_request<R>(reader: &mut BufReader<R>) -> std::io::Result<Option<HttpRequest>>
where
    R: AsyncRead + Unpin,
{
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(std::io::Error::other("bad request line"));
    };
    let (method, path) = (method.to_owned(), path.to_owned());
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut request = HttpRequest {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if request.header("transfer-encoding").is_some() {
        return Err(std::io::Error::other(
            "chunked request bodies are not supported",
        ));
    }
    let length: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    request.body.resize(length, 0);
    reader.read_exact(&mut request.body).await?;
    Ok(Some(request))
}

pub async fn write_response(
    writer: &mut (impl AsyncWrite + Unpin),
    response: HttpResponse,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {}\r\nContent-Length: {}\r\n",
        response.status,
        response.body.len()
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    writer.write_all(head.as_bytes()).await?;
    writer.write_all(&response.body).await?;
    writer.flush().await
}

/// With `bearerTokens`: 401 unless the request carries an accepted token.
pub fn check_bearer(server: &Server, request: &HttpRequest) -> Result<(), HttpResponse> {
    let Some(accepted) = &server.accepted_tokens else {
        return Ok(());
    };
    let token = request
        .header("authorization")
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    let ok = token
        .as_ref()
        .is_some_and(|token| accepted.lock().expect("tokens lock").contains(token));
    server.record_now(
        "auth",
        json!({ "path": request.route(), "token": token, "accepted": ok }),
    );
    if ok {
        Ok(())
    } else {
        let mut response = HttpResponse::empty("401 Unauthorized");
        if !server.config.bearer_without_challenge {
            response
                .headers
                .push(("WWW-Authenticate", "Bearer realm=\"fake\"".into()));
        }
        Err(response)
    }
}

/// `POST /token`: the refresh grant of [`TokenEndpoint`].
pub fn token_response(
    server: &Server,
    endpoint: &TokenEndpoint,
    request: &HttpRequest,
) -> HttpResponse {
    let form: serde_json::Map<String, Value> = String::from_utf8_lossy(&request.body)
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (percent_decode(k), json!(percent_decode(v))))
        .collect();
    server.record_now("token", Value::Object(form.clone()));
    let field = |key: &str| form.get(key).and_then(Value::as_str);
    let valid = field("grant_type") == Some("refresh_token")
        && field("refresh_token") == Some(endpoint.refresh_token.as_str())
        && field("client_id") == Some(endpoint.client_id.as_str())
        && endpoint
            .client_secret
            .as_deref()
            .is_none_or(|secret| field("client_secret") == Some(secret));
    if !valid {
        return HttpResponse::json(
            "400 Bad Request",
            &json!({ "error": "invalid_grant", "error_description": "unknown refresh token or client" }),
        );
    }
    if let Some(accepted) = &server.accepted_tokens {
        accepted
            .lock()
            .expect("tokens lock")
            .insert(endpoint.access_token.clone());
    }
    let mut answer = json!({ "access_token": endpoint.access_token, "token_type": "Bearer" });
    if let Some(seconds) = endpoint.expires_in {
        answer["expires_in"] = json!(seconds);
    }
    if let Some(rotated) = &endpoint.new_refresh_token {
        answer["refresh_token"] = json!(rotated);
    }
    HttpResponse::json("200 OK", &answer)
}

/// `application/x-www-form-urlencoded` decoding of one key or value.
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// 400 without a session id, 404 for an unknown one (the client then
/// re-initializes, as the spec says).
pub fn check_session(server: &Server, id: Option<&str>) -> Result<(), HttpResponse> {
    match id {
        None => Err(HttpResponse::empty("400 Bad Request")),
        Some(id) if server.sessions.lock().expect("sessions lock").contains(id) => Ok(()),
        Some(_) => Err(HttpResponse::empty("404 Not Found")),
    }
}

pub fn new_session_id(server: &Server) -> String {
    let id = format!(
        "fake-{}-{}",
        std::process::id(),
        server.next_session.fetch_add(1, Ordering::SeqCst)
    );
    server
        .sessions
        .lock()
        .expect("sessions lock")
        .insert(id.clone());
    id
}

pub async fn handle_post(server: &Arc<Server>, request: &HttpRequest) -> HttpResponse {
    let t = server.recorder.now();
    let text = String::from_utf8_lossy(&request.body);
    let message = match parse_message(&text) {
        Ok(message) => message,
        Err(raw) => {
            server.recorder.record(t, "recv", raw);
            let response = error_response(Value::Null, -32700, "parse error".into());
            return HttpResponse::json("400 Bad Request", &response);
        }
    };
    server.recorder.record(t, "recv", message.clone());
    let is_initialize = message.get("method") == Some(&json!("initialize"));
    if !is_initialize && let Err(response) = check_session(server, request.header("mcp-session-id"))
    {
        return response;
    }
    let Some(response) = server.handle(&message, t).await else {
        return HttpResponse::empty("202 Accepted");
    };
    server.record_now("send", response.clone());
    let mut reply = HttpResponse::json("200 OK", &response);
    if is_initialize {
        reply
            .headers
            .push(("Mcp-Session-Id", new_session_id(server)));
    }
    reply
}

/// `POST /messages?sessionId=…` (legacy SSE): 202 at once; the answer goes
/// out on the session's event stream.
pub fn handle_legacy_post(server: &Arc<Server>, request: &HttpRequest) -> HttpResponse {
    let id = request.query("sessionId").map(str::to_owned);
    let Some(stream) = id
        .as_deref()
        .and_then(|id| server.legacy.lock().expect("legacy lock").get(id).cloned())
    else {
        return HttpResponse::empty("404 Not Found");
    };
    let t = server.recorder.now();
    let text = String::from_utf8_lossy(&request.body);
    let message = match parse_message(&text) {
        Ok(message) => message,
        Err(raw) => {
            server.recorder.record(t, "recv", raw);
            return HttpResponse::empty("400 Bad Request");
        }
    };
    server.recorder.record(t, "recv", message.clone());
    let server = server.clone();
    tokio::spawn(async move {
        if let Some(response) = server.handle(&message, t).await {
            server.record_now("send", response.clone());
            let _ = stream.send(response);
        }
    });
    HttpResponse::empty("202 Accepted")
}

pub const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
    Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";

/// Server-to-client stream: SSE events in a chunked response, open until the
/// client goes away.
pub async fn serve_sse(
    server: &Server,
    writer: &mut (impl AsyncWrite + Unpin),
) -> std::io::Result<()> {
    let Out::Http { stream, backlog } = &server.out else {
        unreachable!("SSE is only served in HTTP mode");
    };
    // Subscribe and take the backlog under one lock so nothing falls between.
    let (mut rx, pending) = {
        let mut backlog = backlog.lock().expect("backlog lock");
        (stream.subscribe(), std::mem::take(&mut *backlog))
    };
    writer.write_all(SSE_HEAD).await?;
    writer.flush().await?;
    for message in pending {
        server.record_now("send", message.clone());
        write_sse_event(writer, "message", &message.to_string()).await?;
    }
    loop {
        match rx.recv().await {
            Ok(message) => write_sse_event(writer, "message", &message.to_string()).await?,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

/// `GET /sse` (legacy SSE): the `endpoint` event, then this session's
/// answers and every notification, until the client goes away.
pub async fn serve_legacy_sse(
    server: &Server,
    writer: &mut (impl AsyncWrite + Unpin),
) -> std::io::Result<()> {
    let Out::Http { stream, .. } = &server.out else {
        unreachable!("SSE is only served in HTTP mode");
    };
    let id = new_session_id(server);
    let (tx, mut answers) = mpsc::unbounded_channel();
    server
        .legacy
        .lock()
        .expect("legacy lock")
        .insert(id.clone(), tx);
    let mut notifications = stream.subscribe();
    let result = async {
        writer.write_all(SSE_HEAD).await?;
        write_sse_event(writer, "endpoint", &format!("/messages?sessionId={id}")).await?;
        loop {
            let message = tokio::select! {
                Some(message) = answers.recv() => message,
                notification = notifications.recv() => match notification {
                    Ok(message) => message,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            };
            write_sse_event(writer, "message", &message.to_string()).await?;
        }
    }
    .await;
    server.legacy.lock().expect("legacy lock").remove(&id);
    server.sessions.lock().expect("sessions lock").remove(&id);
    result
}

pub async fn write_sse_event(
    writer: &mut (impl AsyncWrite + Unpin),
    event: &str,
    data: &str,
) -> std::io::Result<()> {
    let event = format!("event: {event}\ndata: {data}\n\n");
    let chunk = format!("{:x}\r\n{event}\r\n", event.len());
    writer.write_all(chunk.as_bytes()).await?;
    writer.flush().await
}
