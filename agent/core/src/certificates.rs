//! J1, J2: the pure parts of the node's certificates: when a certificate is renewed
//! (kubelet's jittered 70–90 % of its lifetime), how close to expiry it is (a warning
//! inside 7 days), and the names of kubelet's PKI files.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Inside this much of its end a certificate's expiry is a warning.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(7 * 24 * 3600);

/// When a certificate valid from `not_before` to `not_after` is renewed: kubelet's
/// certificate manager picks `not_before + (0.7 + 0.2·jitter)·lifetime`, `jitter` in
/// [0, 1] (clamped), so that a fleet's renewals spread over 70–90 % of the lifetime.
/// A certificate whose `not_after` is not after `not_before` is due at `not_before`.
pub fn rotation_deadline(not_before: SystemTime, not_after: SystemTime, jitter: f64) -> SystemTime {
    let lifetime = not_after.duration_since(not_before).unwrap_or(Duration::ZERO);
    let jitter = if jitter.is_nan() { 0.0 } else { jitter.clamp(0.0, 1.0) };
    not_before + lifetime.mul_f64(0.7 + 0.2 * jitter)
}

/// How a certificate stands at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// More than [`EXPIRY_WARNING`] left.
    Valid,
    /// Still valid, but within [`EXPIRY_WARNING`] of its end.
    ExpiringSoon,
    /// Past `not_after` (or not yet valid).
    Expired,
}

/// Where a certificate valid from `not_before` to `not_after` stands at `now`.
pub fn expiry(now: SystemTime, not_before: SystemTime, not_after: SystemTime) -> Expiry {
    if now < not_before || now >= not_after {
        return Expiry::Expired;
    }
    match not_after.duration_since(now) {
        Ok(left) if left > EXPIRY_WARNING => Expiry::Valid,
        _ => Expiry::ExpiringSoon,
    }
}

/// Seconds left until `not_after` at `now`, negative once past (the `ttl` gauge).
pub fn seconds_left(now: SystemTime, not_after: SystemTime) -> f64 {
    match not_after.duration_since(now) {
        Ok(left) => left.as_secs_f64(),
        Err(past) => -past.duration().as_secs_f64(),
    }
}

/// kubelet's PKI file of a certificate made at `at`:
/// `kubelet-<kind>-YYYY-MM-DD-HH-MM-SS.pem` (UTC), `kind` being `client` or `server`.
pub fn pem_file_name(kind: &str, at: SystemTime) -> String {
    let seconds = at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    let days = i64::try_from(seconds / 86_400).unwrap_or(i64::MAX);
    let in_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "kubelet-{kind}-{year:04}-{month:02}-{day:02}-{:02}-{:02}-{:02}.pem",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// The link that names the current certificate of `kind`: `kubelet-<kind>-current.pem`.
pub fn current_link_name(kind: &str) -> String {
    format!("kubelet-{kind}-current.pem")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    /// J2: kubelet's deadline at the ends and middle of the jitter.
    #[test]
    fn j2_rotation_deadline_is_70_to_90_percent_of_the_lifetime() {
        let (start, end) = (at(1_000), at(2_000));
        assert_eq!(rotation_deadline(start, end, 0.0), at(1_700));
        assert_eq!(rotation_deadline(start, end, 0.5), at(1_800));
        assert_eq!(rotation_deadline(start, end, 1.0), at(1_900));
        assert_eq!(rotation_deadline(start, end, 7.0), at(1_900));
        assert_eq!(rotation_deadline(start, end, f64::NAN), at(1_700));
        assert_eq!(rotation_deadline(end, start, 0.5), end);
    }

    proptest! {
        /// J2: for any certificate and jitter the deadline is within [70 %, 90 %] of the
        /// lifetime, and grows with the jitter.
        #[test]
        fn j2_rotation_deadline_stays_in_its_window(
            start in 0u64..4_000_000_000,
            lifetime in 0u64..400_000_000,
            a in 0.0f64..=1.0,
            b in 0.0f64..=1.0,
        ) {
            let (not_before, not_after) = (at(start), at(start + lifetime));
            let deadline = rotation_deadline(not_before, not_after, a);
            let offset = deadline.duration_since(not_before).unwrap().as_secs_f64();
            let lifetime = lifetime as f64;
            prop_assert!(offset >= 0.7 * lifetime - 1e-6 && offset <= 0.9 * lifetime + 1e-6);
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(rotation_deadline(not_before, not_after, low)
                <= rotation_deadline(not_before, not_after, high));
        }

        /// J2: the expiry state follows the clock: valid, then a warning for the last
        /// 7 days, then expired, never back.
        #[test]
        fn j2_expiry_moves_forward_only(
            start in 0u64..4_000_000_000,
            lifetime in 1u64..100_000_000,
            t1 in 0u64..200_000_000,
            t2 in 0u64..200_000_000,
        ) {
            let rank = |e: Expiry| match e { Expiry::Valid => 0, Expiry::ExpiringSoon => 1, Expiry::Expired => 2 };
            let (nb, na) = (at(start), at(start + lifetime));
            let (early, late) = (t1.min(t2), t1.max(t2));
            let e1 = expiry(at(start + early), nb, na);
            let e2 = expiry(at(start + late), nb, na);
            prop_assert!(rank(e1) <= rank(e2));
            let left = lifetime.saturating_sub(early);
            let want = if early >= lifetime { Expiry::Expired }
                else if left > EXPIRY_WARNING.as_secs() { Expiry::Valid }
                else { Expiry::ExpiringSoon };
            prop_assert_eq!(e1, want);
        }
    }

    #[test]
    fn j2_expiry_before_validity_is_expired_and_seconds_left_is_signed() {
        assert_eq!(expiry(at(5), at(10), at(20)), Expiry::Expired);
        assert_eq!(seconds_left(at(10), at(25)), 15.0);
        assert_eq!(seconds_left(at(30), at(25)), -5.0);
    }

    /// J1: kubelet's file names, in UTC.
    #[test]
    fn j1_pem_file_names_are_kubelets() {
        assert_eq!(pem_file_name("client", at(0)), "kubelet-client-1970-01-01-00-00-00.pem");
        // 2024-02-29T13:05:09Z, a leap day.
        assert_eq!(
            pem_file_name("server", at(1_709_211_909)),
            "kubelet-server-2024-02-29-13-05-09.pem"
        );
        // 2026-11-25T23:59:59Z.
        assert_eq!(
            pem_file_name("client", at(1_795_651_199)),
            "kubelet-client-2026-11-25-23-59-59.pem"
        );
        assert_eq!(current_link_name("client"), "kubelet-client-current.pem");
    }
}
