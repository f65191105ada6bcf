//! The API server's time, as the `Date` header of its answers tells it (issue 54: clock
//! jumps).
//!
//! An edge board often has no real-time clock: it boots at 1970, or at the time
//! `fake-hwclock` saved last, and NTP later steps its clock by hours or months. The
//! node's certificates and its service account tokens are judged by the cluster's
//! clock, not the board's, so their decisions (is this certificate expired, not yet
//! valid, due for renewal; is this token due for a refresh) take the server's time when
//! it is known. Every answer of the server, whatever its status, carries its `Date`; the
//! time is then that date plus the time elapsed since on the monotonic clock, which no
//! step of the wall clock moves. Before any answer the local wall clock is all there is,
//! and decisions that would throw something away on its word alone wait for the server.
//!
//! The other wall-clock values (the Lease's `renewTime`, status and Event timestamps, log
//! lines, checkpoint and GC times) are the local clock's, as kubelet writes them: they
//! record when something happened on this node.

use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

/// A new skew (the server's date minus the local clock's) that differs from the last one
/// by more than this is a step of one of the clocks: waiters are woken.
const STEP: Duration = Duration::from_secs(60);

/// What the server said the time was, and when that was on the monotonic clock.
#[derive(Debug, Clone, Copy)]
struct Seen {
    date: SystemTime,
    at: Instant,
    /// The server's date minus the local clock then, in seconds.
    skew: i64,
}

/// The server's time as last seen; one for the process (every client of the agent talks
/// to the same cluster).
#[derive(Debug)]
pub struct ServerTime {
    seen: Mutex<Option<Seen>>,
    /// Counts the steps: the first date seen, and each new skew.
    steps: watch::Sender<u64>,
}

static SERVER_TIME: LazyLock<ServerTime> = LazyLock::new(ServerTime::default);

/// The process's [`ServerTime`], which the API clients' transport feeds.
pub fn global() -> &'static ServerTime {
    &SERVER_TIME
}

/// The server's time now if known, else the local wall clock's (see the module's doc).
pub fn trusted_now() -> SystemTime {
    global().trusted_now()
}

/// [`trusted_now`] as a timestamp.
pub fn trusted_timestamp() -> jiff::Timestamp {
    jiff::Timestamp::try_from(trusted_now()).unwrap_or_else(|_| jiff::Timestamp::now())
}

impl Default for ServerTime {
    fn default() -> ServerTime {
        ServerTime { seen: Mutex::new(None), steps: watch::Sender::new(0) }
    }
}

impl ServerTime {
    /// Takes a `Date` header value (`Sun, 06 Nov 1994 08:49:37 GMT`) of an answer received
    /// now; a value that does not parse is ignored.
    pub fn observe_header(&self, value: &str) {
        if let Ok(date) = jiff::fmt::rfc2822::parse(value) {
            self.observe(SystemTime::from(date.timestamp()), SystemTime::now(), Instant::now());
        }
    }

    /// The server's `date`, received when the local clock read `local` and the monotonic
    /// one `at`.
    ///
    /// The estimate never goes back but for a step: a `Date` is whole seconds, so a new one
    /// may read up to a second behind the running estimate, and a deadline computed on
    /// the estimate must not find itself early when its timer fires.
    pub fn observe(&self, date: SystemTime, local: SystemTime, at: Instant) {
        let skew = signed_seconds(date, local);
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (stepped, newer) = match *seen {
            None => (true, true),
            Some(last) => {
                let estimate = last.date + at.saturating_duration_since(last.at);
                (last.skew.abs_diff(skew) > STEP.as_secs(), date >= estimate)
            }
        };
        if stepped || newer {
            *seen = Some(Seen { date, at, skew });
        }
        drop(seen);
        if stepped {
            if skew.unsigned_abs() > STEP.as_secs() {
                tracing::warn!(
                    skew_seconds = skew,
                    "the local clock is off the API server's: certificate and token decisions take the server's time"
                );
            }
            self.steps.send_modify(|n| *n += 1);
        }
    }

    /// The server's time now, if an answer told it.
    pub fn now(&self) -> Option<SystemTime> {
        let seen = *self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.map(|seen| seen.date + seen.at.elapsed())
    }

    /// [`ServerTime::now`], else the local wall clock.
    pub fn trusted_now(&self) -> SystemTime {
        self.now().unwrap_or_else(SystemTime::now)
    }

    /// Whether an answer told the server's time.
    pub fn is_known(&self) -> bool {
        self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_some()
    }

    /// Changes on the first date seen and on each step of either clock.
    pub fn steps(&self) -> watch::Receiver<u64> {
        self.steps.subscribe()
    }
}

/// `a - b` in whole seconds, negative when `a` is earlier.
fn signed_seconds(a: SystemTime, b: SystemTime) -> i64 {
    match a.duration_since(b) {
        Ok(ahead) => i64::try_from(ahead.as_secs()).unwrap_or(i64::MAX),
        Err(behind) => -i64::try_from(behind.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn the_server_s_time_runs_on_the_monotonic_clock_from_its_date() {
        let time = ServerTime::default();
        assert!(!time.is_known());
        let before = SystemTime::now();
        assert!(time.trusted_now() >= before, "the local clock before any answer");
        let date = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        // Seen a second ago, with the local clock at 1970.
        let at = Instant::now() - Duration::from_secs(1);
        time.observe(date, SystemTime::UNIX_EPOCH + DAY, at);
        let now = time.now().unwrap();
        assert!(now >= date + Duration::from_secs(1) && now < date + Duration::from_secs(5));
        assert_eq!(
            time.trusted_now().duration_since(date).unwrap().as_secs(),
            now.duration_since(date).unwrap().as_secs()
        );
    }

    #[test]
    fn the_first_date_and_each_step_wake_the_waiters_and_small_drift_does_not() {
        let time = ServerTime::default();
        let mut steps = time.steps();
        let local = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        time.observe(local + Duration::from_secs(2), local, Instant::now());
        assert!(steps.has_changed().unwrap());
        steps.mark_unchanged();
        // Seconds of drift or latency: no step.
        time.observe(local + Duration::from_secs(30), local, Instant::now());
        assert!(!steps.has_changed().unwrap());
        // The local clock stepped 90 days ahead: the skew jumps.
        time.observe(local, local + 90 * DAY, Instant::now());
        assert!(steps.has_changed().unwrap());
    }

    #[test]
    fn a_date_rounded_down_to_its_second_does_not_move_the_time_back() {
        let time = ServerTime::default();
        let date = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let first = Instant::now() - Duration::from_millis(900);
        time.observe(date, date, first);
        let before = time.now().unwrap();
        // The same second, read 0.9 s later: behind the estimate, so not taken.
        time.observe(date, date, Instant::now());
        assert!(time.now().unwrap() >= before);
        // A later second is taken.
        time.observe(date + Duration::from_secs(2), date, Instant::now());
        assert!(time.now().unwrap() >= date + Duration::from_secs(2));
        // A step back of an hour (the server's clock was set) is taken too.
        time.observe(date - Duration::from_secs(3600), date, Instant::now());
        assert!(time.now().unwrap() < date);
    }

    #[test]
    fn a_date_header_is_read_as_rfc_7231_writes_it() {
        let time = ServerTime::default();
        time.observe_header("not a date");
        assert!(!time.is_known());
        time.observe_header("Sun, 29 Nov 2026 13:00:00 GMT");
        let now = time.now().unwrap();
        let expected: SystemTime =
            "2026-11-29T13:00:00Z".parse::<jiff::Timestamp>().unwrap().into();
        assert!(now >= expected && now < expected + Duration::from_secs(5), "{now:?}");
    }
}
