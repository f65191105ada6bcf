//! `merge`: a sequence of source updates (ADD, UPDATE, DELETE, REMOVE, SET from the file,
//! URL, push and API sources) decoded from the input, applied to the merge core
//! ([`PodStore`]), checking after every update what the merge promises (SEMANTICS.md
//! M1–M11) and what its property tests (`agent/core/src/merge/tests.rs`) state.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use outpost_core::merge::{DeltaOp, Merged, Op, PodStore, SourceUpdate};
use outpost_core::pod::{self, Fingerprint, FullName, Source, SourcePod};

const SOURCES: [Source; 4] = [Source::File, Source::Url, Source::Push, Source::Api];
const OPS: [Op; 5] = [Op::Set, Op::Add, Op::Update, Op::Delete, Op::Remove];
/// At most this many pods in one update: small pools make collisions likely.
const MAX_PODS: usize = 6;

/// Decodes `data` into updates and applies them one by one; see [`check`] for what is
/// checked after each.
pub fn merge(data: &[u8]) {
    let mut store = PodStore::new(SOURCES);
    let mut workers = Workers::default();
    let mut seen_set = BTreeSet::new();
    for (step, update) in Updates(data).enumerate() {
        let (source, op) = (update.source, update.op);
        let replay = (op == Op::Set).then(|| update.clone());
        let merged = store.apply(update, at(2 * step));
        workers.observe(&merged);
        if op == Op::Set {
            seen_set.insert(source);
        }
        check(&store, &workers, &seen_set);
        // A SET said again changes nothing (M5, M6).
        if let Some(again) = replay {
            let merged = store.apply(again, at(2 * step + 1));
            assert!(
                merged.deltas.is_empty(),
                "a replayed SET from {source:?} emitted {:?}",
                merged
                    .deltas
                    .iter()
                    .map(|d| (d.op, pod::uid(&d.pod).to_owned()))
                    .collect::<Vec<_>>()
            );
            check(&store, &workers, &seen_set);
        }
    }
}

/// The store's state against the workers' view and the rules that hold at rest.
fn check(store: &PodStore, workers: &Workers, seen_set: &BTreeSet<Source>) {
    // M9: synced exactly when every source has sent a SET.
    assert_eq!(store.synced(), seen_set.len() == SOURCES.len(), "M9: synced flag is wrong");
    // The deltas alone rebuild exactly the desired pods: nothing lost or duplicated (M8).
    let desired: HashMap<String, (String, Fingerprint)> = store
        .pods()
        .map(|(_, name, p)| (name.to_string(), (pod::uid(p).to_owned(), Fingerprint::of(p))))
        .collect();
    assert_eq!(workers.0, desired, "the deltas and the store disagree");
    // One pod per full name and one source per pod (M2, M11).
    let mut names = BTreeSet::new();
    let mut uids = BTreeSet::new();
    for (source, name, p) in store.pods() {
        assert!(names.insert(FullName::clone(name)), "{name} is desired twice");
        assert!(uids.insert(pod::uid(p).to_owned()), "UID {} is desired twice", pod::uid(p));
        assert_eq!(FullName::of(p), **name, "a pod is held under another pod's name");
        assert_eq!(
            pod::annotation(p, pod::CONFIG_SOURCE),
            Some(source.config_source()),
            "M1: config.source is not the pod's source"
        );
    }
    // M11: static sources win over the API server; a conflict between sources names the
    // pod that runs. (An M2 duplicate names the pod its own update kept, which may have
    // gone since or lost to another source's.)
    let running: HashMap<String, (Source, String)> = store
        .pods()
        .map(|(source, name, p)| (name.to_string(), (source, pod::uid(p).to_owned())))
        .collect();
    for conflict in store.conflicts() {
        let name = conflict.full_name.to_string();
        assert!(
            !(conflict.source.is_static() && conflict.winner_source == Source::Api),
            "M11: an API pod runs as {name} while a static pod claims it"
        );
        if conflict.source == conflict.winner_source {
            continue;
        }
        if let Some((source, uid)) = running.get(&name) {
            assert_eq!((*source, uid.as_str()), (conflict.winner_source, &*conflict.winner_uid));
        }
    }
}

/// What the pod workers believe, rebuilt from the deltas alone: full name → (UID, content).
#[derive(Debug, Default)]
struct Workers(HashMap<String, (String, Fingerprint)>);

impl Workers {
    fn observe(&mut self, merged: &Merged) {
        let ops: Vec<DeltaOp> = merged.deltas.iter().map(|d| d.op).collect();
        assert!(ops.is_sorted(), "M8: deltas out of order: {ops:?}");
        for delta in &merged.deltas {
            let name = FullName::of(&delta.pod).to_string();
            let uid = pod::uid(&delta.pod).to_owned();
            let deleting = delta.pod.metadata.deletion_timestamp.is_some();
            match delta.op {
                DeltaOp::Add => {
                    let before = self.0.insert(name.clone(), (uid, Fingerprint::of(&delta.pod)));
                    assert!(before.is_none(), "M8: a second ADD for {name}");
                }
                DeltaOp::Remove => {
                    let held = self.0.remove(&name).map(|(uid, _)| uid);
                    assert_eq!(held, Some(uid), "M8: REMOVE of a pod the workers do not run");
                }
                DeltaOp::Update | DeltaOp::Delete | DeltaOp::Reconcile => {
                    assert!(
                        delta.op != DeltaOp::Update || !deleting,
                        "M4: UPDATE of a pod being deleted"
                    );
                    assert!(delta.op != DeltaOp::Delete || deleting, "M4: DELETE of a live pod");
                    let held = self.0.get_mut(&name);
                    let Some(held) = held.filter(|held| held.0 == uid) else {
                        panic!("M8: {:?} of {name} ({uid}), which the workers do not run", delta.op)
                    };
                    held.1 = Fingerprint::of(&delta.pod);
                }
            }
        }
    }
}

/// The updates in the input: per update, one byte for the source (low 2 bits) and the op,
/// one for the number of pods, then two bytes per pod (see [`pod_of`]).
#[derive(Debug)]
struct Updates<'a>(&'a [u8]);

impl Iterator for Updates<'_> {
    type Item = SourceUpdate;

    fn next(&mut self) -> Option<SourceUpdate> {
        let (&[kind, count], rest) = self.0.split_first_chunk::<2>()?;
        let source = SOURCES[usize::from(kind) % SOURCES.len()];
        let op = OPS[usize::from(kind >> 2) % OPS.len()];
        let count = (usize::from(count) % (MAX_PODS + 1)).min(rest.len() / 2);
        let (pods, rest) = rest.split_at(2 * count);
        self.0 = rest;
        let pods = pods.chunks_exact(2).map(|b| SourcePod::new(pod_of(source, b[0], b[1])));
        Some(SourceUpdate { source, op, pods: pods.collect() })
    }
}

/// A pod from a small pool: six names in two namespaces, three versions (the UID depends
/// on the source and version, as a static pod's content hash does), two images, and
/// whether it is running, being deleted, or labelled.
fn pod_of(source: Source, a: u8, b: u8) -> Pod {
    let (name, version, namespace) = (a % 6, (a >> 3) % 3, (a >> 5) % 2);
    let mut p = Pod::default();
    p.metadata.namespace = Some(format!("ns{namespace}"));
    p.metadata.name = Some(format!("p{name}"));
    p.metadata.uid = Some(format!("{}-{namespace}-{name}-{version}", source.as_str()));
    p.spec = Some(PodSpec {
        containers: vec![Container {
            name: "c".into(),
            image: Some(format!("img:{}", b % 2)),
            ..Default::default()
        }],
        ..Default::default()
    });
    if b & 2 != 0 {
        p.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
    }
    if b & 4 != 0 {
        p.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        p.metadata.deletion_grace_period_seconds = Some(i64::from(b >> 4));
    }
    if b & 8 != 0 {
        p.metadata.labels = Some([("tier".to_owned(), "web".to_owned())].into());
    }
    p
}

/// The time of the merge's `step`th apply.
fn at(step: usize) -> Timestamp {
    let seconds = i64::try_from(step).unwrap_or(i64::MAX);
    Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}
