//! The stdio transport: newline-delimited JSON on stdin and stdout.

use super::*;

pub async fn serve_stdio(server: Arc<Server>, mut rx: mpsc::UnboundedReceiver<StdoutItem>) {
    // Writing from one task keeps lines whole and the reader and timers free
    // to run while a slow client leaves the pipe full.
    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(item) = rx.recv().await {
            match item {
                StdoutItem::Line(mut line) => {
                    line.push('\n');
                    if stdout.write_all(line.as_bytes()).await.is_err()
                        || stdout.flush().await.is_err()
                    {
                        return;
                    }
                }
                StdoutItem::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    });

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let t = server.recorder.now();
        let message = parse_message(&line);
        server
            .recorder
            .record(t, "recv", message.clone().unwrap_or_else(|raw| raw));
        // One task per message: tasks start in arrival order, so responses
        // keep that order unless a fault delays one of them.
        let server = server.clone();
        tokio::spawn(async move {
            let message = match message {
                Ok(message) => message,
                Err(_) if server.silent_at(t) => return,
                Err(_) => {
                    server.send(error_response(Value::Null, -32700, "parse error".into()));
                    return;
                }
            };
            let is_initialize = message.get("method") == Some(&json!("initialize"));
            if let Some(response) = server.handle(&message, t).await {
                server.send(response);
                if is_initialize
                    && server.config.garbage_on_stdout == Some(GarbageWhen::AfterInitialize)
                {
                    server.send_raw(GARBAGE_LINE);
                }
            }
        });
    }

    // stdin closed: let the writer drain what is queued, then exit.
    if let Out::Stdio(tx) = &server.out {
        let (done_tx, done_rx) = oneshot::channel();
        if tx.send(StdoutItem::Flush(done_tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(1), done_rx).await;
        }
    }
    server.exit(0, "stdin closed");
}
