//! K3: `persistentVolumeClaim` volumes, and generic `ephemeral` ones (a claim the API
//! server's controller makes, `<pod name>-<volume name>`), bound to a `hostPath` or
//! `local` PersistentVolume. Pure: the claim and its volume come resolved (the agent's
//! `objects` watches both by name), the mount is `outpost_runtime::volumes`'.
//!
//! As kubelet's volume manager decides it: the claim must exist, not be being deleted,
//! be `Bound` and name its volume; an ephemeral volume's claim must be controlled by the
//! pod; the volume must be bound to that claim (`claimRef.uid`), of `volumeMode:
//! Filesystem`, and its `nodeAffinity` must hold for this node. Each refusal reads as
//! kubelet's message. A `hostPath` volume is its path (checked per its `type` as a
//! hostPath volume is); a `local` one is bind-mounted at
//! `<pod dir>/volumes/kubernetes.io~local-volume/<volume name>` and takes the pod's
//! `fsGroup` unless read-only; `readOnly` comes from the pod's claim.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, PersistentVolume, PersistentVolumeClaim, Pod, Volume,
};

use crate::projection::{self, Object, Reference, Resolved};

pub mod affinity;
pub(crate) mod volume;

pub use self::affinity::matches as node_affinity_matches;
pub use self::volume::{ClaimVolume, claim};

/// Where `local` volumes are bind-mounted, under the pod's directory (kubelet's layout).
pub const LOCAL_VOLUME: &str = "volumes/kubernetes.io~local-volume";

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
}

impl Bound {
    /// The host path the containers bind: a hostPath volume's path, or a local volume's
    /// mount under the pod's directory.
    pub fn path(&self, pod_dir: &Path) -> PathBuf {
        match &self.source {
            Source::HostPath(source) => PathBuf::from(&source.path),
            Source::Local { .. } => pod_dir.join(LOCAL_VOLUME).join(&self.volume),
        }
    }

    /// Whether the pod's `fsGroup` is given the volume: kubelet's local plugin does it
    /// for a writable volume; its hostPath plugin never does.
    pub fn takes_fs_group(&self) -> bool {
        matches!(self.source, Source::Local { .. }) && !self.read_only
    }
}

/// A claim's volume on the node, as the containers' mounts need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub path: PathBuf,
    pub read_only: bool,
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
/// `resolved` (which holds the claim and, once the claim names it, its volume).
pub fn bind(
    pod: &Pod,
    volume: &Volume,
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
    let mode = spec.volume_mode.as_deref().unwrap_or("Filesystem");
    if mode != "Filesystem" {
        return Err(processing(format!(
            "volume {} has volumeMode {mode}, but is specified in volumeMounts; Outpost mounts \
             Filesystem volumes only",
            volume.name
        )));
    }
    if let Some(affinity) = &spec.node_affinity {
        affinity::matches(affinity, node)
            .map_err(|why| Error::NodeAffinity { volume: volume_name.to_owned(), why })?;
    }
    let source = if let Some(host_path) = spec.host_path {
        Source::HostPath(host_path)
    } else if let Some(local) = spec.local {
        Source::Local { path: local.path }
    } else {
        let json = serde_json::to_value(&persistent.spec).unwrap_or_default();
        let kind = UNSUPPORTED_SOURCES.iter().find(|k| json.get(**k).is_some());
        let kind = kind.map_or("(none)", |k| k).to_owned();
        return Err(Error::Unsupported { volume: volume_name.to_owned(), kind });
    };
    Ok(Some(Bound { volume: volume_name.to_owned(), source, read_only: claim_volume.read_only }))
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
