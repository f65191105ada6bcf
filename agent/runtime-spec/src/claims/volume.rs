//! Which claim a pod's volume uses: its own file, so that `projection` (which lists the
//! claims a pod refers to) and the rest of `claims` (which reads them resolved) do not
//! import each other.

use k8s_openapi::api::core::v1::{Pod, Volume};

/// The claim a pod's volume uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimVolume {
    /// The claim's name, in the pod's namespace.
    pub name: String,
    /// A generic ephemeral volume's claim (it must be the pod's own).
    pub ephemeral: bool,
    /// `persistentVolumeClaim.readOnly`.
    pub read_only: bool,
}

/// The claim of `volume`, `None` when it is not a claim's volume.
pub fn claim(pod: &Pod, volume: &Volume) -> Option<ClaimVolume> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some(ClaimVolume {
            name: source.claim_name.clone(),
            ephemeral: false,
            read_only: source.read_only.unwrap_or(false),
        });
    }
    volume.ephemeral.as_ref()?;
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    Some(ClaimVolume {
        name: format!("{pod_name}-{}", volume.name),
        ephemeral: true,
        read_only: false,
    })
}
