//! Pods' cgroups, as kubelet lays them out (Q2): one cgroup for all pods (`kubepods`
//! under `--cgroup-root`), a cgroup per QoS class under it (Guaranteed pods sit right
//! under the pods cgroup), then `pod<uid>`, then each container (runc makes the last
//! level from the container's `cgroupsPath`). [`Layout`] names them for the cgroupfs and
//! systemd drivers; [`Hierarchy`] is where this machine mounts them (cgroup v1, one tree
//! per controller, or the v2 unified tree) and reads a cgroup's usage.
//!
//! [`PodCgroups`] makes the pods, QoS and pod cgroups with kubelet's limits
//! (`outpost_core::resource_config`) through [`tree`]'s cgroupfs writes, in every
//! hierarchy (each cgroup v1 controller's and the v2 one). runc makes a container's own
//! cgroup and removes it when the container is deleted; a pod's cgroup is removed once
//! its containers are gone. Under the systemd driver systemd makes and removes them
//! ([`systemd`]: the slices' unit properties through `systemctl`).

mod layout;
mod pods;
pub mod systemd;
pub mod tree;
mod usage;

pub use self::layout::{CgroupName, Driver, Layout, PODS};
pub use self::pods::PodCgroups;
pub use self::tree::Error;
pub use self::usage::{CGROUP_ROOT, Hierarchy, Usage};
