use futures::{FutureExt, StreamExt};
use outpost_core::merge::{Op, SourceUpdate};
use outpost_core::pod::Source;
use outpost_core::source::push::Error as Refusal;

use super::*;

const NODE: &str = "edge-1";

fn pod(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}

fn list(names: &[&str]) -> String {
    let items: Vec<String> = names
        .iter()
        .map(|n| {
            format!(r#"{{"metadata":{{"name":"{n}"}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#)
        })
        .collect();
    format!(r#"{{"apiVersion":"v1","kind":"PodList","items":[{}]}}"#, items.join(","))
}

/// Pod name → UID of a SET.
fn names(update: &SourceUpdate) -> Vec<String> {
    update.pods.iter().map(|p| p.name.name.clone()).collect()
}

fn config(dir: &std::path::Path) -> Config {
    Config {
        node_name: NODE.into(),
        checkpoints: Checkpoints::new(dir),
        metrics: crate::source::metrics::SourceMetrics::default(),
    }
}

/// The next event, which must be ready now (a change's SET is sent before it returns).
fn ready(stream: &mut EventStream) -> SourceEvent {
    stream.next().now_or_never().flatten().expect("an event is ready")
}

/// `severity key` of each manifest with problems the event lists.
fn problems_of(event: SourceEvent) -> Vec<String> {
    match event {
        SourceEvent::Problems(problems) => {
            problems.iter().map(|p| format!("{} {}", p.severity, p.manifest)).collect()
        }
        other => panic!("expected the manifests with problems, got {other:?}"),
    }
}

/// A pod whose manifest decodes with a warning (its priority class is not known).
fn warned(name: &str) -> String {
    pod(name, "busybox").replace("spec:\n", "spec:\n  priorityClassName: gold\n")
}

fn set_of(event: SourceEvent) -> (Vec<String>, Freshness) {
    match event {
        SourceEvent::Update(update, freshness) => {
            assert_eq!((update.source, update.op), (Source::Push, Op::Set));
            (names(&update), freshness)
        }
        other => panic!("expected a SET, got {other:?}"),
    }
}

#[tokio::test]
async fn without_a_checkpoint_the_source_starts_empty_and_live() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    assert_eq!(set_of(ready(&mut stream)), (vec![], Freshness::Live));
    assert!(stream.next().now_or_never().is_none(), "nothing more until a push");
    assert!(handle.list().is_empty());
}

#[tokio::test]
async fn changes_are_checkpointed_then_sent_and_come_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    ready(&mut stream);

    let (summary, change) = handle.put("web", pod("web", "busybox")).await.unwrap();
    assert_eq!(change, Change::Created);
    assert_eq!(summary.pods[0].name, "web-edge-1");
    assert!(dir.path().join("checkpoints/push.json").is_file());
    assert_eq!(set_of(ready(&mut stream)), (vec!["web-edge-1".into()], Freshness::Live));

    // Identical again: nothing is written or sent.
    let (_, change) = handle.put("web", pod("web", "busybox")).await.unwrap();
    assert_eq!(change, Change::Unchanged);
    assert!(stream.next().now_or_never().is_none());

    handle.put("db", list(&["db"])).await.unwrap();
    assert_eq!(
        set_of(ready(&mut stream)),
        (vec!["db-edge-1".into(), "web-edge-1".into()], Freshness::Live)
    );
    let keys: Vec<_> = handle.list().into_iter().map(|s| s.key).collect();
    assert_eq!(keys, ["db", "web"]);

    let removed = handle.delete("db").await.unwrap();
    assert_eq!(removed.pods[0].name, "db-edge-1");
    assert_eq!(set_of(ready(&mut stream)), (vec!["web-edge-1".into()], Freshness::Live));
    assert!(matches!(handle.delete("db").await, Err(Error::Refused(Refusal::NotFound { .. }))));
    assert!(stream.next().now_or_never().is_none());
    let uid = summary.pods[0].uid.clone();
    drop((handle, stream));

    // A restart replays the checkpoint: same pods, same UIDs, marked as from the checkpoint.
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    assert_eq!(set_of(ready(&mut stream)), (vec!["web-edge-1".into()], Freshness::Checkpoint));
    assert_eq!(handle.summary("web").unwrap().pods[0].uid, uid);
}

#[tokio::test]
async fn a_failed_checkpoint_write_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    ready(&mut stream);
    // The checkpoint directory cannot be created: a file is in its place.
    std::fs::write(dir.path().join("checkpoints"), b"").unwrap();
    let error = handle.put("web", pod("web", "busybox")).await.unwrap_err();
    assert!(matches!(error, Error::Checkpoint { .. }), "{error}");
    assert!(error.to_string().contains("nothing changed"), "{error}");
    assert!(handle.list().is_empty());
    assert!(stream.next().now_or_never().is_none(), "no SET for a change not stored");
}

#[tokio::test]
async fn invalid_requests_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    ready(&mut stream);
    assert!(matches!(
        handle.put("a/b", pod("web", "x")).await,
        Err(Error::Refused(Refusal::Key { .. }))
    ));
    assert!(matches!(
        handle.put("web", "kind: [").await,
        Err(Error::Refused(Refusal::Manifest { .. }))
    ));
    // Only listed among the manifests with problems.
    assert_eq!(problems_of(ready(&mut stream)), ["rejected web"]);
    assert!(matches!(handle.delete("..").await, Err(Error::Refused(Refusal::Key { .. }))));
    assert!(stream.next().now_or_never().is_none());
    assert!(!dir.path().join("checkpoints/push.json").exists());
}

#[tokio::test]
async fn a_corrupt_checkpoint_is_moved_aside_and_the_source_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoints/push.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"outpost-checkpoint v1 len=3 xxh3=00\n{}").unwrap();
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    assert_eq!(set_of(ready(&mut stream)), (vec![], Freshness::Live));
    match ready(&mut stream) {
        SourceEvent::Failed(error) => {
            let message = error.to_string();
            assert!(message.contains("push.json.corrupt"), "{message}");
            assert!(message.contains("push the manifests again"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert!(!path.exists());
    assert!(dir.path().join("checkpoints/push.json.corrupt").is_file());
    // Pushing works again and writes a good checkpoint.
    handle.put("web", pod("web", "busybox")).await.unwrap();
    assert!(Checkpoints::new(dir.path()).read::<Checkpoint>("push").unwrap().is_some());
}

#[tokio::test]
async fn rejected_and_warned_pushes_are_listed_until_fixed_or_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    ready(&mut stream);

    let (summary, _) = handle.put("web", warned("web")).await.unwrap();
    assert_eq!(summary.warnings.len(), 1, "the answer carries the warnings");
    assert_eq!(set_of(ready(&mut stream)).0, ["web-edge-1"], "its pods run");
    assert_eq!(problems_of(ready(&mut stream)), ["warned web"]);
    // Pushed again unchanged: answered with the warnings, nothing sent.
    let (summary, _) = handle.put("web", warned("web")).await.unwrap();
    assert_eq!(summary.warnings.len(), 1);
    assert!(stream.next().now_or_never().is_none());

    // A rejected push of the key: it keeps its pods and is listed as rejected.
    assert!(handle.put("web", "kind: [").await.is_err());
    assert_eq!(problems_of(ready(&mut stream)), ["rejected web"]);
    assert!(stream.next().now_or_never().is_none(), "no SET: nothing changed");

    // Restarted: the stored manifest's warnings come back with it.
    drop((handle, stream));
    let (handle, mut stream) = open(config(dir.path())).unwrap();
    ready(&mut stream);
    assert_eq!(problems_of(ready(&mut stream)), ["warned web"]);

    // Fixed, then a rejected key deleted: nothing listed.
    handle.put("web", pod("web", "busybox")).await.unwrap();
    ready(&mut stream);
    assert!(problems_of(ready(&mut stream)).is_empty());
    assert!(handle.put("db", "kind: [").await.is_err());
    assert_eq!(problems_of(ready(&mut stream)), ["rejected db"]);
    assert!(matches!(handle.delete("db").await, Err(Error::Refused(Refusal::NotFound { .. }))));
    assert!(problems_of(ready(&mut stream)).is_empty());
}
