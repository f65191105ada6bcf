//! Watches: kube-rs's raw watch and its `watcher()` state machine.

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use serde_json::json;

use super::{api_error, drive, pod, pods, soon};
use crate::apiserver::TestApiServer;

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

#[tokio::test]
async fn watcher_sees_added_modified_and_deleted() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("a", Some("n"))).await.unwrap();
    let mut events = drive(watcher::watcher(api.clone(), watcher::Config::default()));
    let mut next = async || soon(events.recv()).await.unwrap();
    assert_eq!([next().await, next().await, next().await], ["init", "init-apply a", "init-done"]);
    soon(server.wait_for_watchers("pods", 1)).await;
    api.create(&PostParams::default(), &pod("b", None)).await.unwrap();
    assert_eq!(next().await, "apply b");
    let label = Patch::Merge(json!({ "metadata": { "labels": { "x": "y" } } }));
    api.patch("b", &PatchParams::default(), &label).await.unwrap();
    assert_eq!(next().await, "apply b");
    api.delete("b", &Default::default()).await.unwrap();
    assert_eq!(next().await, "delete b");
    assert_eq!(server.count("list", "pods"), 1);
    assert_eq!(server.count("watch", "pods"), 1);
}

#[tokio::test]
async fn streaming_list_ends_its_initial_events_with_a_bookmark() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("a", None)).await.unwrap();
    let config = watcher::Config::default().streaming_lists();
    let mut events = drive(watcher::watcher(api.clone(), config));
    let mut next = async || soon(events.recv()).await.unwrap();
    assert_eq!([next().await, next().await, next().await], ["init", "init-apply a", "init-done"]);
    assert_eq!(server.count("list", "pods"), 0);
    api.create(&PostParams::default(), &pod("b", None)).await.unwrap();
    assert_eq!(next().await, "apply b");
}

#[tokio::test]
async fn a_watch_with_a_selector_sees_objects_leave_and_enter_it() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let rv = server.resource_version().to_string();
    let mut events =
        api.watch(&WatchParams::default().labels("app=web"), &rv).await.unwrap().boxed();
    let mut next = async || soon(events.try_next()).await.unwrap().unwrap();
    api.create(&PostParams::default(), &pod("other", None)).await.unwrap();
    api.create(&PostParams::default(), &pod("web", None)).await.unwrap();
    assert!(matches!(next().await, WatchEvent::Added(p) if name(&p) == "web"));
    let relabel = |app: &str| Patch::Merge(json!({ "metadata": { "labels": { "app": app } } }));
    let moved = api.patch("web", &PatchParams::default(), &relabel("elsewhere")).await.unwrap();
    match next().await {
        WatchEvent::Deleted(p) => {
            assert_eq!(p.metadata.labels.unwrap()["app"], "web", "the last state that matched");
            assert_eq!(p.metadata.resource_version, moved.metadata.resource_version);
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    api.patch("web", &PatchParams::default(), &relabel("web")).await.unwrap();
    assert!(matches!(next().await, WatchEvent::Added(p) if name(&p) == "web"));
}

#[tokio::test]
async fn bookmarks_carry_the_current_resource_version() {
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    let api = pods(&server).await;
    let rv = server.resource_version().to_string();
    let mut events = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    api.create(&PostParams::default(), &pod("a", None)).await.unwrap();
    assert!(matches!(soon(events.try_next()).await.unwrap(), Some(WatchEvent::Added(_))));
    match soon(events.try_next()).await.unwrap() {
        Some(WatchEvent::Bookmark(b)) => {
            assert_eq!(b.metadata.resource_version, server.resource_version().to_string())
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn timeout_seconds_ends_the_watch() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    let rv = server.resource_version().to_string();
    let events =
        api.watch(&WatchParams::default().timeout(1).disable_bookmarks(), &rv).await.unwrap();
    let all: Vec<_> = soon(events.collect::<Vec<_>>()).await;
    assert!(all.is_empty(), "{all:?}");
    assert_eq!(server.watchers("pods"), 0);
}

#[tokio::test]
async fn an_expired_resource_version_gets_410() {
    let server = TestApiServer::start().await.unwrap();
    let api = pods(&server).await;
    api.create(&PostParams::default(), &pod("a", None)).await.unwrap();
    let old = server.resource_version().to_string();
    api.create(&PostParams::default(), &pod("b", None)).await.unwrap();
    // Within the history, an exact read sees the past.
    let exact = ListParams::default().at(&old).matching(VersionMatch::Exact);
    let past = api.list(&exact).await.unwrap();
    assert_eq!(past.items.iter().map(name).collect::<Vec<_>>(), ["a"]);
    assert_eq!(past.metadata.resource_version.as_deref(), Some(old.as_str()));

    server.compact();
    assert_eq!(api_error(api.list(&exact).await), (410, "Expired".into()));
    let mut events = api.watch(&WatchParams::default(), &old).await.unwrap().boxed();
    match soon(events.try_next()).await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(soon(events.try_next()).await.unwrap().is_none(), "the watch ends after the error");
    // The current resourceVersion is still good.
    let now = server.resource_version().to_string();
    let _events = api.watch(&WatchParams::default().timeout(1), &now).await.unwrap();
}

#[tokio::test]
async fn a_watch_that_falls_out_of_the_history_gets_410() {
    let server = TestApiServer::builder().history_limit(2).start().await.unwrap();
    let api = pods(&server).await;
    let rv = server.resource_version().to_string();
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &pod(name, None)).await.unwrap();
    }
    let mut events = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    match soon(events.try_next()).await.unwrap() {
        Some(WatchEvent::Error(status)) => assert_eq!(status.code, 410),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}
