//! What tests of pod workers build their pods from (here and in the agent's executor
//! tests, through the `test-util` feature).

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

/// `default/web` of UID `uid` with these (name, image) containers.
pub fn pod(uid: &str, containers: &[(&str, &str)]) -> Pod {
    let mut p = Pod::default();
    p.metadata.namespace = Some("default".into());
    p.metadata.name = Some("web".into());
    p.metadata.uid = Some(uid.into());
    p.spec = Some(PodSpec {
        containers: containers
            .iter()
            .map(|(name, image)| Container {
                name: (*name).into(),
                image: Some((*image).into()),
                ..Container::default()
            })
            .collect(),
        ..PodSpec::default()
    });
    p
}
