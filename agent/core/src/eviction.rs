//! Node-pressure eviction as kubelet's eviction manager does it (E1–E2), with no IO:
//!
//! - [`signal`]: the eviction signals (`memory.available`, `nodefs.inodesFree`, …), the
//!   resource each one starves and the node condition it drives; observations of them.
//! - [`threshold`]: thresholds parsed from kubelet's flags and config fields
//!   (`--eviction-hard memory.available<100Mi`, `evictionSoft`, grace periods, minimum
//!   reclaims), kubelet's defaults, and the resolved [`Config`].
//! - [`manager`]: observations over time → the thresholds met (soft ones after their
//!   grace period, met ones until their minimum reclaim), the node's pressure conditions
//!   (held for `evictionPressureTransitionPeriod`), and the resource to reclaim.
//! - [`rank`]: the pods ranked as kubelet ranks them for the starved resource, the one
//!   victim of a pass (never a static, mirror or system-critical pod), its grace period
//!   and kubelet's message.
//! - [`control`]: the manager's decisions over time as a pure state machine: readings,
//!   kernel notifications, the victim's status and the time in; passes, the node-level
//!   reclaim, the one eviction at a time, the kernel's thresholds to arm and the next
//!   wake-up out.
//! - [`format`]: quantities printed as Kubernetes prints them (`100Mi`, `43008Ki`, `5k`).

pub mod control;
pub mod format;
pub mod manager;
pub mod rank;
pub mod signal;
pub mod threshold;

#[cfg(test)]
mod tests;

pub use self::control::{Action, Arm, Controller, Input, Step};
pub use self::manager::{Manager, Outcome, Pressure, Reclaim};
pub use self::rank::{Candidate, Eviction, PodStats, rank, victim};
pub use self::signal::{Memcg, Observation, Observations, Reading, Resource, Signal};
pub use self::threshold::{Config, Error, Settings, Threshold, ThresholdValue};

/// The reason an evicted pod's status carries (`status.reason`) and its Event's reason.
pub const REASON: &str = "Evicted";
