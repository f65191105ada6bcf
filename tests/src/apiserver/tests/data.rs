//! ConfigMaps and Secrets through kube-rs: one object watched alone, `stringData`,
//! `type`, immutability, keys; the controllers' objects in every namespace.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};
use serde_json::json;

use super::{api_error, client, soon};
use crate::apiserver::TestApiServer;

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let data = data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some(data),
        ..Default::default()
    }
}

/// The message of a kube-rs API error, with its code.
async fn message<T: std::fmt::Debug>(result: kube::Result<T>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn one_config_map_is_listed_and_watched_alone_by_its_name() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    api.create(&PostParams::default(), &config_map("app", &[("k", "1")])).await.unwrap();
    api.create(&PostParams::default(), &config_map("other", &[("k", "1")])).await.unwrap();
    let alone = ListParams::default().fields("metadata.name=app");
    let list = api.list(&alone).await.unwrap();
    let names: Vec<_> = list.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    assert_eq!(names, ["app"]);

    let rv = list.metadata.resource_version.unwrap();
    let params = WatchParams::default().fields("metadata.name=app");
    let mut events = api.watch(&params, &rv).await.unwrap().boxed();
    api.patch("other", &PatchParams::default(), &Patch::Merge(json!({ "data": { "k": "2" } })))
        .await
        .unwrap();
    api.patch("app", &PatchParams::default(), &Patch::Merge(json!({ "data": { "k": "3" } })))
        .await
        .unwrap();
    match soon(events.next()).await {
        Some(Ok(WatchEvent::Modified(cm))) => {
            assert_eq!(cm.metadata.name.as_deref(), Some("app"));
            assert_eq!(cm.data.unwrap()["k"], "3");
        }
        other => panic!("expected the change of app alone, got {other:?}"),
    }
}

#[tokio::test]
async fn an_immutable_config_map_refuses_data_changes_with_the_real_message() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let mut frozen = config_map("frozen", &[("k", "1")]);
    frozen.immutable = Some(true);
    api.create(&PostParams::default(), &frozen).await.unwrap();
    let change = Patch::Merge(json!({ "data": { "k": "2" } }));
    let (code, text) = message(api.patch("frozen", &PatchParams::default(), &change).await).await;
    assert_eq!(code, 422);
    assert_eq!(
        text,
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let thaw = Patch::Merge(json!({ "immutable": false }));
    assert_eq!(api_error(api.patch("frozen", &PatchParams::default(), &thaw).await).0, 422);
    let labels = Patch::Merge(json!({ "metadata": { "labels": { "a": "b" } } }));
    api.patch("frozen", &PatchParams::default(), &labels).await.unwrap();
    api.delete("frozen", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn config_keys_are_validated() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let (code, text) =
        message(api.create(&PostParams::default(), &config_map("bad", &[("a/b", "1")])).await)
            .await;
    assert_eq!(code, 422);
    assert!(
        text.starts_with(
            "ConfigMap \"bad\" is invalid: data[a/b]: Invalid value: \"a/b\": a valid config key"
        ),
        "{text}"
    );
    let dots = config_map("dots", &[("..x", "1")]);
    assert_eq!(api_error(api.create(&PostParams::default(), &dots).await).0, 422);
}

#[tokio::test]
async fn secret_string_data_is_merged_into_data_and_type_defaults_to_opaque() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<Secret> = Api::namespaced(client(&server).await, "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "creds" },
        "data": { "user": "YWRtaW4=", "pass": "b2xk" },
        "stringData": { "pass": "new" },
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &secret).await.unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert_eq!(created.string_data, None);
    let data = created.data.unwrap();
    assert_eq!(data["user"], ByteString(b"admin".to_vec()));
    assert_eq!(data["pass"], ByteString(b"new".to_vec()));

    let change = Patch::Merge(json!({ "stringData": { "user": "root" } }));
    let patched = api.patch("creds", &PatchParams::default(), &change).await.unwrap();
    assert_eq!(patched.data.unwrap()["user"], ByteString(b"root".to_vec()));
    let retype = Patch::Merge(json!({ "type": "kubernetes.io/tls" }));
    let (code, text) = message(api.patch("creds", &PatchParams::default(), &retype).await).await;
    assert_eq!(code, 422);
    assert_eq!(
        text,
        "Secret \"creds\" is invalid: type: Invalid value: \"kubernetes.io/tls\": field is immutable"
    );
    let bad = Patch::Merge(json!({ "data": { "x": "not base64!" } }));
    assert_eq!(api_error(api.patch("creds", &PatchParams::default(), &bad).await).0, 400);
}

#[tokio::test]
async fn secrets_are_selected_by_type_and_immutable_ones_keep_their_data() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<Secret> = Api::namespaced(client(&server).await, "default");
    for (name, ty) in [("a", None), ("b", Some("kubernetes.io/dockerconfigjson"))] {
        let secret = Secret {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            type_: ty.map(str::to_string),
            data: Some(BTreeMap::from([(
                ".dockerconfigjson".to_string(),
                ByteString(b"{}".to_vec()),
            )])),
            immutable: Some(true),
            ..Default::default()
        };
        api.create(&PostParams::default(), &secret).await.unwrap();
    }
    let pull = ListParams::default().fields("type=kubernetes.io/dockerconfigjson");
    let names: Vec<_> =
        api.list(&pull).await.unwrap().items.into_iter().filter_map(|s| s.metadata.name).collect();
    assert_eq!(names, ["b"]);
    let change = Patch::Merge(json!({ "stringData": { "k": "v" } }));
    let (code, text) = message(api.patch("a", &PatchParams::default(), &change).await).await;
    assert_eq!(code, 422);
    assert!(
        text.ends_with("data: Forbidden: field is immutable when `immutable` is set"),
        "{text}"
    );
}

async fn default_objects(client: &Client, namespace: &str) -> (ServiceAccount, ConfigMap) {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    (accounts.get("default").await.unwrap(), config_maps.get("kube-root-ca.crt").await.unwrap())
}

#[tokio::test]
async fn every_namespace_has_a_default_service_account_and_the_root_ca() {
    let server = TestApiServer::start_tls().await.unwrap();
    let client = client(&server).await;
    let ca = server.ca_pem().unwrap().to_string();
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let (_, root_ca) = default_objects(&client, namespace).await;
        assert_eq!(root_ca.data.unwrap()["ca.crt"], ca);
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "shop");
    assert_eq!(api_error(accounts.get("default").await).0, 404);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "shop");
    config_maps.create(&PostParams::default(), &config_map("app", &[])).await.unwrap();
    let (account, root_ca) = default_objects(&client, "shop").await;
    assert_eq!(root_ca.data.unwrap()["ca.crt"], ca);
    let app_rv: u64 =
        config_maps.get("app").await.unwrap().metadata.resource_version.unwrap().parse().unwrap();
    let account_rv: u64 = account.metadata.resource_version.clone().unwrap().parse().unwrap();
    assert!(account_rv < app_rv, "the controllers' objects are written first, each on its own");

    accounts.delete("default", &DeleteParams::default()).await.unwrap();
    let (again, _) = default_objects(&client, "shop").await;
    assert_ne!(again.metadata.uid, account.metadata.uid, "the controller makes a new one");
}

#[tokio::test]
async fn without_tls_the_root_ca_is_a_generated_ca() {
    let server = TestApiServer::start().await.unwrap();
    let (_, root_ca) = default_objects(&client(&server).await, "default").await;
    let pem = root_ca.data.unwrap()["ca.crt"].clone();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
}
