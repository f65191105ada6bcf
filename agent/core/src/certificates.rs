//! J1, J2: the pure parts of the node's certificates: when a certificate is renewed
//! (kubelet's jittered 70–90 % of its lifetime), how close to expiry it is (a warning
//! inside 7 days), the names of kubelet's PKI files, and what the Node's
//! `CertificateExpired` condition says of them ([`condition`]).

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
    let (year, month, day, hour, minute, second) = utc(at);
    format!("kubelet-{kind}-{year:04}-{month:02}-{day:02}-{hour:02}-{minute:02}-{second:02}.pem")
}

/// The link that names the current certificate of `kind`: `kubelet-<kind>-current.pem`.
pub fn current_link_name(kind: &str) -> String {
    format!("kubelet-{kind}-current.pem")
}

/// The Node condition type that reports the node's managed certificates (J2). Like
/// the pressure conditions, `True` is the problem.
pub const CONDITION_TYPE: &str = "CertificateExpired";

/// A certificate the node keeps (`client` or `server`), as the Node condition sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// `client` or `server`, kubelet's kinds.
    pub kind: &'static str,
    /// The end of the certificate in use, once there is one.
    pub not_after: Option<SystemTime>,
    /// What keeps it from being renewed, if anything.
    pub problem: Option<String>,
    /// The last time it was found expired and then replaced.
    pub lapse: Option<Lapse>,
}

/// A certificate that expired (the node was cut off past its end) and was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lapse {
    pub expired_at: SystemTime,
    pub replaced_at: SystemTime,
}

/// The `CertificateExpired` condition (status, reason, message) for the certificates
/// the node keeps, at `now`; `None` when it keeps none (no TLS bootstrapping).
///
/// `True` while any certificate in use has expired, with the reason naming which
/// (`ClientCertificateExpired`, `ServingCertificateExpired`, both:
/// `CertificatesExpired`); an expired client certificate can be reported only once the
/// node has credentials again, so a replaced one is kept as `False` with the reason
/// `CertificateReplacedAfterExpiry` and when it lapsed, until the agent restarts.
/// Otherwise `False`, `CertificatesValid`. No expiry date is in the message, so a
/// rotation does not change the status.
pub fn condition(held: &[Held], now: SystemTime) -> Option<(bool, &'static str, String)> {
    if held.is_empty() {
        return None;
    }
    let expired: Vec<&Held> =
        held.iter().filter(|h| h.not_after.is_some_and(|end| now >= end)).collect();
    if !expired.is_empty() {
        let reason = match expired.as_slice() {
            [one] if one.kind == "server" => "ServingCertificateExpired",
            [_] => "ClientCertificateExpired",
            _ => "CertificatesExpired",
        };
        let parts: Vec<String> = expired
            .iter()
            .map(|h| {
                let end = h.not_after.map(rfc3339).unwrap_or_default();
                match &h.problem {
                    Some(problem) => {
                        format!("the {} certificate expired at {end}: {problem}", name(h.kind))
                    }
                    None => format!("the {} certificate expired at {end}", name(h.kind)),
                }
            })
            .collect();
        return Some((true, reason, format!("{}; pods keep running", parts.join("; "))));
    }
    let lapses: Vec<String> = held
        .iter()
        .filter_map(|h| {
            let lapse = h.lapse?;
            Some(format!(
                "the {} certificate expired at {} and was replaced at {}",
                name(h.kind),
                rfc3339(lapse.expired_at),
                rfc3339(lapse.replaced_at)
            ))
        })
        .collect();
    if lapses.is_empty() {
        Some((false, "CertificatesValid", "the node's certificates are valid".to_owned()))
    } else {
        Some((false, "CertificateReplacedAfterExpiry", lapses.join("; ")))
    }
}

/// How the condition's message names a kind of certificate.
fn name(kind: &'static str) -> &'static str {
    if kind == "server" { "serving" } else { kind }
}

/// A time as RFC 3339 in UTC, to the second (before 1970: the epoch).
pub fn rfc3339(at: SystemTime) -> String {
    let (year, month, day, hour, minute, second) = utc(at);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

/// The UTC date and time of day of `at`, to the second.
fn utc(at: SystemTime) -> (i64, u32, u32, u64, u64, u64) {
    let seconds = at.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    let days = i64::try_from(seconds / 86_400).unwrap_or(i64::MAX);
    let in_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    (year, month, day, in_day / 3600, in_day % 3600 / 60, in_day % 60)
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

    fn held(kind: &'static str, not_after: u64) -> Held {
        Held { kind, not_after: Some(at(not_after)), problem: None, lapse: None }
    }

    /// J2: the Node condition says which certificate expired, and that pods keep running.
    #[test]
    fn j2_condition_names_the_expired_certificate() {
        assert_eq!(condition(&[], at(10)), None);
        let valid = [held("client", 100), held("server", 100)];
        assert_eq!(
            condition(&valid, at(10)),
            Some((false, "CertificatesValid", "the node's certificates are valid".to_owned()))
        );
        let serving = [held("client", 100), held("server", 5)];
        assert_eq!(
            condition(&serving, at(10)),
            Some((
                true,
                "ServingCertificateExpired",
                "the serving certificate expired at 1970-01-01T00:00:05Z; pods keep running"
                    .to_owned()
            ))
        );
        let client = [Held { problem: Some("the CSR was denied".into()), ..held("client", 10) }];
        assert_eq!(
            condition(&client, at(10)),
            Some((
                true,
                "ClientCertificateExpired",
                "the client certificate expired at 1970-01-01T00:00:10Z: the CSR was denied; pods keep running"
                    .to_owned()
            ))
        );
        let both = [held("client", 3), held("server", 5)];
        assert_eq!(condition(&both, at(10)).map(|c| c.1), Some("CertificatesExpired"));
        // No certificate yet (waiting for the first one) is not an expiry.
        let none = [Held { not_after: None, ..held("client", 0) }];
        assert_eq!(condition(&none, at(10)).map(|c| c.1), Some("CertificatesValid"));
    }

    /// J2: once replaced, the lapse stays in the condition (the node could not say so
    /// while its client certificate was expired).
    #[test]
    fn j2_condition_keeps_a_replaced_certificates_lapse() {
        let lapse = Lapse { expired_at: at(60), replaced_at: at(3_661) };
        let replaced =
            [Held { lapse: Some(lapse), ..held("client", 90_000) }, held("server", 90_000)];
        assert_eq!(
            condition(&replaced, at(4_000)),
            Some((
                false,
                "CertificateReplacedAfterExpiry",
                "the client certificate expired at 1970-01-01T00:01:00Z and was replaced at 1970-01-01T01:01:01Z"
                    .to_owned()
            ))
        );
    }

    proptest! {
        /// J2: the condition is True exactly when a certificate in use has ended, and a
        /// rotation (a later end) never changes a False one.
        #[test]
        fn j2_condition_is_true_exactly_when_one_has_ended(
            ends in proptest::collection::vec(0u64..1_000, 1..3),
            now in 0u64..1_000,
            later in 1u64..1_000,
        ) {
            let kinds = ["client", "server"];
            let held: Vec<Held> = ends.iter().zip(kinds).map(|(end, kind)| held(kind, *end)).collect();
            let (on, _, _) = condition(&held, at(now)).unwrap();
            prop_assert_eq!(on, ends.iter().any(|end| now >= *end));
            if !on {
                let rotated: Vec<Held> = held.iter().map(|h| Held { not_after: h.not_after.map(|t| t + Duration::from_secs(later)), ..h.clone() }).collect();
                prop_assert_eq!(condition(&rotated, at(now)), condition(&held, at(now)));
            }
        }
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
