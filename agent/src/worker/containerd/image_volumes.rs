//! V4: a container's image volumes (KEP-4639), ready before it is created: each image
//! pulled per the volume's `pullPolicy` (defaulted by its tag), with the pod's pull
//! secrets and kubelet's image Events on the pod, then mounted read-only from a
//! snapshot view in the pod's directory (`volumes::image`).
//!
//! As kubelet does (`getImageVolumes`, then `toKubeContainerImageVolumes`), a container
//! that mounts an image volume whose image cannot be had waits with that pull's error
//! (`ErrImagePull`, then `ImagePullBackOff`; `ErrImageNeverPull`); containers that do
//! not mount it start. A `subPath` into one must be a directory of the image, as
//! containerd's CRI plugin requires (kubelet's `CreateContainerError` otherwise).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod};
use outpost_core::lifecycle::PullPolicy;
use outpost_core::pod;
use outpost_core::pod_worker::{StartFailure, WaitingReason};

use super::{Pods, ensure_image};
use crate::apiserver::events::pod_ref;
use crate::error_chain::describe;
use crate::runtime::volumes;

/// Pulls and mounts the image volumes `container` mounts; the last failure, if any.
pub(super) async fn ensure(
    pods: &Pods,
    pod: &Pod,
    container: &Container,
) -> Result<(), StartFailure> {
    let mounted: BTreeSet<&str> =
        container.volume_mounts.iter().flatten().map(|m| m.name.as_str()).collect();
    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    let mut failed = None;
    for volume in volumes.filter(|v| mounted.contains(v.name.as_str())) {
        let Some(source) = &volume.image else { continue };
        let reference = source.reference.as_deref().unwrap_or_default();
        let policy = PullPolicy::of_image_volume(source);
        let object = pod_ref(pod, None);
        let image = match ensure_image(pods, pod, reference, policy, &object).await {
            Ok(image) => image,
            Err(failure) => {
                failed = Some(failure);
                continue;
            }
        };
        let pod_dir = pods.pods_dir().join(pod::uid(pod));
        let host = &*pods.settings.host;
        let create_error = |e: volumes::image::Error| {
            StartFailure::new(WaitingReason::CreateContainerError, describe(&e))
        };
        let dir = volumes::image::mount(
            &pods.containerd,
            host,
            &pod_dir,
            pod,
            &volume.name,
            &image.chain_id,
        )
        .await
        .map_err(create_error)?;
        let mounts = container.volume_mounts.iter().flatten();
        for mount in mounts.filter(|m| m.name == volume.name) {
            if let Some(sub_path) = mount.sub_path.as_deref().filter(|p| !p.is_empty()) {
                volumes::image::check_sub_path(&dir, &volume.name, sub_path)
                    .map_err(create_error)?;
            }
        }
    }
    failed.map_or(Ok(()), Err)
}
