//! The eviction manager's figure: `outpost_evictions_total{signal}` (kubelet's
//! `kubelet_evictions{eviction_signal}`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The eviction manager's: `outpost_evictions_total{signal}` (kubelet's
/// `kubelet_evictions{eviction_signal}`).
#[derive(Debug, Clone, Default)]
pub struct Evictions {
    evictions: Family<[(&'static str, &'static str); 1], Counter>,
}

impl Evictions {
    pub fn register(outpost: &mut Registry) -> Evictions {
        let metrics = Evictions::default();
        outpost.register(
            "evictions",
            "Pods evicted by the eviction manager, by the signal whose threshold was met",
            metrics.evictions.clone(),
        );
        metrics
    }

    /// A pod was evicted for `signal`.
    pub fn evicted(&self, signal: outpost_core::eviction::Signal) {
        self.evicted_for(signal.as_str());
    }

    /// A pod was evicted for a signal of kubelet's named `signal` (the ephemeral-storage
    /// limits': `ephemeralpodfs.limit`, `ephemeralcontainerfs.limit`, `emptydirfs.limit`).
    pub fn evicted_for(&self, signal: &'static str) {
        self.evictions.get_or_create(&[("signal", signal)]).inc();
    }

    /// How many pods were evicted for `signal` (tests).
    pub fn count(&self, signal: outpost_core::eviction::Signal) -> u64 {
        self.evictions.get_or_create(&[("signal", signal.as_str())]).get()
    }
}
