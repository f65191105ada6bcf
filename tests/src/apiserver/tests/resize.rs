//! `pods/resize` (K6) through kube-rs, with the patches `kubectl patch --subresource
//! resize` sends: only the containers' cpu and memory change, in kube-apiserver's words
//! when refused (that nodes may not use it is the Node authorizer's test).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::pods;
use crate::apiserver::TestApiServer;

/// A Guaranteed pod, as kubernetes.io's resize task makes it (`qos-demo-5`'s shape).
fn guaranteed(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "node-a", "containers": [{
            "name": "pause",
            "image": "registry.k8s.io/pause:3.8",
            "resizePolicy": [
                {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                {"resourceName": "memory", "restartPolicy": "RestartContainer"}
            ],
            "resources": {
                "limits": {"memory": "200Mi", "cpu": "700m"},
                "requests": {"memory": "200Mi", "cpu": "700m"}
            }
        }]}
    }))
    .unwrap()
}

async fn resize(api: &Api<Pod>, name: &str, patch: Value) -> kube::Result<Pod> {
    api.patch_subresource("resize", name, &PatchParams::default(), &Patch::Strategic(patch)).await
}

/// The refusal's code and message.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn resources(cpu: &str, memory: &str) -> Value {
    json!({"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}})
}

#[tokio::test]
async fn k6_a_resize_changes_only_the_containers_cpu_and_memory() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &guaranteed("qos-demo-5")).await.unwrap();
    let got: Pod = api.get_subresource("resize", "qos-demo-5").await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("qos-demo-5"));
    let patch = json!({"spec": {"containers": [{
        "name": "pause", "image": "other", "resources": resources("800m", "300Mi")
    }]}});
    let resized = resize(&api, "qos-demo-5", patch).await.unwrap();
    let container = &resized.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("registry.k8s.io/pause:3.8"), "only resources");
    let limits = container.resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["cpu"].0, "800m");
    assert_eq!(limits["memory"].0, "300Mi");
    assert_eq!(resized.metadata.generation, Some(2));
    // The same again changes nothing, and the generation stays.
    let same = json!({"spec": {"containers": [{"name": "pause", "resources": resources("800m", "300Mi")}]}});
    assert_eq!(resize(&api, "qos-demo-5", same).await.unwrap().metadata.generation, Some(2));
}

#[tokio::test]
async fn k6_what_a_resize_may_not_do_is_refused_in_the_api_servers_words() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &guaranteed("web")).await.unwrap();
    let refused = |patch: Value| {
        let api = api.clone();
        async move { refusal(resize(&api, "web", patch).await) }
    };
    let container = |resources: Value| json!({"spec": {"containers": [{"name": "pause", "resources": resources}]}});
    // Guaranteed to Burstable.
    let (code, message) = refused(container(json!({"requests": {"cpu": "500m"}}))).await;
    assert_eq!(code, 422);
    assert!(message.contains("spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"), "{message}");
    // Only cpu and memory.
    let mut storage = resources("700m", "200Mi");
    storage["limits"]["ephemeral-storage"] = json!("1Gi");
    let (_, message) = refused(container(storage)).await;
    assert!(
        message.contains("spec: Forbidden: only cpu and memory resources are mutable"),
        "{message}"
    );
    // A memory limit lowered with the NotRequired policy.
    let lowered = json!({"spec": {"containers": [{"name": "pause",
        "resizePolicy": [{"resourceName": "memory", "restartPolicy": "NotRequired"}],
        "resources": resources("700m", "100Mi")}]}});
    let (_, message) = refused(lowered).await;
    assert!(
        message.contains("spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"),
        "{message}"
    );
    // With RestartContainer for memory it is allowed (the policy the pod has).
    resize(&api, "web", container(resources("700m", "100Mi"))).await.unwrap();
}

#[tokio::test]
async fn k6_removing_a_limit_a_mirror_pod_and_a_node_without_resize_are_refused() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let mut burstable = guaranteed("burst");
    let container = &mut burstable.spec.as_mut().unwrap().containers[0];
    container.resources = Some(
        serde_json::from_value(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}))
            .unwrap(),
    );
    api.create(&PostParams::default(), &burstable).await.unwrap();
    let removed = json!({"spec": {"containers": [{"name": "pause", "resources": {"requests": {"cpu": "100m"}}}]}});
    // A strategic merge patch keeps the limit; a merge patch of the whole list removes it.
    let patch = Patch::Merge(removed);
    let result = api.patch_subresource("resize", "burst", &PatchParams::default(), &patch).await;
    let (_, message) = refusal(result);
    assert!(
        message.contains(
            "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed"
        ),
        "{message}"
    );

    let mut mirror = guaranteed("static-node-a");
    mirror.metadata.annotations =
        Some([("kubernetes.io/config.mirror".to_owned(), "0123".to_owned())].into());
    api.create(&PostParams::default(), &mirror).await.unwrap();
    let patch = json!({"spec": {"containers": [{"name": "pause", "resources": resources("800m", "200Mi")}]}});
    let (_, message) = refusal(resize(&api, "static-node-a", patch.clone()).await);
    assert!(message.ends_with("Forbidden: static pods cannot be resized"), "{message}");

    // A running container whose status has no resources: a node without resize.
    let mut pod = api.create(&PostParams::default(), &guaranteed("web-old")).await.unwrap();
    pod.status = Some(
        serde_json::from_value(json!({"containerStatuses": [{
            "name": "pause", "image": "registry.k8s.io/pause:3.8", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {"startedAt": "2026-11-27T00:00:00Z"}}
        }]}))
        .unwrap(),
    );
    api.replace_status("web-old", &PostParams::default(), &pod).await.unwrap();
    let (_, message) = refusal(resize(&api, "web-old", patch).await);
    assert!(
        message.contains("spec: Forbidden: Pod running on node without support for resize"),
        "{message}"
    );
}
