//! The names of the pods' cgroups, as kubelet's `CgroupName` makes them: a list of
//! components that each driver spells its own way. cgroupfs joins them as a path
//! (`/kubepods/burstable/pod<uid>`); systemd makes each a slice named after all the
//! components down to it (`/kubepods.slice/kubepods-burstable.slice/
//! kubepods-burstable-pod<uid_with_underscores>.slice`).

use outpost_core::qos::QosClass;

/// The pods cgroup's name under the cgroup root (kubelet's).
pub const PODS: &str = "kubepods";
/// The prefix of a container's scope under the systemd driver (runc's
/// `slice:prefix:name` cgroupsPath).
const SCOPE_PREFIX: &str = "outpost";

/// `--cgroup-driver`: who manages the cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Driver {
    /// The agent and runc write cgroupfs directly (kubelet's default).
    #[default]
    Cgroupfs,
    /// systemd slices and scopes (needs systemd as PID 1).
    Systemd,
}

/// A cgroup as a list of components below the hierarchy's root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CgroupName(Vec<String>);

impl CgroupName {
    pub fn components(&self) -> &[String] {
        &self.0
    }

    fn child(&self, component: &str) -> CgroupName {
        let mut components = self.0.clone();
        components.push(component.to_owned());
        CgroupName(components)
    }

    /// The path below a hierarchy's root, as `driver` names the cgroup (absolute, `/`
    /// for the root itself).
    pub fn path(&self, driver: Driver) -> String {
        match driver {
            Driver::Cgroupfs => format!("/{}", self.0.join("/")),
            Driver::Systemd => {
                let mut path = String::new();
                for depth in 1..=self.0.len() {
                    path.push('/');
                    path.push_str(&slice_name(&self.0[..depth]));
                }
                if path.is_empty() { "/".to_owned() } else { path }
            }
        }
    }
}

/// systemd's slice for components `a`, `b`, `c`: `a-b-c.slice`, dashes inside a
/// component escaped as underscores (as kubelet escapes them).
fn slice_name(components: &[String]) -> String {
    let escaped: Vec<String> = components.iter().map(|c| c.replace('-', "_")).collect();
    format!("{}.slice", escaped.join("-"))
}

/// Where the pods' cgroups are: the driver and the cgroup root (`--cgroup-root`, `/` by
/// default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub driver: Driver,
    root: CgroupName,
}

impl Layout {
    /// `root` is a cgroupfs-style path (`/`, `/edge`); under systemd each of its
    /// components becomes a slice level.
    pub fn new(driver: Driver, root: &str) -> Layout {
        let components = root.split('/').filter(|c| !c.is_empty()).map(str::to_owned).collect();
        Layout { driver, root: CgroupName(components) }
    }

    /// The cgroup of all pods (`<root>/kubepods`): node allocatable is enforced on it.
    pub fn pods(&self) -> CgroupName {
        self.root.child(PODS)
    }

    /// The cgroup of a QoS class's pods (the pods cgroup for Guaranteed).
    pub fn qos(&self, class: QosClass) -> CgroupName {
        match class.cgroup_name() {
            Some(name) => self.pods().child(name),
            None => self.pods(),
        }
    }

    /// The pod's cgroup: `pod<uid>` under its QoS class's cgroup.
    pub fn pod(&self, class: QosClass, uid: &str) -> CgroupName {
        self.qos(class).child(&format!("pod{uid}"))
    }

    /// Every place a pod `uid` may have its cgroup under this layout, whatever its class
    /// (for removing what a pod of unknown class left).
    pub fn pod_candidates(&self, uid: &str) -> Vec<CgroupName> {
        [QosClass::Guaranteed, QosClass::Burstable, QosClass::BestEffort]
            .into_iter()
            .map(|class| self.pod(class, uid))
            .collect()
    }

    /// runc's `cgroupsPath` for container `id` in the pod cgroup `pod`: a path under
    /// cgroupfs, `slice:prefix:name` under systemd.
    pub fn container_path(&self, pod: &CgroupName, id: &str) -> String {
        match self.driver {
            Driver::Cgroupfs => format!("{}/{id}", pod.path(Driver::Cgroupfs)),
            Driver::Systemd => format!("{}:{SCOPE_PREFIX}:{id}", slice_name(pod.components())),
        }
    }
}

impl Layout {
    /// The directory of container `id`'s cgroup below a hierarchy's root (what runc
    /// makes of [`Layout::container_path`]): `<pod>/<id>`, or under systemd
    /// `<pod slices>/<prefix>-<id>.scope`.
    pub fn container_cgroup(&self, pod: &CgroupName, id: &str) -> String {
        match self.driver {
            Driver::Cgroupfs => self.container_path(pod, id),
            Driver::Systemd => format!("{}/{SCOPE_PREFIX}-{id}.scope", pod.path(Driver::Systemd)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroupfs_names_are_kubelets() {
        let layout = Layout::new(Driver::Cgroupfs, "/");
        assert_eq!(layout.pods().path(Driver::Cgroupfs), "/kubepods");
        assert_eq!(layout.qos(QosClass::Guaranteed).path(Driver::Cgroupfs), "/kubepods");
        let pod = layout.pod(QosClass::Burstable, "1-2");
        assert_eq!(pod.path(Driver::Cgroupfs), "/kubepods/burstable/pod1-2");
        assert_eq!(layout.container_path(&pod, "c1"), "/kubepods/burstable/pod1-2/c1");
        assert_eq!(layout.container_cgroup(&pod, "c1"), "/kubepods/burstable/pod1-2/c1");
        let nested = Layout::new(Driver::Cgroupfs, "/edge/test/");
        let pod = nested.pod(QosClass::BestEffort, "u");
        assert_eq!(pod.path(Driver::Cgroupfs), "/edge/test/kubepods/besteffort/podu");
    }

    #[test]
    fn systemd_names_are_kubelets_slices() {
        let layout = Layout::new(Driver::Systemd, "/");
        assert_eq!(layout.pods().path(Driver::Systemd), "/kubepods.slice");
        let pod = layout.pod(QosClass::Burstable, "12ab-34cd");
        assert_eq!(
            pod.path(Driver::Systemd),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12ab_34cd.slice"
        );
        assert_eq!(
            layout.container_path(&pod, "c1"),
            "kubepods-burstable-pod12ab_34cd.slice:outpost:c1"
        );
        assert_eq!(
            layout.container_cgroup(&pod, "c1"),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12ab_34cd.slice/\
             outpost-c1.scope"
        );
        let guaranteed = layout.pod(QosClass::Guaranteed, "u");
        assert_eq!(guaranteed.path(Driver::Systemd), "/kubepods.slice/kubepods-podu.slice");
        assert_eq!(CgroupName(Vec::new()).path(Driver::Systemd), "/");
    }
}
