//! K1: the Service variables joined to the container's own (kubelet's
//! `makeEnvironmentVariables`): appended after them, seen by `$(VAR)`, never over a
//! variable the container defines (`env` or `envFrom`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use proptest::prelude::*;

use super::super::super::tests::{context, pod};
use super::*;
use crate::projection::{Object, Reference, Resolution, Resolved};
use crate::services::ServiceEnv;

fn services() -> ServiceEnv {
    [
        ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
        ("KUBERNETES_SERVICE_PORT", "443"),
        ("WEB_SERVICE_HOST", "10.0.0.2"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into()
}

fn resolved() -> Resolved {
    let config_map = ConfigMap {
        data: Some([("WEB_SERVICE_HOST".to_owned(), "from-configmap".to_owned())].into()),
        ..ConfigMap::default()
    };
    let found = Resolution::Found(Object::ConfigMap(Arc::new(config_map)));
    Resolved([(Reference::ConfigMap("c".to_owned()), found)].into())
}

fn environment_of(container: &str, services: &ServiceEnv) -> Environment {
    let pod = pod(&format!("spec: {{containers: [{container}]}}"));
    let resolved = resolved();
    let ctx = PodContext { resolved: &resolved, services, ..context(&pod) };
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let at = Subject::container(&pod, &container.name);
    environment(&ctx, container, None, &[], &Default::default(), &at).unwrap()
}

#[test]
fn k1_service_variables_come_after_the_container_own() {
    let env = environment_of("{name: app, image: b, env: [{name: A, value: a}]}", &services());
    assert_eq!(
        env.entries[1..],
        [
            "A=a",
            "KUBERNETES_SERVICE_HOST=10.96.0.1",
            "KUBERNETES_SERVICE_PORT=443",
            "WEB_SERVICE_HOST=10.0.0.2"
        ]
    );
    // Command and args see them.
    assert_eq!(env.var("KUBERNETES_SERVICE_PORT"), Some("443"));
}

#[test]
fn k1_env_and_env_from_win_over_services() {
    let env = environment_of(
        "{name: app, image: b, envFrom: [{configMapRef: {name: c}}], env: [{name: KUBERNETES_SERVICE_HOST, value: mine}]}",
        &services(),
    );
    assert_eq!(
        env.entries[1..],
        [
            "WEB_SERVICE_HOST=from-configmap",
            "KUBERNETES_SERVICE_HOST=mine",
            "KUBERNETES_SERVICE_PORT=443"
        ]
    );
}

#[test]
fn k1_expansion_sees_services_after_the_container_own() {
    let env = environment_of(
        "{name: app, image: b, env: [{name: URL, value: 'https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)'}, {name: KUBERNETES_SERVICE_PORT, value: '6443'}, {name: LATER, value: '$(KUBERNETES_SERVICE_PORT)'}]}",
        &services(),
    );
    assert_eq!(env.var("URL"), Some("https://10.96.0.1:443"));
    // Once the container defines it, its own value is what expands.
    assert_eq!(env.var("LATER"), Some("6443"));
    assert_eq!(env.var("KUBERNETES_SERVICE_PORT"), Some("6443"));
}

#[test]
fn k1_a_service_variable_replaces_the_image_one() {
    let pod = pod("spec: {containers: [{name: app, image: b}]}");
    let services = services();
    let ctx = PodContext { services: &services, ..context(&pod) };
    let image = super::super::super::tests::image(
        r#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{"Env":["PATH=/bin","WEB_SERVICE_HOST=image"]}}"#,
    );
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let at = Subject::container(&pod, &container.name);
    let env = environment(&ctx, container, image.config().as_ref(), &[], &Default::default(), &at)
        .unwrap();
    assert!(env.entries.contains(&"WEB_SERVICE_HOST=10.0.0.2".to_owned()), "{:?}", env.entries);
}

proptest! {
    /// K1: whatever the Services, the container's own variables keep their values, and
    /// every Service variable the container does not define is there once.
    #[test]
    fn k1_the_pod_own_variables_always_win(
        own in prop::collection::btree_map("[A-C]_[A-C]", "[a-z]{0,4}", 0..5),
        services in prop::collection::btree_map("[A-C]_[A-C]", "[0-9]{1,3}", 0..6),
    ) {
        let vars: Vec<String> = own
            .iter()
            .map(|(k, v)| format!("{{name: {k}, value: '{v}'}}"))
            .collect();
        let container = format!("{{name: app, image: b, env: [{}]}}", vars.join(", "));
        let env = environment_of(&container, &services);
        for (name, value) in &own {
            prop_assert_eq!(env.var(name), Some(value.as_str()));
            let entry = format!("{name}={value}");
            prop_assert!(env.entries.contains(&entry));
        }
        for (name, value) in &services {
            let prefix = format!("{name}=");
            let count = env.entries.iter().filter(|e| e.starts_with(&prefix)).count();
            prop_assert_eq!(count, 1);
            if !own.contains_key(name) {
                prop_assert_eq!(env.var(name), Some(value.as_str()));
            }
        }
    }
}
