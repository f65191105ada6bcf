use jiff::Timestamp;
use proptest::prelude::*;

use super::*;

/// Seconds of 0000-01-01T00:00:00Z: from there on, years have four digits.
const YEAR_ZERO: i64 = -62_167_219_200;

fn rfc3339(time: Time) -> String {
    let mut out = Vec::new();
    time.write_rfc3339_nanos(&mut out);
    String::from_utf8(out).unwrap()
}

fn jiff(secs: i64, nanos: u32) -> Timestamp {
    Timestamp::new(secs, i32::try_from(nanos).unwrap()).unwrap()
}

#[test]
fn formats_known_instants() {
    let time = Time::from_unix(1_767_323_045, 500_000_000);
    assert_eq!(rfc3339(time), "2026-01-02T03:04:05.500000000Z");
    assert_eq!(time.rotation_stamp(), "20260102-030405");
    assert_eq!(rfc3339(Time::UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
    // A leap day, and the last second of a leap year.
    assert_eq!(Time::from_unix(951_782_400, 1).rotation_stamp(), "20000229-000000");
    assert_eq!(
        rfc3339(Time::from_unix(1_735_689_599, 999_999_999)),
        "2024-12-31T23:59:59.999999999Z"
    );
    assert_eq!(rfc3339(Time::from_unix(-1, 0)), "1969-12-31T23:59:59.000000000Z");
}

#[test]
fn nanoseconds_past_a_second_are_capped() {
    assert_eq!(Time::from_unix(0, 2_000_000_000), Time::from_unix(0, 999_999_999));
}

#[test]
fn system_times_before_the_epoch_count_back() {
    let before = UNIX_EPOCH - std::time::Duration::from_millis(1500);
    assert_eq!(Time::from(before), Time::from_unix(-2, 500_000_000));
    let whole = UNIX_EPOCH - std::time::Duration::from_secs(3);
    assert_eq!(Time::from(whole), Time::from_unix(-3, 0));
}

#[test]
fn now_is_the_system_clock() {
    let before = jiff::Timestamp::now();
    let now = Time::now();
    let after = jiff::Timestamp::now();
    assert!((before.as_second()..=after.as_second()).contains(&now.secs));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    /// The CRI timestamp is jiff's `%Y-%m-%dT%H:%M:%S.%9fZ`, which the logger wrote before,
    /// for every instant from year 0 to jiff's last.
    #[test]
    fn rfc3339_is_jiffs(secs in YEAR_ZERO..=Timestamp::MAX.as_second(), nanos in 0u32..1_000_000_000) {
        let expected = jiff(secs, nanos).strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string();
        prop_assert_eq!(rfc3339(Time::from_unix(secs, nanos)), expected);
    }

    #[test]
    fn rotation_stamp_is_jiffs(secs in YEAR_ZERO..=Timestamp::MAX.as_second()) {
        let expected = jiff(secs, 0).strftime("%Y%m%d-%H%M%S").to_string();
        prop_assert_eq!(Time::from_unix(secs, 0).rotation_stamp(), expected);
    }

    /// Around today, where the logger runs: every second of a few years.
    #[test]
    fn recent_instants_are_jiffs(secs in 1_700_000_000i64..1_900_000_000, nanos in 0u32..1_000_000_000) {
        let expected = jiff(secs, nanos).strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string();
        prop_assert_eq!(rfc3339(Time::from_unix(secs, nanos)), expected);
    }
}
