//! Eviction thresholds as kubelet takes them: `--eviction-hard` / `evictionHard`
//! (`memory.available<100Mi,nodefs.available<10%` on the command line, a map in the
//! config file), `--eviction-soft` with `--eviction-soft-grace-period`
//! (`memory.available=1m30s`), `--eviction-minimum-reclaim`,
//! `--eviction-pressure-transition-period` and `--eviction-max-pod-grace-period`.
//!
//! Defaults are kubelet's (Linux): `memory.available<100Mi`, `nodefs.available<10%`,
//! `nodefs.inodesFree<5%`, `imagefs.available<15%`, `imagefs.inodesFree<5%`. As in
//! kubelet, giving `evictionHard` at all replaces them: a signal left out has no hard
//! threshold, unless `mergeDefaultEvictionSettings` is true, in which case the defaults
//! fill in the signals left out. `0%` and `100%` disable a threshold.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::signal::Signal;
use crate::quantity::Quantity;

/// kubelet's `DefaultEvictionHard` on Linux.
pub const DEFAULT_HARD: [(&str, &str); 5] = [
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
    ("imagefs.available", "15%"),
    ("imagefs.inodesFree", "5%"),
];

/// kubelet's default `evictionPressureTransitionPeriod`.
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(5 * 60);

/// A setting, named as the flag and the config field (for error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Hard,
    Soft,
    SoftGracePeriod,
    MinimumReclaim,
    PressureTransitionPeriod,
    MaxPodGracePeriod,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Hard => "--eviction-hard (evictionHard)",
            Field::Soft => "--eviction-soft (evictionSoft)",
            Field::SoftGracePeriod => "--eviction-soft-grace-period (evictionSoftGracePeriod)",
            Field::MinimumReclaim => "--eviction-minimum-reclaim (evictionMinimumReclaim)",
            Field::PressureTransitionPeriod => {
                "--eviction-pressure-transition-period (evictionPressureTransitionPeriod)"
            }
            Field::MaxPodGracePeriod => {
                "--eviction-max-pod-grace-period (evictionMaxPodGracePeriod)"
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "{field}: {item:?} is not a statement; expected signal{separator}value, comma separated"
    )]
    Statement { field: Field, item: String, separator: char },
    #[error(
        "{field}: unsupported eviction signal {signal:?}; use memory.available, \
         allocatableMemory.available, nodefs.available, nodefs.inodesFree, imagefs.available, \
         imagefs.inodesFree or pid.available"
    )]
    Signal { field: Field, signal: String },
    #[error("{field}: {signal} {value:?}: a percentage must be between 0% and 100%")]
    Percentage { field: Field, signal: Signal, value: String },
    #[error(
        "{field}: {signal} {value:?}: expected a positive quantity such as 100Mi, or a percentage"
    )]
    Quantity { field: Field, signal: Signal, value: String },
    #[error("{field}: {signal} {value:?}: expected a duration such as \"1m30s\", not negative")]
    Duration { field: Field, signal: Signal, value: String },
    #[error("{field}: {value:?}: expected a duration such as \"5m\", not negative")]
    Period { field: Field, value: String },
    #[error("{field}: {value}: must not be negative")]
    Negative { field: Field, value: i64 },
    #[error(
        "--eviction-soft (evictionSoft): {signal} has no grace period; give one in \
         --eviction-soft-grace-period (evictionSoftGracePeriod)"
    )]
    NoGracePeriod { signal: Signal },
}

/// A threshold's value: an absolute quantity (bytes, inodes, PIDs) or a share of the
/// signal's capacity (0.1 for `10%`, kept as kubelet's float32).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    Quantity(i64),
    Percentage(f32),
}

impl ThresholdValue {
    /// The value against `capacity` (kubelet's `GetThresholdQuantity`).
    pub fn quantity(self, capacity: i64) -> i64 {
        match self {
            ThresholdValue::Quantity(q) => q,
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_precision_loss,
                reason = "kubelet's own float arithmetic, truncated as Go's int64() does"
            )]
            ThresholdValue::Percentage(p) => (capacity as f64 * f64::from(p)) as i64,
        }
    }
}

/// One threshold: the signal's available amount below `value` (the operator is always
/// `<`). A zero grace period makes it a hard threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    pub grace_period: Duration,
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }

    /// Whether `available` of `capacity` meets it; with `enforce_min_reclaim`, against
    /// the threshold plus its minimum reclaim (kubelet's `thresholdsMet`).
    pub fn met(&self, available: i64, capacity: i64, enforce_min_reclaim: bool) -> bool {
        let mut quantity = self.value.quantity(capacity);
        if enforce_min_reclaim && let Some(min) = self.min_reclaim {
            quantity = quantity.saturating_add(min.quantity(capacity));
        }
        quantity > available
    }
}

/// The eviction settings as given (flags over the config file); maps from signal names
/// to values. `hard: None` is "not given" (kubelet's defaults apply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub hard: Option<BTreeMap<String, String>>,
    pub soft: BTreeMap<String, String>,
    pub soft_grace_period: BTreeMap<String, String>,
    pub minimum_reclaim: BTreeMap<String, String>,
    pub pressure_transition_period: Option<String>,
    pub max_pod_grace_period: Option<i64>,
    pub merge_defaults: bool,
}

/// The eviction manager's configuration, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Hard thresholds first, then soft, each in [`Signal::ALL`] order.
    pub thresholds: Vec<Threshold>,
    pub pressure_transition_period: Duration,
    /// The longest grace period a pod evicted for a soft threshold gets, in seconds.
    pub max_pod_grace_period: i64,
}

impl Default for Config {
    /// kubelet's defaults.
    fn default() -> Config {
        Config::resolve(&Settings::default()).unwrap_or(Config {
            thresholds: Vec::new(),
            pressure_transition_period: DEFAULT_PRESSURE_TRANSITION_PERIOD,
            max_pod_grace_period: 0,
        })
    }
}

impl Config {
    /// kubelet's `ParseThresholdConfig` over the settings with kubelet's defaults.
    pub fn resolve(settings: &Settings) -> Result<Config, Error> {
        let defaults = || DEFAULT_HARD.iter().map(|(s, v)| ((*s).to_owned(), (*v).to_owned()));
        let hard = match &settings.hard {
            None => defaults().collect(),
            Some(given) if settings.merge_defaults => {
                let mut merged: BTreeMap<String, String> = defaults().collect();
                merged.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
                merged
            }
            Some(given) => given.clone(),
        };
        let mut thresholds = statements(Field::Hard, &hard)?;
        let mut soft = statements(Field::Soft, &settings.soft)?;
        let grace = per_signal(Field::SoftGracePeriod, &settings.soft_grace_period, grace_period)?;
        for threshold in &mut soft {
            threshold.grace_period = grace
                .iter()
                .find(|(signal, _)| *signal == threshold.signal)
                .map(|(_, period)| *period)
                .ok_or(Error::NoGracePeriod { signal: threshold.signal })?;
        }
        thresholds.extend(soft);
        let reclaims = per_signal(Field::MinimumReclaim, &settings.minimum_reclaim, min_reclaim)?;
        for threshold in &mut thresholds {
            threshold.min_reclaim =
                reclaims.iter().find(|(s, _)| *s == threshold.signal).map(|(_, v)| *v);
        }
        let pressure_transition_period = match &settings.pressure_transition_period {
            None => DEFAULT_PRESSURE_TRANSITION_PERIOD,
            Some(raw) => crate::duration::parse(raw).ok_or_else(|| Error::Period {
                field: Field::PressureTransitionPeriod,
                value: raw.clone(),
            })?,
        };
        let max_pod_grace_period = settings.max_pod_grace_period.unwrap_or(0);
        if max_pod_grace_period < 0 {
            return Err(Error::Negative {
                field: Field::MaxPodGracePeriod,
                value: max_pod_grace_period,
            });
        }
        Ok(Config { thresholds, pressure_transition_period, max_pod_grace_period })
    }

    /// With node allocatable enforced on pods, every hard `memory.available` threshold
    /// also applies to `allocatableMemory.available` (kubelet's `addAllocatableThresholds`).
    pub fn with_allocatable(mut self) -> Config {
        let copies: Vec<Threshold> = self
            .thresholds
            .iter()
            .filter(|t| t.signal == Signal::MemoryAvailable && t.is_hard())
            .map(|t| Threshold { signal: Signal::AllocatableMemoryAvailable, ..*t })
            .collect();
        self.thresholds.extend(copies);
        self
    }

    /// The hard threshold of `signal`, if any.
    pub fn hard(&self, signal: Signal) -> Option<&Threshold> {
        self.thresholds.iter().find(|t| t.signal == signal && t.is_hard())
    }

    /// What the hard threshold of `signal` holds back of `capacity` (0 without one):
    /// node allocatable is capacity less this, less the reservations.
    pub fn hard_quantity(&self, signal: Signal, capacity: i64) -> i64 {
        self.hard(signal).map_or(0, |t| t.value.quantity(capacity))
    }
}

/// Splits a flag's value (`memory.available<100Mi,nodefs.available<10%` with `<`, or
/// `memory.available=1m30s` with `=`) into a map; later statements win.
pub fn parse_statements(
    field: Field,
    raw: &str,
    separator: char,
) -> Result<BTreeMap<String, String>, Error> {
    let mut map = BTreeMap::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.split_once(separator) {
            Some((signal, value)) if !signal.trim().is_empty() => {
                map.insert(signal.trim().to_owned(), value.trim().to_owned());
            }
            _ => return Err(Error::Statement { field, item: item.to_owned(), separator }),
        }
    }
    Ok(map)
}

fn signal(field: Field, name: &str) -> Result<Signal, Error> {
    Signal::parse(name).ok_or_else(|| Error::Signal { field, signal: name.to_owned() })
}

/// Each entry's signal checked and its value parsed, in [`Signal::ALL`] order.
fn per_signal<T>(
    field: Field,
    map: &BTreeMap<String, String>,
    parse: impl Fn(Signal, &str) -> Result<Option<T>, Error>,
) -> Result<Vec<(Signal, T)>, Error> {
    let mut parsed = Vec::new();
    for (name, value) in map {
        let signal = signal(field, name)?;
        if let Some(v) = parse(signal, value)? {
            parsed.push((signal, v));
        }
    }
    parsed.sort_by_key(|(s, _)| *s);
    Ok(parsed)
}

/// Threshold statements (kubelet's `parseThresholdStatement`): `0%` and `100%` are
/// ignored, other percentages must be in range, quantities positive.
fn statements(field: Field, map: &BTreeMap<String, String>) -> Result<Vec<Threshold>, Error> {
    let parsed = per_signal(field, map, |signal, raw| {
        if raw == "0%" || raw == "100%" {
            return Ok(None);
        }
        let value = match raw.strip_suffix('%') {
            Some(number) => {
                let bad = || Error::Percentage { field, signal, value: raw.to_owned() };
                let percent: f32 = number.trim().parse().map_err(|_| bad())?;
                if !(0.0..=100.0).contains(&percent) {
                    return Err(bad());
                }
                ThresholdValue::Percentage(percent / 100.0)
            }
            None => {
                let bad = || Error::Quantity { field, signal, value: raw.to_owned() };
                let bytes = Quantity::parse(raw).and_then(|q| q.value()).map_err(|_| bad())?;
                if bytes <= 0 {
                    return Err(bad());
                }
                ThresholdValue::Quantity(bytes)
            }
        };
        Ok(Some(value))
    })?;
    Ok(parsed
        .into_iter()
        .map(|(signal, value)| Threshold {
            signal,
            value,
            grace_period: Duration::ZERO,
            min_reclaim: None,
        })
        .collect())
}

fn grace_period(signal: Signal, raw: &str) -> Result<Option<Duration>, Error> {
    let period = crate::duration::parse(raw);
    period.map(Some).ok_or_else(|| Error::Duration {
        field: Field::SoftGracePeriod,
        signal,
        value: raw.to_owned(),
    })
}

/// kubelet's `parseMinimumReclaims`: a positive percentage or a non-negative quantity.
fn min_reclaim(signal: Signal, raw: &str) -> Result<Option<ThresholdValue>, Error> {
    let field = Field::MinimumReclaim;
    match raw.strip_suffix('%') {
        Some(number) => {
            let bad = || Error::Percentage { field, signal, value: raw.to_owned() };
            let percent: f32 = number.trim().parse().map_err(|_| bad())?;
            if percent <= 0.0 || percent > 100.0 {
                return Err(bad());
            }
            Ok(Some(ThresholdValue::Percentage(percent / 100.0)))
        }
        None => {
            let bad = || Error::Quantity { field, signal, value: raw.to_owned() };
            let value = Quantity::parse(raw).and_then(|q| q.value()).map_err(|_| bad())?;
            Ok(Some(ThresholdValue::Quantity(value)))
        }
    }
}
