//! The debounce of one watched file, as a pure state machine: it is told of
//! events, of the judge's verdicts and of the time (`now` is always passed
//! in), and says when to judge the file and what to emit. No threads, no
//! file system: the policy is tested on its own.
//!
//! - **Leading edge.** The first event after the file has been quiet for the
//!   window is judged at once; `Valid` content is emitted immediately.
//! - **Trailing edge.** Events while the file settles push its deadline to a
//!   window after the latest one; once quiet it is judged again and emitted
//!   once. No event after the leading emission, no trailing emission.
//! - **Half-written or briefly missing.** A leading `Invalid` or `Absent` is
//!   not emitted: the file is judged again once quiet, and that verdict is
//!   emitted whatever it is.
//! - **Absent is news once.** `Absent` is not emitted while the consumer's
//!   last view of the file is already "absent".

use std::time::{Duration, Instant};

use super::Verdict;

/// One file's debounce state.
#[derive(Debug, Default)]
pub(super) struct Debounce {
    /// The consumer's last view of the file is "absent".
    absent: bool,
    /// Some while the file settles after an event.
    settle: Option<Settle>,
}

#[derive(Debug)]
struct Settle {
    /// When the file counts as quiet, unless another event comes first.
    quiet_at: Instant,
    /// Judge (and emit) again once quiet: an event came after the leading
    /// emission, or the leading judge said `Invalid` or `Absent`.
    dirty: bool,
}

impl Debounce {
    /// A file whose consumer's view is "absent" from the start or not.
    pub(super) fn new(absent: bool) -> Self {
        Debounce {
            absent,
            settle: None,
        }
    }

    /// Sets the consumer's view (when the watch is first armed).
    pub(super) fn set_absent(&mut self, absent: bool) {
        self.absent = absent;
    }

    /// An event at `now`. While settling it only pushes the deadline (and
    /// returns false); otherwise the file must be judged now (true) and the
    /// verdict given to [`Debounce::leading`].
    pub(super) fn event(&mut self, now: Instant, window: Duration) -> bool {
        match &mut self.settle {
            Some(settle) => {
                settle.quiet_at = now + window;
                settle.dirty = true;
                false
            }
            None => true,
        }
    }

    /// The leading edge's verdict, judged at `now`: what to emit, if anything.
    pub(super) fn leading(
        &mut self,
        now: Instant,
        window: Duration,
        verdict: Verdict,
    ) -> Option<Verdict> {
        let quiet_at = now + window;
        match verdict {
            // Nothing the consumer does not know: stay idle.
            Verdict::Absent if self.absent => None,
            // Perhaps half-written, or gone only for a moment: look again
            // once it has been quiet.
            Verdict::Invalid | Verdict::Absent => {
                self.settle = Some(Settle {
                    quiet_at,
                    dirty: true,
                });
                None
            }
            verdict => {
                self.settle = Some(Settle {
                    quiet_at,
                    dirty: false,
                });
                self.emitted(verdict)
            }
        }
    }

    /// An event's leading edge for content that cannot be judged before
    /// it settles (a server's source code, [`super::dev`]): nothing is
    /// emitted now, and the file is judged once quiet — a burst of saves is
    /// one trailing emission. Call after [`Debounce::event`] said to judge.
    pub(super) fn unjudged(&mut self, now: Instant, window: Duration) {
        // What a half-written file gets: look again once it has been quiet.
        let emitted = self.leading(now, window, Verdict::Invalid);
        debug_assert!(emitted.is_none());
    }

    /// Ends the settling if the file is quiet by `now`; true when it must be
    /// judged again (the verdict goes to [`Debounce::trailing`]).
    pub(super) fn quiet(&mut self, now: Instant) -> bool {
        match &self.settle {
            Some(settle) if settle.quiet_at <= now => {
                let dirty = settle.dirty;
                self.settle = None;
                dirty
            }
            _ => false,
        }
    }

    /// The trailing edge's verdict: what to emit, if anything.
    pub(super) fn trailing(&mut self, verdict: Verdict) -> Option<Verdict> {
        if verdict == Verdict::Absent && self.absent {
            return None;
        }
        self.emitted(verdict)
    }

    /// When the file counts as quiet (None when idle).
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.settle.as_ref().map(|settle| settle.quiet_at)
    }

    fn emitted(&mut self, verdict: Verdict) -> Option<Verdict> {
        self.absent = verdict == Verdict::Absent;
        Some(verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_millis(300);

    fn ms(start: Instant, n: u64) -> Instant {
        start + Duration::from_millis(n)
    }

    #[test]
    fn a_valid_leading_event_is_emitted_at_once_and_a_quiet_file_is_not_judged_again() {
        let t0 = Instant::now();
        let mut d = Debounce::new(false);
        assert!(d.event(t0, W));
        assert_eq!(d.leading(t0, W, Verdict::Valid), Some(Verdict::Valid));
        assert_eq!(d.deadline(), Some(ms(t0, 300)));
        assert!(!d.quiet(ms(t0, 299)));
        assert!(!d.quiet(ms(t0, 300)), "no event after the leading emission");
        assert_eq!(d.deadline(), None);
        assert!(d.event(ms(t0, 400), W), "idle again: the next event leads");
    }

    #[test]
    fn events_while_settling_push_the_deadline_and_emit_once_when_quiet() {
        let t0 = Instant::now();
        let mut d = Debounce::new(false);
        assert!(d.event(t0, W));
        d.leading(t0, W, Verdict::Valid);
        for n in [100, 200, 350] {
            assert!(!d.event(ms(t0, n), W), "settling events are not judged");
        }
        assert_eq!(d.deadline(), Some(ms(t0, 650)));
        assert!(!d.quiet(ms(t0, 649)));
        assert!(d.quiet(ms(t0, 650)));
        assert_eq!(d.trailing(Verdict::Valid), Some(Verdict::Valid));
        assert_eq!(d.deadline(), None);
    }

    #[test]
    fn a_half_written_file_is_never_reported_invalid_when_it_completes() {
        let t0 = Instant::now();
        let mut d = Debounce::new(false);
        assert!(d.event(t0, W));
        assert_eq!(d.leading(t0, W, Verdict::Invalid), None);
        assert!(!d.event(ms(t0, 10), W));
        assert!(d.quiet(ms(t0, 310)));
        assert_eq!(d.trailing(Verdict::Valid), Some(Verdict::Valid));
    }

    #[test]
    fn a_truly_broken_or_deleted_file_is_reported_after_the_quiet_window() {
        let t0 = Instant::now();
        let mut d = Debounce::new(false);
        d.event(t0, W);
        assert_eq!(d.leading(t0, W, Verdict::Invalid), None);
        assert!(d.quiet(ms(t0, 300)));
        assert_eq!(d.trailing(Verdict::Invalid), Some(Verdict::Invalid));

        let mut d = Debounce::new(false);
        d.event(t0, W);
        assert_eq!(d.leading(t0, W, Verdict::Absent), None);
        assert!(d.quiet(ms(t0, 300)));
        assert_eq!(d.trailing(Verdict::Absent), Some(Verdict::Absent));
    }

    #[test]
    fn unjudged_content_is_emitted_once_after_a_burst() {
        let t0 = Instant::now();
        let mut d = Debounce::new(false);
        assert!(d.event(t0, W));
        d.unjudged(t0, W);
        assert_eq!(d.deadline(), Some(ms(t0, 300)), "nothing emitted at once");
        for n in [50, 120, 200] {
            assert!(!d.event(ms(t0, n), W));
        }
        assert!(!d.quiet(ms(t0, 499)));
        assert!(d.quiet(ms(t0, 500)), "judged once quiet");
        assert_eq!(d.trailing(Verdict::Valid), Some(Verdict::Valid));
        assert!(d.event(ms(t0, 900), W), "idle again: the next save leads");
    }

    #[test]
    fn absent_is_news_once() {
        let t0 = Instant::now();
        let mut d = Debounce::new(true);
        d.event(t0, W);
        assert_eq!(d.leading(t0, W, Verdict::Absent), None);
        assert_eq!(d.deadline(), None, "nothing new: stays idle");

        let mut d = Debounce::new(false);
        d.event(t0, W);
        d.leading(t0, W, Verdict::Invalid);
        assert!(d.quiet(ms(t0, 300)));
        assert_eq!(d.trailing(Verdict::Absent), Some(Verdict::Absent));
        d.event(ms(t0, 1000), W);
        assert_eq!(d.leading(ms(t0, 1000), W, Verdict::Absent), None);
        d.set_absent(false);
        d.event(ms(t0, 2000), W);
        assert_eq!(
            d.leading(ms(t0, 2000), W, Verdict::Valid),
            Some(Verdict::Valid)
        );
    }
}
