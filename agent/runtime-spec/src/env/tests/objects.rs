//! env and envFrom from ConfigMaps and Secrets (SEMANTICS.md V1's objects, kubelet's
//! `makeEnvironmentVariables`).

use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::super::super::tests::{context, pod};
use super::*;
use crate::projection::{Object, Reference, Resolution, Resolved};

fn objects() -> Resolved {
    let config_map = ConfigMap {
        data: Some(
            [("MODE", "fast"), ("LEVEL", "3"), ("1st", "x"), ("with space", "y")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into(),
        ),
        ..ConfigMap::default()
    };
    let secret = Secret {
        data: Some(
            [("PASSWORD", &b"hunter2"[..]), ("LEVEL", b"9"), ("TOKEN", b"t\xff")]
                .map(|(k, v)| (k.to_owned(), ByteString(v.to_vec())))
                .into(),
        ),
        ..Secret::default()
    };
    Resolved(
        [
            (
                Reference::ConfigMap("app".to_owned()),
                Resolution::Found(Object::ConfigMap(Arc::new(config_map))),
            ),
            (
                Reference::Secret("db".to_owned()),
                Resolution::Found(Object::Secret(Arc::new(secret))),
            ),
            (Reference::ConfigMap("gone".to_owned()), Resolution::Absent),
            (Reference::Secret("gone".to_owned()), Resolution::Absent),
            (Reference::Secret("far".to_owned()), Resolution::Unavailable("offline".to_owned())),
        ]
        .into(),
    )
}

fn env_with(container: &str) -> Result<Vec<String>> {
    let pod = pod(&format!("spec: {{containers: [{container}]}}"));
    let resolved = objects();
    let ctx = PodContext { resolved: &resolved, ..context(&pod) };
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let at = Subject::container(&pod, &container.name);
    environment(&ctx, container, None, &[], &Default::default(), &at)
        .map(|e| e.entries[1..].to_vec())
}

#[test]
fn v1_env_from_then_env_which_wins() {
    let entries = env_with(
        "{name: app, image: b, envFrom: [{configMapRef: {name: app}}, {secretRef: {name: db}, prefix: DB_}, {secretRef: {name: db}}], env: [{name: MODE, value: slow}, {name: X, value: '$(DB_PASSWORD)-$(LEVEL)'}]}",
    )
    .unwrap();
    assert_eq!(
        entries,
        [
            "DB_LEVEL=9",
            "DB_PASSWORD=hunter2",
            "DB_TOKEN=t\u{fffd}",
            "LEVEL=9",
            "MODE=slow",
            "PASSWORD=hunter2",
            "TOKEN=t\u{fffd}",
            "X=hunter2-9",
        ],
        "envFrom sorted by name, a later source and env win in place, invalid names left out"
    );
}

#[test]
fn v1_key_refs() {
    let entries = env_with(
        "{name: app, image: b, env: [{name: M, valueFrom: {configMapKeyRef: {name: app, key: MODE}}}, {name: P, valueFrom: {secretKeyRef: {name: db, key: PASSWORD}}}, {name: O, valueFrom: {secretKeyRef: {name: db, key: nope, optional: true}}}, {name: G, valueFrom: {configMapKeyRef: {name: gone, key: k, optional: true}}}]}",
    )
    .unwrap();
    assert_eq!(entries, ["M=fast", "P=hunter2"], "optional and missing: unset");
}

#[test]
fn v1_missing_objects_and_keys_in_kubelets_words() {
    let error = |container: &str| env_with(container).unwrap_err().to_string();
    let env =
        |source: &str| format!("{{name: app, image: b, env: [{{name: V, valueFrom: {source}}}]}}");
    assert_eq!(
        error(&env("{configMapKeyRef: {name: gone, key: k}}")),
        "configmap \"gone\" not found"
    );
    assert_eq!(error(&env("{secretKeyRef: {name: gone, key: k}}")), "secret \"gone\" not found");
    assert_eq!(
        error(&env("{configMapKeyRef: {name: app, key: k}}")),
        "couldn't find key k in ConfigMap default/app"
    );
    assert_eq!(
        error(&env("{secretKeyRef: {name: db, key: k}}")),
        "couldn't find key k in Secret default/db"
    );
    assert_eq!(
        error(&env("{secretKeyRef: {name: far, key: k, optional: true}}")),
        "couldn't get secret default/far: offline",
        "optional covers a missing object, not an unknown one"
    );
    let from = |source: &str| format!("{{name: app, image: b, envFrom: [{source}]}}");
    assert_eq!(error(&from("{configMapRef: {name: gone}}")), "configmap \"gone\" not found");
    assert_eq!(error(&from("{secretRef: {name: gone}}")), "secret \"gone\" not found");
    assert_eq!(
        env_with(&from("{secretRef: {name: gone, optional: true}}")).unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        env_with(&from("{configMapRef: {name: gone, optional: true}}")).unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn v1_invalid_names_are_reported_as_kubelet_does() {
    let pod = pod(
        "spec: {containers: [{name: app, image: b, envFrom: [{configMapRef: {name: app}}, {secretRef: {name: db}}, {configMapRef: {name: app}, prefix: P_}]}]}",
    );
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(
        invalid_names(&pod, container, &objects()),
        [
            "Keys [1st, with space] from the EnvFrom configMap default/app were skipped since they \
          are considered invalid environment variable names.",
            "Keys [P_with space] from the EnvFrom configMap default/app were skipped since they \
          are considered invalid environment variable names."
        ]
    );
    let failing = pod_with_gone();
    let container = &failing.spec.as_ref().unwrap().containers[0];
    assert!(invalid_names(&failing, container, &objects()).is_empty());
}

fn pod_with_gone() -> k8s_openapi::api::core::v1::Pod {
    pod("spec: {containers: [{name: app, image: b, envFrom: [{configMapRef: {name: gone}}]}]}")
}
