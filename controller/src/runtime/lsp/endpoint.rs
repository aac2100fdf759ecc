//! Where a language server is reached — its stdio pipes, a tcp
//! `host:port` or a unix socket — as the spec says, checked before anything
//! starts, and one connection attempt to it.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use steward_schema::formats::LspTransport;
use steward_schema::resource::{LspServerSpec, Reason};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use crate::runtime::start::StartError;

/// Host of a tcp server whose `socket.host` is not set.
const DEFAULT_HOST: &str = "127.0.0.1";

/// Where the server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Endpoint {
    Stdio,
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Stdio => f.write_str("stdio"),
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Unix(path) => write!(f, "unix socket {}", path.display()),
        }
    }
}

impl Endpoint {
    pub(super) fn of(spec: &LspServerSpec) -> Result<Endpoint, StartError> {
        let bad = |message: &str| StartError::failed(message);
        match spec.transport {
            LspTransport::Stdio if spec.command.is_none() => Err(bad(
                "start the language server: the stdio transport needs a command",
            )),
            LspTransport::Stdio => Ok(Endpoint::Stdio),
            LspTransport::Tcp => {
                let socket = spec.socket.as_ref();
                let port = socket.and_then(|socket| socket.port).ok_or_else(|| {
                    bad("connect to the language server: the tcp transport needs socket.port")
                })?;
                let port = u16::try_from(port)
                    .ok()
                    .filter(|port| *port != 0)
                    .ok_or_else(|| {
                        StartError::new(
                            Reason::StartFailed,
                            format!("connect to the language server: port {port} is out of range"),
                        )
                    })?;
                let host = socket
                    .and_then(|socket| socket.host.clone())
                    .filter(|host| !host.is_empty())
                    .unwrap_or_else(|| DEFAULT_HOST.to_owned());
                Ok(Endpoint::Tcp { host, port })
            }
            LspTransport::Socket => {
                let path = spec
                    .socket
                    .as_ref()
                    .and_then(|socket| socket.path.as_deref())
                    .filter(|path| !path.is_empty())
                    .ok_or_else(|| {
                        bad("connect to the language server: the socket transport needs socket.path")
                    })?;
                // Normalized to absolute; a relative one is the workspace folder's.
                Ok(Endpoint::Unix(Path::new(&spec.workspace_folder).join(path)))
            }
        }
    }

    pub(super) async fn connect(&self) -> io::Result<(Input, Output)> {
        match self {
            Endpoint::Stdio => Err(io::Error::other("stdio is not a network endpoint")),
            Endpoint::Tcp { host, port } => {
                let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                stream.set_nodelay(true)?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read.compat()), Box::new(write.compat_write())))
            }
            Endpoint::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path).await?;
                let (read, write) = stream.into_split();
                Ok((Box::new(read.compat()), Box::new(write.compat_write())))
            }
        }
    }
}

pub(super) type Input = Box<dyn futures::AsyncRead + Send + Unpin>;
pub(super) type Output = Box<dyn futures::AsyncWrite + Send + Unpin>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::lsp::testing::*;

    #[tokio::test]
    async fn spec_problems_fail_before_anything_starts() {
        let (_dir, ws) = workspace();
        let (result, _rx) = connect(&spec(&ws, LspTransport::Stdio)).await;
        assert_eq!(
            result.unwrap_err().message,
            "start the language server: the stdio transport needs a command"
        );
        let (result, _rx) = connect(&spec(&ws, LspTransport::Tcp)).await;
        assert_eq!(
            result.unwrap_err().message,
            "connect to the language server: the tcp transport needs socket.port"
        );
        let (result, _rx) = connect(&spec(&ws, LspTransport::Socket)).await;
        assert_eq!(
            result.unwrap_err().message,
            "connect to the language server: the socket transport needs socket.path"
        );
    }
}
