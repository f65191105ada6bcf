use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::WatchEvent;

use super::*;
use crate::apiserver::watcher::fake::{Call, FakeListWatch, error_event};

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

fn cm(name: &str, data: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_owned());
    c.data = Some(BTreeMap::from([("k".to_owned(), data.to_owned())]));
    c
}

fn config_map(name: &str, data: &str) -> Object {
    Object::ConfigMap(Arc::new(cm(name, data)))
}

fn cm_key(name: &str) -> Key {
    Key { kind: Kind::ConfigMap, namespace: "default".into(), name: name.into() }
}

fn watched(objects: &Objects) -> Vec<(String, usize, bool)> {
    let state = lock(&objects.0.as_ref().unwrap().state);
    state
        .objects
        .keys()
        .map(|k| (k.name.clone(), state.claims.claimants(k).count(), state.watches.is_watching(k)))
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
        state.objects.insert(cm_key(name), known);
    }
    let mut secret = Secret::default();
    secret.metadata.name = Some("s".into());
    let secret_key = Key { kind: Kind::Secret, namespace: "default".into(), name: "s".into() };
    let known = Known::Present(Object::Secret(Arc::new(secret)));
    state.objects.insert(secret_key.clone(), known);
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
        restored.objects.iter().map(|(k, known)| (k.name.clone(), known.clone())).collect();
    assert_eq!(
        known,
        [
            ("absent".into(), Known::Absent),
            ("present".into(), Known::Present(config_map("present", "v1"))),
            ("s".into(), restored.objects[&secret_key].clone()),
        ],
        "what was unknown is not kept"
    );
    assert!(matches!(restored.objects[&secret_key], Known::Present(Object::Secret(_))));
    assert_eq!(restored.tokens.get(&token_key), Some(&token));
    assert!(restored.claims.claimed().next().is_none() && restored.watches.len() == 0);

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
        state.objects.insert(cm_key(name), known);
    }
    checkpoints.write_private(saved::CHECKPOINT, &saved::snapshot(SERVER, &state)).unwrap();
    let (objects, _changes) = Objects::start(client(SERVER), checkpoints).await;
    let p = pod("u1", &["kept", "missing"]);
    objects.claim(&p);
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

/// `key` claimed by the pod `u1` (`web-u1`) as [`Objects::claim`] does, without its watch.
fn claimed(objects: &Objects, key: &Key) -> Arc<Inner> {
    let inner = objects.0.clone().unwrap();
    let mut state = lock(&inner.state);
    state.objects.insert(key.clone(), Known::Unknown);
    state.claims.claim("u1", BTreeSet::from([key.clone()]));
    let name = FullName { namespace: "default".into(), name: "web-u1".into() };
    state.pods.insert("u1".into(), Claimant { name, base: BTreeSet::from([key.clone()]) });
    drop(state);
    inner
}

/// The name of the next pod told of a change.
async fn told(changes: &mut Changes) -> Option<String> {
    changes.recv().await.map(|name| name.name)
}

fn known(inner: &Inner, key: &Key) -> Option<Known> {
    lock(&inner.state).objects.get(key).cloned()
}

#[tokio::test(start_paused = true)]
async fn v1_an_objects_watch_tells_its_claimants_whether_it_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, mut changes) = Objects::start(client(SERVER), Checkpoints::new(dir.path())).await;
    let key = cm_key("a");
    let inner = claimed(&objects, &key);
    let fake = FakeListWatch::<ConfigMap>::default();
    fake.answer_list(vec![], "10");
    let watch = fake.open_watch();
    fake.answer_list(vec![cm("other", "x"), cm("a", "v3")], "20");
    let _second = fake.open_watch();
    let task = tokio::spawn(watch::follow_with(inner.clone(), key.clone(), fake.clone()));

    assert_eq!(told(&mut changes).await.as_deref(), Some("web-u1"));
    assert_eq!(known(&inner, &key), Some(Known::Absent), "a list without it: absent");
    for (event, want) in [
        (WatchEvent::Added(cm("a", "v1")), Known::Present(config_map("a", "v1"))),
        (WatchEvent::Modified(cm("a", "v2")), Known::Present(config_map("a", "v2"))),
        (WatchEvent::Deleted(cm("a", "v2")), Known::Absent),
    ] {
        watch.unbounded_send(Ok(event)).unwrap();
        assert_eq!(told(&mut changes).await.as_deref(), Some("web-u1"));
        assert_eq!(known(&inner, &key), Some(want));
    }
    // 410: a new list, which finds it.
    watch.unbounded_send(error_event(410)).unwrap();
    assert_eq!(told(&mut changes).await.as_deref(), Some("web-u1"));
    assert_eq!(known(&inner, &key), Some(Known::Present(config_map("a", "v3"))));
    task.abort();

    let fields = Some("metadata.name=a".to_owned());
    let list = Call::List { fields: fields.clone(), limit: None, continue_token: None };
    let watch_from = |version: &str| Call::Watch {
        fields: fields.clone(),
        timeout: Some(crate::apiserver::watcher::MIN_WATCH_TIMEOUT_SECS),
        version: version.to_owned(),
    };
    assert_eq!(fake.calls(), [list.clone(), watch_from("10"), list, watch_from("20")]);
}

fn claim_pod(uid: &str, claim: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("web-{uid}"), "namespace": "default", "uid": uid},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "volumes": [{"name": "www", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }))
    .unwrap()
}

fn bound_claim(name: &str, volume: &str) -> Object {
    let claim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": "c1"},
        "spec": {"volumeName": volume},
        "status": {"phase": "Bound"},
    }))
    .unwrap();
    Object::PersistentVolumeClaim(Arc::new(claim))
}

fn keys(objects: &Objects) -> Vec<(Key, usize, bool)> {
    let state = lock(&objects.0.as_ref().unwrap().state);
    let claimants = |k| state.claims.claimants(k).count();
    state.objects.keys().map(|k| (k.clone(), claimants(k), state.watches.is_watching(k))).collect()
}

/// K3, K5: claims and volumes are never watched (a node may only `get` them); what a
/// `get` answers is kept, the bound claim's volume joins the pod's claim, and both are
/// checkpointed; with the server unreachable, what was kept is used (V3).
#[tokio::test]
async fn k5_claims_and_volumes_are_got_not_watched_and_kept_for_offline_use() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, mut changes) = Objects::start(client(SERVER), Checkpoints::new(dir.path())).await;
    objects.claim(&claim_pod("u1", "www"));
    let claim_key =
        Key { kind: Kind::PersistentVolumeClaim, namespace: "default".into(), name: "www".into() };
    let volume_key =
        Key { kind: Kind::PersistentVolume, namespace: String::new(), name: "pvc-1".into() };
    assert_eq!(keys(&objects), vec![(claim_key.clone(), 1, false)]);
    assert_eq!(volume_key.to_string(), "persistentvolume pvc-1");

    // Nothing is known and the server cannot be reached: the pod waits, told why.
    let inner = objects.0.clone().unwrap();
    let Resolution::Unavailable(why) = inner.object(&claim_key).await else { panic!("known") };
    assert!(why.starts_with("cannot get persistentvolumeclaim default/www: "), "{why}");

    // A `get` finds it bound: its volume joins the pod's claim (not watched either); the
    // pod, which reads it itself, is not told.
    assert!(inner.keep(&claim_key, Known::Present(bound_claim("www", "pvc-1"))).is_some());
    assert_eq!(keys(&objects), vec![(claim_key.clone(), 1, false), (volume_key.clone(), 1, false)]);
    let volume =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "pvc-1"}})).unwrap();
    inner.keep(&volume_key, Known::Present(Object::PersistentVolume(Arc::new(volume))));
    assert!(changes.try_recv().is_err(), "a claimant is not told of what it got");

    // Kept in the checkpoint with the claim, restored as they were.
    inner.save().await;
    let restored = saved::restore(&Checkpoints::new(dir.path()), SERVER).await;
    assert!(matches!(
        restored.objects[&claim_key],
        Known::Present(Object::PersistentVolumeClaim(_))
    ));
    assert!(matches!(restored.objects[&volume_key], Known::Present(Object::PersistentVolume(_))));
    // The server is unreachable: what was kept is used.
    assert!(matches!(
        inner.object(&volume_key).await,
        Resolution::Found(Object::PersistentVolume(_))
    ));

    // The claim goes: so does its volume; the pod is gone: nothing is kept.
    inner.keep(&claim_key, Known::Absent);
    assert_eq!(keys(&objects), vec![(claim_key, 1, false)]);
    objects.release("u1");
    assert!(keys(&objects).is_empty());
}

fn class_pod(uid: &str, class: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("web-{uid}"), "namespace": "default", "uid": uid},
        "spec": {"runtimeClassName": class, "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap()
}

fn runtime_class(name: &str, handler: &str) -> Object {
    let mut class = k8s_openapi::api::node::v1::RuntimeClass::default();
    class.metadata.name = Some(name.to_owned());
    class.handler = handler.to_owned();
    Object::RuntimeClass(Arc::new(class))
}

/// D5: an API pod's RuntimeClass is watched by name (cluster-scoped) while the pod refers
/// to it, its first answer is waited for as a ConfigMap's, and what was read is kept in
/// the checkpoint and answers offline.
#[tokio::test]
async fn d5_a_pods_runtime_class_is_watched_kept_and_answers_offline() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = Checkpoints::new(dir.path());
    let (objects, _changes) = Objects::start(client(SERVER), checkpoints.clone()).await;
    let p = class_pod("u1", "gpu");
    objects.claim(&p);
    let key = Key { kind: Kind::RuntimeClass, namespace: String::new(), name: "gpu".into() };
    let inner = objects.0.clone().unwrap();
    assert!(lock(&inner.state).watches.is_watching(&key), "watched by name");
    assert!(!objects.answers(&p).objects, "not answered yet: the sandbox waits");
    assert_eq!(key.to_string(), "runtimeclass gpu");

    // Answered: kept, checkpointed, and what resolves (the server is not there: offline).
    inner.answer(&key, Known::Present(runtime_class("gpu", "nvidia"))).await;
    assert!(objects.answers(&p).objects);
    let reference = Reference::RuntimeClass("gpu".into());
    let resolved = objects.resolve(&p, &BTreeSet::from([reference.clone()])).await;
    assert_eq!(
        resolved.0.get(&reference),
        Some(&Resolution::Found(runtime_class("gpu", "nvidia")))
    );
    let restored = saved::restore(&checkpoints, SERVER).await;
    assert_eq!(restored.objects.get(&key), Some(&Known::Present(runtime_class("gpu", "nvidia"))));

    // After a restart without the server, the pod's class answers from the checkpoint.
    let (again, _changes) = Objects::start(client(SERVER), checkpoints).await;
    again.claim(&p);
    let resolved = again.resolve(&p, &BTreeSet::from([reference.clone()])).await;
    assert_eq!(
        resolved.0.get(&reference),
        Some(&Resolution::Found(runtime_class("gpu", "nvidia")))
    );
    objects.release("u1");
    assert!(!lock(&inner.state).watches.is_watching(&key), "no pod refers to it any more");
}

fn trust_bundle(
    name: &str,
    pem: &str,
) -> k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "managedFields": [{"manager": "kubectl"}]},
        "spec": {"trustBundle": pem},
    }))
    .unwrap()
}

/// The set as it is kept, of `(name, pem)`.
fn trust_bundles(bundles: &[(&str, &str)]) -> Known {
    let set = bundles
        .iter()
        .map(|(name, pem)| {
            let mut bundle = trust_bundle(name, pem);
            bundle.metadata.managed_fields = None;
            ((*name).to_owned(), bundle)
        })
        .collect();
    Known::Present(Object::ClusterTrustBundles(Arc::new(set)))
}

/// V1: every ClusterTrustBundle is listed (in pages, with no field selector) and
/// watched as one object; each change tells the claimants the whole set, and a watch
/// event that changes nothing tells nobody.
#[tokio::test(start_paused = true)]
async fn v1_the_cluster_trust_bundles_are_one_listed_and_watched_set() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, mut changes) = Objects::start(client(SERVER), Checkpoints::new(dir.path())).await;
    let key =
        Key { kind: Kind::ClusterTrustBundles, namespace: String::new(), name: String::new() };
    assert_eq!(key.to_string(), "clustertrustbundles");
    let inner = claimed(&objects, &key);
    let fake = FakeListWatch::default();
    fake.answer_list(vec![trust_bundle("a", "A")], "10");
    let watch = fake.open_watch();
    let task = tokio::spawn(watch::follow_all(inner.clone(), key.clone(), fake.clone()));

    assert_eq!(told(&mut changes).await.as_deref(), Some("web-u1"));
    assert_eq!(known(&inner, &key), Some(trust_bundles(&[("a", "A")])));
    for (event, want) in [
        (WatchEvent::Added(trust_bundle("b", "B")), trust_bundles(&[("a", "A"), ("b", "B")])),
        (WatchEvent::Modified(trust_bundle("a", "A2")), trust_bundles(&[("a", "A2"), ("b", "B")])),
        (WatchEvent::Deleted(trust_bundle("b", "B")), trust_bundles(&[("a", "A2")])),
    ] {
        watch.unbounded_send(Ok(event)).unwrap();
        assert_eq!(told(&mut changes).await.as_deref(), Some("web-u1"));
        assert_eq!(known(&inner, &key), Some(want));
    }
    // The same bundle again (a resync, a relist): nobody is told.
    watch.unbounded_send(Ok(WatchEvent::Modified(trust_bundle("a", "A2")))).unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(changes.try_recv().is_err());
    task.abort();
    let list = Call::List { fields: None, limit: Some(500), continue_token: None };
    assert_eq!(fake.calls()[0], list);
}
