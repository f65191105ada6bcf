//! Injected failures and the UID precondition of updates and patches.

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::{api_error, pod, pods};
use crate::apiserver::{Fault, TestApiServer};

/// The raw answer to a status patch: code, `Retry-After` header, body.
async fn raw_patch(server: &TestApiServer) -> (u16, Option<String>, serde_json::Value) {
    let response = reqwest::Client::new()
        .patch(format!("{}/api/v1/namespaces/default/pods/web/status", server.url()))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"status":{"phase":"Running"}}"#)
        .send()
        .await
        .unwrap();
    let code = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    let body = response.bytes().await.unwrap();
    (code, retry_after, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn the_next_n_matching_requests_fail_as_the_real_server_fails_them() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("web", Some("edge"))).await.unwrap();
    server.fail_next(1, "patch", "pods/status", Fault::internal_error());
    server.fail_next(1, "patch", "pods/status", Fault::too_many_requests().retry_after(7));
    server.fail_next(2, "patch", "pods/status", Fault::unavailable().retry_after(3));
    // Other requests are not affected.
    api.get("web").await.unwrap();
    assert_eq!(server.faults_remaining(), 4);

    let (code, after, body) = raw_patch(&server).await;
    assert_eq!((code, after), (500, None));
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["reason"], "InternalError");
    assert_eq!(body["code"], 500);
    assert!(body["message"].as_str().unwrap().starts_with("Internal error occurred"));

    let (code, after, body) = raw_patch(&server).await;
    assert_eq!((code, after.as_deref()), (429, Some("7")));
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["details"]["retryAfterSeconds"], 7);

    for _ in 0..2 {
        let (code, after, body) = raw_patch(&server).await;
        assert_eq!((code, after.as_deref()), (503, Some("3")));
        assert_eq!(body["reason"], "ServiceUnavailable");
    }
    assert_eq!(server.faults_remaining(), 0);
    let (code, _, body) = raw_patch(&server).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"]["phase"], "Running");
    // Failed requests are counted like the others.
    assert_eq!(server.count("patch", "pods/status"), 5);
    assert_eq!(server.count_object("patch", "pods/status", "default/web"), 5);
    assert_eq!(server.count_object("patch", "pods/status", "default/other"), 0);
    assert_eq!(server.count("get", "pods"), 1);
}

/// kube-rs's default client retries a 429 with its own backoff (the agent turns that
/// layer off): the injected answer is one it recognises as retriable.
#[tokio::test]
async fn kube_rs_retries_an_injected_429() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    server.fail_next(1, "create", "pods", Fault::too_many_requests());
    api.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    assert_eq!(server.count("create", "pods"), 2);
    server.fail_next(1, "get", "pods", Fault::internal_error());
    assert_eq!(api_error(api.get("web").await), (500, "InternalError".into()));
}

#[tokio::test]
async fn a_patch_carrying_another_uid_is_a_conflict_and_changes_nothing() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let created = api.create(&PostParams::default(), &pod("web", Some("edge"))).await.unwrap();
    let version = server.resource_version();
    let patch = json!({ "metadata": { "uid": "not-the-uid" }, "status": { "phase": "Failed" } });
    let result = api.patch_status("web", &PatchParams::default(), &Patch::Merge(&patch)).await;
    let Err(kube::Error::Api(status)) = result else { panic!("expected a conflict") };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains(
            "Precondition failed: UID in precondition: not-the-uid, UID in object meta: "
        ),
        "{}",
        status.message
    );
    assert!(status.message.contains("/registry/pods/default/web"), "{}", status.message);
    assert_eq!(server.resource_version(), version, "nothing written");
    // The right UID is a precondition that holds.
    let uid = created.metadata.uid.unwrap();
    let patch = json!({ "metadata": { "uid": uid }, "status": { "phase": "Running" } });
    let patched =
        api.patch_status("web", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(patched.status.and_then(|s| s.phase).as_deref(), Some("Running"));
}
