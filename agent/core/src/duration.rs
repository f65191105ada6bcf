//! Durations as the settings write them: Go's syntax (`90s`, `1m30s`, `500ms`, what
//! kubelet's flags take), ISO 8601 (`PT20S`), or a bare `0`.

use std::time::Duration;

/// A non-negative duration: "0", "90s", "1h30m", "500ms", "PT20S"; `None` for anything
/// else (a negative one among them).
pub fn parse(raw: &str) -> Option<Duration> {
    let raw = raw.trim();
    if raw == "0" {
        return Some(Duration::ZERO);
    }
    let parsed: k8s_openapi::jiff::SignedDuration = raw.parse().ok()?;
    Duration::try_from(parsed).ok()
}

/// A duration above zero (the same syntax as [`parse`]).
pub fn positive(raw: &str) -> Option<Duration> {
    parse(raw).filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{parse, positive};

    #[test]
    fn go_iso_and_zero() {
        for (raw, expected) in [
            ("0", Some(Duration::ZERO)),
            (" 0s ", Some(Duration::ZERO)),
            ("90s", Some(Duration::from_secs(90))),
            ("1h30m", Some(Duration::from_secs(5400))),
            ("500ms", Some(Duration::from_millis(500))),
            ("PT20S", Some(Duration::from_secs(20))),
            ("-5s", None),
            ("ten", None),
            ("", None),
        ] {
            assert_eq!(parse(raw), expected, "{raw:?}");
            assert_eq!(positive(raw), expected.filter(|d| !d.is_zero()), "{raw:?}");
        }
    }
}
