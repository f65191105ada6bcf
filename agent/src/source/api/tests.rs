//! The API source driven by the watcher over a scripted [`FakeListWatch`], on tokio's
//! paused clock: what reaches the merge, and what the checkpoint holds when it does.

use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::WatchEvent;
use outpost_core::merge::PodStore;
use outpost_core::pod::Source;

use super::*;
use crate::apiserver::watcher::fake::{FakeListWatch, bookmark, error_event, refused};
use crate::source::{Freshness, Op, SourceEvent};

const SERVER: &str = "http://127.0.0.1:9";
const NODE: &str = "edge-1";

/// A client of a server that is not there: the fake answers instead.
fn client() -> ApiClient {
    let config = kube::Config::new(SERVER.parse().unwrap());
    let kube = kube::Client::try_from(config).unwrap();
    ApiClient::new(kube, SERVER.to_owned(), Connectivity::default())
}

fn pod(name: &str, version: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.namespace = Some("default".to_owned());
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.metadata.resource_version = Some(version.to_owned());
    pod.metadata.labels = Some([("app".to_owned(), name.to_owned())].into());
    pod
}

fn mirror(name: &str, version: &str) -> Pod {
    let mut pod = pod(name, version);
    pod.metadata.annotations =
        Some([(outpost_core::pod::CONFIG_MIRROR.to_owned(), "hash".to_owned())].into());
    pod
}

/// The source, its checkpoint directory and its mirror view.
struct Harness {
    _dir: tempfile::TempDir,
    checkpoints: Checkpoints,
    mirrors: MirrorView,
    fake: FakeListWatch<Pod>,
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::new(dir.path());
        Harness {
            _dir: dir,
            checkpoints,
            mirrors: MirrorView::default(),
            fake: FakeListWatch::default(),
        }
    }

    fn start(&self) -> EventStream {
        let source = ApiSource::new(Config {
            client: client(),
            node_name: NODE.to_owned(),
            checkpoints: self.checkpoints.clone(),
            mirrors: self.mirrors.clone(),
        });
        source.stream_of(self.fake.clone())
    }

    fn save(&self, server: &str, node: &str, pods: &[Pod]) {
        let pods = pods.iter().cloned().map(Arc::new).collect();
        let saved = Checkpoint { server: server.to_owned(), node_name: node.to_owned(), pods };
        self.checkpoints.write(CHECKPOINT, &saved).unwrap();
    }

    /// The names of the pods in the checkpoint.
    fn checkpointed(&self) -> Vec<String> {
        let saved = self.checkpoints.read::<Checkpoint>(CHECKPOINT).unwrap();
        let pods = saved.map(|s| s.pods).unwrap_or_default();
        pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect()
    }

    fn mirror_names(&self) -> Vec<String> {
        let mirrors = self.mirrors.current().unwrap_or_default();
        mirrors.keys().map(|name| name.name.clone()).collect()
    }
}

/// An event as a short line: `Set Live [a, b]`, `Update [c]`, `Confirmed`, `Failed: …`.
fn label(event: &SourceEvent) -> String {
    match event {
        SourceEvent::Update(update, freshness) => {
            let names: Vec<&str> = update.pods.iter().map(|p| p.name.name.as_str()).collect();
            match update.op {
                Op::Set => format!("Set {freshness:?} [{}]", names.join(", ")),
                op => format!("{op:?} [{}]", names.join(", ")),
            }
        }
        SourceEvent::Confirmed => "Confirmed".to_owned(),
        SourceEvent::Failed(e) => format!("Failed: {e}"),
        SourceEvent::Problems(problems) => format!("Problems: {}", problems.len()),
    }
}

async fn next(events: &mut EventStream) -> SourceEvent {
    match tokio::time::timeout(Duration::from_secs(3600), events.next()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the source ended"),
        Err(_) => panic!("no event"),
    }
}

async fn labels(events: &mut EventStream, n: usize) -> Vec<String> {
    let mut taken = Vec::new();
    for _ in 0..n {
        taken.push(label(&next(events).await));
    }
    taken
}

/// Lists `pods` at version 10, and opens the watch after it.
fn listed(
    harness: &Harness,
    pods: Vec<Pod>,
) -> UnboundedSender<Result<WatchEvent<Pod>, kube::Error>> {
    harness.fake.answer_list(pods, "10");
    harness.fake.open_watch()
}

#[tokio::test(start_paused = true)]
async fn o2_a_checkpoint_of_this_server_and_node_is_replayed_then_replaced_by_the_list() {
    let harness = Harness::new();
    harness.save(SERVER, NODE, &[pod("a", "1"), pod("gone", "2")]);
    let _watch = listed(&harness, vec![pod("a", "1"), pod("b", "3")]);
    let mut events = harness.start();
    assert_eq!(labels(&mut events, 2).await, ["Set Checkpoint [a, gone]", "Set Live [a, b]"]);
    assert_eq!(harness.checkpointed(), ["a", "b"], "the first list replaced the checkpoint");
}

#[tokio::test(start_paused = true)]
async fn o2_without_a_checkpoint_the_first_set_is_the_lists() {
    let harness = Harness::new();
    let _watch = listed(&harness, vec![pod("a", "1")]);
    let mut events = harness.start();
    assert_eq!(labels(&mut events, 1).await, ["Set Live [a]"]);
    assert_eq!(harness.checkpointed(), ["a"]);
}

#[tokio::test(start_paused = true)]
async fn o2_a_checkpoint_of_another_server_or_node_is_not_replayed() {
    for (server, node) in [("https://elsewhere:6443", NODE), (SERVER, "edge-2")] {
        let harness = Harness::new();
        harness.save(server, node, &[pod("theirs", "1")]);
        let _watch = listed(&harness, vec![pod("a", "1")]);
        let mut events = harness.start();
        assert_eq!(labels(&mut events, 1).await, ["Set Live [a]"], "{server} {node}");
        assert_eq!(harness.checkpointed(), ["a"]);
    }
}

#[tokio::test(start_paused = true)]
async fn o2_an_unreadable_checkpoint_is_reported_and_replaced_by_the_list() {
    let harness = Harness::new();
    let path = harness.checkpoints.path(CHECKPOINT);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"outpost-checkpoint v1 len=3 xxh3=00\n{}").unwrap();
    let _watch = listed(&harness, vec![pod("a", "1")]);
    let mut events = harness.start();
    let seen = labels(&mut events, 2).await;
    assert!(seen[0].starts_with("Failed: ") && seen[0].contains("corrupt"), "{seen:?}");
    assert_eq!(seen[1], "Set Live [a]");
    assert_eq!(harness.checkpointed(), ["a"]);
}

#[tokio::test(start_paused = true)]
async fn o1_watch_events_are_checkpointed_in_batches_before_they_are_sent() {
    let harness = Harness::new();
    let watch = listed(&harness, vec![pod("a", "1")]);
    let mut events = harness.start();
    assert_eq!(labels(&mut events, 1).await, ["Set Live [a]"]);
    // Three events ready at once: one batch, one write before the first is sent.
    let mut deleting = pod("a", "12");
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    for event in [
        WatchEvent::Added(pod("b", "11")),
        WatchEvent::Modified(deleting),
        WatchEvent::Added(pod("c", "13")),
    ] {
        watch.unbounded_send(Ok(event)).unwrap();
    }
    assert_eq!(label(&next(&mut events).await), "Update [b]");
    assert_eq!(harness.checkpointed(), ["a", "b", "c"], "the whole batch, before its first event");
    assert_eq!(labels(&mut events, 2).await, ["Delete [a]", "Update [c]"]);

    watch.unbounded_send(Ok(WatchEvent::Deleted(pod("b", "14")))).unwrap();
    assert_eq!(labels(&mut events, 1).await, ["Remove [b]"]);
    assert_eq!(harness.checkpointed(), ["a", "c"]);

    // A status-only change is not written again (the file removed here stays away).
    std::fs::remove_file(harness.checkpoints.path(CHECKPOINT)).unwrap();
    let mut status_only = pod("c", "15");
    status_only.status = Some(Default::default());
    watch.unbounded_send(Ok(WatchEvent::Modified(status_only))).unwrap();
    // A DELETED of a pod the source does not have tells the merge nothing.
    watch.unbounded_send(Ok(WatchEvent::Deleted(pod("unknown", "16")))).unwrap();
    watch.unbounded_send(bookmark("17")).unwrap();
    assert_eq!(labels(&mut events, 2).await, ["Update [c]", "Confirmed"]);
    assert_eq!(harness.checkpointed(), Vec::<String>::new(), "not rewritten");
}

#[tokio::test(start_paused = true)]
async fn m6_o4_a_410_relists_and_the_new_set_removes_what_vanished() {
    let harness = Harness::new();
    harness.fake.answer_list(vec![pod("a", "1"), pod("b", "2")], "10");
    harness.fake.answer_watch(vec![error_event(410)]);
    let _watch = {
        harness.fake.answer_list(vec![pod("b", "2"), pod("c", "3")], "20");
        harness.fake.open_watch()
    };
    let mut events = harness.start();
    let mut store = PodStore::new([Source::Api]);
    let mut merged = Vec::new();
    for _ in 0..2 {
        let SourceEvent::Update(update, Freshness::Live) = next(&mut events).await else {
            panic!("a SET from each list");
        };
        assert_eq!(update.op, Op::Set);
        let result = store.apply(update, Timestamp::UNIX_EPOCH);
        let deltas = result.deltas.iter();
        merged.push(
            deltas
                .map(|d| format!("{:?} {}", d.op, d.pod.metadata.name.clone().unwrap_or_default()))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(merged, [vec!["Add a", "Add b"], vec!["Remove a", "Add c"]]);
    assert_eq!(harness.checkpointed(), ["b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn r6_mirror_pods_go_to_the_mirror_view_and_never_reach_the_merge() {
    let harness = Harness::new();
    let watch = listed(&harness, vec![pod("a", "1"), mirror("m1", "2")]);
    let mut events = harness.start();
    assert_eq!(labels(&mut events, 1).await, ["Set Live [a]"]);
    assert_eq!(harness.mirror_names(), ["m1"]);
    for event in [
        WatchEvent::Added(mirror("m2", "11")),
        WatchEvent::Deleted(mirror("m1", "12")),
        WatchEvent::Added(pod("b", "13")),
    ] {
        watch.unbounded_send(Ok(event)).unwrap();
    }
    assert_eq!(labels(&mut events, 1).await, ["Update [b]"], "nothing of m1 or m2");
    assert_eq!(harness.mirror_names(), ["m2"]);
    assert_eq!(harness.checkpointed(), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn failures_are_reported_and_bookmarks_and_recoveries_confirm_the_source() {
    let harness = Harness::new();
    harness.fake.fail_list(refused());
    harness.fake.answer_list(vec![pod("a", "1")], "10");
    harness.fake.answer_watch(vec![bookmark("11"), Err(refused())]);
    let _watch = harness.fake.open_watch();
    let mut events = harness.start();
    let seen = labels(&mut events, 5).await;
    let failed = |text: &str| text.starts_with("Failed: the API server http://127.0.0.1:9: ");
    assert!(
        failed(&seen[0]) && seen[0].contains("listing pods (spec.nodeName=edge-1)"),
        "{seen:?}"
    );
    assert_eq!(seen[1..3], ["Set Live [a]", "Confirmed"], "a list's SET needs no confirmation");
    assert!(
        failed(&seen[3]) && seen[3].contains("watching pods (spec.nodeName=edge-1)"),
        "{seen:?}"
    );
    assert_eq!(seen[4], "Confirmed", "the watch is back");
}
