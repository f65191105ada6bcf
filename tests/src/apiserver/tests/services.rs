//! K1: Services (cluster IPs, the registry's defaults, the server's own `kubernetes`
//! Service) and who a request is (`SelfSubjectReview`, service account tokens).

use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{client, pod, pods};
use crate::apiserver::TestApiServer;

#[tokio::test]
async fn k1_the_kubernetes_service_is_the_server_own_address() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<Service> = Api::namespaced(client(&server).await, "default");
    let service = api.get("kubernetes").await.unwrap();
    let spec = service.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.name.as_deref(), Some("https"));
    assert_eq!(port.port, i32::from(server.addr().port()));
}

#[tokio::test]
async fn k1_a_service_gets_a_cluster_ip_and_the_registry_defaults() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<Service> = Api::namespaced(client(&server).await, "apps");
    let new = |name: &str, spec: Value| -> Service {
        serde_json::from_value(json!({ "metadata": { "name": name }, "spec": spec })).unwrap()
    };
    let pp = PostParams::default();
    let web = api.create(&pp, &new("web", json!({ "ports": [{ "port": 80 }] }))).await.unwrap();
    let spec = web.spec.unwrap();
    let ip = spec.cluster_ip.unwrap();
    assert!(ip.starts_with("10.96."), "{ip}");
    assert_eq!(spec.cluster_ips.unwrap(), std::slice::from_ref(&ip));
    assert_eq!(spec.session_affinity.as_deref(), Some("None"));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80))
    );
    let db = api.create(&pp, &new("db", json!({ "ports": [{ "port": 5432 }] }))).await.unwrap();
    assert_ne!(db.spec.unwrap().cluster_ip.unwrap(), ip);
    let headless = new("h", json!({ "clusterIP": "None", "ports": [{ "port": 1 }] }));
    let headless = api.create(&pp, &headless).await.unwrap().spec.unwrap();
    assert_eq!(headless.cluster_ip.as_deref(), Some("None"));
    let external = new("x", json!({ "type": "ExternalName", "externalName": "example.org" }));
    let external = api.create(&pp, &external).await.unwrap().spec.unwrap();
    assert_eq!(external.cluster_ip, None);
    // A field selector on the cluster IP, as newer kubelets use.
    let params = kube::api::ListParams::default().fields("spec.clusterIP!=None");
    let names: Vec<String> = api
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    assert_eq!(names, ["db", "web", "x"]);
}

/// POSTs a SelfSubjectReview with `token`; the code and the body.
async fn whoami(server: &TestApiServer, token: Option<&str>) -> (u16, Value) {
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.token = token.map(|t| t.to_owned().into());
    let client = Client::try_from(config).unwrap();
    let request = hyper::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("content-type", "application/json")
        .body(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#.to_vec())
        .unwrap();
    match client.request::<Value>(request).await {
        Ok(body) => (201, body),
        Err(kube::Error::Api(status)) => (status.code, json!(status.message)),
        Err(other) => panic!("{other:?}"),
    }
}

/// A token of `default/default` bound to the pod `name` (of `uid`).
fn bound_token(server: &TestApiServer, name: &str, uid: &str) -> String {
    server
        .create_token(
            "default",
            "default",
            json!({
                "boundObjectRef": { "kind": "Pod", "apiVersion": "v1", "name": name, "uid": uid },
            }),
        )
        .unwrap()
}

#[tokio::test]
async fn k1_a_pod_bound_token_is_its_service_account_while_the_pod_exists() {
    let server = TestApiServer::start().await.unwrap();
    let created = pods(&server)
        .await
        .create(&PostParams::default(), &pod("web", Some("edge-1")))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    let token = bound_token(&server, "web", &uid);
    let (code, review) = whoami(&server, Some(&token)).await;
    assert_eq!(code, 201, "{review}");
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], "system:serviceaccount:default:default");
    assert_eq!(
        user["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"])
    );
    assert_eq!(user["extra"]["authentication.kubernetes.io/pod-name"], json!(["web"]));
    assert_eq!(user["extra"]["authentication.kubernetes.io/node-name"], json!(["edge-1"]));
    // Anonymous without a token (no static token configured).
    assert_eq!(whoami(&server, None).await.1["status"]["userInfo"]["username"], "system:anonymous");
    // The pod gone, its token is refused; a token this server did not sign too, once a
    // static token is required.
    server.delete("pods", Some("default"), "web", Some(0)).unwrap();
    assert_eq!(whoami(&server, Some(&token)).await.0, 401);
    let guarded = TestApiServer::builder().token("s3cret").start().await.unwrap();
    assert_eq!(whoami(&guarded, Some("other")).await.0, 401);
    assert_eq!(whoami(&guarded, Some("s3cret")).await.1["status"]["userInfo"]["username"], "admin");
}
