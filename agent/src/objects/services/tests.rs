//! K1: which Services a pod needs, what is answered of them (its worker waits on that),
//! and the checkpoint that makes Services of an earlier run count as read.

use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

use outpost_core::pod_worker::Answers;

use super::super::saved;
use super::*;
use crate::apiserver::ApiClient;
use crate::checkpoint::Checkpoints;
use crate::objects::Objects;

/// A client of a server that is not there: unreachable, nothing is ever answered.
fn client() -> ApiClient {
    let server = "http://127.0.0.1:9";
    let config = kube::Config::new(server.parse().unwrap());
    let kube = kube::Client::try_from(config).unwrap();
    ApiClient::new(kube, server.to_owned(), crate::apiserver::Connectivity::default())
}

fn pod(namespace: &str, links: Option<bool>, source: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "web", "namespace": namespace, "uid": format!("u-{namespace}"),
            "annotations": {"kubernetes.io/config.source": source},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "enableServiceLinks": links},
    }))
    .unwrap()
}

fn service(namespace: &str, name: &str, ip: &str) -> Arc<Service> {
    let mut service = Service {
        spec: Some(ServiceSpec {
            cluster_ip: Some(ip.to_owned()),
            ports: Some(vec![ServicePort { port: 443, ..ServicePort::default() }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    service.metadata.name = Some(name.to_owned());
    service.metadata.namespace = Some(namespace.to_owned());
    Arc::new(service)
}

fn namespace_scope(namespace: &str) -> Scope {
    Scope::Namespace(namespace.to_owned())
}

#[test]
fn k1_a_pod_needs_its_namespace_with_links_and_the_kubernetes_service() {
    let set = |scopes: &[Scope]| scopes.iter().cloned().collect::<BTreeSet<_>>();
    assert_eq!(scopes(&pod("apps", None, "api")), set(&[Scope::Master, namespace_scope("apps")]));
    assert_eq!(
        scopes(&pod("apps", Some(true), "api")),
        set(&[Scope::Master, namespace_scope("apps")])
    );
    assert_eq!(scopes(&pod("apps", Some(false), "api")), set(&[Scope::Master]));
    // The services of `default` hold its kubernetes Service.
    assert_eq!(scopes(&pod("default", None, "api")), set(&[namespace_scope("default")]));
    assert_eq!(scopes(&pod("default", Some(false), "api")), set(&[Scope::Master]));
}

#[tokio::test]
async fn k1_an_api_pods_services_are_unanswered_until_read_and_a_static_pods_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, _changes) = Objects::start(client(), Checkpoints::new(dir.path())).await;
    let api = pod("apps", None, "api");
    // Claimed when the merge hands it over (the dispatcher), as every API pod.
    objects.claim(&api);
    let answers = objects.answers(&api);
    assert!(answers.objects && !answers.services, "the server at :9 never answers");
    assert_eq!(objects.service_env(&api), Err(super::super::SERVICES_NOT_READ));
    // It is watched now, while the pod is there.
    let watched = |objects: &Objects| {
        let state = lock(&objects.0.as_ref().unwrap().state);
        state.services.scopes.keys().cloned().collect::<Vec<_>>()
    };
    assert_eq!(watched(&objects), [Scope::Master, namespace_scope("apps")]);
    let file = pod("apps", None, "file");
    objects.claim_services(&file);
    assert!(objects.answers(&file).complete(), "a static pod waits for nothing");
    assert_eq!(objects.service_env(&file), Ok(ServiceEnv::new()));
    objects.release("u-apps");
    assert_eq!(watched(&objects), []);
    // Without an API server there are no Service variables, for any pod.
    assert_eq!(Objects::default().service_env(&api), Ok(ServiceEnv::new()));
    assert_eq!(Objects::default().answers(&api), Answers::ALL);
}

#[tokio::test]
async fn k1_services_of_an_earlier_run_count_as_read() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = Checkpoints::new(dir.path());
    let mut state = State::default();
    state.services.restore(Scope::Master, vec![service("default", "kubernetes", "10.96.0.1")]);
    state.services.restore(namespace_scope("apps"), vec![service("apps", "db", "10.96.0.20")]);
    let mut unread = Watched::default();
    unread.services.insert("x".into(), service("other", "x", "10.96.0.30"));
    state.services.scopes.insert(namespace_scope("other"), unread);
    let snapshot = saved::snapshot("http://127.0.0.1:9", &state);
    checkpoints.write_private(saved::CHECKPOINT, &snapshot).unwrap();

    let (objects, _changes) = Objects::start(client(), checkpoints).await;
    {
        let state = lock(&objects.0.as_ref().unwrap().state);
        let kept: Vec<&Scope> = state.services.scopes.keys().collect();
        assert_eq!(kept, [&Scope::Master, &namespace_scope("apps")], "an unread scope is not kept");
    }
    let env = objects.service_env(&pod("apps", None, "api")).unwrap();
    assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
    assert_eq!(env["DB_SERVICE_HOST"], "10.96.0.20");
    let env = objects.service_env(&pod("apps", Some(false), "api")).unwrap();
    assert!(!env.contains_key("DB_SERVICE_HOST"));
    // Once every source has been seen, what nobody needs goes.
    objects.release("u-apps");
    objects.collect_garbage();
    assert!(lock(&objects.0.as_ref().unwrap().state).services.scopes.is_empty());
}
