//! Transports and framing: the listener of the tcp and unix-socket
//! transports, and LSP messages framed by `Content-Length:` headers.

use super::*;

pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    pub async fn accept(&self) -> std::io::Result<(BoxRead, BoxWrite)> {
        match self {
            Self::Tcp(listener) => {
                let (stream, _) = listener.accept().await?;
                let (reader, writer) = stream.into_split();
                Ok((Box::new(reader), Box::new(writer)))
            }
            Self::Unix(listener) => {
                let (stream, _) = listener.accept().await?;
                let (reader, writer) = stream.into_split();
                Ok((Box::new(reader), Box::new(writer)))
            }
        }
    }
}

/// The write half of a connection, shared with delayed-diagnostics tasks.
#[derive(Clone)]
pub struct Writer(Arc<tokio::sync::Mutex<BoxWrite>>);

impl Writer {
    pub fn new(inner: BoxWrite) -> Self {
        Self(Arc::new(tokio::sync::Mutex::new(inner)))
    }

    pub async fn send(&self, message: Value) -> std::io::Result<()> {
        let body = serde_json::to_vec(&message)?;
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(&body);
        let mut inner = self.0.lock().await;
        inner.write_all(&frame).await?;
        inner.flush().await?;
        record(Event::Send, message);
        Ok(())
    }
}

pub enum Frame {
    Message(Value),
    /// A well-framed body that is not JSON.
    Garbage,
}

/// The read half of a connection: `Content-Length` framing.
pub struct FrameReader(pub BufReader<BoxRead>);

impl FrameReader {
    /// The next frame, or `None` at a clean end of stream.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        use std::io::{Error, ErrorKind};
        let mut content_length = None;
        let mut saw_header = false;
        loop {
            let mut line = String::new();
            if self.0.read_line(&mut line).await? == 0 {
                return if saw_header {
                    Err(Error::new(
                        ErrorKind::UnexpectedEof,
                        "stream closed inside a header",
                    ))
                } else {
                    Ok(None)
                };
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if saw_header {
                    break;
                }
                continue;
            }
            saw_header = true;
            let (name, value) = line.split_once(':').ok_or_else(|| {
                Error::new(ErrorKind::InvalidData, format!("bad header line {line:?}"))
            })?;
            if name.trim().eq_ignore_ascii_case("content-length") {
                let length = value.trim().parse::<usize>().map_err(|err| {
                    Error::new(ErrorKind::InvalidData, format!("bad Content-Length: {err}"))
                })?;
                content_length = Some(length);
            }
        }
        let length = content_length
            .ok_or_else(|| Error::new(ErrorKind::InvalidData, "no Content-Length header"))?;
        let mut body = vec![0; length];
        self.0.read_exact(&mut body).await?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(message) => {
                record(Event::Recv, message.clone());
                Ok(Some(Frame::Message(message)))
            }
            Err(_) => {
                record(
                    Event::Recv,
                    json!({ "raw": String::from_utf8_lossy(&body) }),
                );
                Ok(Some(Frame::Garbage))
            }
        }
    }
}
