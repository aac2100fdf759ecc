//! The controller's end of the control socket: accept connections (of this
//! user only), read each request line and answer it, on the event loop or
//! as a stream.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use super::protocol::{Answer, Reply, Request, answer_line, status_line_parts};
use crate::support::socket::{Refused, admit_peer};

/// A request that needs the controller's event loop, with where to answer.
#[derive(Debug)]
pub struct Incoming {
    pub request: Request,
    pub reply: oneshot::Sender<Answer>,
}

/// What a request gets when the event loop is gone.
const SHUTTING_DOWN: &str = "the controller is shutting down";

/// How long a connection may take to send its request line.
const REQUEST_LINE_TIMEOUT: Duration = Duration::from_secs(30);

/// After a failed accept (EMFILE, ENFILE, ENOBUFS, ENOMEM...), wait this
/// long before accepting again instead of spinning: the pending connection
/// stays queued until then.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serve connections: every request goes to `to_loop` (the controller's
/// event loop answers), but a stream ([`Request::is_stream`]) is answered
/// by `watch_stream`.
pub async fn serve<W, Fut>(listener: UnixListener, to_loop: mpsc::Sender<Incoming>, watch_stream: W)
where
    W: Fn(Request, UnixStream) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut failing = false;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors or memory: the connection stays queued
                // and `accept` would fail again at once. Said once per streak.
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(%error, "control socket: accept failed; retrying every {ACCEPT_BACKOFF:?}");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if std::mem::take(&mut failing) {
            tracing::info!("control socket: accepting connections again");
        }
        if let Err(why) = admit_peer(&stream) {
            let from = match why {
                Refused::OtherUser => "another user",
                Refused::OwnServer => "a server Steward runs",
            };
            tracing::warn!(peer = ?stream.peer_cred().ok(), "control socket: refused a connection from {from}");
            tokio::spawn(refuse(stream, why));
            continue;
        }
        let to_loop = to_loop.clone();
        let watch_stream = watch_stream.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            // A client that never says anything does not hold a descriptor
            // for ever.
            let Ok(Ok(Some(line))) =
                tokio::time::timeout(REQUEST_LINE_TIMEOUT, lines.next_line()).await
            else {
                return;
            };
            let answer = match serde_json::from_str::<Request>(&line) {
                Ok(request) if request.is_stream() => {
                    let stream = match lines.into_inner().into_inner().reunite(write) {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                    watch_stream(request, stream).await;
                    return;
                }
                Ok(request) => {
                    let (reply, answer) = oneshot::channel();
                    if to_loop.send(Incoming { request, reply }).await.is_err() {
                        Err(SHUTTING_DOWN.to_owned())
                    } else {
                        answer
                            .await
                            .unwrap_or_else(|_| Err(SHUTTING_DOWN.to_owned()))
                    }
                }
                Err(e) => Err(format!("parse the request: {e}")),
            };
            let _ = write_answer(&mut write, answer).await;
        });
    }
}

/// Answer a peer of another user with an error (after its request line, so
/// that it reads the answer rather than a broken pipe), and hang up.
async fn refuse(stream: UnixStream, why: Refused) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let _ = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await;
    let uid = crate::support::paths::effective_uid();
    let refusal = Err(match why {
        Refused::OtherUser => {
            format!("use the controller: it serves only its own user (uid {uid})")
        }
        Refused::OwnServer => {
            "use the controller: a server Steward runs may not use its control socket".to_owned()
        }
    });
    let _ = write_answer(&mut write, refusal).await;
}

/// Write one answer line.
pub async fn write_answer<W: AsyncWriteExt + Unpin>(
    w: &mut W,
    answer: Answer,
) -> std::io::Result<()> {
    if let Ok(Reply::StatusJson(raw)) = &answer {
        let (before, after) = status_line_parts();
        w.write_all(before).await?;
        w.write_all(raw.0.get().as_bytes()).await?;
        w.write_all(after).await?;
        return w.flush().await;
    }
    let line = answer_line(answer).map_err(std::io::Error::other)?;
    w.write_all(&line).await?;
    w.flush().await
}
