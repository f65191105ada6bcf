//! The eviction signals kubelet knows on Linux, what each one measures, the resource it
//! starves and the node condition it drives, and observations of them.

use std::fmt;

/// An eviction signal, named as kubelet's flags and config name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// Memory capacity less the root memory cgroup's working set.
    MemoryAvailable,
    /// Node allocatable memory less the pods cgroup's working set (when node allocatable
    /// is enforced on pods).
    AllocatableMemoryAvailable,
    /// Free bytes of the filesystem of the agent's state dir (volumes, logs).
    NodeFsAvailable,
    /// Free inodes of that filesystem.
    NodeFsInodesFree,
    /// Free bytes of containerd's image filesystem (its snapshotter's root).
    ImageFsAvailable,
    /// Free inodes of that filesystem.
    ImageFsInodesFree,
    /// PIDs that can still be allocated (the PID limit less the tasks running).
    PidAvailable,
}

/// What a signal starves (kubelet's `signalToResource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    Memory,
    EphemeralStorage,
    Inodes,
    Pids,
}

impl Resource {
    /// The name kubelet's message uses ("The node was low on resource: memory").
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::EphemeralStorage => "ephemeral-storage",
            Resource::Inodes => "inodes",
            Resource::Pids => "pids",
        }
    }

    /// Whether quantities of it are bytes (printed with binary suffixes) or counts.
    pub fn is_bytes(self) -> bool {
        matches!(self, Resource::Memory | Resource::EphemeralStorage)
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The node conditions eviction drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Condition {
    MemoryPressure,
    DiskPressure,
    PidPressure,
}

impl Signal {
    pub const ALL: [Signal; 7] = [
        Signal::MemoryAvailable,
        Signal::AllocatableMemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    /// The signal of a name (exact, as kubelet matches it).
    pub fn parse(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.as_str() == name)
    }

    pub fn resource(self) -> Resource {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Resource::Memory,
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => Resource::EphemeralStorage,
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => Resource::Inodes,
            Signal::PidAvailable => Resource::Pids,
        }
    }

    pub fn condition(self) -> Condition {
        match self.resource() {
            Resource::Memory => Condition::MemoryPressure,
            Resource::EphemeralStorage | Resource::Inodes => Condition::DiskPressure,
            Resource::Pids => Condition::PidPressure,
        }
    }

    /// Memory signals are reclaimed before any other (kubelet's `byEvictionPriority`).
    pub fn is_memory(self) -> bool {
        self.resource() == Resource::Memory
    }

    /// Whether it measures nodefs or imagefs (bytes or inodes).
    pub fn is_disk(self) -> bool {
        matches!(self.resource(), Resource::EphemeralStorage | Resource::Inodes)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reading of a signal: how much is available of how much (bytes, inodes or PIDs;
/// available may be negative, as kubelet's allocatable signal can be).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: i64,
    pub capacity: i64,
}

/// The signals read in one pass; a signal that could not be read is absent (its
/// thresholds are then not met, as kubelet skips a signal without an observation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observations(Vec<(Signal, Observation)>);

impl Observations {
    pub fn new() -> Observations {
        Observations::default()
    }

    /// Records `signal` (replacing an earlier reading of it).
    pub fn set(&mut self, signal: Signal, observation: Observation) {
        match self.0.iter_mut().find(|(s, _)| *s == signal) {
            Some((_, o)) => *o = observation,
            None => self.0.push((signal, observation)),
        }
    }

    pub fn with(mut self, signal: Signal, available: i64, capacity: i64) -> Observations {
        self.set(signal, Observation { available, capacity });
        self
    }

    pub fn get(&self, signal: Signal) -> Option<Observation> {
        self.0.iter().find(|(s, _)| *s == signal).map(|(_, o)| *o)
    }

    pub fn iter(&self) -> impl Iterator<Item = (Signal, Observation)> + '_ {
        self.0.iter().copied()
    }
}

/// A memory cgroup as the kernel's usage thresholds need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memcg {
    /// What its usage file counts, bytes.
    pub usage: u64,
    /// The inactive file cache within it (usage less working set), bytes.
    pub inactive: u64,
    /// Its capacity: `MemTotal` for the root, the limit for the pods cgroup.
    pub capacity: u64,
}

/// One reading of the machine: the signals, and the memory cgroups behind them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    pub observations: Observations,
    /// The root memory cgroup (v1 only: v2's root has no usage file).
    pub root: Option<Memcg>,
    /// The pods cgroup, when it exists and is limited (node allocatable is enforced on
    /// pods).
    pub pods: Option<Memcg>,
}
