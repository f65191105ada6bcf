use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;

use super::*;
use crate::pod::Fingerprint;

const T0: Timestamp = Timestamp::UNIX_EPOCH;

fn later(seconds: i64) -> Timestamp {
    Timestamp::from_second(seconds).unwrap_or(T0)
}

fn pod(ns: &str, name: &str, uid: &str, image: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.namespace = Some(ns.into());
    p.metadata.name = Some(name.into());
    p.metadata.uid = Some(uid.into());
    p.spec = Some(PodSpec {
        containers: vec![Container {
            name: "c".into(),
            image: Some(image.into()),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

fn sp(p: Pod) -> SourcePod {
    SourcePod::new(p)
}

fn update(source: Source, op: Op, pods: Vec<Pod>) -> SourceUpdate {
    SourceUpdate { source, op, pods: pods.into_iter().map(sp).collect() }
}

fn ops(merged: &Merged) -> Vec<(DeltaOp, String)> {
    merged.deltas.iter().map(|d| (d.op, pod::uid(&d.pod).to_owned())).collect()
}

/// Expected deltas: op and UID, in order.
fn want(ops: &[(DeltaOp, &str)]) -> Vec<(DeltaOp, String)> {
    ops.iter().map(|(op, uid)| (*op, (*uid).to_owned())).collect()
}

/// Asserts the deltas of one merge.
#[track_caller]
fn assert_ops(merged: &Merged, expected: &[(DeltaOp, &str)]) {
    assert_eq!(ops(merged), want(expected));
}

/// Applies a SET from `source` at `at`.
fn set(store: &mut PodStore, source: Source, pods: Vec<Pod>, at: Timestamp) -> Merged {
    store.apply(update(source, Op::Set, pods), at)
}

fn store() -> PodStore {
    PodStore::new([Source::File, Source::Api])
}

#[test]
fn m1_config_source_is_stamped_before_comparing() {
    let mut s = store();
    let m = set(&mut s, Source::File, vec![pod("default", "a", "u1", "img")], T0);
    assert_eq!(pod::annotation(&m.deltas[0].pod, CONFIG_SOURCE), Some("file"));
    // A pod that already carries the right stamp compares equal to the unstamped one.
    let mut stamped = pod("default", "a", "u1", "img");
    pod::set_annotation(&mut stamped, CONFIG_SOURCE, "file");
    let m = set(&mut s, Source::File, vec![stamped], later(5));
    assert!(m.deltas.is_empty(), "{:?}", ops(&m));
}

#[test]
fn m1_a_stamped_pod_is_passed_on_without_a_copy() {
    let mut s = store();
    let mut p = pod("default", "a", "u1", "img");
    pod::set_annotation(&mut p, CONFIG_SOURCE, "file");
    pod::set_annotation(&mut p, CONFIG_SEEN, "then");
    let shared = Arc::new(p);
    let m = s.apply(
        SourceUpdate {
            source: Source::File,
            op: Op::Set,
            pods: vec![SourcePod::new(shared.clone())],
        },
        T0,
    );
    assert!(Arc::ptr_eq(&m.deltas[0].pod, &shared), "the delta must carry the source's Arc");
}

#[test]
fn m2_second_pod_with_same_full_name_in_one_update_is_dropped() {
    let mut s = store();
    let m = set(
        &mut s,
        Source::File,
        vec![pod("default", "a", "first", "img"), pod("default", "a", "second", "img")],
        T0,
    );
    assert_ops(&m, &[(DeltaOp::Add, "first")]);
    assert_eq!(m.duplicates.len(), 1);
    assert_eq!(m.duplicates[0].uid, "second");
    assert_eq!(m.duplicates[0].winner_uid, "first");
    assert_eq!(s.conflicts().len(), 1, "the dropped duplicate is reported");
}

#[test]
fn m2_a_known_pod_beats_a_newcomer_listed_before_it() {
    let mut s = store();
    set(&mut s, Source::File, vec![pod("default", "a", "old", "img")], T0);
    let m = set(
        &mut s,
        Source::File,
        vec![pod("default", "a", "new", "img"), pod("default", "a", "old", "img")],
        later(1),
    );
    assert!(m.deltas.is_empty(), "{:?}", ops(&m));
    assert_eq!(m.duplicates[0].uid, "new");
}

#[test]
fn m3_unknown_uid_is_add_with_first_seen_time() {
    let mut s = store();
    let m =
        s.apply(update(Source::File, Op::Add, vec![pod("default", "a", "u1", "img")]), later(42));
    assert_ops(&m, &[(DeltaOp::Add, "u1")]);
    assert_eq!(
        pod::annotation(&m.deltas[0].pod, CONFIG_SEEN),
        Some(later(42).to_string().as_str())
    );
}

#[test]
fn m4_semantic_change_is_update_and_keeps_config_seen() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "a", "u1", "img:1")], later(1));
    let mut changed = Vec::new();
    let mut p = pod("default", "a", "u1", "img:2");
    pod::set_annotation(&mut p, CONFIG_SEEN, "a later sighting");
    changed.push(p);
    let mut p = pod("default", "a", "u1", "img:2");
    p.metadata.labels = Some(BTreeMap::from([("tier".to_owned(), "web".to_owned())]));
    changed.push(p);
    let mut p = pod("default", "a", "u1", "img:2");
    pod::set_annotation(&mut p, "example.com/note", "x");
    changed.push(p);
    let mut p = pod("default", "a", "u1", "img:2");
    p.metadata.deletion_grace_period_seconds = Some(5);
    changed.push(p);
    for (i, p) in changed.into_iter().enumerate() {
        let m = s.apply(update(Source::Api, Op::Update, vec![p]), later(10 + i as i64));
        assert_eq!(ops(&m), want(&[(DeltaOp::Update, "u1")]), "change {i}");
        assert_eq!(
            pod::annotation(&m.deltas[0].pod, CONFIG_SEEN),
            Some(later(1).to_string().as_str()),
            "M4: config.seen is kept"
        );
    }
}

#[test]
fn m4_deletion_timestamp_makes_it_a_delete() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "a", "u1", "img")], T0);
    let mut p = pod("default", "a", "u1", "img");
    p.metadata.deletion_timestamp = Some(Time(later(9)));
    p.metadata.deletion_grace_period_seconds = Some(30);
    let m = s.apply(update(Source::Api, Op::Delete, vec![p]), later(10));
    assert_ops(&m, &[(DeltaOp::Delete, "u1")]);
}

#[test]
fn m4_bookkeeping_annotations_alone_are_not_an_update() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "a", "u1", "img")], T0);
    let mut p = pod("default", "a", "u1", "img");
    pod::set_annotation(&mut p, CONFIG_SEEN, "other");
    pod::set_annotation(&mut p, CONFIG_MIRROR, "other");
    let m = s.apply(update(Source::Api, Op::Update, vec![p]), later(1));
    assert!(m.deltas.is_empty(), "{:?}", ops(&m));
}

#[test]
fn m5_status_only_change_is_reconcile_and_no_change_is_nothing() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "a", "u1", "img")], T0);
    let m = set(&mut s, Source::Api, vec![pod("default", "a", "u1", "img")], later(1));
    assert!(m.deltas.is_empty());
    let mut p = pod("default", "a", "u1", "img");
    p.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
    let m = s.apply(update(Source::Api, Op::Update, vec![p]), later(2));
    assert_ops(&m, &[(DeltaOp::Reconcile, "u1")]);
}

#[test]
fn m6_set_replaces_and_removes_what_is_missing() {
    let mut s = store();
    set(
        &mut s,
        Source::File,
        vec![pod("default", "a", "u1", "i"), pod("default", "b", "u2", "i")],
        T0,
    );
    let m = set(
        &mut s,
        Source::File,
        vec![pod("default", "b", "u2", "i"), pod("default", "c", "u3", "i")],
        later(1),
    );
    assert_ops(&m, &[(DeltaOp::Remove, "u1"), (DeltaOp::Add, "u3")]);
    let m = set(&mut s, Source::File, vec![], later(2));
    assert_ops(&m, &[(DeltaOp::Remove, "u2"), (DeltaOp::Remove, "u3")]);
    assert!(s.is_empty());
}

#[test]
fn m6_set_of_one_source_leaves_other_sources_alone() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "api", "a1", "i")], T0);
    let m = set(&mut s, Source::File, vec![], later(1));
    assert!(m.deltas.is_empty());
    assert_eq!(s.len(), 1);
}

#[test]
fn m7_remove_of_unknown_uid_is_a_noop() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "a", "u1", "i")], T0);
    let m =
        s.apply(update(Source::Api, Op::Remove, vec![pod("default", "x", "nope", "i")]), later(1));
    assert!(m.deltas.is_empty());
    let m =
        s.apply(update(Source::Api, Op::Remove, vec![pod("default", "a", "u1", "i")]), later(1));
    assert_ops(&m, &[(DeltaOp::Remove, "u1")]);
}

#[test]
fn m8_one_merge_orders_remove_add_update_delete_reconcile() {
    let mut s = store();
    set(
        &mut s,
        Source::Api,
        vec![
            pod("ns", "gone", "g", "i"),
            pod("ns", "upd", "u", "i"),
            pod("ns", "del", "d", "i"),
            pod("ns", "rec", "r", "i"),
        ],
        T0,
    );
    let mut del = pod("ns", "del", "d", "i");
    del.metadata.deletion_timestamp = Some(Time(later(1)));
    let mut rec = pod("ns", "rec", "r", "i");
    rec.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
    // Listed in the opposite order of M8 on purpose.
    let m = set(
        &mut s,
        Source::Api,
        vec![rec, del, pod("ns", "upd", "u", "i2"), pod("ns", "new", "n", "i")],
        later(2),
    );
    let got: Vec<DeltaOp> = m.deltas.iter().map(|d| d.op).collect();
    assert_eq!(
        got,
        vec![DeltaOp::Remove, DeltaOp::Add, DeltaOp::Update, DeltaOp::Delete, DeltaOp::Reconcile]
    );
}

#[test]
fn m9_synced_only_after_every_configured_source_sent_a_set() {
    let mut s = PodStore::new([Source::File, Source::Url, Source::Api]);
    assert!(!s.synced());
    set(&mut s, Source::File, vec![], T0);
    s.apply(update(Source::Api, Op::Add, vec![pod("d", "a", "u", "i")]), T0);
    assert!(!s.synced(), "an ADD is not a SET");
    set(&mut s, Source::Api, vec![], T0);
    assert!(!s.synced());
    set(&mut s, Source::Url, vec![], T0);
    assert!(s.synced());
    assert!(s.source_seen(Source::Url));
}

#[test]
fn m10_edited_static_manifest_is_remove_then_add() {
    let mut s = store();
    set(&mut s, Source::File, vec![pod("default", "web-node", "hash-1", "img:1")], T0);
    let m =
        set(&mut s, Source::File, vec![pod("default", "web-node", "hash-2", "img:2")], later(1));
    assert_ops(&m, &[(DeltaOp::Remove, "hash-1"), (DeltaOp::Add, "hash-2")]);
}

#[test]
fn m11_static_beats_api_for_the_same_full_name() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "web", "api-uid", "i")], T0);
    let m = set(&mut s, Source::File, vec![pod("default", "web", "file-uid", "i")], later(1));
    assert_ops(&m, &[(DeltaOp::Remove, "api-uid"), (DeltaOp::Add, "file-uid")]);
    assert_eq!(m.deltas[0].source, Source::Api);
    let conflicts = s.conflicts();
    assert_eq!(conflicts.len(), 1);
    assert_eq!((conflicts[0].source, conflicts[0].winner_source), (Source::Api, Source::File));
    // An update to the losing API pod reaches nobody.
    let m = set(&mut s, Source::Api, vec![pod("default", "web", "api-uid", "i2")], later(2));
    assert!(m.deltas.is_empty(), "{:?}", ops(&m));
    // When the static pod goes, the API pod (in its latest version) takes over.
    let m = set(&mut s, Source::File, vec![], later(3));
    assert_ops(&m, &[(DeltaOp::Remove, "file-uid"), (DeltaOp::Add, "api-uid")]);
    assert!(s.conflicts().is_empty());
}

#[test]
fn m11_between_static_sources_first_seen_wins() {
    let mut s = PodStore::new([Source::File, Source::Url]);
    set(&mut s, Source::Url, vec![pod("default", "web", "url-uid", "i")], T0);
    let m = set(&mut s, Source::File, vec![pod("default", "web", "file-uid", "i")], T0);
    assert!(m.deltas.is_empty(), "the later static pod does not run: {:?}", ops(&m));
    let c = s.conflicts();
    assert_eq!((c[0].uid.as_str(), c[0].winner_uid.as_str()), ("file-uid", "url-uid"));
}

#[test]
fn m11_between_two_files_of_one_source_first_seen_wins_across_sets() {
    let mut s = store();
    set(&mut s, Source::File, vec![pod("default", "web", "b-yaml", "i")], T0);
    // a.yaml appears later but sorts first: the running pod from b.yaml keeps the name.
    let m = set(
        &mut s,
        Source::File,
        vec![pod("default", "web", "a-yaml", "i"), pod("default", "web", "b-yaml", "i")],
        later(1),
    );
    assert!(m.deltas.is_empty(), "{:?}", ops(&m));
    assert_eq!(s.conflicts()[0].uid, "a-yaml");
    // b.yaml deleted: a.yaml's pod runs now.
    let m = set(&mut s, Source::File, vec![pod("default", "web", "a-yaml", "i")], later(2));
    assert_ops(&m, &[(DeltaOp::Remove, "b-yaml"), (DeltaOp::Add, "a-yaml")]);
}

#[test]
fn r6_mirror_pods_from_the_api_are_not_desired() {
    let mut s = store();
    let mut mirror = pod("default", "web-node", "m1", "i");
    pod::set_annotation(&mut mirror, CONFIG_MIRROR, "hash");
    let m = set(&mut s, Source::Api, vec![mirror], T0);
    assert!(m.deltas.is_empty());
    assert!(s.is_empty());
}

#[test]
fn a_renamed_uid_moves_to_its_new_name() {
    let mut s = store();
    set(&mut s, Source::Api, vec![pod("default", "a", "u1", "i")], T0);
    let m = set(&mut s, Source::Api, vec![pod("default", "b", "u1", "i")], later(1));
    assert_ops(&m, &[(DeltaOp::Remove, "u1"), (DeltaOp::Add, "u1")]);
    let names: Vec<_> = s.pods().map(|(_, n, _)| n.to_string()).collect();
    assert_eq!(names, vec!["default/b"]);
}

// ---- properties ----------------------------------------------------------------------

/// A generated pod: small pools of names and images so collisions and no-op changes happen.
#[derive(Debug, Clone)]
struct Gen {
    name: u8,
    version: u8,
    image: u8,
    running: bool,
}

fn gen_pod(source: Source, g: &Gen) -> Pod {
    // UID depends on the source and content version, as for static pods (S5).
    let uid = format!("{}-{}-{}", source.as_str(), g.name, g.version);
    let mut p = pod("ns", &format!("p{}", g.name), &uid, &format!("img:{}", g.image));
    if g.running {
        p.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
    }
    p
}

fn arb_set() -> impl Strategy<Value = Vec<Gen>> {
    prop::collection::vec(
        (0u8..6, 0u8..2, 0u8..2, any::<bool>()).prop_map(|(name, version, image, running)| Gen {
            name,
            version,
            image,
            running,
        }),
        0..6,
    )
}

/// Each source's SETs, and an interleaving of them that keeps each source's own order.
fn arb_history() -> impl Strategy<Value = (Vec<(Source, Vec<Gen>)>, Vec<usize>)> {
    let sources = [Source::File, Source::Url, Source::Api];
    prop::collection::vec((0usize..3, arb_set()), 1..25).prop_flat_map(move |steps| {
        let steps: Vec<(Source, Vec<Gen>)> =
            steps.into_iter().map(|(s, set)| (sources[s], set)).collect();
        let n = steps.len();
        (Just(steps), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
    })
}

/// Reorders `steps` by `shuffle` while keeping every source's own SETs in order.
fn interleave(steps: &[(Source, Vec<Gen>)], shuffle: &[usize]) -> Vec<(Source, Vec<Gen>)> {
    let mut per_source: HashMap<Source, std::collections::VecDeque<Vec<Gen>>> = HashMap::new();
    for (s, set) in steps {
        per_source.entry(*s).or_default().push_back(set.clone());
    }
    let slots: Vec<Source> = shuffle.iter().map(|&i| steps[i].0).collect();
    slots.into_iter().filter_map(|s| Some((s, per_source.get_mut(&s)?.pop_front()?))).collect()
}

/// What the pod workers believe, rebuilt from deltas alone; panics on a lost or
/// duplicated notification.
#[derive(Default)]
struct Workers(HashMap<String, (String, Fingerprint)>);

impl Workers {
    fn observe(&mut self, merged: &Merged) -> Result<(), TestCaseError> {
        let ops: Vec<DeltaOp> = merged.deltas.iter().map(|d| d.op).collect();
        prop_assert!(ops.is_sorted(), "M8 order violated: {ops:?}");
        for d in &merged.deltas {
            let name = FullName::of(&d.pod).to_string();
            let uid = pod::uid(&d.pod).to_owned();
            let fp = Fingerprint::of(&d.pod);
            match d.op {
                DeltaOp::Add => {
                    prop_assert!(!self.0.contains_key(&name), "duplicate ADD for {name}");
                    self.0.insert(name, (uid, fp));
                }
                DeltaOp::Remove => {
                    let held = self.0.remove(&name);
                    prop_assert_eq!(held.map(|h| h.0), Some(uid), "REMOVE of a pod not running");
                }
                DeltaOp::Update | DeltaOp::Delete | DeltaOp::Reconcile => {
                    let held = self.0.get_mut(&name);
                    prop_assert!(
                        held.as_ref().is_some_and(|h| h.0 == uid),
                        "{:?} of unknown pod",
                        d.op
                    );
                    if let Some(h) = held {
                        h.1 = fp;
                    }
                }
            }
        }
        Ok(())
    }
}

fn desired(s: &PodStore) -> HashMap<String, (String, Fingerprint)> {
    s.pods()
        .map(|(_, _, p)| {
            (FullName::of(p).to_string(), (pod::uid(p).to_owned(), Fingerprint::of(p)))
        })
        .collect()
}

/// Per-source content: (source, uid) → fingerprint.
fn contents(s: &PodStore) -> BTreeMap<(Source, String), (u128, u128)> {
    s.states
        .iter()
        .flat_map(|(src, st)| {
            st.pods.iter().map(move |e| {
                (
                    (*src, e.pod.uid.to_string()),
                    (e.pod.fingerprint.semantic, e.pod.fingerprint.status),
                )
            })
        })
        .collect()
}

fn run(history: &[(Source, Vec<Gen>)], workers: &mut Workers) -> Result<PodStore, TestCaseError> {
    let mut s = PodStore::new([Source::File, Source::Url, Source::Api]);
    for (i, (source, set)) in history.iter().enumerate() {
        let pods = set.iter().map(|g| gen_pod(*source, g)).collect();
        let merged = s.apply(update(*source, Op::Set, pods), later(i as i64));
        workers.observe(&merged)?;
    }
    Ok(s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any interleaving ends in each source's last SET; the deltas rebuild exactly the
    /// desired pods (nothing lost, nothing duplicated) and each merge is in M8 order.
    #[test]
    fn m6_m8_any_interleaving_converges_to_the_last_sets((steps, shuffle) in arb_history()) {
        let history = interleave(&steps, &shuffle);
        let mut workers = Workers::default();
        let s = run(&history, &mut workers)?;
        prop_assert_eq!(&workers.0, &desired(&s), "deltas and store disagree");

        // Reference: only each source's last SET, applied once.
        let mut last: BTreeMap<Source, Vec<Gen>> = BTreeMap::new();
        for (source, set) in &history {
            last.insert(*source, set.clone());
        }
        let reference: Vec<(Source, Vec<Gen>)> = last.into_iter().collect();
        let r = run(&reference, &mut Workers::default())?;
        // Which UID wins a contested name may depend on history (first seen, M11/M2);
        // the names that run, and the pods held without same-update duplicates, may not.
        let names = |s: &PodStore| s.pods().map(|(_, n, _)| FullName::clone(n)).collect::<BTreeSet<_>>();
        prop_assert_eq!(names(&s), names(&r));
        let no_dups = |s: &PodStore| contents(s).into_iter()
            .filter(|((src, _), _)| s.states[src].duplicates.is_empty())
            .collect::<BTreeMap<_, _>>();
        prop_assert_eq!(no_dups(&s), no_dups(&r));
    }

    /// Upserts and removals mixed with SETs never lose or duplicate a notification.
    #[test]
    fn m7_m8_upserts_and_removes_keep_workers_in_step(
        steps in prop::collection::vec((0usize..3, 0usize..3, arb_set()), 1..30)
    ) {
        let sources = [Source::File, Source::Api, Source::Url];
        let op_of = [Op::Set, Op::Add, Op::Remove];
        let mut s = PodStore::new(sources);
        let mut workers = Workers::default();
        for (i, (src, op, set)) in steps.iter().enumerate() {
            let pods = set.iter().map(|g| gen_pod(sources[*src], g)).collect();
            let merged = s.apply(update(sources[*src], op_of[*op], pods), later(i as i64));
            workers.observe(&merged)?;
        }
        prop_assert_eq!(&workers.0, &desired(&s));
        // Every full name held by some pod has exactly one active pod, static first.
        for (source, name, _) in s.pods() {
            let rivals: Vec<Source> = s.states.iter()
                .filter(|(_, st)| st.pods.iter().any(|e| e.pod.name == *name))
                .map(|(src, _)| *src)
                .collect();
            if rivals.iter().any(|r| r.is_static()) {
                prop_assert!(source.is_static(), "api pod runs while a static pod claims {name}");
            }
        }
    }
}
