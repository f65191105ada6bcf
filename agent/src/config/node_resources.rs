//! The settings of the pods' cgroups and node allocatable, kubelet's: `--cgroup-driver`
//! (`cgroupDriver`), `--cgroup-root` (`cgroupRoot`), `--pod-max-pids` (`podPidsLimit`),
//! `--system-reserved` and `--kube-reserved` (`systemReserved`, `kubeReserved`: maps in
//! the file, `cpu=100m,memory=100Mi,ephemeral-storage=1Gi,pid=1000` on the command line)
//! and `--enforce-node-allocatable` (`enforceNodeAllocatable`, `[pods]` by default).

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::str::FromStr;

use clap::ValueEnum;
use outpost_core::node_status::allocatable::{self, HardEviction, Reservation, Reserved};
use serde::Deserialize;

use crate::runtime::cgroups::{Driver, Layout};

pub const DEFAULT_CGROUP_ROOT: &str = "/";
/// kubelet's default `podPidsLimit`: unlimited.
pub const DEFAULT_POD_PIDS_LIMIT: i64 = -1;
/// kubelet's default `enforceNodeAllocatable`.
pub const DEFAULT_ENFORCE_NODE_ALLOCATABLE: &str = "pods";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{flag}: {source}")]
    Reserved {
        flag: &'static str,
        #[source]
        source: allocatable::Error,
    },
    #[error(
        "enforce-node-allocatable {0:?}: Outpost does not manage the system or kube cgroups, so \
         it can enforce only \"pods\" (or \"none\")"
    )]
    UnmanagedCgroup(String),
    #[error("enforce-node-allocatable {0:?}: expected pods or none")]
    Enforce(String),
    #[error("cgroup-root {0:?}: expected an absolute cgroup path such as / or /edge")]
    Root(String),
    #[error("pod-max-pids {0}: expected -1 (unlimited) or a positive number")]
    PodPids(i64),
    #[error(
        "--cgroup-driver systemd needs systemd as PID 1 to manage the slices, and PID 1 here is \
         {0:?}; use --cgroup-driver cgroupfs"
    )]
    NoSystemd(String),
    /// `--system-reserved`, `--kube-reserved`: an item that is not `resource=quantity`.
    #[error("{0:?}: expected resource=quantity")]
    ReservedItem(String),
}

/// `--cgroup-driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(try_from = "String")]
pub enum CgroupDriver {
    Cgroupfs,
    Systemd,
}

impl TryFrom<String> for CgroupDriver {
    type Error = super::values::Error;
    fn try_from(name: String) -> Result<Self, super::values::Error> {
        super::from_value_name("cgroupDriver", &name)
    }
}

/// A reservation as given: `resource=quantity[,…]`; in the file, a map (quantities as
/// strings or numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ReservedList(pub BTreeMap<String, Scalar>);

/// A quantity in the file: `100Mi`, or a bare number (`pid: 1000`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    Text(String),
    Integer(i64),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Text(text) => text.clone(),
            Scalar::Integer(n) => n.to_string(),
        }
    }
}

impl FromStr for ReservedList {
    type Err = Error;
    fn from_str(raw: &str) -> Result<ReservedList, Error> {
        let mut map = BTreeMap::new();
        for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some((key, value)) if !key.trim().is_empty() => {
                    map.insert(key.trim().to_owned(), Scalar::Text(value.trim().to_owned()));
                }
                _ => return Err(Error::ReservedItem(pair.to_owned())),
            }
        }
        Ok(ReservedList(map))
    }
}

/// The pods' cgroups and allocatable, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeResources {
    /// Where the pods' cgroups go, and how they are named.
    pub layout: Layout,
    /// `podPidsLimit` (`None`: unlimited).
    pub pod_pids_limit: Option<i64>,
    /// The reservations and hard eviction thresholds allocatable is reduced by.
    pub reservation: Reservation,
    /// `enforceNodeAllocatable` has `pods`: the pods cgroup is limited to allocatable.
    pub enforce_pods: bool,
}

/// The settings as given (each `None`/empty when not).
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub cgroup_driver: Option<CgroupDriver>,
    pub cgroup_root: Option<String>,
    pub pod_max_pids: Option<i64>,
    pub system_reserved: Vec<ReservedList>,
    pub kube_reserved: Vec<ReservedList>,
    pub enforce_node_allocatable: Option<Vec<String>>,
}

impl NodeResources {
    pub fn resolve(given: Given) -> Result<NodeResources, Error> {
        let root = given.cgroup_root.unwrap_or_else(|| DEFAULT_CGROUP_ROOT.to_owned());
        if !root.starts_with('/') || root.split('/').any(|c| c == "." || c == "..") {
            return Err(Error::Root(root));
        }
        let driver = match given.cgroup_driver.unwrap_or(CgroupDriver::Cgroupfs) {
            CgroupDriver::Cgroupfs => Driver::Cgroupfs,
            CgroupDriver::Systemd => Driver::Systemd,
        };
        let pod_pids_limit = match given.pod_max_pids.unwrap_or(DEFAULT_POD_PIDS_LIMIT) {
            -1 => None,
            n if n > 0 => Some(n),
            n => return Err(Error::PodPids(n)),
        };
        let enforce = given
            .enforce_node_allocatable
            .unwrap_or_else(|| vec![DEFAULT_ENFORCE_NODE_ALLOCATABLE.to_owned()]);
        let mut enforce_pods = false;
        for level in enforce.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            match level {
                "pods" => enforce_pods = true,
                "none" => {}
                "system-reserved" | "kube-reserved" => {
                    return Err(Error::UnmanagedCgroup(level.to_owned()));
                }
                other => return Err(Error::Enforce(other.to_owned())),
            }
        }
        Ok(NodeResources {
            layout: Layout::new(driver, &root),
            pod_pids_limit,
            reservation: Reservation {
                system_reserved: reserved("system-reserved", &given.system_reserved)?,
                kube_reserved: reserved("kube-reserved", &given.kube_reserved)?,
                // kubelet's default hard thresholds; `--eviction-hard`'s are set by
                // `with_eviction_hard`.
                eviction_hard: HardEviction::default(),
            },
            enforce_pods,
        })
    }

    /// With allocatable reduced by the configured hard eviction thresholds.
    pub fn with_eviction_hard(mut self, eviction_hard: HardEviction) -> NodeResources {
        self.reservation.eviction_hard = eviction_hard;
        self
    }

    /// Refuses the systemd driver where systemd is not PID 1 (`pid1`: its command name,
    /// `/proc/1/comm`).
    pub fn check_driver(&self, pid1: &str) -> Result<(), Error> {
        if self.layout.driver == Driver::Systemd && pid1.trim() != "systemd" {
            return Err(Error::NoSystemd(pid1.trim().to_owned()));
        }
        Ok(())
    }
}

impl Default for NodeResources {
    fn default() -> NodeResources {
        NodeResources::resolve(Given::default()).unwrap_or(NodeResources {
            layout: Layout::new(Driver::Cgroupfs, DEFAULT_CGROUP_ROOT),
            pod_pids_limit: None,
            reservation: Reservation::default(),
            enforce_pods: true,
        })
    }
}

/// The reservations given (several flags add up, a later one overriding a resource).
fn reserved(flag: &'static str, lists: &[ReservedList]) -> Result<Reserved, Error> {
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for list in lists {
        merged.extend(list.0.iter().map(|(k, v)| (k.clone(), v.text())));
    }
    Reserved::parse(merged.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|source| Error::Reserved { flag, source })
}
