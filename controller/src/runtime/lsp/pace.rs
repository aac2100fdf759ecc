//! Reading a language server that floods its client: when it writes many
//! small messages in a short time (a storm of `client/registerCapability`,
//! of progress or log notifications), its output is read every
//! [`BURST_PAUSE`] instead of message by message. The pipe (or socket)
//! holds what comes meanwhile, so one wake-up reads many messages — the
//! wake-ups, not the messages, are most of what such a storm costs (1000
//! requests a second: 3.5 % of a core read one by one, 1.7–1.9 % paced;
//! `steward-lsp-bench --registration-storm`). A server in a burst is
//! answered up to [`BURST_PAUSE`] later; at its usual pace nothing waits,
//! and a large message (reads that fill the buffer) is read at full speed.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::AsyncRead;
use tokio::time::{Duration, Instant, Sleep};

/// How many small reads, each within [`WINDOW`] of the read before, make a
/// burst.
const BURST_READS: u32 = 32;
/// A read later than this after the one before ends a burst.
const WINDOW: Duration = Duration::from_millis(50);
/// A read of less than this is small: the server wrote little since the
/// last one (a read of more says more may be waiting: read again at once).
const SMALL: usize = 4096;
/// How long reading pauses after a small read in a burst.
const BURST_PAUSE: Duration = Duration::from_millis(25);

/// A reader that pauses in bursts (see the module doc).
pub(super) struct Paced<R> {
    inner: R,
    last_read: Instant,
    /// Small reads since the last gap of more than [`WINDOW`].
    small_reads: u32,
    pause: Option<Pin<Box<Sleep>>>,
}

impl<R> Paced<R> {
    pub(super) fn new(inner: R) -> Self {
        Paced {
            inner,
            last_read: Instant::now(),
            small_reads: 0,
            pause: None,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Paced<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(pause) = this.pause.as_mut() {
            ready!(pause.as_mut().poll(cx));
            this.pause = None;
        }
        let n = ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let now = Instant::now();
        if now.duration_since(this.last_read) > WINDOW {
            this.small_reads = 0;
        }
        this.last_read = now;
        if n < SMALL && n > 0 {
            this.small_reads = this.small_reads.saturating_add(1);
            if this.small_reads >= BURST_READS {
                this.pause = Some(Box::pin(tokio::time::sleep(BURST_PAUSE)));
            }
        }
        Poll::Ready(Ok(n))
    }
}

#[cfg(test)]
mod tests {
    use futures::AsyncReadExt as _;
    use tokio::io::AsyncWriteExt as _;
    use tokio_util::compat::TokioAsyncReadCompatExt as _;

    use super::*;

    /// Write `chunks` of `size` bytes, each read before the next is
    /// written, `gap` apart; how long the reads took in all.
    async fn read_chunks(chunks: usize, size: usize, gap: Duration) -> Duration {
        let (mut write, read) = tokio::io::duplex(64 * 1024);
        let mut paced = Paced::new(read.compat());
        let mut buf = vec![0u8; 8192];
        let mut waited = Duration::ZERO;
        for _ in 0..chunks {
            tokio::time::sleep(gap).await;
            write.write_all(&vec![b'x'; size]).await.unwrap();
            let t = Instant::now();
            let mut got = 0;
            while got < size {
                got += paced.read(&mut buf).await.unwrap();
            }
            waited += t.elapsed();
        }
        waited
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_small_messages_is_read_in_pauses() {
        // The first BURST_READS reads wait for nothing; from then on each
        // read waits out what is left of the pause the one before began.
        let gap = Duration::from_millis(1);
        let waited = read_chunks(BURST_READS as usize + 10, 200, gap).await;
        assert_eq!(waited, (BURST_PAUSE - gap) * 10);
    }

    #[tokio::test(start_paused = true)]
    async fn messages_at_a_usual_pace_and_large_ones_never_wait() {
        let spaced = read_chunks(100, 200, WINDOW + Duration::from_millis(1)).await;
        assert_eq!(spaced, Duration::ZERO);
        let large = read_chunks(200, 8192, Duration::ZERO).await;
        assert_eq!(large, Duration::ZERO);
    }
}
