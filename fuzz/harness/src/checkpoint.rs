//! `checkpoint`: a checkpoint file's bytes (`<state-dir>/checkpoints/<name>.json`), as the
//! agent reads them at start: the header checked against the body
//! ([`outpost::checkpoint::decode`]), then, for a body whose header is right, what the push
//! source restores from it ([`outpost::source::push::open`]) and the merge makes of the
//! restored pods. The restored pods are not validated again, so the merge must take
//! whatever a checkpoint holds.

use std::path::Path;

use futures::StreamExt as _;
use k8s_openapi::jiff::Timestamp;
use outpost::checkpoint::{self, Checkpoints};
use outpost::source::SourceEvent;
use outpost::source::metrics::SourceMetrics;
use outpost::source::push;
use outpost_core::merge::PodStore;
use outpost_core::pod::{self, FullName, Source};
use serde_json::Value;

/// Reads `data` as a whole checkpoint file, then as the body of a good one.
pub fn checkpoint(data: &[u8]) {
    // A file that passes the header check is exactly what a write of its body makes.
    if checkpoint::decode::<Value>(data).is_ok() {
        let body = data.splitn(2, |&b| b == b'\n').nth(1).unwrap_or_default();
        assert_eq!(checkpoint::frame(body), data, "a header that the writer would not write");
    }
    let framed = checkpoint::frame(data);
    assert_eq!(
        checkpoint::decode::<Value>(&framed).is_ok(),
        serde_json::from_slice::<Value>(data).is_ok(),
        "a framed body decodes differently from the body itself"
    );
    if let Ok(state_dir) = crate::scratch_dir() {
        restore_push(state_dir.path(), &framed);
        open_sealed(state_dir.path(), data);
    }
}

/// Reads `file` as a private checkpoint with a state key: anything but what that key
/// sealed for that name is refused, never half-read (V3).
fn open_sealed(state_dir: &Path, file: &[u8]) {
    let source = checkpoint::seal::Source::File("/fuzz/state.key".into());
    let Ok(key) = checkpoint::seal::StateKey::derive(&[7; 32], source) else { return };
    let checkpoints = Checkpoints::new(state_dir).with_key(Some(std::sync::Arc::new(key)));
    let path = checkpoints.path("api-objects");
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() || std::fs::write(&path, file).is_err() {
        return;
    }
    if let Ok(Some(value)) = checkpoints.read::<Value>("api-objects") {
        // Only a plain file reads without the key's seal, and then as decode reads it.
        assert!(checkpoint::decode::<Value>(file).is_ok_and(|plain| plain == value));
    }
}

/// Writes `file` as the push source's checkpoint, opens the source over it and merges
/// what it restores.
fn restore_push(state_dir: &Path, file: &[u8]) {
    let checkpoints = Checkpoints::new(state_dir);
    let path = checkpoints.path("push");
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() || std::fs::write(&path, file).is_err() {
        return;
    }
    let config = push::Config {
        node_name: "fuzz-node".to_owned(),
        checkpoints,
        metrics: SourceMetrics::default(),
    };
    let Ok((handle, events)) = push::open(config) else { return };
    let listed = handle.list();
    // The source's own stream ends with its last handle.
    drop(handle);
    let events: Vec<SourceEvent> = futures::executor::block_on(events.collect());
    let mut store = PodStore::new([Source::Push]);
    let mut restored = 0;
    for event in events {
        if let SourceEvent::Update(update, _) = event {
            assert_eq!(update.source, Source::Push);
            restored += update.pods.len();
            store.apply(update, Timestamp::UNIX_EPOCH);
        }
    }
    let listed_pods: usize = listed.iter().map(|summary| summary.pods.len()).sum();
    assert_eq!(restored, listed_pods, "the SET and the listing disagree on the pods");
    let mut names = std::collections::BTreeSet::new();
    for (source, name, p) in store.pods() {
        assert_eq!(source, Source::Push);
        assert!(names.insert(FullName::clone(name)), "{name} is desired twice");
        assert_eq!(FullName::of(p), **name);
        assert_eq!(pod::annotation(p, pod::CONFIG_SOURCE), Some(Source::Push.config_source()));
    }
}
