//! The commands' end of the control socket: connect to the running
//! controller and ask it something. Each typed call ([`status`], [`reload`],
//! [`events`], [`logs`], [`lsp`]…) sends its request and returns the kind of
//! reply it asked for; a reply of another kind is an error
//! ([`ControlError::Unexpected`]), and so is the controller's refusal
//! ([`ControlError::Refused`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use steward_schema::resource::{ReloadSummary, ToolRow, WorkspaceStatus};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::protocol::{LogsQuery, Reply, Request, read_answer, read_status_text, request_line};
use crate::gateway::lsp::LspQuery;
use crate::observe::events::Event;
use crate::observe::logs::LogChunk;
use crate::support::paths::Paths;

/// Why the controller could not be asked, or did not answer what was asked.
/// Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("reach the controller at {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("talk to the controller: {0}")]
    Io(#[from] std::io::Error),
    #[error("write the request: {0}")]
    Encode(serde_json::Error),
    #[error("read the controller's answer: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("read the controller's answer: expected {expected}, got {got}")]
    Unexpected {
        expected: &'static str,
        got: &'static str,
    },
    /// The controller's own error, already phrased to read after "failed to".
    #[error("{0}")]
    Refused(String),
    #[error("the controller closed the connection without answering")]
    Closed,
}

/// What `reload` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Reloaded {
    /// What its reconciles did.
    Summary(ReloadSummary),
    /// The controller's word that there was nothing to reconcile.
    Note(String),
}

/// A `logs` answer (or one of `logs -f`).
#[derive(Debug, Clone, PartialEq)]
pub enum Logs {
    /// Lines of one process of the server.
    Lines(LogChunk),
    /// Why there are none (no process yet, a remote server), or that the
    /// followed server left the configuration.
    Notice(String),
}

/// The answers of a streaming request ([`Request::is_stream`]), each of the
/// kind the call asked for.
pub struct Replies<T> {
    rx: mpsc::Receiver<Result<Reply, ControlError>>,
    take: fn(Reply) -> Result<T, ControlError>,
}

impl<T> Replies<T> {
    /// The next answer: [`ControlError::Closed`] when the controller hangs
    /// up, then `None`.
    pub async fn next(&mut self) -> Option<Result<T, ControlError>> {
        Some(self.rx.recv().await?.and_then(self.take))
    }
}

/// The current `WorkspaceStatus` (with the servers' secrets when
/// `show_secrets`).
pub async fn status(
    path: &Path,
    show_secrets: bool,
    timeout: Duration,
) -> Result<WorkspaceStatus, ControlError> {
    status_of(request(path, &status_request(show_secrets), timeout).await?)
}

/// The one-shot status request, with the servers' secrets or not.
fn status_request(show_secrets: bool) -> Request {
    if show_secrets {
        Request::StatusWithSecrets { watch: false }
    } else {
        Request::Status
    }
}

/// The current `WorkspaceStatus` as JSON indented as `serde_json` indents
/// it, without reading it into values (`steward status -o json`).
pub async fn status_pretty_json(
    path: &Path,
    show_secrets: bool,
    timeout: Duration,
) -> Result<String, ControlError> {
    let line = answer_line(path, &status_request(show_secrets), timeout)
        .await?
        .ok_or(ControlError::Closed)?;
    let text = read_status_text(&line)?.map_err(ControlError::Refused)?;
    Ok(crate::support::json_pretty::pretty(text))
}

/// `WorkspaceStatus` now and after every change.
pub async fn watch(
    path: &Path,
    show_secrets: bool,
) -> Result<Replies<WorkspaceStatus>, ControlError> {
    let asked = if show_secrets {
        Request::StatusWithSecrets { watch: true }
    } else {
        Request::Watch
    };
    open_stream(path, &asked, status_of).await
}

/// Re-read every source; answers when the reload's reconciles have finished.
pub async fn reload(path: &Path, timeout: Duration) -> Result<Reloaded, ControlError> {
    match request(path, &Request::Reload, timeout).await? {
        Reply::Reload(summary) => Ok(Reloaded::Summary(summary)),
        Reply::Message(note) => Ok(Reloaded::Note(note)),
        other => Err(unexpected("a reload summary", &other)),
    }
}

/// Restart servers once; answers when their reconciles have finished.
pub async fn restart(
    path: &Path,
    names: &[String],
    now: bool,
    timeout: Duration,
) -> Result<ReloadSummary, ControlError> {
    let asked = Request::Restart {
        names: names.to_vec(),
        now,
    };
    match request(path, &asked, timeout).await? {
        Reply::Reload(summary) => Ok(summary),
        other => Err(unexpected("a reload summary", &other)),
    }
}

/// Stop servers and keep them stopped; answers what was stopped.
pub async fn stop(
    path: &Path,
    names: &[String],
    timeout: Duration,
) -> Result<String, ControlError> {
    let asked = Request::Stop {
        names: names.to_vec(),
    };
    message_of(request(path, &asked, timeout).await?)
}

/// Undo [`stop`]; answers what was started.
pub async fn start(
    path: &Path,
    names: &[String],
    timeout: Duration,
) -> Result<String, ControlError> {
    let asked = Request::Start {
        names: names.to_vec(),
    };
    message_of(request(path, &asked, timeout).await?)
}

/// Pin the tool definitions `names` (or, with `all`, every server with
/// quarantined ones) offer now; answers what was accepted.
pub async fn accept_tools(
    path: &Path,
    names: &[String],
    all: bool,
    timeout: Duration,
) -> Result<String, ControlError> {
    let asked = Request::AcceptTools {
        names: names.to_vec(),
        all,
    };
    message_of(request(path, &asked, timeout).await?)
}

/// How long telling one controller of a change may take.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `asked` (a change that concerns every controller of the user: a
/// secret, a sign-in) to each controller of `paths`' HOME_DIR; the socket
/// and answer of each that answered (a socket left by a killed controller
/// answers nothing: skipped).
pub async fn tell_every_controller(paths: &Paths, asked: &Request) -> Vec<(PathBuf, String)> {
    let mut answers = Vec::new();
    for socket in paths.controller_sockets() {
        match request(&socket, asked, NOTIFY_TIMEOUT)
            .await
            .and_then(message_of)
        {
            Ok(answer) => answers.push((socket, answer)),
            Err(e) => {
                tracing::debug!(socket = %socket.display(), error = %e, "a controller was not told")
            }
        }
    }
    answers
}

/// `steward secret move` through the running controller (see
/// [`Request::SecretMove`]); answers what it did.
pub async fn secret_move(
    path: &Path,
    asked: Request,
    timeout: Duration,
) -> Result<String, ControlError> {
    message_of(request(path, &asked, timeout).await?)
}

/// Every tool of the workspace (`steward tools`).
pub async fn tools(path: &Path, timeout: Duration) -> Result<Vec<ToolRow>, ControlError> {
    match request(path, &Request::Tools, timeout).await? {
        Reply::Tools(rows) => Ok(rows),
        other => Err(unexpected("tools", &other)),
    }
}

/// The event log, oldest first.
pub async fn events(path: &Path, timeout: Duration) -> Result<Vec<Event>, ControlError> {
    events_of(request(path, &Request::Events { watch: false }, timeout).await?)
}

/// The event log, then every new or updated event.
pub async fn watch_events(path: &Path) -> Result<Replies<Vec<Event>>, ControlError> {
    open_stream(path, &Request::Events { watch: true }, events_of).await
}

/// The kept stderr lines of a server (`query.follow` is ignored).
pub async fn logs(path: &Path, query: &LogsQuery, timeout: Duration) -> Result<Logs, ControlError> {
    let asked = Request::Logs(LogsQuery {
        follow: false,
        ..query.clone()
    });
    logs_of(request(path, &asked, timeout).await?)
}

/// The kept stderr lines of a server, then every new one, across its
/// restarts, until it leaves the configuration (`query.follow` is ignored).
pub async fn follow_logs(path: &Path, query: &LogsQuery) -> Result<Replies<Logs>, ControlError> {
    let asked = Request::Logs(LogsQuery {
        follow: true,
        ..query.clone()
    });
    open_stream(path, &asked, logs_of).await
}

/// Ask a language server: (the server used, its answer).
pub async fn lsp(
    path: &Path,
    query: &LspQuery,
    timeout: Duration,
) -> Result<(String, Value), ControlError> {
    match request(path, &Request::Lsp(query.clone()), timeout).await? {
        Reply::Lsp { server, result } => Ok((server, result)),
        other => Err(unexpected("a language server's answer", &other)),
    }
}

/// One line of a status stream read by hand (a reader that timestamps each
/// line as it arrives): the document it carries.
pub fn read_status(line: &str) -> Result<WorkspaceStatus, ControlError> {
    status_of(reply_of(line)?)
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

/// Send `asked` and read one answer (bounded by `timeout`), of any kind:
/// the typed calls above say which they expect.
pub async fn request(
    path: &Path,
    asked: &Request,
    timeout: Duration,
) -> Result<Reply, ControlError> {
    match answer_line(path, asked, timeout).await? {
        Some(line) => reply_of(&line),
        None => Err(ControlError::Closed),
    }
}

/// Send one request; its answer line (`None` when the controller hung up
/// without one).
async fn answer_line(
    path: &Path,
    asked: &Request,
    timeout: Duration,
) -> Result<Option<String>, ControlError> {
    let stream = connect(path).await?;
    let (read, mut write) = stream.into_split();
    write
        .write_all(&request_line(asked).map_err(ControlError::Encode)?)
        .await?;
    let mut lines = BufReader::new(read).lines();
    Ok(tokio::time::timeout(timeout, lines.next_line())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"))??)
}

/// Send a streaming request ([`Request::is_stream`]): yields each answer as
/// it arrives, of any kind.
pub async fn stream(path: &Path, asked: &Request) -> Result<Replies<Reply>, ControlError> {
    open_stream(path, asked, Ok).await
}

async fn open_stream<T>(
    path: &Path,
    asked: &Request,
    take: fn(Reply) -> Result<T, ControlError>,
) -> Result<Replies<T>, ControlError> {
    let stream = connect(path).await?;
    let (read, mut write) = stream.into_split();
    write
        .write_all(&request_line(asked).map_err(ControlError::Encode)?)
        .await?;
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let _keep_open = write;
        let mut lines = BufReader::new(read).lines();
        loop {
            let item = match lines.next_line().await {
                Ok(Some(line)) => reply_of(&line),
                Ok(None) => Err(ControlError::Closed),
                Err(e) => Err(ControlError::Io(e)),
            };
            let end = item.is_err();
            if tx.send(item).await.is_err() || end {
                return;
            }
        }
    });
    Ok(Replies { rx, take })
}

/// The reply an answer line carries, or the controller's refusal.
fn reply_of(line: &str) -> Result<Reply, ControlError> {
    read_answer(line)?.map_err(ControlError::Refused)
}

fn unexpected(expected: &'static str, got: &Reply) -> ControlError {
    ControlError::Unexpected {
        expected,
        got: got.kind(),
    }
}

fn status_of(reply: Reply) -> Result<WorkspaceStatus, ControlError> {
    match reply {
        Reply::Status(status) => Ok(*status),
        Reply::StatusJson(json) => Ok(serde_json::from_str(json.0.get())?),
        other => Err(unexpected("a status", &other)),
    }
}

fn message_of(reply: Reply) -> Result<String, ControlError> {
    match reply {
        Reply::Message(message) => Ok(message),
        other => Err(unexpected("a message", &other)),
    }
}

fn events_of(reply: Reply) -> Result<Vec<Event>, ControlError> {
    match reply {
        Reply::Events(events) => Ok(events),
        other => Err(unexpected("events", &other)),
    }
}

fn logs_of(reply: Reply) -> Result<Logs, ControlError> {
    match reply {
        Reply::Logs(chunk) => Ok(Logs::Lines(chunk)),
        Reply::Message(notice) => Ok(Logs::Notice(notice)),
        other => Err(unexpected("log lines", &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::protocol::{Answer, answer_line};

    /// A socket that reads one request line and answers `answers`, then
    /// hangs up; returns its path (kept while `dir` lives).
    fn controller(dir: &tempfile::TempDir, answers: Vec<Answer>) -> PathBuf {
        let path = dir.path().join("control.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            lines.next_line().await.unwrap();
            for answer in answers {
                write
                    .write_all(&answer_line(answer).unwrap())
                    .await
                    .unwrap();
            }
        });
        path
    }

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_call_gets_the_kind_it_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = controller(&dir, vec![Ok(Reply::Message("stopped a".to_owned()))]);
        assert_eq!(
            stop(&path, &["a".to_owned()], T).await.unwrap(),
            "stopped a"
        );
    }

    #[tokio::test]
    async fn a_reply_of_another_kind_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = controller(&dir, vec![Ok(Reply::Message("stopped a".to_owned()))]);
        let e = status(&path, false, T).await.unwrap_err();
        assert!(matches!(
            e,
            ControlError::Unexpected {
                expected: "a status",
                got: "a message"
            }
        ));
        assert_eq!(
            e.to_string(),
            "read the controller's answer: expected a status, got a message"
        );
    }

    #[tokio::test]
    async fn the_controllers_refusal_is_an_error_that_reads_after_failed_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = controller(&dir, vec![Err("restart a: it is blocked".to_owned())]);
        let e = restart(&path, &["a".to_owned()], false, T)
            .await
            .unwrap_err();
        assert!(matches!(e, ControlError::Refused(_)));
        assert_eq!(e.to_string(), "restart a: it is blocked");
    }

    #[tokio::test]
    async fn a_stream_yields_its_kind_then_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = controller(
            &dir,
            vec![Ok(Reply::Events(Vec::new())), Ok(Reply::Events(Vec::new()))],
        );
        let mut events = watch_events(&path).await.unwrap();
        assert_eq!(events.next().await.unwrap().unwrap(), Vec::new());
        assert_eq!(events.next().await.unwrap().unwrap(), Vec::new());
        assert!(matches!(
            events.next().await,
            Some(Err(ControlError::Closed))
        ));
        assert!(events.next().await.is_none());
    }

    #[tokio::test]
    async fn a_reload_with_nothing_to_reconcile_is_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let note = "reload applied; nothing to reconcile".to_owned();
        let path = controller(&dir, vec![Ok(Reply::Message(note.clone()))]);
        assert_eq!(reload(&path, T).await.unwrap(), Reloaded::Note(note));
    }
}
