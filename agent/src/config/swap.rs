//! Swap's settings (D6), kubelet's: `--fail-swap-on` (`failSwapOn`, default true) and
//! `memorySwap.swapBehavior` (the file only: `NoSwap`, the default, or `LimitedSwap`), and
//! the checks kubelet makes of them at start: `LimitedSwap` needs cgroup v2, and swap on
//! needs `failSwapOn: false`.

use outpost_core::swap::{self, Behavior};
use serde::Deserialize;

use crate::host::Host;

/// Where the kernel lists the swap areas in use.
const PROC_SWAPS: &str = "swaps";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Behavior(#[from] swap::Error),
    /// kubelet's words, then what to do.
    #[error(
        "swap feature is enabled and LimitedSwap but it is only supported with cgroupv2 (this \
         node's cgroups are v1: set memorySwap.swapBehavior to NoSwap, or boot with the unified \
         cgroup v2 hierarchy)"
    )]
    LimitedSwapOnCgroupV1,
    /// kubelet's words.
    #[error(
        "running with swap on is not supported, please disable swap or set --fail-swap-on flag \
         to false"
    )]
    SwapOn,
    #[error("failed to determine if swap is on: cannot read /proc/swaps: {0}")]
    ProcSwaps(#[source] std::io::Error),
}

/// KubeletConfiguration's `memorySwap` (the file only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySwapSettings {
    #[serde(default)]
    pub swap_behavior: Option<String>,
}

/// The swap settings, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Swap {
    /// `failSwapOn`: refuse to start on a node with swap on.
    pub fail_swap_on: bool,
    /// `memorySwap.swapBehavior`: how much the containers may swap.
    pub behavior: Behavior,
}

impl Default for Swap {
    fn default() -> Swap {
        Swap { fail_swap_on: true, behavior: Behavior::NoSwap }
    }
}

impl Swap {
    /// The settings as given (`None`: not given), checked as kubelet's configuration
    /// validation checks them.
    pub fn resolve(
        fail_swap_on: Option<bool>,
        memory_swap: Option<MemorySwapSettings>,
    ) -> Result<Swap, Error> {
        let behavior = memory_swap.and_then(|m| m.swap_behavior).unwrap_or_default();
        Ok(Swap {
            fail_swap_on: fail_swap_on.unwrap_or(true),
            behavior: Behavior::parse(&behavior)?,
        })
    }

    /// kubelet's checks at start, on a node whose cgroups are v2 or not (`cgroup_v2`)
    /// and whose `/proc/swaps` `host` reads: `LimitedSwap` is refused on cgroup v1, and
    /// swap on unless `failSwapOn` is false. Whether swap is on (a node without
    /// `/proc/swaps` has none).
    pub fn check(&self, host: &dyn Host, cgroup_v2: bool) -> Result<bool, Error> {
        if self.behavior == Behavior::LimitedSwap && !cgroup_v2 {
            return Err(Error::LimitedSwapOnCgroupV1);
        }
        let on = match host.proc(PROC_SWAPS) {
            Ok(text) => swap::is_on(&text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
            Err(error) => return Err(Error::ProcSwaps(error)),
        };
        if on && self.fail_swap_on {
            return Err(Error::SwapOn);
        }
        Ok(on)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Recording;

    const HEADER: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";

    fn swap_on() -> String {
        format!("{HEADER}/swapfile                               file\t\t16380\t\t0\t\t-2\n")
    }

    fn behavior(value: &str) -> Option<MemorySwapSettings> {
        Some(MemorySwapSettings { swap_behavior: Some(value.to_owned()) })
    }

    #[test]
    fn d6_swap_settings_default_to_kubelets() {
        assert_eq!(Swap::resolve(None, None).unwrap(), Swap::default());
        assert_eq!(Swap::default(), Swap { fail_swap_on: true, behavior: Behavior::NoSwap });
        let given = Swap::resolve(Some(false), behavior("LimitedSwap")).unwrap();
        assert_eq!(given, Swap { fail_swap_on: false, behavior: Behavior::LimitedSwap });
        assert_eq!(Swap::resolve(None, behavior("")).unwrap().behavior, Behavior::NoSwap);
        let error = Swap::resolve(None, behavior("UnlimitedSwap")).unwrap_err();
        assert!(error.to_string().starts_with("invalid configuration: memorySwap.swapBehavior"));
    }

    /// D6: the agent refuses to start with swap on, in kubelet's words, unless
    /// `failSwapOn` is false; `/proc/swaps` with its header alone, or none, is swap off.
    #[test]
    fn d6_swap_on_is_refused_unless_fail_swap_on_is_false() {
        let host = Recording::new();
        let default = Swap::default();
        assert!(!default.check(&host, false).unwrap(), "no /proc/swaps: no swap");
        host.file("/proc/swaps", HEADER);
        assert!(!default.check(&host, false).unwrap());
        host.file("/proc/swaps", swap_on());
        let error = default.check(&host, false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "running with swap on is not supported, please disable swap or set --fail-swap-on \
             flag to false"
        );
        let allowed = Swap { fail_swap_on: false, ..default };
        assert!(allowed.check(&host, false).unwrap(), "swap on, allowed");
        assert_eq!(host.reads().last().map(|p| p.display().to_string()).unwrap(), "/proc/swaps");
    }

    /// D6: `LimitedSwap` on cgroup v1 is refused before anything else, in kubelet's words.
    #[test]
    fn d6_limited_swap_needs_cgroup_v2() {
        let host = Recording::new();
        let limited = Swap { fail_swap_on: false, behavior: Behavior::LimitedSwap };
        let error = limited.check(&host, false).unwrap_err();
        assert!(
            error.to_string().starts_with(
                "swap feature is enabled and LimitedSwap but it is only supported with cgroupv2"
            ),
            "{error}"
        );
        assert!(host.reads().is_empty(), "refused before /proc/swaps is read");
        assert!(!limited.check(&host, true).unwrap());
    }
}
