//! Reads and writes through kube-rs: create, get, list, update, patch, delete.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use super::{api_error, client, pod, pods};
use crate::apiserver::TestApiServer;

#[tokio::test]
async fn create_stamps_metadata_and_get_returns_it() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let created = api.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.uid.as_ref().map(String::len), Some(36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(
        meta.resource_version.as_deref(),
        Some(server.resource_version().to_string().as_str())
    );
    assert_eq!(created.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    let got = api.get("web").await.unwrap();
    assert_eq!(got.metadata.uid, meta.uid);
    assert_eq!(api_error(api.get("nope").await), (404, "NotFound".into()));
}

#[tokio::test]
async fn create_of_an_existing_name_is_already_exists_and_invalid_is_422() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    let again = api.create(&PostParams::default(), &pod("web", None)).await;
    assert_eq!(api_error(again), (409, "AlreadyExists".into()));
    let mut nameless = pod("x", None);
    nameless.metadata.name = None;
    assert_eq!(
        api_error(api.create(&PostParams::default(), &nameless).await),
        (422, "Invalid".into())
    );
}

#[tokio::test]
async fn list_filters_by_field_and_label_selectors() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    for (name, node) in
        [("a", Some("node-a")), ("b", Some("node-a")), ("c", Some("node-b")), ("d", None)]
    {
        api.create(&PostParams::default(), &pod(name, node)).await.unwrap();
    }
    let names = |list: kube::core::ObjectList<Pod>| {
        list.items.into_iter().filter_map(|p| p.metadata.name).collect::<Vec<_>>()
    };
    let on_a = api.list(&ListParams::default().fields("spec.nodeName=node-a")).await.unwrap();
    assert_eq!(names(on_a), ["a", "b"]);
    let not_a = api.list(&ListParams::default().fields("spec.nodeName!=node-a")).await.unwrap();
    assert_eq!(names(not_a), ["c", "d"]);
    let unbound = api.list(&ListParams::default().fields("spec.nodeName=")).await.unwrap();
    assert_eq!(names(unbound), ["d"]);
    let by_name =
        api.list(&ListParams::default().fields("metadata.name=c,metadata.namespace=default")).await;
    assert_eq!(names(by_name.unwrap()), ["c"]);
    let labelled = api.list(&ListParams::default().labels("app in (a,d),app!=d")).await.unwrap();
    assert_eq!(names(labelled), ["a"]);
    let unknown = api.list(&ListParams::default().fields("spec.bogus=1")).await;
    assert_eq!(api_error(unknown), (400, "BadRequest".into()));
    let all: Api<Pod> = Api::all(client(&server).await);
    assert_eq!(all.list(&ListParams::default()).await.unwrap().items.len(), 4);
}

#[tokio::test]
async fn list_pages_with_limit_and_continue_at_one_resource_version() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        api.create(&PostParams::default(), &pod(name, None)).await.unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let rv = first.metadata.resource_version.clone();
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    // A write between pages is not seen by the later pages.
    api.delete("p5", &DeleteParams::default()).await.unwrap();
    let mut token = first.metadata.continue_.clone();
    let mut names: Vec<String> = first.items.into_iter().filter_map(|p| p.metadata.name).collect();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api.list(&ListParams::default().limit(2).continue_token(&t)).await.unwrap();
        assert_eq!(page.metadata.resource_version, rv);
        names.extend(page.items.into_iter().filter_map(|p| p.metadata.name));
        token = page.metadata.continue_;
    }
    assert_eq!(names, ["p1", "p2", "p3", "p4", "p5"]);
}

#[tokio::test]
async fn update_with_a_stale_resource_version_conflicts() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let created = api.create(&PostParams::default(), &pod("web", Some("n"))).await.unwrap();
    let mut first = created.clone();
    first.metadata.labels = Some([("v".to_string(), "1".to_string())].into());
    api.replace("web", &PostParams::default(), &first).await.unwrap();
    let mut stale = created.clone();
    stale.metadata.labels = Some([("v".to_string(), "2".to_string())].into());
    let conflict = api.replace("web", &PostParams::default(), &stale).await;
    assert_eq!(api_error(conflict), (409, "Conflict".into()));
    // Without a resourceVersion the update is unconditional.
    stale.metadata.resource_version = None;
    let replaced = api.replace("web", &PostParams::default(), &stale).await.unwrap();
    assert_eq!(replaced.metadata.labels.as_ref().unwrap()["v"], "2");
    // A main-resource write keeps the status; spec changes beyond images are invalid.
    let mut with_status = replaced.clone();
    with_status.status.as_mut().unwrap().phase = Some("Running".into());
    let kept = api.replace("web", &PostParams::default(), &with_status).await.unwrap();
    assert_eq!(kept.status.unwrap().phase.as_deref(), Some("Pending"));
    let moved = Patch::Merge(json!({ "spec": { "nodeName": "elsewhere" } }));
    let moved = api.patch("web", &PatchParams::default(), &moved).await;
    assert_eq!(api_error(moved), (422, "Invalid".into()));
}

#[tokio::test]
async fn patch_status_merges_conditions_by_type() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("web", Some("n"))).await.unwrap();
    let merge = Patch::Merge(json!({ "status": {
        "phase": "Running",
        "conditions": [{ "type": "Ready", "status": "False" }, { "type": "Initialized", "status": "True" }],
    }}));
    api.patch_status("web", &PatchParams::default(), &merge).await.unwrap();
    let strategic = Patch::Strategic(json!({ "status": {
        "conditions": [{ "type": "Ready", "status": "True" }],
        "containerStatuses": [{ "name": "main", "ready": true, "restartCount": 0, "image": "busybox", "imageID": "" }],
    }}));
    let patched = api.patch_status("web", &PatchParams::default(), &strategic).await.unwrap();
    let status = patched.status.unwrap();
    let conditions: Vec<(String, String)> =
        status.conditions.unwrap().into_iter().map(|c| (c.type_, c.status)).collect();
    assert_eq!(
        conditions,
        [("Ready".into(), "True".into()), ("Initialized".into(), "True".into())]
    );
    assert_eq!(status.phase.as_deref(), Some("Running"));
    // A merge patch replaces the list whole; a status write leaves the spec alone.
    let replace = Patch::Merge(json!({
        "spec": { "nodeName": "other" },
        "status": { "conditions": [{ "type": "Ready", "status": "False" }] },
    }));
    let patched = api.patch_status("web", &PatchParams::default(), &replace).await.unwrap();
    assert_eq!(patched.status.unwrap().conditions.unwrap().len(), 1);
    assert_eq!(patched.spec.unwrap().node_name.as_deref(), Some("n"));
    // A patch that carries a stale resourceVersion conflicts.
    let stale = Patch::Merge(
        json!({ "metadata": { "resourceVersion": "1" }, "status": { "phase": "Failed" } }),
    );
    assert_eq!(api_error(api.patch_status("web", &PatchParams::default(), &stale).await).0, 409);
}

#[tokio::test]
async fn json_patch_applies_and_apply_patch_is_unsupported() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    let ops = json!([{ "op": "add", "path": "/metadata/labels/tier", "value": "front" }]);
    let request = hyper::Request::patch("/api/v1/namespaces/default/pods/web")
        .header("Content-Type", "application/json-patch+json")
        .body(serde_json::to_vec(&ops).unwrap())
        .unwrap();
    let patched: Pod =
        serde_json::from_str(&client(&server).await.request_text(request).await.unwrap()).unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["tier"], "front");
    let failing = json!([{ "op": "test", "path": "/metadata/name", "value": "other" }]);
    let request = hyper::Request::patch("/api/v1/namespaces/default/pods/web")
        .header("Content-Type", "application/json-patch+json")
        .body(serde_json::to_vec(&failing).unwrap())
        .unwrap();
    assert_eq!(api_error(client(&server).await.request_text(request).await).0, 422);
    let apply =
        Patch::Apply(json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "web" } }));
    let applied = api.patch("web", &PatchParams::apply("test"), &apply).await;
    assert_eq!(api_error(applied), (415, "UnsupportedMediaType".into()));
}

#[tokio::test]
async fn bound_pods_delete_gracefully_and_preconditions_are_checked() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let bound = api.create(&PostParams::default(), &pod("bound", Some("n"))).await.unwrap();
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    assert_eq!(api_error(api.delete("bound", &wrong_uid).await), (409, "Conflict".into()));
    let right_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: bound.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let marked =
        api.delete("bound", &right_uid).await.unwrap().left().expect("the pod, not a Status");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(30));
    assert!(api.get("bound").await.is_ok(), "a bound pod waits for its node");
    let gone = api
        .delete("bound", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() })
        .await;
    assert!(gone.unwrap().is_left());
    assert_eq!(api_error(api.get("bound").await).0, 404);
    // An unbound pod goes at once.
    api.create(&PostParams::default(), &pod("unbound", None)).await.unwrap();
    api.delete("unbound", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(api.get("unbound").await).0, 404);
}

#[tokio::test]
async fn nodes_leases_and_events() {
    let server = TestApiServer::start().await.unwrap();
    let client = client(&server).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": "edge-1" },
        "status": { "conditions": [{ "type": "Ready", "status": "True" }], "addresses": [{ "type": "Hostname", "address": "edge-1" }] },
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let patch = Patch::Strategic(
        json!({ "status": { "addresses": [{ "type": "InternalIP", "address": "10.0.0.2" }] } }),
    );
    let patched = nodes.patch_status("edge-1", &PatchParams::default(), &patch).await.unwrap();
    assert_eq!(patched.status.unwrap().addresses.unwrap().len(), 2);
    let deleted = nodes.delete("edge-1", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right(), "nodes answer a delete with a Status");

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": { "name": "edge-1" },
        "spec": { "holderIdentity": "edge-1", "leaseDurationSeconds": 40 },
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut renewed = created.clone();
    renewed.spec.as_mut().unwrap().lease_duration_seconds = Some(41);
    leases.replace("edge-1", &PostParams::default(), &renewed).await.unwrap();
    assert_eq!(api_error(leases.replace("edge-1", &PostParams::default(), &renewed).await).0, 409);
    assert_eq!(leases.get("edge-1").await.unwrap().spec.unwrap().lease_duration_seconds, Some(41));

    let events: Api<Event> = Api::namespaced(client, "default");
    let event: Event = serde_json::from_value(json!({
        "metadata": { "name": "web.1" },
        "involvedObject": { "kind": "Pod", "name": "web", "namespace": "default" },
        "reason": "Started",
        "type": "Normal",
    }))
    .unwrap();
    events.create(&PostParams::default(), &event).await.unwrap();
    let found =
        events.list(&ListParams::default().fields("involvedObject.name=web,reason=Started")).await;
    assert_eq!(found.unwrap().items.len(), 1);
}
