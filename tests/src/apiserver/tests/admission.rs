//! The ServiceAccount admission plugin on pod create, through kube-rs.

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::{client, pods};
use crate::apiserver::TestApiServer;

const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn pod_from(spec: Value, annotations: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": "web", "annotations": annotations },
        "spec": spec,
    }))
    .unwrap()
}

/// Creates the pod; the created pod as JSON, or the refusal's code and message.
async fn create(server: &TestApiServer, pod: &Pod) -> Result<Value, (u16, String)> {
    match pods(server).await.create(&PostParams::default(), pod).await {
        Ok(pod) => Ok(serde_json::to_value(pod).unwrap()),
        Err(kube::Error::Api(status)) => Err((status.code, status.message.clone())),
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_pod_gets_the_default_service_account_and_the_kube_api_access_volume() {
    let server = TestApiServer::start().await.unwrap();
    let spec = json!({
        "initContainers": [{ "name": "init", "image": "busybox" }],
        "containers": [
            { "name": "main", "image": "busybox" },
            { "name": "own", "image": "busybox",
              "volumeMounts": [{ "name": "mine", "mountPath": MOUNT }] },
        ],
        "volumes": [{ "name": "mine", "emptyDir": {} }],
    });
    let pod = create(&server, &pod_from(spec, json!({}))).await.unwrap();
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    assert_eq!(pod["spec"]["serviceAccount"], "default");
    let volume = &pod["spec"]["volumes"][1];
    let name = volume["name"].as_str().unwrap();
    let suffix = name.strip_prefix("kube-api-access-").unwrap();
    assert_eq!(suffix.len(), 5);
    assert!(suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    assert_eq!(
        volume["projected"],
        json!({
            "defaultMode": 420,
            "sources": [
                { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
                { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                { "downwardAPI": { "items": [{ "path": "namespace",
                    "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" } }] } },
            ],
        })
    );
    let mount = json!([{ "name": name, "readOnly": true, "mountPath": MOUNT }]);
    assert_eq!(pod["spec"]["initContainers"][0]["volumeMounts"], mount);
    assert_eq!(pod["spec"]["containers"][0]["volumeMounts"], mount);
    assert_eq!(pod["spec"]["containers"][1]["volumeMounts"][0]["name"], "mine");
    assert_eq!(pod["spec"]["containers"][1]["volumeMounts"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn automount_false_on_the_pod_or_else_the_service_account_mounts_nothing() {
    let server = TestApiServer::start().await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client(&server).await, "default");
    let robot: ServiceAccount = serde_json::from_value(json!({
        "metadata": { "name": "robot" },
        "automountServiceAccountToken": false,
        "imagePullSecrets": [{ "name": "registry" }],
    }))
    .unwrap();
    accounts.create(&PostParams::default(), &robot).await.unwrap();
    let container = json!([{ "name": "main", "image": "busybox" }]);

    let spec = json!({ "serviceAccountName": "robot", "containers": container });
    let pod = create(&server, &pod_from(spec, json!({}))).await.unwrap();
    assert_eq!(pod["spec"].get("volumes"), None);
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{ "name": "registry" }]));
    server.delete_pod("default", "web").unwrap();

    let spec = json!({ "serviceAccountName": "robot", "automountServiceAccountToken": true,
        "imagePullSecrets": [{ "name": "own" }], "containers": container });
    let pod = create(&server, &pod_from(spec, json!({}))).await.unwrap();
    assert_eq!(pod["spec"]["volumes"].as_array().unwrap().len(), 1);
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{ "name": "own" }]));
    server.delete_pod("default", "web").unwrap();

    let spec = json!({ "automountServiceAccountToken": false, "containers": container });
    let pod = create(&server, &pod_from(spec, json!({}))).await.unwrap();
    assert_eq!(pod["spec"].get("volumes"), None);
}

#[tokio::test]
async fn a_missing_service_account_is_forbidden_with_the_real_message() {
    let server = TestApiServer::start().await.unwrap();
    let spec = json!({ "serviceAccount": "ghost", "containers": [{ "name": "main", "image": "busybox" }] });
    let refused = create(&server, &pod_from(spec, json!({}))).await.unwrap_err();
    assert_eq!(
        refused,
        (
            403,
            "pods \"web\" is forbidden: error looking up service account default/ghost: \
             serviceaccount \"ghost\" not found"
                .into()
        )
    );
}

#[tokio::test]
async fn a_mirror_pod_is_not_defaulted_and_may_not_refer_to_api_objects() {
    let server = TestApiServer::start().await.unwrap();
    let mirror = json!({ "kubernetes.io/config.mirror": "0123" });
    let container = |extra: Value| {
        let mut c = json!({ "name": "main", "image": "busybox" });
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!([c])
    };
    let plain = json!({ "containers": container(json!({})) });
    let pod = create(&server, &pod_from(plain, mirror.clone())).await.unwrap();
    assert_eq!(pod["spec"].get("serviceAccountName"), None);
    assert_eq!(pod["spec"].get("volumes"), None);
    server.delete_pod("default", "web").unwrap();

    let forbidden =
        |what: &str| (403, format!("pods \"web\" is forbidden: a mirror pod may not {what}"));
    for (spec, what) in [
        (
            json!({ "serviceAccountName": "default", "containers": container(json!({})) }),
            "reference service accounts",
        ),
        (
            json!({ "imagePullSecrets": [{ "name": "r" }], "containers": container(json!({})) }),
            "reference secrets",
        ),
        (
            json!({ "containers": container(json!({ "envFrom": [{ "secretRef": { "name": "s" } }] })) }),
            "reference secrets",
        ),
        (
            json!({ "containers": container(json!({ "env": [{ "name": "A",
            "valueFrom": { "secretKeyRef": { "name": "s", "key": "k" } } }] })) }),
            "reference secrets",
        ),
        (
            json!({ "containers": container(json!({})),
            "volumes": [{ "name": "v", "secret": { "secretName": "s" } }] }),
            "reference secrets",
        ),
        (
            json!({ "containers": container(json!({})), "volumes": [{ "name": "v",
            "projected": { "sources": [{ "serviceAccountToken": { "path": "t" } }] } }] }),
            "use ServiceAccountToken volume projections",
        ),
        (
            json!({ "containers": container(json!({})),
            "volumes": [{ "name": "v", "configMap": { "name": "c" } }] }),
            "reference configmaps",
        ),
        (
            json!({ "containers": container(json!({ "env": [{ "name": "A",
            "valueFrom": { "configMapKeyRef": { "name": "c", "key": "k" } } }] })) }),
            "reference configmaps",
        ),
    ] {
        let refused = create(&server, &pod_from(spec, mirror.clone())).await.unwrap_err();
        assert_eq!(refused, forbidden(what));
    }
}
