//! The eviction settings with kubelet's names: `--eviction-hard` / `evictionHard`,
//! `--eviction-soft` / `evictionSoft`, `--eviction-soft-grace-period` /
//! `evictionSoftGracePeriod`, `--eviction-minimum-reclaim` / `evictionMinimumReclaim`,
//! `--eviction-pressure-transition-period`, `--eviction-max-pod-grace-period` and
//! `mergeDefaultEvictionSettings`. On the command line a map is written as kubelet takes
//! it (`memory.available<100Mi,nodefs.available<10%`; `memory.available=1m30s`) and may
//! be repeated; in the file it is a map. The values are checked, and kubelet's defaults
//! applied, by [`outpost_core::eviction::Config::resolve`].

use std::collections::BTreeMap;
use std::str::FromStr;

use outpost_core::eviction::{self, Settings as EvictionSettings, Signal, ThresholdValue};
use outpost_core::node_status::allocatable::{HardEviction, Threshold};
use serde::Deserialize;

use super::Settings;

/// A map flag's item that is not `signal<value` (thresholds) or `signal=value`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{item:?}: expected signal{separator}value items separated by commas")]
    Item { item: String, separator: char },
}

/// Thresholds, `signal<value[,…]` on the command line; a map in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Thresholds(pub BTreeMap<String, String>);

/// Values per signal, `signal=value[,…]` on the command line; a map in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct SignalValues(pub BTreeMap<String, String>);

impl FromStr for Thresholds {
    type Err = Error;
    fn from_str(raw: &str) -> Result<Thresholds, Error> {
        split(raw, '<').map(Thresholds)
    }
}

impl FromStr for SignalValues {
    type Err = Error;
    fn from_str(raw: &str) -> Result<SignalValues, Error> {
        split(raw, '=').map(SignalValues)
    }
}

/// kubelet's map flags: `key<sep>value` items separated by commas.
fn split(raw: &str, separator: char) -> Result<BTreeMap<String, String>, Error> {
    let mut map = BTreeMap::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.split_once(separator) {
            Some((key, value)) if !key.trim().is_empty() => {
                map.insert(key.trim().to_owned(), value.trim().to_owned());
            }
            _ => return Err(Error::Item { item: item.to_owned(), separator }),
        }
    }
    Ok(map)
}

/// Repeated flags add up; a later statement for the same signal wins.
fn merged<'a>(
    maps: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    maps.into_iter().flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone()))).collect()
}

/// The hard `memory.available` and `nodefs.available` thresholds, as node allocatable
/// takes them.
pub fn hard_eviction(config: &eviction::Config) -> HardEviction {
    let threshold = |signal| {
        config.hard(signal).map(|t| match t.value {
            ThresholdValue::Quantity(bytes) => Threshold::Bytes(u64::try_from(bytes).unwrap_or(0)),
            ThresholdValue::Percentage(share) => Threshold::Percentage(f64::from(share) * 100.0),
        })
    };
    HardEviction {
        memory_available: threshold(Signal::MemoryAvailable),
        nodefs_available: threshold(Signal::NodeFsAvailable),
    }
}

/// The eviction manager's configuration from the settings (flags over file), with
/// kubelet's defaults.
pub fn resolve(s: &Settings) -> Result<eviction::Config, eviction::Error> {
    let given = EvictionSettings {
        hard: (!s.eviction_hard.is_empty()).then(|| merged(s.eviction_hard.iter().map(|t| &t.0))),
        soft: merged(s.eviction_soft.iter().map(|t| &t.0)),
        soft_grace_period: merged(s.eviction_soft_grace_period.iter().map(|t| &t.0)),
        minimum_reclaim: merged(s.eviction_minimum_reclaim.iter().map(|t| &t.0)),
        pressure_transition_period: s.eviction_pressure_transition_period.clone(),
        max_pod_grace_period: s.eviction_max_pod_grace_period,
        merge_defaults: s.merge_default_eviction_settings.unwrap_or(false),
    };
    eviction::Config::resolve(&given)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use outpost_core::eviction::{Signal, ThresholdValue};

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        settings: Settings,
    }

    fn flags(args: &[&str]) -> Settings {
        let mut argv = vec!["outpost"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().settings
    }

    // E1: kubelet's flag syntax, repeatable.
    #[test]
    fn flags_take_kubelets_syntax() {
        let s = flags(&[
            "--eviction-hard",
            "memory.available<500Mi,nodefs.available<5%",
            "--eviction-hard",
            "pid.available<10%",
            "--eviction-soft",
            "memory.available<1Gi",
            "--eviction-soft-grace-period",
            "memory.available=1m30s",
            "--eviction-minimum-reclaim",
            "memory.available=100Mi",
            "--eviction-pressure-transition-period",
            "30s",
            "--eviction-max-pod-grace-period",
            "20",
        ]);
        let config = resolve(&s).unwrap();
        let mi = 1024 * 1024;
        assert_eq!(
            config.hard(Signal::MemoryAvailable).unwrap().value,
            ThresholdValue::Quantity(500 * mi)
        );
        assert!(config.hard(Signal::PidAvailable).is_some());
        assert!(
            config.hard(Signal::ImageFsAvailable).is_none(),
            "given thresholds replace the defaults"
        );
        let soft = config.thresholds.iter().find(|t| !t.is_hard()).unwrap();
        assert_eq!(soft.grace_period, Duration::from_secs(90));
        assert_eq!(soft.min_reclaim, Some(ThresholdValue::Quantity(100 * mi)));
        assert_eq!(config.pressure_transition_period, Duration::from_secs(30));
        assert_eq!(config.max_pod_grace_period, 20);
    }

    // E1: the KubeletConfiguration fields, as maps.
    #[test]
    fn the_file_takes_kubelets_maps() {
        let yaml = "evictionHard:\n  memory.available: 200Mi\nmergeDefaultEvictionSettings: true\n\
                    evictionSoft: {nodefs.available: 20%}\n\
                    evictionSoftGracePeriod: {nodefs.available: 2m}\n\
                    evictionMinimumReclaim: {nodefs.available: 1Gi}\n\
                    evictionPressureTransitionPeriod: 1m\nevictionMaxPodGracePeriod: 30\n";
        let s = Settings::from_yaml(yaml).unwrap();
        let config = resolve(&s).unwrap();
        assert_eq!(config.thresholds.len(), 6, "five defaults merged, one soft");
        assert_eq!(
            config.hard(Signal::MemoryAvailable).unwrap().value,
            ThresholdValue::Quantity(200 * 1024 * 1024)
        );
        assert_eq!(config.pressure_transition_period, Duration::from_secs(60));
        assert_eq!(config.max_pod_grace_period, 30);
    }

    #[test]
    fn nothing_given_is_kubelets_defaults() {
        assert_eq!(resolve(&Settings::default()).unwrap(), eviction::Config::default());
        let disabled = Settings::from_yaml("evictionHard: {}\n").unwrap();
        assert!(resolve(&disabled).unwrap().thresholds.is_empty());
    }

    // Node allocatable is reduced by the configured hard thresholds, not the defaults.
    #[test]
    fn allocatable_takes_the_configured_hard_thresholds() {
        let s = flags(&["--eviction-hard", "memory.available<1Gi,nodefs.available<5%"]);
        let hard = hard_eviction(&resolve(&s).unwrap());
        assert_eq!(hard.memory_available, Some(Threshold::Bytes(1 << 30)));
        assert_eq!(hard.nodefs_available.map(|t| t.amount(1000)), Some(50));
        let none = flags(&["--eviction-hard", "pid.available<10%"]);
        assert_eq!(hard_eviction(&resolve(&none).unwrap()).memory_available, None);
        // The defaults hold back what the eviction manager's thresholds are, computed as
        // kubelet computes them (its float32 percentages).
        let config = resolve(&Settings::default()).unwrap();
        let defaults = hard_eviction(&config);
        let capacity: i64 = 1 << 40;
        let nodefs = defaults.nodefs_available.unwrap().amount(capacity.unsigned_abs());
        assert_eq!(
            i64::try_from(nodefs).unwrap(),
            config.hard_quantity(Signal::NodeFsAvailable, capacity)
        );
        assert_eq!(defaults.memory_available, Some(Threshold::Bytes(100 << 20)));
    }

    #[test]
    fn bad_values_name_the_flag() {
        let s = flags(&["--eviction-hard", "memory.available<lots"]);
        assert!(
            resolve(&s)
                .unwrap_err()
                .to_string()
                .starts_with("--eviction-hard (evictionHard): memory.available \"lots\"")
        );
        let error = Cli::try_parse_from(["outpost", "--eviction-hard", "memory.available=1Gi"])
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("expected signal<value items separated by commas"), "{error}");
    }
}
