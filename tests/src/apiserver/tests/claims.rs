//! K3: PersistentVolumeClaims (namespaced) and PersistentVolumes (cluster-scoped), each
//! with a status subresource, through kube-rs as the agent reads them.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use super::client;
use crate::apiserver::TestApiServer;

#[tokio::test]
async fn k3_claims_and_volumes_start_pending_and_their_status_is_a_subresource() {
    let server = TestApiServer::start().await.unwrap();
    let kube = client(&server).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), "default");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "www-web-0"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    }))
    .unwrap();
    let created = claims.create(&PostParams::default(), &claim).await.unwrap();
    assert_eq!(created.status.and_then(|s| s.phase).as_deref(), Some("Pending"));

    let volumes: Api<PersistentVolume> = Api::all(kube);
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "pvc-1", "namespace": "ignored"},
        "spec": {"hostPath": {"path": "/tmp/x"}, "capacity": {"storage": "1Gi"}},
    }))
    .unwrap();
    let created = volumes.create(&PostParams::default(), &volume).await.unwrap();
    assert_eq!(created.metadata.namespace, None, "cluster-scoped");
    let status = created.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(status.last_phase_transition_time.is_some());

    // The binder's writes: the claim's spec, then its status.
    let mut bound = server.get("persistentvolumeclaims", Some("default"), "www-web-0").unwrap();
    bound["spec"]["volumeName"] = json!("pvc-1");
    bound["status"] = json!({"phase": "Bound"});
    let updated = server.update(bound.clone()).unwrap();
    assert_eq!(updated["spec"]["volumeName"], "pvc-1");
    assert_eq!(updated["status"]["phase"], "Pending", "a main-resource write keeps the status");
    bound["metadata"]["resourceVersion"] = updated["metadata"]["resourceVersion"].clone();
    let updated = server.update_status(bound).unwrap();
    assert_eq!(updated["status"]["phase"], "Bound");

    let by_name = ListParams::default().fields("metadata.name=pvc-1");
    assert_eq!(volumes.list(&by_name).await.unwrap().items.len(), 1);
}
