//! Bursts of messages turned into rounds, as a value: the caller feeds the messages and
//! the clock, supplies the randomness and does the sleeping, so the policy is a pure
//! function that tests can walk exhaustively.
//!
//! The kernel reports a network change as a burst (an interface going down and up sends
//! a few dozen link, address and route messages within milliseconds); a reconnect probe
//! should go once per change, not once per message. A round is due [`Settings::quiet`]
//! after the burst's last message, but no later than [`Settings::longest`] after its
//! first (a link that never stops flapping still gets probed), and never sooner than
//! [`Settings::gap`] after the previous round (a busy host, pods coming and going, does
//! not turn into a stream of probes). A jitter drawn once per burst is added, so that
//! boxes that saw the same change at the same moment (a site switch restarting) do not
//! probe their API server in lockstep.
//!
//! Times are the elapsed time since an origin the caller keeps.

use std::time::Duration;

/// How bursts become rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// A burst ends after this long without a message.
    pub quiet: Duration,
    /// A round is due at most this long after the burst's first message.
    pub longest: Duration,
    /// The least time between two rounds.
    pub gap: Duration,
    /// The largest delay added to a round (drawn uniformly per burst).
    pub jitter: Duration,
}

impl Settings {
    /// Kernel network changes → reconnect probes. A link's own messages come within a
    /// few milliseconds; its carrier, a DHCP lease or IPv6's duplicate address detection
    /// come later and are changes of their own (another round).
    pub const NETWORK: Settings = Settings {
        quiet: Duration::from_millis(100),
        longest: Duration::from_secs(1),
        gap: Duration::from_secs(1),
        jitter: Duration::from_millis(200),
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Burst {
    first: Duration,
    last: Duration,
    jitter: Duration,
}

/// The bursts seen so far and the last round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debounce {
    settings: Settings,
    burst: Option<Burst>,
    last_round: Option<Duration>,
}

impl Debounce {
    pub fn new(settings: Settings) -> Debounce {
        Debounce { settings, burst: None, last_round: None }
    }

    /// A message arrived at `now`; `random` (uniform in `[0, 1)`, clamped) draws the
    /// jitter if it starts a burst.
    pub fn message(&mut self, now: Duration, random: f64) {
        match &mut self.burst {
            Some(burst) => burst.last = burst.last.max(now),
            None => {
                let jitter = self.settings.jitter.mul_f64(random.clamp(0.0, 1.0));
                self.burst = Some(Burst { first: now, last: now, jitter });
            }
        }
    }

    /// When the pending burst's round is due (`None`: no burst pending).
    pub fn due(&self) -> Option<Duration> {
        let burst = self.burst?;
        let settled = (burst.last + self.settings.quiet).min(burst.first + self.settings.longest);
        let spaced = self.last_round.map_or(settled, |at| settled.max(at + self.settings.gap));
        Some(spaced + burst.jitter)
    }

    /// Whether a round is due at `now`; if so it starts now and the burst is over.
    pub fn round(&mut self, now: Duration) -> bool {
        if self.due().is_none_or(|due| now < due) {
            return false;
        }
        self.burst = None;
        self.last_round = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SETTINGS: Settings = Settings {
        quiet: Duration::from_millis(100),
        longest: Duration::from_secs(1),
        gap: Duration::from_secs(2),
        jitter: Duration::from_millis(200),
    };

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn a_burst_gives_one_round_after_it_went_quiet() {
        let mut d = Debounce::new(SETTINGS);
        assert_eq!(d.due(), None);
        assert!(!d.round(ms(0)), "nothing pending");
        for at in [0, 3, 5, 40, 90] {
            d.message(ms(at), 0.0);
        }
        assert_eq!(d.due(), Some(ms(190)), "quiet after the last message");
        assert!(!d.round(ms(189)));
        assert!(d.round(ms(190)));
        assert!(!d.round(ms(191)), "one round per burst");
        assert_eq!(d.due(), None);
    }

    #[test]
    fn a_burst_that_never_settles_still_gets_its_round() {
        let mut d = Debounce::new(SETTINGS);
        for at in (0..1_500).step_by(50) {
            d.message(ms(at), 0.0);
            if d.round(ms(at)) {
                assert_eq!(at, 1_000, "at the longest wait after the first message");
                return;
            }
        }
        panic!("no round in 1.5 s of messages");
    }

    #[test]
    fn rounds_keep_their_gap_and_their_jitter() {
        let mut d = Debounce::new(SETTINGS);
        d.message(ms(0), 0.5);
        assert_eq!(d.due(), Some(ms(200)), "quiet 100 ms + jitter 100 ms");
        assert!(d.round(ms(200)));
        d.message(ms(300), 0.0);
        assert_eq!(d.due(), Some(ms(2_200)), "2 s after the previous round");
        assert!(d.round(ms(2_200)));
        d.message(ms(9_000), 1.5);
        assert_eq!(d.due(), Some(ms(9_300)), "a random value past 1 is clamped");
        assert!(d.round(ms(9_300)));
        assert_eq!(d.due(), None);
    }

    proptest! {
        /// Whatever the messages and however often the clock is polled: rounds are at
        /// least `gap` apart, each comes after a message that no earlier round covered,
        /// and a burst's round is never later than `longest` + jitter after its first
        /// message, or its gap.
        #[test]
        fn rounds_are_spaced_and_follow_messages(
            steps in prop::collection::vec((0u64..400, any::<bool>(), 0.0f64..1.0), 1..200),
        ) {
            let mut d = Debounce::new(SETTINGS);
            let mut now = Duration::ZERO;
            let mut rounds: Vec<Duration> = Vec::new();
            let mut uncovered: Option<Duration> = None;
            for (advance, message, random) in steps {
                now += ms(advance);
                if message {
                    d.message(now, random);
                    uncovered.get_or_insert(now);
                }
                if let Some(due) = d.due() {
                    let first = uncovered.unwrap_or(now);
                    let bound = (first + SETTINGS.longest)
                        .max(rounds.last().map_or(Duration::ZERO, |r| *r + SETTINGS.gap))
                        + SETTINGS.jitter;
                    prop_assert!(due <= bound, "due {:?} past {:?}", due, bound);
                }
                if d.round(now) {
                    prop_assert!(uncovered.take().is_some(), "a round with no message before it");
                    if let Some(previous) = rounds.last() {
                        prop_assert!(now >= *previous + SETTINGS.gap);
                    }
                    rounds.push(now);
                }
            }
        }
    }
}
