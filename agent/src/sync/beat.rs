//! The writers' beat: every 10 s (kubelet's lease renew interval and node status update
//! frequency) the lease is renewed and the machine read, on one wakeup.
//!
//! One task owns a periodic kernel timer (a timerfd, CLOCK_MONOTONIC) and tells its
//! subscribers on a watch channel. A timerfd wakes the agent once when it expires; a 10 s
//! timer of tokio's wakes a parked runtime three times, as its wheel moves the entry
//! down through 4.1 s and 64 ms slots before it fires (seen in B5's idle window: three
//! epoll timeouts per timer). Where no timerfd can be made, tokio's interval stands in.
//!
//! Each agent's beat has a phase of its own: the first beat comes after a random part of
//! the period, then every period. Nodes that start in the same second (a site whose
//! power comes back, a fleet restarted together) so renew their Leases spread over the
//! 10 s instead of all in one second every 10 s (B13: the worst second's requests
//! against the fleet's mean).

use std::time::Duration;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;
use tracing::warn;

use crate::host::reactor::{self, Timer};

/// The beat's period: kubelet's lease renew interval (a quarter of the lease's 40 s).
pub const PERIOD: Duration = Duration::from_secs(10);
// The machine is read on the same beat.
const _: () =
    assert!(PERIOD.as_nanos() == outpost_core::node_status::STATUS_UPDATE_FREQUENCY.as_nanos());

/// A subscription to the beat: [`watch::Receiver::changed`] resolves on the next one.
pub type Beats = watch::Receiver<u64>;

/// When the first beat comes: `unit` (in `[0, 1)`, random) of the period, so that
/// agents started together beat apart.
pub fn phase(unit: f64) -> Duration {
    PERIOD.mul_f64(unit.clamp(0.0, 1.0))
}

/// Ticks every [`PERIOD`] until aborted, the first after a random [`phase`], counting
/// the beats in `beats`.
pub async fn run(beats: watch::Sender<u64>) {
    // A zero expiry would disarm the timerfd: the first beat is at least 1 ms away.
    let first = phase(fastrand::f64()).max(Duration::from_millis(1));
    let mut timer = match periodic(first) {
        Ok(timer) => Some(timer),
        Err(e) => {
            warn!(error = %e, "no timerfd for the writers' beat; tokio's timer stands in (two more wakeups a beat)");
            None
        }
    };
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + first, PERIOD);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        match &mut timer {
            Some(fd) => match expired(fd).await {
                Ok(()) => {}
                Err(e) => {
                    warn!(error = %e, "the writers' timerfd failed; tokio's timer stands in");
                    timer = None;
                    interval.reset();
                }
            },
            None => {
                interval.tick().await;
            }
        }
        beats.send_modify(|count| *count = count.wrapping_add(1));
    }
}

/// A timerfd that expires after `first`, then every [`PERIOD`].
fn periodic(first: Duration) -> std::io::Result<AsyncFd<Timer>> {
    let flags = TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC;
    let timer = TimerFd::new(ClockId::CLOCK_MONOTONIC, flags)?;
    let period = TimeSpec::from_duration(PERIOD);
    let first = TimeSpec::from_duration(first);
    timer.set(Expiration::IntervalDelayed(first, period), TimerSetTimeFlags::empty())?;
    reactor::register(Timer(timer), Interest::READABLE)
}

/// Waits for the timer's next expiry (or takes one that already came).
async fn expired(timer: &mut AsyncFd<Timer>) -> std::io::Result<()> {
    loop {
        let mut ready = timer.readable_mut().await?;
        // The count of expiries since the last read (8 bytes); missed ones are one beat.
        match nix::unistd::read(&ready.get_inner().0, &mut [0; 8]) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// B13: the first beat is anywhere in the period, by the random draw; never after it.
    #[test]
    fn b13_the_first_beat_has_a_phase_within_the_period() {
        assert_eq!(phase(0.0), Duration::ZERO);
        assert_eq!(phase(0.25), Duration::from_millis(2500));
        assert_eq!(phase(0.999), Duration::from_millis(9990));
        assert_eq!(phase(7.0), PERIOD, "out of range is clamped");
    }
}
