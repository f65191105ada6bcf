use proptest::prelude::*;

use super::*;

const S: Duration = Duration::from_secs(1);

#[test]
fn n2_first_reading_has_no_rate_the_second_has_the_windows() {
    let mut rates = CpuRates::default();
    assert_eq!(rates.observe("a", 1_000_000_000, 10 * S), None);
    // Half a core over two seconds.
    assert_eq!(rates.observe("a", 2_000_000_000, 12 * S), Some(500_000_000));
    // Too soon: the last rate, the base kept.
    assert_eq!(rates.observe("a", 2_100_000_000, 12 * S + S / 10), Some(500_000_000));
    // Two cores over one second from the base at 12 s.
    assert_eq!(rates.observe("a", 4_000_000_000, 13 * S), Some(2_000_000_000));
}

#[test]
fn n2_a_counter_that_goes_back_starts_anew() {
    let mut rates = CpuRates::default();
    rates.observe("a", 5_000, Duration::ZERO);
    assert_eq!(rates.observe("a", 1_000, 5 * S), None);
    assert_eq!(rates.observe("a", 1_000 + 2_000_000_000, 7 * S), Some(1_000_000_000));
}

#[test]
fn n2_unread_cgroups_are_forgotten_and_the_cache_is_bounded() {
    let mut rates = CpuRates::default();
    rates.observe("old", 1, Duration::ZERO);
    rates.observe("new", 1, TTL);
    rates.prune(TTL);
    assert_eq!(rates.len(), 1);
    for i in 0..MAX_ENTRIES + 10 {
        rates.observe(&format!("c{i}"), 1, TTL + Duration::from_millis(i as u64));
    }
    assert_eq!(rates.len(), MAX_ENTRIES);
    // The least recently read went first: "new" was read before all of them.
    assert!(rates.observe("new", 2, 2 * TTL).is_none());
}

proptest! {
    /// N2: whatever the readings, a rate is the CPU used over a window of at least
    /// MIN_WINDOW, never more than the time since the first reading allows.
    #[test]
    fn n2_rates_match_some_window(
        steps in proptest::collection::vec((0u64..4_000_000_000, 0u64..3_000), 1..40)
    ) {
        let mut rates = CpuRates::default();
        let (mut ns, mut ms) = (0u64, 0u64);
        let mut readings = vec![(0u64, 0u64)];
        rates.observe("k", 0, Duration::ZERO);
        for (used, elapsed) in steps {
            ns += used;
            ms += elapsed;
            readings.push((ms, ns));
            if let Some(rate) = rates.observe("k", ns, Duration::from_millis(ms)) {
                let fits = readings.iter().any(|(a_ms, a_ns)| {
                    readings.iter().any(|(b_ms, b_ns)| {
                        b_ms >= a_ms && b_ms - a_ms >= 1_000 && {
                            let r = u128::from(b_ns - a_ns) * 1_000_000_000
                                / (u128::from(b_ms - a_ms) * 1_000_000);
                            r == u128::from(rate)
                        }
                    })
                });
                prop_assert!(fits, "rate {rate} matches no window");
            }
        }
    }
}
