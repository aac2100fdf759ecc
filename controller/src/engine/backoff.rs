//! Backoff policies: how long a key waits before it is tried again.
//!
//! This module owns *when* to retry; the [work queue](crate::engine::queue) owns *that*
//! a key is retried (the reconciler turns a retry time into a
//! [`Requeue`](crate::engine::queue::Requeue)). Everything here is a pure state
//! machine: every time input is an explicit `now`, nothing sleeps and nothing
//! reads the clock, so it is unit-testable without waiting.
//!
//! Two policies:
//!
//! - [`KeyBackoff`]: per-key exponential backoff for failed reconciles
//!   (default 500 ms doubling to 60 s, no jitter), built on
//!   [`backon::ExponentialBuilder`].
//! - [`CrashLoop`]: kubelet-style `CrashLoopBackOff` for servers that exit after
//!   having started (10 s doubling to 300 s), keyed by server name *and*
//!   `configHash`.
//! - [`LspRestarts`]: a language server's `restartOnCrash` / `maxRestarts`
//!   policy, counted per `configHash`.
//!
//! Invariants:
//!
//! - **Only attempts made after their delay count.** A failure (or crash)
//!   whose attempt began before the key's retry time — because an unrelated
//!   event enqueued the key early — does not advance the exponent. Otherwise
//!   every stray event would double the delay again (client-go's
//!   super-exponential backoff, kubernetes/kubernetes#132805).
//! - **Reset on success and on a spec change.** [`KeyBackoff::succeeded`] and
//!   [`KeyBackoff::reset`] forget the key. A crash-loop entry belongs to one
//!   `configHash`: a different hash starts from the initial delay, and so does
//!   a crash after the process stayed up for the stable window (10 min).
//! - With jitter off (the default) delays never exceed the configured maximum
//!   and the sequence is deterministic; jitter adds at most the delay again.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

/// First delay after a failed reconcile.
pub const DEFAULT_INITIAL_DELAY: Duration = Duration::from_millis(500);
/// Growth factor between consecutive counted failures.
pub const DEFAULT_FACTOR: f32 = 2.0;
/// Upper bound on the failure backoff.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(60);

/// First delay after a crash (kubelet: 10 s).
pub const CRASH_INITIAL_DELAY: Duration = Duration::from_secs(10);
/// Upper bound on the crash-loop delay (kubelet: 300 s).
pub const CRASH_MAX_DELAY: Duration = Duration::from_secs(300);
/// A process that stayed up this long before crashing starts a fresh crash
/// loop (kubelet: 10 min).
pub const CRASH_STABLE_AFTER: Duration = Duration::from_secs(600);
/// Growth factor of the crash-loop delay.
const CRASH_FACTOR: f32 = 2.0;

/// A backoff configuration that cannot describe a sensible delay sequence.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackoffConfigError {
    /// The first delay is zero.
    #[error("backoff initial delay must be greater than zero")]
    ZeroInitialDelay,
    /// The factor is below 1 or not finite.
    #[error("backoff factor must be a finite number >= 1, got {0}")]
    InvalidFactor(f32),
    /// The cap is below the first delay.
    #[error("backoff max delay {max:?} is below the initial delay {initial:?}")]
    MaxBelowInitial {
        /// Configured first delay.
        initial: Duration,
        /// Configured cap.
        max: Duration,
    },
    /// The crash-loop stable window is zero.
    #[error("crash-loop stable window must be greater than zero")]
    ZeroStableWindow,
}

/// Parameters of [`KeyBackoff`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// Delay after the first counted failure.
    pub initial: Duration,
    /// Multiplier between consecutive counted failures.
    pub factor: f32,
    /// Cap on the delay.
    pub max: Duration,
    /// Add a random extra delay in `[0, delay)` (off by default: deterministic).
    pub jitter: bool,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: DEFAULT_INITIAL_DELAY,
            factor: DEFAULT_FACTOR,
            max: DEFAULT_MAX_DELAY,
            jitter: false,
        }
    }
}

impl BackoffConfig {
    /// Checks that the configuration describes a growing, capped sequence.
    pub fn validate(&self) -> Result<(), BackoffConfigError> {
        validate_ladder(self.initial, self.factor, self.max)
    }

    fn builder(&self) -> ExponentialBuilder {
        let builder = exponential(self.initial, self.factor, self.max);
        if self.jitter {
            builder.with_jitter()
        } else {
            builder
        }
    }
}

fn validate_ladder(
    initial: Duration,
    factor: f32,
    max: Duration,
) -> Result<(), BackoffConfigError> {
    if initial.is_zero() {
        return Err(BackoffConfigError::ZeroInitialDelay);
    }
    if !factor.is_finite() || factor < 1.0 {
        return Err(BackoffConfigError::InvalidFactor(factor));
    }
    if max < initial {
        return Err(BackoffConfigError::MaxBelowInitial { initial, max });
    }
    Ok(())
}

fn exponential(initial: Duration, factor: f32, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(initial)
        .with_factor(factor)
        .with_max_delay(max)
        .without_max_times()
}

/// One key's position on the exponential ladder.
#[derive(Debug)]
struct Ladder {
    steps: ExponentialBackoff,
    /// The last delay handed out (the one currently being waited).
    delay: Duration,
    /// When the key may be tried again.
    retry_at: Instant,
    /// Counted (on-time) failures since the last reset.
    count: u32,
}

impl Ladder {
    fn start(builder: ExponentialBuilder, max: Duration, now: Instant) -> Self {
        let mut steps = builder.build();
        // Unbounded `max_times` and no total delay: the iterator never ends;
        // fall back to the cap all the same.
        let delay = steps.next().unwrap_or(max);
        Self {
            steps,
            delay,
            retry_at: now + delay,
            count: 1,
        }
    }

    /// Moves one rung up (a counted failure).
    fn advance(&mut self, max: Duration) {
        self.delay = self.steps.next().unwrap_or(max);
        self.count = self.count.saturating_add(1);
    }
}

/// Per-key exponential backoff for failed reconciles.
///
/// The reconciler reports each outcome: [`failed`](Self::failed) returns the
/// instant to requeue the key at, [`succeeded`](Self::succeeded) and
/// [`reset`](Self::reset) forget it. [`ready`](Self::ready) tells whether a
/// key picked up by an unrelated event may be acted on already.
#[derive(Debug)]
pub struct KeyBackoff<K> {
    config: BackoffConfig,
    builder: ExponentialBuilder,
    keys: HashMap<K, Ladder>,
}

impl<K: Clone + Eq + Hash> Default for KeyBackoff<K> {
    fn default() -> Self {
        Self::with_valid_config(BackoffConfig::default())
    }
}

impl<K: Clone + Eq + Hash> KeyBackoff<K> {
    /// A backoff with the given parameters.
    pub fn new(config: BackoffConfig) -> Result<Self, BackoffConfigError> {
        config.validate()?;
        Ok(Self::with_valid_config(config))
    }

    fn with_valid_config(config: BackoffConfig) -> Self {
        Self {
            config,
            builder: config.builder(),
            keys: HashMap::new(),
        }
    }

    /// Records a failed attempt made at `now` and returns when to retry.
    ///
    /// An attempt made before the key's retry time (early) changes nothing:
    /// neither the exponent nor the pending retry time moves, and that
    /// pending time is returned. Otherwise the delay grows one step (the
    /// first failure gets the initial delay) and the retry is `now` plus it.
    #[cfg(test)]
    pub fn failed(&mut self, key: &K, now: Instant) -> Instant {
        self.failed_attempt(key, now, now)
    }

    /// Like [`failed`](Self::failed), with the attempt's start and the time
    /// the failure was observed given separately: whether the attempt was
    /// early is judged by `attempted_at` (a long reconcile that began early
    /// and failed after the retry time is still early).
    pub fn failed_attempt(&mut self, key: &K, attempted_at: Instant, now: Instant) -> Instant {
        let max = self.config.max;
        match self.keys.get_mut(key) {
            // Early attempt: neither the exponent nor the pending retry moves.
            Some(ladder) if attempted_at < ladder.retry_at => ladder.retry_at,
            Some(ladder) => {
                ladder.advance(max);
                ladder.retry_at = now + ladder.delay;
                ladder.retry_at
            }
            None => {
                let ladder = Ladder::start(self.builder, max, now);
                let at = ladder.retry_at;
                self.keys.insert(key.clone(), ladder);
                at
            }
        }
    }

    /// The key's reconcile succeeded: its backoff starts over.
    pub fn succeeded(&mut self, key: &K) {
        self.keys.remove(key);
    }

    /// The key's spec changed (or the key went away): its backoff starts over.
    /// How many keys it holds a ladder for.
    #[cfg(test)]
    pub fn tracked_keys(&self) -> usize {
        self.keys.len()
    }

    pub fn reset(&mut self, key: &K) {
        self.keys.remove(key);
    }

    /// When the key may be retried, if it is backing off.
    pub fn next_retry_at(&self, key: &K) -> Option<Instant> {
        self.keys.get(key).map(|l| l.retry_at)
    }

    /// The delay currently being waited by the key, if it is backing off.
    #[cfg(test)]
    pub fn current_delay(&self, key: &K) -> Option<Duration> {
        self.keys.get(key).map(|l| l.delay)
    }

    /// Counted failures since the last reset (early attempts not included).
    #[cfg(test)]
    pub fn failures(&self, key: &K) -> u32 {
        self.keys.get(key).map_or(0, |l| l.count)
    }

    /// Whether an attempt at `now` would count: no backoff, or its delay has
    /// elapsed.
    #[cfg(test)]
    pub fn ready(&self, key: &K, now: Instant) -> bool {
        self.next_retry_at(key).is_none_or(|at| now >= at)
    }
}

/// Parameters of [`CrashLoop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashLoopConfig {
    /// Delay after the first crash.
    pub initial: Duration,
    /// Cap on the delay (the delay doubles up to it).
    pub max: Duration,
    /// A process that stayed up this long starts a fresh loop when it crashes.
    pub stable_after: Duration,
}

impl Default for CrashLoopConfig {
    fn default() -> Self {
        Self {
            initial: CRASH_INITIAL_DELAY,
            max: CRASH_MAX_DELAY,
            stable_after: CRASH_STABLE_AFTER,
        }
    }
}

impl CrashLoopConfig {
    /// Checks that the configuration describes a growing, capped sequence.
    pub fn validate(&self) -> Result<(), BackoffConfigError> {
        validate_ladder(self.initial, CRASH_FACTOR, self.max)?;
        if self.stable_after.is_zero() {
            return Err(BackoffConfigError::ZeroStableWindow);
        }
        Ok(())
    }
}

#[derive(Debug)]
struct CrashEntry {
    config_hash: String,
    ladder: Ladder,
    /// The first crash was restarted at once; the ladder's first rung is
    /// still to come.
    restarted_at_once: bool,
}

/// Kubelet-style crash-loop backoff for servers that exit after starting.
///
/// Entries are keyed by server name and belong to one `configHash`: queries
/// with another hash see no entry, and a crash under a new hash starts over.
/// A process that stayed up for [`CrashLoopConfig::stable_after`] before
/// crashing starts over too. The first crash of a run is restarted at once
/// (a remote server that lost its session, a server killed by accident);
/// only repeated crashes back off, 10 s doubling to 300 s.
#[derive(Debug)]
pub struct CrashLoop<N> {
    config: CrashLoopConfig,
    builder: ExponentialBuilder,
    entries: HashMap<N, CrashEntry>,
}

impl<N: Clone + Eq + Hash> Default for CrashLoop<N> {
    fn default() -> Self {
        Self::with_valid_config(CrashLoopConfig::default())
    }
}

impl<N: Clone + Eq + Hash> CrashLoop<N> {
    /// A crash-loop tracker with the given parameters.
    pub fn new(config: CrashLoopConfig) -> Result<Self, BackoffConfigError> {
        config.validate()?;
        Ok(Self::with_valid_config(config))
    }

    fn with_valid_config(config: CrashLoopConfig) -> Self {
        Self {
            config,
            builder: exponential(config.initial, CRASH_FACTOR, config.max),
            entries: HashMap::new(),
        }
    }

    /// Records that the process `name` running `config_hash`, started at
    /// `started_at`, exited at `now`; returns how long to wait before
    /// starting it again (the retry time is `now` plus that delay).
    ///
    /// Starts over on a new hash or after a stable run. A process that was
    /// started before its retry time (restarted early) keeps the current
    /// delay instead of doubling it.
    pub fn crashed(
        &mut self,
        name: &N,
        config_hash: &str,
        started_at: Instant,
        now: Instant,
    ) -> Duration {
        let stable = now.saturating_duration_since(started_at) >= self.config.stable_after;
        let max = self.config.max;
        match self.entries.get_mut(name) {
            Some(entry) if entry.config_hash == config_hash && !stable => {
                let ladder = &mut entry.ladder;
                // Started before its retry time: this run does not count.
                if started_at >= ladder.retry_at {
                    if std::mem::take(&mut entry.restarted_at_once) {
                        ladder.count = ladder.count.saturating_add(1);
                    } else {
                        ladder.advance(max);
                    }
                }
                ladder.retry_at = now + ladder.delay;
                ladder.delay
            }
            _ => {
                let mut ladder = Ladder::start(self.builder, max, now);
                ladder.retry_at = now;
                self.entries.insert(
                    name.clone(),
                    CrashEntry {
                        config_hash: config_hash.to_owned(),
                        ladder,
                        restarted_at_once: true,
                    },
                );
                Duration::ZERO
            }
        }
    }

    /// Tells the tracker that `name` has been running since `started_at`;
    /// once that run is stable the entry is dropped (so status stops
    /// reporting a crash loop without waiting for another crash). Returns
    /// whether an entry was dropped.
    pub fn running(
        &mut self,
        name: &N,
        config_hash: &str,
        started_at: Instant,
        now: Instant,
    ) -> bool {
        let stable = now.saturating_duration_since(started_at) >= self.config.stable_after;
        let drop_it = stable
            || self
                .entries
                .get(name)
                .is_some_and(|e| e.config_hash != config_hash);
        drop_it && self.entries.remove(name).is_some()
    }

    /// Forgets `name` (server removed, or an explicit restart was asked for).
    /// How many names it holds an entry for.
    #[cfg(test)]
    pub fn tracked_names(&self) -> usize {
        self.entries.len()
    }

    pub fn reset(&mut self, name: &N) {
        self.entries.remove(name);
    }

    fn entry(&self, name: &N, config_hash: &str) -> Option<&Ladder> {
        self.entries
            .get(name)
            .filter(|e| e.config_hash == config_hash)
            .map(|e| &e.ladder)
    }

    /// When `name` under `config_hash` may be started again (`status.nextRetryAt`).
    pub fn next_retry_at(&self, name: &N, config_hash: &str) -> Option<Instant> {
        self.entry(name, config_hash).map(|l| l.retry_at)
    }

    /// Counted crashes under `config_hash` since the loop started.
    pub fn crashes(&self, name: &N, config_hash: &str) -> u32 {
        self.entry(name, config_hash).map_or(0, |l| l.count)
    }

    /// Whether `name` is waiting out a crash-loop delay at `now` (status
    /// reason `CrashLoopBackOff`).
    #[cfg(test)]
    pub fn in_crash_loop(&self, name: &N, config_hash: &str, now: Instant) -> bool {
        self.next_retry_at(name, config_hash)
            .is_some_and(|at| now < at)
    }

    /// Whether `name` under `config_hash` may be started at `now`.
    #[cfg(test)]
    pub fn ready(&self, name: &N, config_hash: &str, now: Instant) -> bool {
        !self.in_crash_loop(name, config_hash, now)
    }
}

/// What to do after a language server exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LspCrash {
    /// Restart it now: this is restart `count` of `max`.
    Restart { count: u32, max: u32 },
    /// `restartOnCrash`, but `max` restarts were already made.
    GaveUp { max: u32 },
    /// `restartOnCrash` is false: hold it until its source is saved.
    Hold,
}

/// A language server's restart policy (`restartOnCrash`, `maxRestarts`):
/// restarts are counted per key and `configHash` (a new hash starts over,
/// as does [`LspRestarts::forget`]); a restart is immediate, not delayed.
#[derive(Debug)]
pub struct LspRestarts<K> {
    counts: HashMap<K, (String, u32)>,
}

impl<K> Default for LspRestarts<K> {
    fn default() -> Self {
        Self {
            counts: HashMap::new(),
        }
    }
}

impl<K: Clone + Eq + Hash> LspRestarts<K> {
    /// Records that `key`, running `config_hash`, exited; says what to do.
    pub fn crashed(
        &mut self,
        key: &K,
        config_hash: &str,
        restart_on_crash: bool,
        max_restarts: u32,
    ) -> LspCrash {
        let entry = self
            .counts
            .entry(key.clone())
            .or_insert_with(|| (config_hash.to_owned(), 0));
        if entry.0 != config_hash {
            *entry = (config_hash.to_owned(), 0);
        }
        entry.1 += 1;
        let count = entry.1;
        if !restart_on_crash {
            LspCrash::Hold
        } else if count <= max_restarts {
            LspCrash::Restart {
                count,
                max: max_restarts,
            }
        } else {
            LspCrash::GaveUp { max: max_restarts }
        }
    }

    /// Forgets `key`'s restarts (its source was saved, or it was removed).
    pub fn forget(&mut self, key: &K) {
        self.counts.remove(key);
    }

    /// How many keys have restarts counted.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no key has restarts counted.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_server_restarts_up_to_max_restarts_per_config_hash() {
        let mut r = LspRestarts::default();
        assert_eq!(
            r.crashed(&"py", "h1", true, 2),
            LspCrash::Restart { count: 1, max: 2 }
        );
        assert_eq!(
            r.crashed(&"py", "h1", true, 2),
            LspCrash::Restart { count: 2, max: 2 }
        );
        assert_eq!(r.crashed(&"py", "h1", true, 2), LspCrash::GaveUp { max: 2 });
        assert_eq!(
            r.crashed(&"py", "h2", true, 2),
            LspCrash::Restart { count: 1, max: 2 },
            "a new configHash starts over"
        );
        r.forget(&"py");
        assert!(r.is_empty());
        assert_eq!(
            r.crashed(&"py", "h2", true, 2),
            LspCrash::Restart { count: 1, max: 2 }
        );
        assert_eq!(r.crashed(&"c", "h", false, 5), LspCrash::Hold);
        assert_eq!(r.len(), 2);
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn failure_delays_double_from_half_a_second_and_cap_at_a_minute() {
        let mut b = KeyBackoff::default();
        let mut now = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..10 {
            let at = b.failed(&"a", now);
            delays.push(at - now);
            // Retry exactly when allowed: every failure counts.
            now = at;
        }
        let want: Vec<Duration> = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
            .into_iter()
            .map(secs)
            .collect();
        assert_eq!(delays, want);
        assert_eq!(b.failures(&"a"), 10);
        assert_eq!(b.current_delay(&"a"), Some(secs(60.0)));
    }

    #[test]
    fn success_and_spec_change_reset_the_key() {
        let mut b = KeyBackoff::default();
        let t0 = Instant::now();
        let at = b.failed(&"a", t0);
        let at = b.failed(&"a", at);
        assert_eq!(b.current_delay(&"a"), Some(secs(1.0)));
        b.succeeded(&"a");
        assert_eq!(b.next_retry_at(&"a"), None);
        assert_eq!(b.failures(&"a"), 0);
        assert_eq!(b.failed(&"a", at) - at, secs(0.5));
        let at2 = b.failed(&"a", b.next_retry_at(&"a").unwrap());
        assert_eq!(b.current_delay(&"a"), Some(secs(1.0)));
        b.reset(&"a");
        assert!(b.ready(&"a", at2 - secs(0.9)));
        assert_eq!(b.failed(&"a", at2) - at2, secs(0.5));
    }

    /// kubernetes/kubernetes#132805: an attempt made before the retry time
    /// (an unrelated event enqueued the key) must not advance the exponent.
    #[test]
    fn early_retry_does_not_advance_the_exponent() {
        let mut b = KeyBackoff::default();
        let t0 = Instant::now();
        let first = b.failed(&"a", t0);
        assert_eq!(first, t0 + secs(0.5));
        // Three early failures: nothing moves.
        for early in [0.1, 0.2, 0.49] {
            assert_eq!(b.failed(&"a", t0 + secs(early)), first);
        }
        assert_eq!(b.failures(&"a"), 1);
        assert_eq!(b.current_delay(&"a"), Some(secs(0.5)));
        // The on-time retry counts once: 0.5 s -> 1 s.
        assert_eq!(b.failed(&"a", first), first + secs(1.0));
        assert_eq!(b.failures(&"a"), 2);
    }

    #[test]
    fn attempt_start_decides_earliness() {
        let mut b = KeyBackoff::default();
        let t0 = Instant::now();
        let first = b.failed(&"a", t0);
        // Began early, failed after the retry time: still early.
        assert_eq!(
            b.failed_attempt(&"a", t0 + secs(0.4), t0 + secs(3.0)),
            first
        );
        assert_eq!(b.failures(&"a"), 1);
    }

    #[test]
    fn ready_only_once_the_delay_elapsed() {
        let mut b = KeyBackoff::default();
        let t0 = Instant::now();
        assert!(b.ready(&"a", t0));
        let at = b.failed(&"a", t0);
        assert!(!b.ready(&"a", t0));
        assert!(!b.ready(&"a", at - Duration::from_nanos(1)));
        assert!(b.ready(&"a", at));
        assert!(b.ready(&"b", t0), "keys are independent");
        assert_eq!(b.next_retry_at(&"b"), None);
    }

    #[test]
    fn config_is_overridable_and_validated() {
        let config = BackoffConfig {
            // backon scales through f32 seconds: pick values exact in binary.
            initial: Duration::from_millis(250),
            factor: 3.0,
            max: Duration::from_secs(2),
            jitter: false,
        };
        let mut b = KeyBackoff::new(config).unwrap();
        let mut now = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..4 {
            let at = b.failed(&1, now);
            delays.push(at - now);
            now = at;
        }
        assert_eq!(
            delays,
            [0.25, 0.75, 2.0, 2.0]
                .into_iter()
                .map(secs)
                .collect::<Vec<_>>()
        );

        let bad = |c: BackoffConfig| KeyBackoff::<u8>::new(c).unwrap_err();
        let base = BackoffConfig::default();
        assert_eq!(
            bad(BackoffConfig {
                initial: Duration::ZERO,
                ..base
            }),
            BackoffConfigError::ZeroInitialDelay
        );
        assert!(matches!(
            bad(BackoffConfig {
                factor: 0.5,
                ..base
            }),
            BackoffConfigError::InvalidFactor(_)
        ));
        assert!(matches!(
            bad(BackoffConfig {
                factor: f32::NAN,
                ..base
            }),
            BackoffConfigError::InvalidFactor(_)
        ));
        assert!(matches!(
            bad(BackoffConfig {
                max: Duration::from_millis(1),
                ..base
            }),
            BackoffConfigError::MaxBelowInitial { .. }
        ));
    }

    #[test]
    fn jitter_stays_within_one_extra_delay() {
        let mut b = KeyBackoff::new(BackoffConfig {
            jitter: true,
            ..BackoffConfig::default()
        })
        .unwrap();
        let mut now = Instant::now();
        for base in [0.5, 1.0, 2.0, 4.0] {
            let at = b.failed(&"a", now);
            let d = at - now;
            assert!(d >= secs(base) && d <= secs(2.0 * base), "{d:?} for {base}");
            now = at;
        }
    }

    const H1: &str = "hash-1";
    const H2: &str = "hash-2";

    /// Crashes `n` times, each restart made exactly at the retry time and
    /// running for `up` before crashing again; returns the delays.
    fn crash_n(
        c: &mut CrashLoop<&'static str>,
        n: usize,
        start: Instant,
        up: Duration,
    ) -> Vec<u64> {
        let mut started = start;
        (0..n)
            .map(|_| {
                let now = started + up;
                let d = c.crashed(&"srv", H1, started, now);
                started = now + d;
                d.as_secs()
            })
            .collect()
    }

    #[test]
    fn crash_loop_doubles_from_ten_seconds_to_five_minutes() {
        let mut c = CrashLoop::default();
        let delays = crash_n(&mut c, 8, Instant::now(), secs(1.0));
        assert_eq!(delays, [0, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(c.crashes(&"srv", H1), 8);
    }

    #[test]
    fn crash_loop_flag_and_next_retry_at() {
        let mut c = CrashLoop::default();
        let t0 = Instant::now();
        assert!(!c.in_crash_loop(&"srv", H1, t0));
        let now = t0 + secs(2.0);
        // The first crash is restarted at once; the second backs off.
        assert_eq!(c.crashed(&"srv", H1, t0, now), Duration::ZERO);
        let t0 = now;
        let now = t0 + secs(2.0);
        let d = c.crashed(&"srv", H1, t0, now);
        assert_eq!(d.as_secs(), 10);
        assert_eq!(c.next_retry_at(&"srv", H1), Some(now + d));
        assert!(c.in_crash_loop(&"srv", H1, now));
        assert!(!c.ready(&"srv", H1, now + d - secs(0.001)));
        assert!(!c.in_crash_loop(&"srv", H1, now + d));
        assert!(c.ready(&"srv", H1, now + d));
        c.reset(&"srv");
        assert_eq!(c.next_retry_at(&"srv", H1), None);
    }

    #[test]
    fn crash_loop_resets_after_ten_stable_minutes() {
        let mut c = CrashLoop::default();
        let t0 = Instant::now();
        assert_eq!(crash_n(&mut c, 4, t0, secs(1.0)), [0, 10, 20, 40]);
        let started = c.next_retry_at(&"srv", H1).unwrap();
        // Up for just under 10 min: keeps climbing.
        let now = started + secs(599.0);
        assert_eq!(c.crashed(&"srv", H1, started, now).as_secs(), 80);
        // Up for 10 min: starts over (at once again).
        let started = c.next_retry_at(&"srv", H1).unwrap();
        let now = started + secs(600.0);
        assert_eq!(c.crashed(&"srv", H1, started, now).as_secs(), 0);
        assert_eq!(c.crashes(&"srv", H1), 1);
    }

    #[test]
    fn stable_run_clears_the_entry_without_a_crash() {
        let mut c = CrashLoop::default();
        let t0 = Instant::now();
        let d = c.crashed(&"srv", H1, t0, t0 + secs(1.0));
        let started = t0 + secs(1.0) + d;
        assert!(!c.running(&"srv", H1, started, started + secs(599.0)));
        assert_eq!(c.crashes(&"srv", H1), 1);
        assert!(c.running(&"srv", H1, started, started + secs(600.0)));
        assert_eq!(c.next_retry_at(&"srv", H1), None);
    }

    #[test]
    fn crash_loop_is_keyed_by_config_hash() {
        let mut c = CrashLoop::default();
        let t0 = Instant::now();
        assert_eq!(crash_n(&mut c, 3, t0, secs(1.0)), [0, 10, 20]);
        // The same name under a new hash sees no loop, and starts fresh.
        let now = c.next_retry_at(&"srv", H1).unwrap();
        assert_eq!(c.next_retry_at(&"srv", H2), None);
        assert!(!c.in_crash_loop(&"srv", H2, now - secs(1.0)));
        let d = c.crashed(&"srv", H2, now, now + secs(1.0));
        assert_eq!(d.as_secs(), 0);
        assert_eq!(c.crashes(&"srv", H2), 1);
        // The old hash's entry is gone (one entry per name).
        assert_eq!(c.next_retry_at(&"srv", H1), None);
        // Other names are independent.
        assert_eq!(c.crashed(&"other", H1, now, now + secs(1.0)).as_secs(), 0);
        assert_eq!(c.crashes(&"srv", H2), 1);
    }

    #[test]
    fn crash_of_an_early_restart_does_not_double() {
        let mut c = CrashLoop::default();
        let t0 = Instant::now();
        assert_eq!(crash_n(&mut c, 2, t0, secs(1.0)), [0, 10]);
        // Restarted 3 s after the second crash (before the 10 s were up):
        // the next wait is 10 s again, measured from this crash.
        let started = t0 + secs(2.0) + secs(3.0);
        let now = started + secs(1.0);
        assert_eq!(c.crashed(&"srv", H1, started, now).as_secs(), 10);
        assert_eq!(c.next_retry_at(&"srv", H1), Some(now + secs(10.0)));
        assert_eq!(c.crashes(&"srv", H1), 2);
    }

    #[test]
    fn crash_loop_config_is_validated() {
        let base = CrashLoopConfig::default();
        assert_eq!(
            CrashLoop::<u8>::new(CrashLoopConfig {
                stable_after: Duration::ZERO,
                ..base
            })
            .unwrap_err(),
            BackoffConfigError::ZeroStableWindow
        );
        assert!(
            CrashLoop::<u8>::new(CrashLoopConfig {
                max: secs(1.0),
                ..base
            })
            .is_err()
        );
        let mut c = CrashLoop::new(CrashLoopConfig {
            initial: secs(1.0),
            max: secs(3.0),
            ..base
        })
        .unwrap();
        assert_eq!(crash_n(&mut c, 4, Instant::now(), secs(0.5)), [0, 1, 2, 3]);
    }
}
