//! A new pod's images, resolved in containerd while its sandbox is set up (beside the CNI
//! ADD, the slow part): each container's start then takes its image from here instead of
//! asking containerd again (an image record, its manifest and config, a snapshot: four
//! or five calls). What is not taken soon goes stale and is resolved again.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use crate::runtime::Containerd;
use crate::runtime::image::resolve::{self, Image};

/// How long a resolved image stands in for asking containerd: the pod's first starts
/// come within it; a container started later (after a long init container) asks anew.
const FRESH_FOR: Duration = Duration::from_secs(10);

/// The images resolved for each pod being set up: by pod UID.
#[derive(Debug, Default)]
pub struct Prefetched(Mutex<HashMap<String, Images>>);

/// One pod's: by image reference, with when each was resolved.
type Images = HashMap<String, (Instant, Image)>;

impl Prefetched {
    /// Resolves the images of the pod's init and app containers (each reference once) and
    /// keeps those containerd has. A failure is left to the container's start, which
    /// resolves again and reports it.
    pub async fn resolve(&self, containerd: &Containerd, uid: &str, pod: &Pod) {
        let references = references(pod);
        let resolving = references.iter().map(|reference| async move {
            let image = resolve::resolve(containerd, reference).await.ok().flatten()?;
            Some((reference.clone(), (Instant::now(), image)))
        });
        let found: HashMap<_, _> =
            futures::future::join_all(resolving).await.into_iter().flatten().collect();
        if found.is_empty() {
            return;
        }
        if let Ok(mut pods) = self.0.lock() {
            pods.insert(uid.to_owned(), found);
        }
    }

    /// The image resolved for the pod `uid` under `reference`, while fresh; taken once.
    pub fn take(&self, uid: &str, reference: &str) -> Option<Image> {
        let mut pods = self.0.lock().ok()?;
        let images = pods.get_mut(uid)?;
        let taken = images.remove(reference);
        images.retain(|_, (at, _)| at.elapsed() < FRESH_FOR);
        if images.is_empty() {
            pods.remove(uid);
        }
        taken.filter(|(at, _)| at.elapsed() < FRESH_FOR).map(|(_, image)| image)
    }

    /// Drops what was resolved for the pod `uid` (its sandbox failed or is torn down).
    pub fn forget(&self, uid: &str) {
        if let Ok(mut pods) = self.0.lock() {
            pods.remove(uid);
        }
    }
}

/// The distinct image references of the pod's init and app containers, in spec order.
fn references(pod: &Pod) -> Vec<String> {
    let Some(spec) = pod.spec.as_ref() else { return Vec::new() };
    let mut seen = HashSet::new();
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .filter_map(|c| c.image.clone())
        .filter(|reference| !reference.is_empty() && seen.insert(reference.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    use super::*;

    fn container(image: &str) -> Container {
        Container { name: image.into(), image: Some(image.into()), ..Container::default() }
    }

    #[test]
    fn references_are_the_init_and_app_images_each_once_in_order() {
        let pod = Pod {
            spec: Some(PodSpec {
                init_containers: Some(vec![container("busybox"), container("")]),
                containers: vec![container("nginx:1.27"), container("busybox")],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        assert_eq!(references(&pod), ["busybox", "nginx:1.27"]);
        assert!(references(&Pod::default()).is_empty());
    }

    fn image(name: &str) -> Image {
        Image {
            name: name.into(),
            digest: format!("sha256:{name}"),
            config: oci_spec::image::ImageConfiguration::default(),
            chain_id: format!("sha256:chain-{name}"),
        }
    }

    #[test]
    fn an_image_is_taken_once_and_only_for_its_pod() {
        let prefetched = Prefetched::default();
        let images = HashMap::from([
            ("busybox".to_owned(), (Instant::now(), image("busybox"))),
            ("nginx".to_owned(), (Instant::now(), image("nginx"))),
        ]);
        prefetched.0.lock().unwrap().insert("u1".into(), images);
        assert!(prefetched.take("u2", "busybox").is_none());
        assert_eq!(prefetched.take("u1", "busybox").map(|i| i.name), Some("busybox".into()));
        assert!(prefetched.take("u1", "busybox").is_none(), "taken once");
        prefetched.forget("u1");
        assert!(prefetched.take("u1", "nginx").is_none());
        assert!(prefetched.0.lock().unwrap().is_empty());
    }

    #[test]
    fn a_stale_image_is_not_taken_and_the_pods_entry_goes_when_empty() {
        let prefetched = Prefetched::default();
        let Some(long_ago) = Instant::now().checked_sub(FRESH_FOR * 2) else { return };
        let images = HashMap::from([("busybox".to_owned(), (long_ago, image("busybox")))]);
        prefetched.0.lock().unwrap().insert("u1".into(), images);
        assert!(prefetched.take("u1", "busybox").is_none());
        assert!(prefetched.0.lock().unwrap().is_empty());
    }
}
