use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;

use super::*;

/// A client of a server that is not there (nothing here needs an answer).
fn client(server: &str) -> ApiClient {
    let config = kube::Config::new(server.parse().unwrap());
    let kube = kube::Client::try_from(config).unwrap();
    ApiClient::new(kube, server.to_owned(), crate::apiserver::Connectivity::default())
}

const SERVER: &str = "http://127.0.0.1:9";

fn pod(uid: &str, config_maps: &[&str]) -> Pod {
    let volumes: Vec<serde_json::Value> = config_maps
        .iter()
        .map(|name| serde_json::json!({"name": name, "configMap": {"name": name}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("web-{uid}"), "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "volumes": volumes},
    }))
    .unwrap()
}

fn config_map(name: &str, data: &str) -> Object {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_owned());
    c.data = Some(BTreeMap::from([("k".to_owned(), data.to_owned())]));
    Object::ConfigMap(Arc::new(c))
}

fn cm_key(name: &str) -> Key {
    Key { kind: Kind::ConfigMap, namespace: "default".into(), name: name.into() }
}

fn watched(objects: &Objects) -> Vec<(String, usize, bool)> {
    let state = lock(&objects.0.as_ref().unwrap().state);
    state
        .objects
        .iter()
        .map(|(k, e)| (k.name.clone(), e.claimants.len(), e.watch.is_some()))
        .collect()
}

#[tokio::test]
async fn v1_objects_are_watched_while_a_pod_refers_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, _changes) = Objects::start(client(SERVER), Checkpoints::new(dir.path())).await;
    objects.claim(&pod("u1", &["a", "b"]));
    objects.claim(&pod("u2", &["b"]));
    assert_eq!(watched(&objects), [("a".into(), 1, true), ("b".into(), 2, true)]);
    // u1 now refers to c instead of a.
    objects.claim(&pod("u1", &["b", "c"]));
    assert_eq!(watched(&objects), [("b".into(), 2, true), ("c".into(), 1, true)]);
    objects.release("u1");
    assert_eq!(watched(&objects), [("b".into(), 1, true)]);
    objects.release("u2");
    assert_eq!(watched(&objects), []);
    objects.release("u2");
}

#[tokio::test]
async fn v3_the_checkpoint_keeps_objects_and_tokens_of_the_same_server_only() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = Checkpoints::new(dir.path());
    let mut state = State::default();
    for (name, known) in [
        ("present", Known::Present(config_map("present", "v1"))),
        ("absent", Known::Absent),
        ("unknown", Known::Unknown),
    ] {
        let entry = Entry { known, claimants: BTreeSet::new(), watch: None };
        state.objects.insert(cm_key(name), entry);
    }
    let mut secret = Secret::default();
    secret.metadata.name = Some("s".into());
    let secret_key = Key { kind: Kind::Secret, namespace: "default".into(), name: "s".into() };
    let entry = Entry {
        known: Known::Present(Object::Secret(Arc::new(secret))),
        claimants: BTreeSet::new(),
        watch: None,
    };
    state.objects.insert(secret_key.clone(), entry);
    let token_key = TokenKey {
        uid: "u1".into(),
        service_account: "default".into(),
        audience: String::new(),
        expiration_seconds: 3607,
    };
    let now = Timestamp::now();
    let token = Token { token: "jwt".into(), issued: now, expires: now };
    state.tokens.insert(token_key.clone(), token.clone());
    checkpoints.write_private(saved::CHECKPOINT, &saved::snapshot(SERVER, &state)).unwrap();

    let restored = saved::restore(&checkpoints, SERVER).await;
    let known: Vec<(String, Known)> =
        restored.objects.iter().map(|(k, e)| (k.name.clone(), e.known.clone())).collect();
    assert_eq!(
        known,
        [
            ("absent".into(), Known::Absent),
            ("present".into(), Known::Present(config_map("present", "v1"))),
            ("s".into(), restored.objects[&secret_key].known.clone()),
        ],
        "what was unknown is not kept"
    );
    assert!(matches!(restored.objects[&secret_key].known, Known::Present(Object::Secret(_))));
    assert_eq!(restored.tokens.get(&token_key), Some(&token));
    assert!(restored.objects.values().all(|e| e.claimants.is_empty() && e.watch.is_none()));

    let other = saved::restore(&checkpoints, "https://elsewhere:6443").await;
    assert!(other.objects.is_empty() && other.tokens.is_empty(), "another server's: not used");
}

#[tokio::test]
async fn v3_restored_objects_answer_offline_and_unclaimed_ones_go_at_garbage_collection() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = Checkpoints::new(dir.path());
    let mut state = State::default();
    for name in ["kept", "stale"] {
        let known = Known::Present(config_map(name, "v1"));
        state
            .objects
            .insert(cm_key(name), Entry { known, claimants: BTreeSet::new(), watch: None });
    }
    checkpoints.write_private(saved::CHECKPOINT, &saved::snapshot(SERVER, &state)).unwrap();
    let (objects, _changes) = Objects::start(client(SERVER), checkpoints).await;
    let p = pod("u1", &["kept", "missing"]);
    let references = projection::volume_references(&p);
    let resolved = objects.resolve(&p, &references).await;
    assert_eq!(
        resolved.0.get(&Reference::ConfigMap("kept".into())),
        Some(&Resolution::Found(config_map("kept", "v1"))),
        "offline, from the checkpoint"
    );
    let missing = resolved.0.get(&Reference::ConfigMap("missing".into()));
    assert!(
        matches!(missing, Some(Resolution::Unavailable(why)) if why.contains("unreachable")),
        "{missing:?}"
    );
    objects.collect_garbage();
    let names: Vec<String> = watched(&objects).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["kept", "missing"]);
}

#[tokio::test]
async fn without_an_api_server_nothing_resolves() {
    let objects = Objects::default();
    let p = pod("u1", &["a"]);
    let resolved = objects.resolve(&p, &projection::volume_references(&p)).await;
    assert!(matches!(
        resolved.0.get(&Reference::ConfigMap("a".into())),
        Some(Resolution::Unavailable(why)) if why.contains("--kubeconfig")
    ));
}
