//! The node's pod cgroups, kept as kubelet's pod and QoS container managers keep them:
//! the pods cgroup and the BestEffort and Burstable ones made at start
//! ([`PodCgroups::ensure_node`]); each pod's made with its limits when its sandbox is set
//! up ([`PodCgroups::ensure_pod`], again for an adopted pod: the same limits) and
//! removed at tear-down, wherever a pod of that UID may have it, also an older agent's
//! `/outpost/pod<uid>` ([`PodCgroups::remove_pod`]); the Burstable cgroup's cpu shares
//! follow its pods' cpu requests as they come and go. Under the cgroupfs driver the
//! agent writes the cgroups ([`tree`]); under systemd's, slices are set and started
//! through `systemctl` ([`systemd`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::core::v1::Pod;
use outpost_core::pod;
use outpost_core::qos::{QosClass, qos_class};
use outpost_core::resize::Resource;
use outpost_core::resource_config::{self, ResourceConfig};
use outpost_host::Host;

use super::systemd::{self, Systemctl, SystemctlCommand};
use super::tree::{self, Error};
use super::{CgroupName, Driver, Hierarchy, Layout, Usage};

/// Where agents before the kubepods hierarchy put a pod's cgroup.
const LEGACY_POD_ROOT: &str = "/outpost";

/// The pods' cgroups, under one layout.
#[derive(Debug)]
pub struct PodCgroups {
    layout: Layout,
    hierarchy: Hierarchy,
    /// `podPidsLimit` (`None`: unlimited).
    pod_pids_limit: Option<i64>,
    /// The Burstable pods set up, by UID: their cpu requests size the Burstable cgroup.
    burstable: Mutex<BTreeMap<String, Pod>>,
    /// How slices are made under the systemd driver.
    systemctl: std::sync::Arc<dyn Systemctl>,
}

impl PodCgroups {
    pub fn new(layout: Layout, hierarchy: Hierarchy, pod_pids_limit: Option<i64>) -> PodCgroups {
        PodCgroups {
            layout,
            hierarchy,
            pod_pids_limit: pod_pids_limit.filter(|l| *l > 0),
            burstable: Mutex::new(BTreeMap::new()),
            systemctl: std::sync::Arc::new(SystemctlCommand),
        }
    }

    /// Runs `systemctl` through `systemctl` (the tests' recording one).
    pub fn with_systemctl(mut self, systemctl: std::sync::Arc<dyn Systemctl>) -> PodCgroups {
        self.systemctl = systemctl;
        self
    }

    /// Makes cgroup `name` (and its parents) with `config`'s limits, if given.
    fn make(&self, name: &CgroupName, config: Option<&ResourceConfig>) -> Result<(), Error> {
        match self.layout.driver {
            Driver::Cgroupfs => {
                let path = self.path(name);
                tree::create(&self.hierarchy, &path)?;
                config.map_or(Ok(()), |config| tree::apply(&self.hierarchy, &path, config))
            }
            Driver::Systemd => {
                let v2 = self.hierarchy.is_v2();
                systemd::ensure(self.systemctl.as_ref(), &unit(name), config, v2)
            }
        }
    }

    /// Removes cgroup `name` (empty of processes).
    fn unmake(&self, name: &CgroupName) -> Result<(), Error> {
        match self.layout.driver {
            Driver::Cgroupfs => tree::remove(&self.hierarchy, &self.path(name)),
            Driver::Systemd => systemd::stop(self.systemctl.as_ref(), &unit(name)),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// A cgroup's path below each hierarchy's root, as the layout's driver names it.
    pub fn path(&self, name: &CgroupName) -> String {
        name.path(self.layout.driver)
    }

    /// Makes the pods cgroup with `pods` (node allocatable, or unlimited) and the
    /// BestEffort and Burstable cgroups under it.
    pub fn ensure_node(&self, pods: &ResourceConfig) -> Result<(), Error> {
        self.make(&self.layout.pods(), Some(pods))?;
        for class in [QosClass::BestEffort, QosClass::Burstable] {
            self.make(&self.layout.qos(class), None)?;
        }
        self.update_qos(QosClass::BestEffort)?;
        self.update_qos(QosClass::Burstable)
    }

    /// Makes the pod's cgroup under its QoS class's with kubelet's limits for it; the
    /// pod's cgroup name (its containers go under it).
    pub fn ensure_pod(&self, pod: &Pod) -> Result<CgroupName, Error> {
        let class = qos_class(pod);
        let uid = pod::uid(pod);
        let name = self.layout.pod(class, uid);
        self.make(&name, Some(&resource_config::for_pod(pod, self.pod_pids_limit)))?;
        if class == QosClass::Burstable {
            let mut pods = self.burstable.lock().unwrap_or_else(PoisonError::into_inner);
            if pods.insert(uid.to_owned(), pod.clone()).is_none() {
                self.apply_qos(QosClass::Burstable, &pods)?;
            }
        }
        Ok(name)
    }

    /// K6: sets the cgroup of pod `pod` (with its allocated resources) to its limits of
    /// `resource`, leaving the others; the Burstable cgroup's cpu shares follow its pods'
    /// requests.
    pub fn resize_pod(&self, pod: &Pod, resource: Resource) -> Result<(), Error> {
        let name = self.pod_name(pod);
        let config = resource_config::for_pod(pod, self.pod_pids_limit);
        match self.layout.driver {
            Driver::Cgroupfs => {
                tree::apply_part(&self.hierarchy, &self.path(&name), &config, resource)?
            }
            Driver::Systemd => self.make(&name, Some(&config))?,
        }
        if resource == Resource::Cpu && qos_class(pod) == QosClass::Burstable {
            let mut pods = self.burstable.lock().unwrap_or_else(PoisonError::into_inner);
            pods.insert(pod::uid(pod).to_owned(), pod.clone());
            self.apply_qos(QosClass::Burstable, &pods)?;
        }
        Ok(())
    }

    /// The name of the cgroup pod `pod` has under this layout.
    pub fn pod_name(&self, pod: &Pod) -> CgroupName {
        self.layout.pod(qos_class(pod), pod::uid(pod))
    }

    /// What pod `pod` (its cgroup) and its containers `ids` use now, read through
    /// `host`, each `None` where its cgroup is gone.
    pub fn usage<'i>(
        &self,
        host: &dyn Host,
        pod: &Pod,
        ids: impl IntoIterator<Item = &'i str>,
    ) -> (Option<Usage>, Vec<(&'i str, Option<Usage>)>) {
        let name = self.pod_name(pod);
        let own = self.hierarchy.usage(host, &self.path(&name)).ok();
        let container = |id| self.hierarchy.usage(host, &self.layout.container_cgroup(&name, id));
        let containers = ids.into_iter().map(|id| (id, container(id).ok())).collect();
        (own, containers)
    }

    /// runc's `cgroupsPath` of container `id` of the pod whose cgroup is `pod`.
    pub fn container_path(&self, pod: &CgroupName, id: &str) -> String {
        self.layout.container_path(pod, id)
    }

    /// Removes pod `uid`'s cgroup wherever it is (each QoS class, and where older agents
    /// put it), in every hierarchy; then sizes the Burstable cgroup to the pods left.
    /// Every place is tried; the first failure is returned.
    pub fn remove_pod(&self, uid: &str) -> Result<(), Error> {
        let mut first = None;
        for name in self.layout.pod_candidates(uid) {
            if let Err(e) = self.unmake(&name) {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = tree::remove(&self.hierarchy, &format!("{LEGACY_POD_ROOT}/pod{uid}")) {
            first.get_or_insert(e);
        }
        let mut pods = self.burstable.lock().unwrap_or_else(PoisonError::into_inner);
        if pods.remove(uid).is_some()
            && let Err(e) = self.apply_qos(QosClass::Burstable, &pods)
        {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    /// The UIDs of the pods that have a cgroup under this layout (not under the legacy
    /// root, which other agents on the host may share).
    pub fn pod_uids(&self) -> Vec<String> {
        let mut uids = Vec::new();
        for class in [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort] {
            let dir = self.hierarchy.dir("memory", &self.path(&self.layout.qos(class)));
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(uid) = pod_uid_of(&name, self.layout.driver) {
                    uids.push(uid);
                }
            }
        }
        uids.sort();
        uids.dedup();
        uids
    }

    /// Sets a QoS class's cgroup to what its pods add up to now.
    fn update_qos(&self, class: QosClass) -> Result<(), Error> {
        let pods = self.burstable.lock().unwrap_or_else(PoisonError::into_inner);
        self.apply_qos(class, &pods)
    }

    /// Sets a QoS class's cgroup to what `burstable` adds up to; called with the lock on
    /// them held, so that two pods coming at once never leave the older sum written.
    fn apply_qos(&self, class: QosClass, burstable: &BTreeMap<String, Pod>) -> Result<(), Error> {
        let config = resource_config::for_qos(class, burstable.values());
        match (config, self.layout.driver) {
            (Some(config), Driver::Cgroupfs) => {
                tree::apply(&self.hierarchy, &self.path(&self.layout.qos(class)), &config)
            }
            (Some(config), Driver::Systemd) => self.make(&self.layout.qos(class), Some(&config)),
            (None, _) => Ok(()),
        }
    }
}

/// The systemd unit of a cgroup named under the systemd driver: its last slice.
fn unit(name: &CgroupName) -> String {
    let path = name.path(Driver::Systemd);
    path.rsplit('/').next().unwrap_or_default().to_owned()
}

/// The pod UID in a pod cgroup's directory name: `pod<uid>` (cgroupfs), or
/// `…-pod<uid with underscores>.slice` (systemd).
fn pod_uid_of(dir_name: &str, driver: Driver) -> Option<String> {
    let uid = match driver {
        Driver::Cgroupfs => dir_name.strip_prefix("pod")?.to_owned(),
        Driver::Systemd => {
            let slice = dir_name.strip_suffix(".slice")?;
            let (_, escaped) = slice.rsplit_once("-pod")?;
            escaped.replace('_', "-")
        }
    };
    (!uid.is_empty() && !uid.contains('/')).then_some(uid)
}

#[cfg(test)]
mod tests;
