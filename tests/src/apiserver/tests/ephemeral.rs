//! `pods/ephemeralcontainers` (X1) through kube-rs: GET, PUT and the patches kubectl
//! sends; only additions, in kube-apiserver's words (that nodes may not use it is the
//! Node authorizer's test).

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::{pod, pods};
use crate::apiserver::TestApiServer;

fn debugger(name: &str, target: &str) -> serde_json::Value {
    json!({"name": name, "image": "busybox", "stdin": true, "tty": true,
           "targetContainerName": target, "terminationMessagePolicy": "File"})
}

/// The refusal's code and message.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn x1_ephemeral_containers_are_added_by_strategic_merge_and_json_patch_and_put() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("web", Some("node-a"))).await.unwrap();
    let before = api.get_ephemeral_containers("web").await.unwrap();
    assert_eq!(before.metadata.name.as_deref(), Some("web"));
    // kubectl debug's patch: a strategic merge patch of the ephemeral containers.
    let patch = json!({"spec": {"ephemeralContainers": [debugger("debugger-a", "main")]}});
    let patched = api
        .patch_ephemeral_containers("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let spec = patched.spec.unwrap();
    assert_eq!(spec.ephemeral_containers.as_ref().unwrap()[0].name, "debugger-a");
    assert_eq!(spec.containers[0].name, "main", "the rest of the spec is kept");
    assert_eq!(patched.metadata.generation, Some(2));
    // A JSON patch (kubectl's fallback) adds a second.
    let add: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/spec/ephemeralContainers/-", "value": debugger("debugger-b", "")}
    ]))
    .unwrap();
    let patched = api
        .patch_ephemeral_containers("web", &PatchParams::default(), &Patch::<()>::Json(add))
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().ephemeral_containers.unwrap().len(), 2);
    // PUT takes only the ephemeral containers: a changed image elsewhere is dropped.
    let mut sent = api.get("web").await.unwrap();
    let spec = sent.spec.as_mut().unwrap();
    spec.containers[0].image = Some("other".into());
    let third = serde_json::from_value(debugger("debugger-c", "main")).unwrap();
    spec.ephemeral_containers.as_mut().unwrap().push(third);
    let put = api.replace_ephemeral_containers("web", &PostParams::default(), &sent).await.unwrap();
    let spec = put.spec.unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some("busybox"));
    assert_eq!(spec.ephemeral_containers.unwrap().len(), 3);
}

#[tokio::test]
async fn x1_existing_ephemeral_containers_are_immutable_and_new_ones_validated() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("web", Some("node-a"))).await.unwrap();
    let patch =
        |list: serde_json::Value| Patch::Merge(json!({"spec": {"ephemeralContainers": list}}));
    let params = PatchParams::default();
    api.patch_ephemeral_containers("web", &params, &patch(json!([debugger("d", "main")])))
        .await
        .unwrap();
    let removed = api.patch_ephemeral_containers("web", &params, &patch(json!([]))).await;
    assert_eq!(
        refusal(removed),
        (
            422,
            "Pod \"web\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral \
             containers \"d\" may not be removed\n"
                .into()
        )
    );
    let mut changed = debugger("d", "main");
    changed["image"] = json!("alpine");
    let changed = api.patch_ephemeral_containers("web", &params, &patch(json!([changed]))).await;
    assert!(refusal(changed).1.contains("existing ephemeral containers \"d\" may not be changed"));
    let mut ported = debugger("e", "nope");
    ported["ports"] = json!([{"containerPort": 80}]);
    let list = json!([debugger("d", "main"), ported, debugger("main", "")]);
    let (code, message) =
        refusal(api.patch_ephemeral_containers("web", &params, &patch(list)).await);
    assert_eq!(code, 422);
    for part in [
        "spec.ephemeralContainers[1].targetContainerName: Not found: \"nope\"",
        "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
        "spec.ephemeralContainers[2].name: Duplicate value: \"main\"",
    ] {
        assert!(message.contains(part), "{part} in {message}");
    }
}

#[tokio::test]
async fn x1_a_mirror_pod_takes_no_ephemeral_container() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let mut mirror = pod("static-node-a", Some("node-a"));
    mirror.metadata.annotations =
        Some([("kubernetes.io/config.mirror".to_owned(), "0123".to_owned())].into());
    api.create(&PostParams::default(), &mirror).await.unwrap();
    api.create(&PostParams::default(), &pod("web", Some("node-a"))).await.unwrap();
    let patch = Patch::Merge(json!({"spec": {"ephemeralContainers": [debugger("d", "main")]}}));
    let params = PatchParams::default();
    let (code, message) =
        refusal(api.patch_ephemeral_containers("static-node-a", &params, &patch).await);
    assert_eq!(code, 422);
    assert!(
        message.ends_with("Forbidden: static pods do not support ephemeral containers"),
        "{message}"
    );
}
