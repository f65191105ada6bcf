//! Node allocatable, as kubelet computes it: capacity less `systemReserved`, less
//! `kubeReserved`, less the hard eviction thresholds (memory.available from memory,
//! nodefs.available from ephemeral-storage); and the limits of the pods cgroup when
//! `enforceNodeAllocatable` has `pods` (capacity less the reservations, without the
//! eviction thresholds, as kubelet enforces it).

#[cfg(test)]
mod tests;

use crate::quantity::{self, Quantity};
use crate::resource_config::{ResourceConfig, milli_cpu_to_shares};

/// kubelet's default hard threshold of `memory.available`.
pub const DEFAULT_MEMORY_AVAILABLE: u64 = 100 * 1024 * 1024;
/// kubelet's default hard threshold of `nodefs.available`, percent of the filesystem.
pub const DEFAULT_NODEFS_AVAILABLE_PERCENT: f64 = 10.0;

/// The resources a reservation (`--system-reserved`, `--kube-reserved`) names.
pub const RESERVABLE: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{resource}={value}: {source}")]
    Quantity {
        resource: String,
        value: String,
        #[source]
        source: quantity::Error,
    },
    #[error("{0}: cannot be reserved; reserve cpu, memory, ephemeral-storage or pid")]
    Resource(String),
}

/// Amounts reserved for the system or for Kubernetes' daemons.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reserved {
    pub cpu_milli: u64,
    /// Bytes.
    pub memory: u64,
    /// Bytes.
    pub ephemeral_storage: u64,
    pub pids: u64,
}

impl Reserved {
    /// From `resource=quantity` pairs (kubelet's `cpu=100m,memory=100Mi,pid=1000`).
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Reserved, Error> {
        let mut reserved = Reserved::default();
        for (resource, value) in pairs {
            let (slot, scale) = match resource {
                "cpu" => (&mut reserved.cpu_milli, 3),
                "memory" => (&mut reserved.memory, 0),
                "ephemeral-storage" => (&mut reserved.ephemeral_storage, 0),
                "pid" => (&mut reserved.pids, 0),
                other => return Err(Error::Resource(other.to_owned())),
            };
            let error =
                |source| Error::Quantity { resource: resource.into(), value: value.into(), source };
            let amount = Quantity::parse(value.trim()).and_then(|q| q.ceil_scaled(scale));
            *slot = u64::try_from(amount.map_err(error)?).unwrap_or(u64::MAX);
        }
        Ok(reserved)
    }

    fn plus(self, other: Reserved) -> Reserved {
        Reserved {
            cpu_milli: self.cpu_milli.saturating_add(other.cpu_milli),
            memory: self.memory.saturating_add(other.memory),
            ephemeral_storage: self.ephemeral_storage.saturating_add(other.ephemeral_storage),
            pids: self.pids.saturating_add(other.pids),
        }
    }
}

/// A hard eviction threshold: an amount, or a percentage of the capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Bytes(u64),
    Percentage(f64),
}

impl Threshold {
    /// What it takes of `capacity`.
    pub fn amount(self, capacity: u64) -> u64 {
        match self {
            Threshold::Bytes(bytes) => bytes,
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss,
                reason = "a percentage of a size in bytes, rounded down as kubelet does"
            )]
            Threshold::Percentage(percent) => {
                (capacity as f64 * percent.clamp(0.0, 100.0) / 100.0) as u64
            }
        }
    }
}

/// The hard eviction thresholds allocatable is reduced by (`--eviction-hard`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HardEviction {
    pub memory_available: Option<Threshold>,
    pub nodefs_available: Option<Threshold>,
}

impl Default for HardEviction {
    /// kubelet's defaults: `memory.available<100Mi`, `nodefs.available<10%`.
    fn default() -> HardEviction {
        HardEviction {
            memory_available: Some(Threshold::Bytes(DEFAULT_MEMORY_AVAILABLE)),
            nodefs_available: Some(Threshold::Percentage(DEFAULT_NODEFS_AVAILABLE_PERCENT)),
        }
    }
}

/// What is kept from pods: the reservations and the hard eviction thresholds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reservation {
    pub system_reserved: Reserved,
    pub kube_reserved: Reserved,
    pub eviction_hard: HardEviction,
}

/// The node's resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capacity {
    pub cpu_milli: u64,
    /// Bytes (`None`: not known).
    pub memory: Option<u64>,
    /// The nodefs' size in bytes.
    pub ephemeral_storage: Option<u64>,
    /// The PID limit.
    pub pids: Option<u64>,
}

/// What pods may have (`status.allocatable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocatable {
    pub cpu_milli: u64,
    pub memory: Option<u64>,
    pub ephemeral_storage: Option<u64>,
}

impl Reservation {
    fn reserved(&self) -> Reserved {
        self.system_reserved.plus(self.kube_reserved)
    }

    /// Capacity less the reservations and the hard eviction thresholds (never below 0).
    pub fn allocatable(&self, capacity: &Capacity) -> Allocatable {
        let reserved = self.reserved();
        let eviction =
            |threshold: Option<Threshold>, of: u64| threshold.map_or(0, |t| t.amount(of));
        Allocatable {
            cpu_milli: capacity.cpu_milli.saturating_sub(reserved.cpu_milli),
            memory: capacity.memory.map(|m| {
                m.saturating_sub(reserved.memory)
                    .saturating_sub(eviction(self.eviction_hard.memory_available, m))
            }),
            ephemeral_storage: capacity.ephemeral_storage.map(|s| {
                s.saturating_sub(reserved.ephemeral_storage)
                    .saturating_sub(eviction(self.eviction_hard.nodefs_available, s))
            }),
        }
    }

    /// The pods cgroup's limits: with `enforce` (`enforceNodeAllocatable: [pods]`) cpu
    /// shares of the allocatable cpu, memory and pids of the capacity less the
    /// reservations; without, the shares of the capacity and no limit.
    pub fn pods_cgroup(&self, capacity: &Capacity, enforce: bool) -> ResourceConfig {
        let milli = |m: u64| i64::try_from(m).unwrap_or(i64::MAX);
        if !enforce {
            return ResourceConfig::unlimited(milli_cpu_to_shares(milli(capacity.cpu_milli)));
        }
        let reserved = self.reserved();
        let cpu = capacity.cpu_milli.saturating_sub(reserved.cpu_milli);
        let limit = |capacity: Option<u64>, reserved: u64| {
            capacity.map(|c| i64::try_from(c.saturating_sub(reserved)).unwrap_or(i64::MAX))
        };
        ResourceConfig {
            memory_limit: limit(capacity.memory, reserved.memory),
            pids_limit: limit(capacity.pids, reserved.pids),
            ..ResourceConfig::unlimited(milli_cpu_to_shares(milli(cpu)))
        }
    }
}
