//! The network switch, TLS, tokens and request counts.

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams, WatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;

use super::{api_error, client, drive, pod, pods, soon};
use crate::apiserver::TestApiServer;

#[tokio::test]
async fn cut_ends_watches_and_refuses_connects_until_restored() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let rv = server.resource_version().to_string();
    let mut events = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    soon(server.wait_for_watchers("pods", 1)).await;

    server.cut().await;
    assert!(!server.is_up());
    // The watch ends abruptly: an error, or the end of the stream, never a hang.
    let ended = soon(async {
        loop {
            match events.next().await {
                None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            }
        }
    });
    ended.await;
    assert_eq!(server.watchers("pods"), 0);
    let refused = tokio::net::TcpStream::connect(server.addr()).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(api.list(&ListParams::default()).await.is_err());

    server.restore().await.unwrap();
    assert!(server.is_up());
    api.create(&PostParams::default(), &pod("a", None)).await.unwrap();
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn a_server_down_at_start_serves_once_restored() {
    let server = TestApiServer::start_down().await.unwrap();
    let api = pods(&server).await;
    assert!(api.list(&ListParams::default()).await.is_err());
    server.restore().await.unwrap();
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn the_watcher_relists_after_a_cut_and_a_compaction() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("a", None)).await.unwrap();
    let mut events =
        drive(watcher::watcher(api.clone(), watcher::Config::default()).default_backoff());
    let mut next = async || soon(events.recv()).await.unwrap();
    assert_eq!([next().await, next().await, next().await], ["init", "init-apply a", "init-done"]);
    soon(server.wait_for_watchers("pods", 1)).await;

    // While the network is down, "a" goes and "b" comes, and the history is compacted,
    // so the watcher's resourceVersion is too old when it comes back: 410, relist.
    server.cut().await;
    server.delete_pod("default", "a").unwrap();
    server.create_pod(&pod("b", None)).unwrap();
    server.compact();
    server.restore().await.unwrap();

    let mut after = Vec::new();
    while after.last().map(String::as_str) != Some("init-done") {
        after.push(next().await);
    }
    let tail: Vec<&str> = after.iter().map(String::as_str).skip_while(|e| *e != "init").collect();
    assert_eq!(tail, ["init", "init-apply b", "init-done"], "all events: {after:?}");
    assert!(after.contains(&"error".to_string()), "the 410 reaches the watcher: {after:?}");
    assert_eq!(server.count("list", "pods"), 2);
}

#[tokio::test]
async fn tls_with_the_generated_ca() {
    let server = TestApiServer::start_tls().await.unwrap();
    assert!(server.url().starts_with("https://127.0.0.1:"));
    assert!(server.ca_pem().unwrap().contains("BEGIN CERTIFICATE"));
    let nodes: Api<Node> = Api::all(client(&server).await);
    let node: Node =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "edge-1" } })).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    assert_eq!(nodes.list(&ListParams::default()).await.unwrap().items.len(), 1);
    // A watch over TLS, cut abruptly, ends too.
    let rv = server.resource_version().to_string();
    let mut events = nodes.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    soon(server.wait_for_watchers("nodes", 1)).await;
    server.cut().await;
    soon(async { while let Some(Ok(_)) = events.next().await {} }).await;
}

#[tokio::test]
async fn a_token_is_required_when_configured() {
    let server = TestApiServer::start_with_token("s3cret").await.unwrap();
    let api = pods(&server).await;
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
    let config = kube::Config::new(server.url().parse().unwrap());
    let api: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    assert_eq!(api_error(api.list(&ListParams::default()).await), (401, "Unauthorized".into()));
}

#[tokio::test]
async fn requests_are_counted_by_verb_and_resource() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("a", Some("n"))).await.unwrap();
    api.get("a").await.unwrap();
    api.get_status("a").await.unwrap();
    api.list(&ListParams::default()).await.unwrap();
    let rv = server.resource_version().to_string();
    let events = api.watch(&WatchParams::default().timeout(1), &rv).await.unwrap();
    drop(events);
    assert_eq!(server.count("create", "pods"), 1);
    assert_eq!(server.count("get", "pods"), 1);
    assert_eq!(server.count("get", "pods/status"), 1);
    assert_eq!(server.count("list", "pods"), 1);
    assert_eq!(server.count("watch", "pods"), 1);
    assert_eq!(server.total_requests(), 5);
    server.reset_requests();
    assert_eq!(server.total_requests(), 0);
}
