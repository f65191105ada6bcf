//! UTC time as the logger writes it: RFC 3339 with nanoseconds in each CRI record, and
//! kubelet's `YYYYMMDD-HHMMSS` in the names of rotated files.
//!
//! Written here rather than taken from a date-time crate: the logger needs only these two
//! formats of a UTC instant (days to a civil date is one small, well-known computation),
//! and every page a crate adds is paid once per container. The tests check both formats
//! against jiff over its whole range.

use std::time::{SystemTime, UNIX_EPOCH};

const NANOS_PER_SECOND: u32 = 1_000_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// An instant: whole seconds since the Unix epoch (negative before it) and the
/// nanoseconds past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time {
    secs: i64,
    nanos: u32,
}

impl Time {
    pub const UNIX_EPOCH: Time = Time { secs: 0, nanos: 0 };

    pub fn now() -> Time {
        Time::from(SystemTime::now())
    }

    /// `secs` since the epoch and `nanos` past them (at most 999,999,999; more are capped).
    pub fn from_unix(secs: i64, nanos: u32) -> Time {
        Time { secs, nanos: nanos.min(NANOS_PER_SECOND - 1) }
    }

    /// Appends `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`: fixed width for years 0 to 9999, so
    /// records sort by their text.
    pub fn write_rfc3339_nanos(self, out: &mut Vec<u8>) {
        Civil::of(self).write(out, [Some(b'-'), Some(b'T'), Some(b':')]);
        out.push(b'.');
        write_digits(out, self.nanos.into(), 9);
        out.push(b'Z');
    }

    /// `YYYYMMDD-HHMMSS`, the time in a rotated log's name (kubelet's `20060102-150405`).
    pub fn rotation_stamp(self) -> String {
        let mut out = Vec::with_capacity(15);
        Civil::of(self).write(&mut out, [None, Some(b'-'), None]);
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl From<SystemTime> for Time {
    fn from(time: SystemTime) -> Time {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Time {
                secs: i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
                nanos: after.subsec_nanos(),
            },
            Err(before) => {
                let before = before.duration();
                let secs = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
                match before.subsec_nanos() {
                    0 => Time { secs: -secs, nanos: 0 },
                    n => Time { secs: -secs - 1, nanos: NANOS_PER_SECOND - n },
                }
            }
        }
    }
}

/// A UTC date and time of day (proleptic Gregorian calendar).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
}

impl Civil {
    /// Year, month, day, then hour, minute, second, with `separators`: between the
    /// date's fields, between date and time, between the time's fields.
    fn write(self, out: &mut Vec<u8>, [date, between, time]: [Option<u8>; 3]) {
        write_year(out, self.year);
        for (separator, field) in [
            (date, self.month),
            (date, self.day),
            (between, self.hour),
            (time, self.minute),
            (time, self.second),
        ] {
            out.extend(separator);
            write_digits(out, field.into(), 2);
        }
    }

    fn of(time: Time) -> Civil {
        let days = time.secs.div_euclid(SECONDS_PER_DAY);
        let of_day = time.secs.rem_euclid(SECONDS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        // Each below 60 or 24, as `of_day` is below a day.
        let small = |n: i64| u8::try_from(n).unwrap_or(u8::MAX);
        Civil {
            year,
            month,
            day,
            hour: small(of_day / 3600),
            minute: small(of_day / 60 % 60),
            second: small(of_day % 60),
        }
    }
}

/// The date `days` after 1970-01-01: the civil-from-days computation on 400-year eras
/// (146,097 days each) that start on March 1st, so that a leap day ends its year.
fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097); // 0..=146_096
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153; // 0..=11, March first
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1; // 1..=31
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let small = |n: i64| u8::try_from(n).unwrap_or(u8::MAX);
    (year, small(month), small(day))
}

/// Four digits for years 0 to 9999; others as they are, with their sign.
fn write_year(out: &mut Vec<u8>, year: i64) {
    match u64::try_from(year) {
        Ok(year) if year <= 9999 => write_digits(out, year, 4),
        _ => out.extend_from_slice(year.to_string().as_bytes()),
    }
}

/// `value`'s last `width` decimal digits, zero-padded.
fn write_digits(out: &mut Vec<u8>, mut value: u64, width: usize) {
    let start = out.len();
    out.resize(start + width, b'0');
    for slot in out[start..].iter_mut().rev() {
        // A digit: below 10.
        *slot = b'0' + u8::try_from(value % 10).unwrap_or(0);
        value /= 10;
    }
}

#[cfg(test)]
mod tests;
