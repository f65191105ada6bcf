//! K3: `persistentVolumeClaim` volumes, and generic `ephemeral` ones (a claim the API
//! server's controller makes, `<pod name>-<volume name>`), bound to a `hostPath` or
//! `local` PersistentVolume. Pure: the claim and its volume come resolved (the agent's
//! `objects` watches both by name), the mount is `outpost_runtime::volumes`'.
//!
//! As kubelet's volume manager decides it: the claim must exist, not be being deleted,
//! be `Bound` and name its volume; an ephemeral volume's claim must be controlled by the
//! pod; the volume must be bound to that claim (`claimRef.uid`), of `volumeMode:
//! Filesystem` where a container mounts it (`volumeMounts`) and `Block` where one takes
//! it as a device (`volumeDevices`), and its `nodeAffinity` must hold for this node.
//! Each refusal reads as kubelet's message. A `hostPath` volume is its path (checked per
//! its `type` as a hostPath volume is); a `local` one is bind-mounted at
//! `<pod dir>/volumes/kubernetes.io~local-volume/<volume name>` and takes the pod's
//! `fsGroup` unless read-only; `readOnly` comes from the pod's claim.
//!
//! A `Block` volume is a `local` one (kubelet's hostPath plugin maps no block device):
//! its `local.path` is the device, linked from
//! `<pod dir>/volumeDevices/kubernetes.io~local-volume/<volume name>`, and each
//! container's `volumeDevices` entry becomes that device node at its `devicePath`
//! ([`devices`]), as containerd's CRI makes kubelet's `Devices`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim, Pod, Volume,
};
use oci_spec::runtime::LinuxDevice;

use crate::projection::{self, Object, Reference, Resolved};

pub mod affinity;
pub(crate) mod volume;

pub use self::affinity::matches as node_affinity_matches;
pub use self::volume::{ClaimVolume, claim};

/// Where `local` volumes are bind-mounted, under the pod's directory (kubelet's layout).
pub const LOCAL_VOLUME: &str = "volumes/kubernetes.io~local-volume";

/// Where `local` volumes in `Block` mode are linked, under the pod's directory (kubelet's
/// pod device map path).
pub const LOCAL_VOLUME_DEVICES: &str = "volumeDevices/kubernetes.io~local-volume";

/// The device cgroup access a container gets to a writable block volume (kubelet's
/// `makeBlockVolumes`); a read-only claim's is `r`.
const DEVICE_ACCESS: &str = "mrw";

/// The device cgroup access of a read-only claim's block volume.
const DEVICE_ACCESS_READ_ONLY: &str = "r";

/// The volumes a pod's containers (init and ephemeral ones too) use, by name: mounted
/// (`volumeMounts`) or as devices (`volumeDevices`), as kubelet's `GetPodVolumeNames`
/// lists them. A volume in neither is not set up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// The volumes some container lists in `volumeMounts`.
    pub mounts: BTreeSet<String>,
    /// The volumes some container lists in `volumeDevices`.
    pub devices: BTreeSet<String>,
}

impl Usage {
    /// What `pod`'s containers use.
    pub fn of(pod: &Pod) -> Self {
        let mut usage = Usage::default();
        let Some(spec) = pod.spec.as_ref() else { return usage };
        let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        let ephemeral = spec.ephemeral_containers.iter().flatten();
        let lists = containers
            .map(|c| (&c.volume_mounts, &c.volume_devices))
            .chain(ephemeral.map(|c| (&c.volume_mounts, &c.volume_devices)));
        for (mounts, devices) in lists {
            usage.mounts.extend(mounts.iter().flatten().map(|m| m.name.clone()));
            usage.devices.extend(devices.iter().flatten().map(|d| d.name.clone()));
        }
        usage
    }

    /// Whether a container uses the volume `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.mounts.contains(name) || self.devices.contains(name)
    }

    /// The volumes used, mounted or as devices, in name order (kubelet's expected volumes).
    pub fn expected(&self) -> Vec<String> {
        self.mounts.union(&self.devices).cloned().collect()
    }
}

/// The volume a claim names (`spec.volumeName`), once it names one.
pub fn bound_volume(claim: &PersistentVolumeClaim) -> Option<&str> {
    let name = claim.spec.as_ref()?.volume_name.as_deref()?;
    (!name.is_empty()).then_some(name)
}

/// This node, as a volume's node affinity sees it.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    pub name: &'a str,
    /// The Node's labels (`--node-labels` and the well-known ones kubelet sets).
    pub labels: &'a BTreeMap<String, String>,
}

/// What a claim's volume is on the node.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A `hostPath` PersistentVolume: the host's path, checked per its `type`.
    HostPath(HostPathVolumeSource),
    /// A `local` PersistentVolume: `spec.local.path`, bind-mounted in the pod's directory.
    Local { path: String },
}

/// A claim's volume, ready to be set up.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// The PersistentVolume's name.
    pub volume: String,
    pub source: Source,
    /// The pod's `persistentVolumeClaim.readOnly`: the volume is mounted read-only.
    pub read_only: bool,
    /// `volumeMode: Block`: the volume is a device (always a `local` one).
    pub block: bool,
}

impl Bound {
    /// The host path the containers bind: a hostPath volume's path, or a local volume's
    /// mount under the pod's directory; a block volume's link to its device there.
    pub fn path(&self, pod_dir: &Path) -> PathBuf {
        match &self.source {
            Source::HostPath(source) => PathBuf::from(&source.path),
            Source::Local { .. } if self.block => {
                pod_dir.join(LOCAL_VOLUME_DEVICES).join(&self.volume)
            }
            Source::Local { .. } => pod_dir.join(LOCAL_VOLUME).join(&self.volume),
        }
    }

    /// Whether the pod's `fsGroup` is given the volume: kubelet's local plugin does it
    /// for a writable Filesystem volume; its hostPath plugin never does.
    pub fn takes_fs_group(&self) -> bool {
        matches!(self.source, Source::Local { .. }) && !self.read_only && !self.block
    }
}

/// A claim's volume on the node, as the containers' mounts and devices need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// What the containers bind; a block volume's link to its device.
    pub path: PathBuf,
    pub read_only: bool,
    /// A block volume's device node, as the host has it (its path the host's): what
    /// each `volumeDevices` entry naming the volume makes in the container.
    pub device: Option<LinuxDevice>,
}

/// Why a claim's volume cannot be set up, as kubelet says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The volume manager's (its populator's) refusals: the pod waits for the claim.
    #[error("{0}")]
    Processing(String),
    /// `MountVolume.NodeAffinity check failed for volume "pv" : no matching NodeSelectorTerms`.
    #[error("MountVolume.NodeAffinity check failed for volume {volume:?} : {why}")]
    NodeAffinity {
        volume: String,
        #[source]
        why: affinity::Error,
    },
    /// kubelet's check that the volume is bound to the claim: it is bound to none (an
    /// item of [`Error::Processing`]).
    #[error(
        "found PV object {volume} but it has a nil pv.Spec.ClaimRef indicating it is not yet \
         bound to the claim"
    )]
    Unbound { volume: String },
    /// The volume is bound to another claim (an item of [`Error::Processing`]).
    #[error(
        "found PV object {volume} but its pv.Spec.ClaimRef.UID {got} does not point to \
         claim.UID {expected}"
    )]
    OtherClaim { volume: String, got: String, expected: String },
    /// A volume Outpost does not mount (A1), naming its type.
    #[error(
        "MountVolume.SetUp failed for volume {volume:?} : PersistentVolume {volume} is of type \
         {kind}, which Outpost does not mount; use a hostPath or local PersistentVolume \
         (local-path-provisioner makes them)"
    )]
    Unsupported { volume: String, kind: String },
    /// A `hostPath` volume in `Block` mode: kubelet's hostPath plugin is no block volume
    /// plugin, so no mapper matches it.
    #[error(
        "MapVolume.FindMapperPluginBySpec failed for volume {volume:?} : no volume plugin \
         matched: PersistentVolume {volume} is a hostPath volume in volumeMode Block, which \
         kubelet's hostPath plugin does not map; use a local PersistentVolume for a block \
         device"
    )]
    BlockHostPath { volume: String },
}

/// The PersistentVolume sources Outpost does not mount (network, cloud and CSI volumes),
/// as the manifest names them.
const UNSUPPORTED_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "iscsi",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// The claim's volume of the pod's `volume` (`Ok(None)`: not a claim's volume), from
/// `resolved` (which holds the claim and, once the claim names it, its volume), for the
/// pod's containers' `usage` of it.
pub fn bind(
    pod: &Pod,
    volume: &Volume,
    usage: &Usage,
    resolved: &Resolved,
    node: Node<'_>,
) -> Result<Option<Bound>, Error> {
    let Some(claim_volume) = claim(pod, volume) else { return Ok(None) };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = &claim_volume.name;
    let processing =
        |why: String| Error::Processing(format!("error processing PVC {namespace}/{name}: {why}"));
    let reference = Reference::PersistentVolumeClaim(name.clone());
    let claim = match projection::lookup(resolved, &reference) {
        Err(why) => return Err(processing(format!("failed to fetch PVC from API server: {why}"))),
        Ok(None) => {
            let why = format!("persistentvolumeclaims {name:?} not found");
            return Err(processing(format!("failed to fetch PVC from API server: {why}")));
        }
        Ok(Some(Object::PersistentVolumeClaim(claim))) => claim.clone(),
        Ok(Some(other)) => {
            let why = projection::wrong_kind(other);
            return Err(processing(format!("failed to fetch PVC from API server: {why}")));
        }
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(processing("PVC is being deleted".to_owned()));
    }
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Bound") {
        return Err(processing("PVC is not bound".to_owned()));
    }
    let Some(volume_name) = bound_volume(&claim) else {
        return Err(processing("PVC has empty pvc.Spec.VolumeName".to_owned()));
    };
    if claim_volume.ephemeral && !owned_by(&claim, pod) {
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        return Err(Error::Processing(format!(
            "PVC {namespace}/{name} was not created for pod {namespace}/{pod_name} (pod is not owner)"
        )));
    }
    let fetch_failed = |why: String| {
        processing(format!("failed to fetch PV {volume_name} from API server: {why}"))
    };
    let reference = Reference::PersistentVolume(volume_name.to_owned());
    let persistent = match projection::lookup(resolved, &reference) {
        Err(why) => return Err(fetch_failed(why)),
        Ok(None) => {
            return Err(fetch_failed(format!("persistentvolumes {volume_name:?} not found")));
        }
        Ok(Some(Object::PersistentVolume(persistent))) => persistent.clone(),
        Ok(Some(other)) => return Err(fetch_failed(projection::wrong_kind(other))),
    };
    check_claim_ref(&persistent, &claim).map_err(|e| processing(e.to_string()))?;
    let spec = persistent.spec.clone().unwrap_or_default();
    // kubelet's populator, word for word (not prefixed as the claim's errors are).
    let mode = spec.volume_mode.as_deref().unwrap_or("Filesystem");
    if usage.mounts.contains(&volume.name) && mode != "Filesystem" {
        return Err(Error::Processing(format!(
            "volume {} has volumeMode {mode}, but is specified in volumeMounts",
            volume.name
        )));
    }
    if usage.devices.contains(&volume.name) && mode != "Block" {
        return Err(Error::Processing(format!(
            "volume {} has volumeMode {mode}, but is specified in volumeDevices",
            volume.name
        )));
    }
    let block = mode == "Block";
    if let Some(affinity) = &spec.node_affinity {
        affinity::matches(affinity, node)
            .map_err(|why| Error::NodeAffinity { volume: volume_name.to_owned(), why })?;
    }
    let source = if let Some(host_path) = spec.host_path {
        if block {
            return Err(Error::BlockHostPath { volume: volume_name.to_owned() });
        }
        Source::HostPath(host_path)
    } else if let Some(local) = spec.local {
        Source::Local { path: local.path }
    } else {
        let json = serde_json::to_value(&persistent.spec).unwrap_or_default();
        let kind = UNSUPPORTED_SOURCES.iter().find(|k| json.get(**k).is_some());
        let kind = kind.map_or("(none)", |k| k).to_owned();
        return Err(Error::Unsupported { volume: volume_name.to_owned(), kind });
    };
    let read_only = claim_volume.read_only;
    Ok(Some(Bound { volume: volume_name.to_owned(), source, read_only, block }))
}

/// Why a container's `volumeDevices` cannot be given it, as kubelet says it
/// (`makeBlockVolumes`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// A relative `devicePath` (the API server lets it through; kubelet does not).
    #[error("error DevicePath `{path}` must be an absolute path")]
    NotAbsolute { path: String },
    /// The volume is not a block volume the pod's set-up linked.
    #[error("cannot find volume {volume:?} to pass into container {container:?}")]
    NoVolume { volume: String, container: String },
}

/// The device nodes of `container`'s `volumeDevices`, from the pod's `claimed` volumes:
/// each volume's host node at the entry's `devicePath`, with the device cgroup access
/// kubelet asks for (`mrw`, or `r` for a read-only claim).
pub fn devices(
    claimed: &BTreeMap<String, Claimed>,
    container: &Container,
) -> Result<Vec<(LinuxDevice, String)>, DeviceError> {
    let mut nodes = Vec::new();
    for entry in container.volume_devices.iter().flatten() {
        if !entry.device_path.starts_with('/') {
            return Err(DeviceError::NotAbsolute { path: entry.device_path.clone() });
        }
        let claim = claimed.get(&entry.name);
        let Some((claim, device)) = claim.and_then(|c| Some((c, c.device.as_ref()?))) else {
            return Err(DeviceError::NoVolume {
                volume: entry.name.clone(),
                container: container.name.clone(),
            });
        };
        let mut node = device.clone();
        node.set_path(PathBuf::from(&entry.device_path));
        let access = if claim.read_only { DEVICE_ACCESS_READ_ONLY } else { DEVICE_ACCESS };
        nodes.push((node, access.to_owned()));
    }
    Ok(nodes)
}

/// kubelet's check that the volume is bound to this very claim.
fn check_claim_ref(
    persistent: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Result<(), Error> {
    let volume = persistent.metadata.name.clone().unwrap_or_default();
    let claim_ref = persistent.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let Some(claim_ref) = claim_ref else {
        return Err(Error::Unbound { volume });
    };
    let expected = claim.metadata.uid.as_deref().unwrap_or_default();
    let got = claim_ref.uid.as_deref().unwrap_or_default();
    if got != expected {
        return Err(Error::OtherClaim {
            volume,
            got: got.to_owned(),
            expected: expected.to_owned(),
        });
    }
    Ok(())
}

/// Whether the pod controls the claim (an ephemeral volume's claim is made with the pod
/// as its controller), in the pod's namespace.
fn owned_by(claim: &PersistentVolumeClaim, pod: &Pod) -> bool {
    let uid = pod.metadata.uid.as_deref();
    claim.metadata.namespace == pod.metadata.namespace
        && claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owner.controller == Some(true) && Some(owner.uid.as_str()) == uid)
}

/// The FailedMount text of a pod whose claims cannot be processed: kubelet's
/// `Unable to attach or mount volumes: unmounted volumes=[..], unattached volumes=[..],
/// failed to process volumes=[..]: <errors>`. `expected` are the volumes the containers
/// mount (none is mounted yet); `failed` the claims' volumes that failed, with why.
pub fn failed_mount(expected: &[String], failed: &[(String, String)]) -> String {
    let mut unmounted = expected.to_vec();
    unmounted.sort();
    unmounted.dedup();
    let mut names: Vec<&str> = failed.iter().map(|(v, _)| v.as_str()).collect();
    names.sort_unstable();
    let errors: Vec<&str> = failed.iter().map(|(_, e)| e.as_str()).collect();
    format!(
        "Unable to attach or mount volumes: unmounted volumes=[{}], unattached volumes=[], \
         failed to process volumes=[{}]: {}",
        unmounted.join(" "),
        names.join(" "),
        errors.join("; ")
    )
}

#[cfg(test)]
mod tests;
