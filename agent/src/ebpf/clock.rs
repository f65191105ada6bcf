//! The BPF programs stamp their records with `bpf_ktime_get_boot_ns()`, the kernel's
//! `CLOCK_BOOTTIME`; the agent shows them as wall-clock times.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `CLOCK_BOOTTIME` now, in nanoseconds.
fn boot_ns() -> Option<i128> {
    let boot = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    Some(i128::from(boot.tv_sec()) * 1_000_000_000 + i128::from(boot.tv_nsec()))
}

/// How long ago (ns) the kernel took the reading `ktime_ns`.
pub fn since_ns(ktime_ns: u64) -> Option<i128> {
    Some(boot_ns()? - i128::from(ktime_ns))
}

/// The wall-clock time of the reading `ktime_ns` (now, if the clock cannot be read).
pub fn wall_time(ktime_ns: u64) -> Timestamp {
    let now = Timestamp::now();
    since_ns(ktime_ns).map_or(now, |ago_ns| ago(now, ago_ns))
}

/// `now` minus `ago_ns` (not after `now` for a reading from the future).
fn ago(now: Timestamp, ago_ns: i128) -> Timestamp {
    let ago_ns = i64::try_from(ago_ns.max(0)).unwrap_or(i64::MAX);
    now.checked_sub(SignedDuration::from_nanos(ago_ns)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_clock_readings_become_wall_clock_times() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(
            ago(now, 1_500_000_000),
            Timestamp::from_millisecond(1_799_999_998_500).unwrap()
        );
        assert_eq!(ago(now, -5), now);
        assert_eq!(ago(now, 0), now);
    }

    #[test]
    fn a_reading_taken_now_is_now() {
        let boot = u64::try_from(boot_ns().unwrap()).unwrap();
        let ago = since_ns(boot).unwrap();
        assert!((0..60_000_000_000).contains(&ago), "{ago}");
        let at = wall_time(boot);
        assert!(Timestamp::now().duration_since(at).as_secs_f64() < 60.0);
    }
}
