//! The commands' end of the control socket: connect to the running
//! controller, send a request, read its answer or a stream of them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::protocol::{Request, Response};

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("reach the controller at {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("talk to the controller: {0}")]
    Io(#[from] std::io::Error),
    #[error("read the controller's answer: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("the controller closed the connection without answering")]
    Closed,
}

/// Connect to the controller at `path`, if one is listening.
pub async fn connect(path: &Path) -> Result<UnixStream, ControlError> {
    UnixStream::connect(path)
        .await
        .map_err(|source| ControlError::Connect {
            path: path.to_path_buf(),
            source,
        })
}

/// Send `request` and read one response (bounded by `timeout`).
pub async fn request(
    path: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<Response, ControlError> {
    let stream = connect(path).await?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    let mut lines = BufReader::new(read).lines();
    let answer = tokio::time::timeout(timeout, lines.next_line())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"))??;
    match answer {
        Some(line) => Ok(serde_json::from_str(&line)?),
        None => Err(ControlError::Closed),
    }
}

/// Open a watch stream: yields each status document as it arrives.
pub async fn watch(
    path: &Path,
) -> Result<mpsc::Receiver<Result<Response, ControlError>>, ControlError> {
    stream(path, &Request::Watch).await
}

/// Send a streaming `request` ([`Request::is_stream`]): yields each
/// response as it arrives.
pub async fn stream(
    path: &Path,
    request: &Request,
) -> Result<mpsc::Receiver<Result<Response, ControlError>>, ControlError> {
    let stream = connect(path).await?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    write.write_all(&line).await?;
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let _keep_open = write;
        let mut lines = BufReader::new(read).lines();
        loop {
            let item = match lines.next_line().await {
                Ok(Some(line)) => serde_json::from_str(&line).map_err(ControlError::from),
                Ok(None) => Err(ControlError::Closed),
                Err(e) => Err(ControlError::Io(e)),
            };
            let end = item.is_err();
            if tx.send(item).await.is_err() || end {
                return;
            }
        }
    });
    Ok(rx)
}
