//! When to re-list a server after its `notifications/*/list_changed`, as a
//! pure state machine: it is told of notifications, of re-lists finishing
//! and of the time (`now` is always passed in), and says when to start a
//! re-list and of which kinds. No tasks, no I/O: the watcher task drives it
//! (`watch`), and the policy is tested on its own.
//!
//! - **Leading edge.** A notification while no re-list is in flight and the
//!   last one started at least [`SPACING`] ago starts one at once.
//! - **One in flight, one per window.** Re-lists of a server never overlap,
//!   and one starts at least [`SPACING`] after the previous one started: a
//!   server announcing changes 1000 times a second is re-listed at most 4
//!   times a second.
//! - **Nothing is lost.** A notification during a re-list in flight, or
//!   within the window, marks its kind dirty; exactly one trailing re-list
//!   runs once allowed, of every dirty kind. Dirty is cleared when a re-list
//!   *starts*, so a change announced while one is in flight (which may or
//!   may not have seen it) is listed again afterwards: the last notification
//!   of a burst is always followed by a re-list that began after it.
//! - **Kinds share the schedule, not the work.** The bounds hold per server
//!   — tools, prompts and resources together, so a server announcing all
//!   three still costs one re-list per window — while a re-list lists only
//!   the kinds announced since the last one started.

use std::time::Duration;

use tokio::time::Instant;

/// The shortest time between the starts of two re-lists of one server.
pub(super) const SPACING: Duration = Duration::from_millis(250);

/// What a `list_changed` notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListKind {
    Tools,
    Prompts,
    /// Resources and resource templates.
    Resources,
}

/// A set of [`ListKind`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Kinds {
    pub(super) tools: bool,
    pub(super) prompts: bool,
    pub(super) resources: bool,
}

impl ListKind {
    /// The kind's bit in an [`Announced`](super::client::Announced).
    pub(super) fn bit(self) -> u8 {
        match self {
            ListKind::Tools => 1,
            ListKind::Prompts => 2,
            ListKind::Resources => 4,
        }
    }
}

impl Kinds {
    /// The kinds whose [`ListKind::bit`] is set in `bits`.
    pub(super) fn from_bits(bits: u8) -> Kinds {
        Kinds {
            tools: bits & ListKind::Tools.bit() != 0,
            prompts: bits & ListKind::Prompts.bit() != 0,
            resources: bits & ListKind::Resources.bit() != 0,
        }
    }

    pub(super) fn is_empty(self) -> bool {
        !(self.tools || self.prompts || self.resources)
    }
}

impl From<ListKind> for Kinds {
    fn from(kind: ListKind) -> Kinds {
        Kinds::from_bits(kind.bit())
    }
}

/// The re-list schedule of one server.
#[derive(Debug)]
pub(super) struct Relist {
    spacing: Duration,
    /// Kinds announced since the last re-list started.
    dirty: Kinds,
    in_flight: bool,
    last_start: Option<Instant>,
}

impl Relist {
    pub(super) fn new(spacing: Duration) -> Relist {
        Relist {
            spacing,
            dirty: Kinds::default(),
            in_flight: false,
            last_start: None,
        }
    }

    /// `list_changed` of `kinds` at `now`: the kinds to re-list now, if a
    /// re-list may start (the leading edge); otherwise they wait, dirty.
    pub(super) fn notified(&mut self, kinds: Kinds, now: Instant) -> Option<Kinds> {
        self.mark(kinds);
        self.due(now)
    }

    /// Changes of `kinds` were announced: they wait, dirty, for
    /// [`Relist::due`].
    pub(super) fn mark(&mut self, kinds: Kinds) {
        self.dirty.tools |= kinds.tools;
        self.dirty.prompts |= kinds.prompts;
        self.dirty.resources |= kinds.resources;
    }

    /// A re-list is promised (something is dirty): announcements until it
    /// starts need not be looked at one by one.
    pub(super) fn pending(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// The re-list in flight finished, whatever its outcome (a failed one
    /// is not retried: the next notification, or a restart, lists again).
    pub(super) fn finished(&mut self) {
        self.in_flight = false;
    }

    /// The kinds to re-list at `now`, if a re-list may start: something is
    /// dirty, none is in flight and the window has passed. The caller
    /// starts it, and calls [`Relist::finished`] when it ends.
    pub(super) fn due(&mut self, now: Instant) -> Option<Kinds> {
        if self.in_flight || self.dirty.is_empty() {
            return None;
        }
        if self
            .last_start
            .is_some_and(|last| now < last + self.spacing)
        {
            return None;
        }
        self.in_flight = true;
        self.last_start = Some(now);
        Some(std::mem::take(&mut self.dirty))
    }

    /// When a trailing re-list may start: `None` while nothing waits, or
    /// while one is in flight (its end is the next moment to look).
    pub(super) fn deadline(&self) -> Option<Instant> {
        if self.in_flight || self.dirty.is_empty() {
            return None;
        }
        // Dirty with no re-list ever started cannot last: the notification
        // that made it dirty started one. Looking at once is still right.
        Some(
            self.last_start
                .map_or_else(Instant::now, |last| last + self.spacing),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: Kinds = Kinds {
        tools: true,
        prompts: false,
        resources: false,
    };

    fn ms(start: Instant, n: u64) -> Instant {
        start + Duration::from_millis(n)
    }

    /// Drives `r` through notifications at the given times (ms) with
    /// re-lists that take `took` ms, and returns when each re-list started
    /// and what it listed.
    fn drive(r: &mut Relist, t0: Instant, at: &[(u64, ListKind)], took: u64) -> Vec<(u64, Kinds)> {
        let mut started = Vec::new();
        let mut in_flight_until: Option<u64> = None;
        let end = at.last().map_or(0, |(t, _)| *t) + 10 * took + 1000;
        let mut next = at.iter().peekable();
        // One step per millisecond: notifications first, then a re-list
        // that ends now, then the schedule.
        for now_ms in 0..=end {
            let now = ms(t0, now_ms);
            while let Some((_, kind)) = next.next_if(|(t, _)| *t == now_ms) {
                if let Some(kinds) = r.notified((*kind).into(), now) {
                    started.push((now_ms, kinds));
                    in_flight_until = Some(now_ms + took);
                }
            }
            if in_flight_until == Some(now_ms) {
                r.finished();
                in_flight_until = None;
            }
            if r.deadline().is_some_and(|d| d <= now)
                && let Some(kinds) = r.due(now)
            {
                started.push((now_ms, kinds));
                in_flight_until = Some(now_ms + took);
            }
        }
        started
    }

    #[test]
    fn a_burst_is_a_leading_relist_and_one_trailing_relist() {
        let t0 = Instant::now();
        let mut r = Relist::new(SPACING);
        let burst: Vec<(u64, ListKind)> = (0..100).map(|t| (t, ListKind::Tools)).collect();
        let started = drive(&mut r, t0, &burst, 10);
        assert_eq!(started, [(0, TOOLS), (250, TOOLS)]);
        assert_eq!(r.deadline(), None, "idle again");
    }

    #[test]
    fn a_lone_notification_is_listed_at_once_and_only_once() {
        let t0 = Instant::now();
        let mut r = Relist::new(SPACING);
        assert_eq!(r.notified(ListKind::Tools.into(), t0), Some(TOOLS));
        assert_eq!(r.deadline(), None, "in flight");
        r.finished();
        assert_eq!(r.deadline(), None, "nothing more announced");
        assert_eq!(r.due(ms(t0, 1000)), None);
        // Long after: a leading edge again.
        assert_eq!(
            r.notified(ListKind::Tools.into(), ms(t0, 1000)),
            Some(TOOLS)
        );
    }

    #[test]
    fn a_notification_during_a_relist_in_flight_is_listed_again_after_it() {
        let t0 = Instant::now();
        let mut r = Relist::new(SPACING);
        assert_eq!(r.notified(ListKind::Tools.into(), t0), Some(TOOLS));
        // The server changes again while its answer is on the way: the
        // re-list in flight may have missed it.
        assert_eq!(r.notified(ListKind::Tools.into(), ms(t0, 5)), None);
        assert_eq!(r.due(ms(t0, 400)), None, "never two in flight");
        assert_eq!(r.deadline(), None);
        r.finished();
        // It took longer than the window: the trailing one starts at once.
        assert_eq!(r.deadline(), Some(ms(t0, 250)));
        assert_eq!(r.due(ms(t0, 400)), Some(TOOLS));
    }

    #[test]
    fn relists_start_at_least_the_spacing_apart_under_a_steady_storm() {
        let t0 = Instant::now();
        let mut r = Relist::new(SPACING);
        // 1000 a second for 10 s, re-lists taking 7 ms.
        let storm: Vec<(u64, ListKind)> = (0..10_000).map(|t| (t, ListKind::Tools)).collect();
        let started = drive(&mut r, t0, &storm, 7);
        let starts: Vec<u64> = started.iter().map(|(t, _)| *t).collect();
        assert!(starts.windows(2).all(|w| w[1] - w[0] >= 250), "{starts:?}");
        // 0, 250, …, 9750 and the trailing one at 10 000.
        assert_eq!(starts.len(), 41, "{starts:?}");
        assert!(*starts.last().unwrap() >= 9_999, "{starts:?}");
    }

    #[test]
    fn slow_relists_never_overlap_and_follow_each_other_while_changes_come() {
        let t0 = Instant::now();
        let mut r = Relist::new(SPACING);
        let storm: Vec<(u64, ListKind)> = (0..2_000).map(|t| (t, ListKind::Tools)).collect();
        // Each re-list takes 600 ms: the next starts when the last ends.
        let started = drive(&mut r, t0, &storm, 600);
        let starts: Vec<u64> = started.iter().map(|(t, _)| *t).collect();
        assert_eq!(starts, [0, 600, 1200, 1800, 2400]);
    }

    #[test]
    fn nothing_is_lost_the_last_notification_is_followed_by_a_relist_that_began_after_it() {
        let t0 = Instant::now();
        // Bursts of every shape: the last notification at various phases
        // of the window and of a re-list in flight.
        for last in [1u64, 100, 249, 250, 251, 260, 499, 500, 737, 1000] {
            for took in [1u64, 10, 249, 300] {
                let mut r = Relist::new(SPACING);
                let burst: Vec<(u64, ListKind)> =
                    (0..=last).map(|t| (t, ListKind::Tools)).collect();
                let started = drive(&mut r, t0, &burst, took);
                let (final_start, _) = *started.last().unwrap();
                assert!(
                    final_start >= last,
                    "last notification at {last} ms, re-lists taking {took} ms: {started:?}"
                );
                assert_eq!(r.deadline(), None, "idle at the end");
            }
        }
    }

    #[test]
    fn kinds_share_one_schedule_and_a_relist_lists_only_the_kinds_announced() {
        let t0 = Instant::now();
        let mut r = Relist::new(SPACING);
        let at = [
            (0, ListKind::Tools),
            (1, ListKind::Prompts),
            (2, ListKind::Resources),
            (3, ListKind::Prompts),
        ];
        let started = drive(&mut r, t0, &at, 10);
        assert_eq!(
            started,
            [
                (0, TOOLS),
                (
                    250,
                    Kinds {
                        tools: false,
                        prompts: true,
                        resources: true
                    }
                )
            ]
        );
    }
}
