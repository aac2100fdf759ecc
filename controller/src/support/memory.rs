//! Giving freed memory back to the system once a burst of work is over.
//!
//! glibc's allocator keeps the pages a cold start, a reload or a status
//! answer freed, for reuse; a controller of hundreds of servers would
//! otherwise hold, for hours, the high-water mark of its busiest moment
//! (measured: ~5 KB per server after 30 edits). [`after_bursts`] trims once
//! the status has been quiet for a moment; at rest it costs nothing. And
//! [`tune`] keeps large buffers (a status document of hundreds of servers,
//! a long tool list) mapped on their own, so that freeing one returns it.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long the status stays unchanged before a burst counts as over.
pub(crate) const QUIET: Duration = Duration::from_millis(200);

/// Size from which an allocation is mapped on its own (glibc's default).
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Fixes glibc's mmap threshold at its default. Left alone, glibc raises it
/// to the size of each large block freed (up to 32 MiB), after which large
/// transient buffers come from the heap and their pages stay behind (−3 KB
/// per server of peak RSS at 500 servers, measured).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn tune() {
    // SAFETY: mallopt takes two integers; setting M_MMAP_THRESHOLD is
    // allowed at any time and only affects later allocations.
    let _ = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn tune() {}

/// Returns the allocator's free pages to the system; `true` when some were.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn release_freed() -> bool {
    // SAFETY: malloc_trim takes no pointers; glibc allows it from any
    // thread at any time (it takes the arenas' locks itself).
    unsafe { libc::malloc_trim(0) != 0 }
}

/// Other allocators return memory on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn release_freed() -> bool {
    false
}

/// After each burst of status changes (a version bump of `changes`
/// followed by [`QUIET`] without one), [`release_freed`]; until `cancel`.
pub(crate) async fn after_bursts(mut changes: watch::Receiver<u64>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(QUIET) => break,
            }
        }
        let started = Instant::now();
        let released = tokio::task::spawn_blocking(release_freed)
            .await
            .unwrap_or(false);
        tracing::debug!(
            released,
            took_us = started.elapsed().as_micros() as u64,
            "gave freed memory back to the system"
        );
    }
}
