//! B4 merge: the merge core alone, no IO.
//!
//! 10,000 realistic pods are decoded and wrapped in [`SourcePod`]s (fingerprinted) once,
//! before anything is timed, as a source would have done. Then, on a fresh [`PodStore`]
//! per repetition, the applies that produce deltas are timed:
//!
//! - add: a SET of 10,000 new pods → 10,000 ADD;
//! - replace: a SET of the same names with new content, so new UIDs → 10,000 REMOVE and
//!   10,000 ADD (what a rollout touching every manifest looks like);
//! - reconcile: a SET of the same pods with a new status → 10,000 RECONCILE;
//!
//! and the SET a source sends most often, 10,000 unchanged pods → no delta. Each update
//! (a clone of a prepared `Vec<SourcePod>`, i.e. of 10,000 `Arc`s) is built outside the
//! timed region; the clock covers `apply` only. The pods carry `config.seen` and
//! `config.source` as the file source stamps them, so `apply` copies no pod.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::jiff::Timestamp;
use outpost_core::merge::{DeltaOp, Op, PodStore, SourceUpdate};
use outpost_core::pod::{self, CONFIG_SEEN, Source, SourcePod};

use crate::Options;
use crate::pods;
use crate::report::{Entry, Stats};

const PODS: usize = 10_000;
/// Targets (BENCHMARKS.md).
const TARGET_DELTAS_PER_S: f64 = 1_000_000.0;
const TARGET_UNCHANGED_MS: f64 = 5.0;
/// Timed unchanged SETs per repetition.
const UNCHANGED_PER_REP: usize = 5;

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let reps = if options.quick { 5 } else { 30 };
    let seen = Timestamp::now().to_string();
    let first = build(0, &seen)?;
    let second = build(1, &seen)?;
    let reconciled: Vec<SourcePod> = second.iter().map(running).collect();

    let mut add = Vec::new();
    let mut replace = Vec::new();
    let mut reconcile = Vec::new();
    let mut unchanged = Vec::new();
    // One untimed repetition first: page faults and allocator growth belong to start-up.
    for rep in 0..=reps {
        let mut store = PodStore::new([Source::File]);
        let a = timed(&mut store, &first, &[(DeltaOp::Add, PODS)]).context("add")?;
        let r = timed(&mut store, &second, &[(DeltaOp::Remove, PODS), (DeltaOp::Add, PODS)])
            .context("replace")?;
        let c =
            timed(&mut store, &reconciled, &[(DeltaOp::Reconcile, PODS)]).context("reconcile")?;
        let mut u = Vec::with_capacity(UNCHANGED_PER_REP);
        for _ in 0..UNCHANGED_PER_REP {
            u.push(timed(&mut store, &reconciled, &[]).context("unchanged")?);
        }
        if rep > 0 {
            add.push(rate(PODS, a));
            replace.push(rate(2 * PODS, r));
            reconcile.push(rate(PODS, c));
            unchanged.extend(u);
        }
        drop(store);
    }

    // What any apply that looks at each pod once pays: the pods are scattered on the heap.
    let floor = Stats::millis(
        &(0..reps * UNCHANGED_PER_REP).map(|_| visit(reconciled.clone())).collect::<Vec<_>>(),
    );

    let throughput = |name: &str, rates: Vec<f64>, deltas: &str| {
        Entry::new("B4", format!("merge throughput: {name}"), "deltas/s", Stats::of(rates))
            .p50_at_least(TARGET_DELTAS_PER_S, "p50 >= 1,000,000 deltas/s")
            .detail("deltas_per_apply", deltas)
    };
    Ok(vec![
        throughput("SET of 10,000 new pods", add, "10,000 ADD"),
        throughput("SET replacing 10,000 pods (new UIDs)", replace, "10,000 REMOVE + 10,000 ADD"),
        throughput("SET of 10,000 status changes", reconcile, "10,000 RECONCILE"),
        Entry::new("B4", "merge: SET of 10,000 unchanged pods", "ms", Stats::millis(&unchanged))
            .p99_below(TARGET_UNCHANGED_MS, "p99 < 5 ms")
            .detail("floor_p50_ms", (floor.p50 * 1000.0).round() / 1000.0)
            .detail("floor", "reading each pod's UID and config.source, then dropping the update"),
    ])
}

/// 10,000 decoded, defaulted pods, stamped as the file source stamps them.
fn build(revision: u64, seen: &str) -> anyhow::Result<Vec<SourcePod>> {
    (0..PODS)
        .map(|i| {
            let name = format!("edge-{i:05}");
            let path = PathBuf::from(format!("/etc/kubernetes/manifests/{name}.yaml"));
            let mut pod = pods::decode(pods::manifest(&name, revision).as_bytes(), &path)?;
            pod::set_annotation(&mut pod, CONFIG_SEEN, seen);
            Ok(SourcePod::new(pod))
        })
        .collect()
}

/// The same pod, now running: a status change only.
fn running(p: &SourcePod) -> SourcePod {
    let mut pod = (*p.pod).clone();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now());
    pod.status = Some(PodStatus {
        phase: Some("Running".to_owned()),
        pod_ip: Some("10.88.0.17".to_owned()),
        host_ip: Some("192.168.1.10".to_owned()),
        start_time: Some(now.clone()),
        conditions: Some(
            ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
                .map(|type_| PodCondition {
                    type_: type_.to_owned(),
                    status: "True".to_owned(),
                    last_transition_time: Some(now.clone()),
                    ..PodCondition::default()
                })
                .to_vec(),
        ),
        ..PodStatus::default()
    });
    SourcePod::new(pod)
}

/// Applies a SET of `pods` and times `apply` alone; checks the deltas by op and count.
fn timed(
    store: &mut PodStore,
    pods: &[SourcePod],
    expect: &[(DeltaOp, usize)],
) -> anyhow::Result<Duration> {
    let update = SourceUpdate { source: Source::File, op: Op::Set, pods: pods.to_vec() };
    let now = Timestamp::now();
    let start = Instant::now();
    let merged = store.apply(update, now);
    let elapsed = start.elapsed();
    let mut counts: Vec<(DeltaOp, usize)> = Vec::new();
    for delta in &merged.deltas {
        match counts.last_mut() {
            Some((op, n)) if *op == delta.op => *n += 1,
            _ => counts.push((delta.op, 1)),
        }
    }
    ensure!(counts == expect, "expected deltas {expect:?}, got {counts:?}");
    ensure!(merged.duplicates.is_empty(), "unexpected duplicates");
    Ok(elapsed)
}

/// Reads each pod's UID and `config.source` and drops the update: a floor for `apply`.
fn visit(pods: Vec<SourcePod>) -> Duration {
    let start = Instant::now();
    let mut bytes = 0;
    for p in &pods {
        bytes += p.uid().len() + pod::annotation(&p.pod, pod::CONFIG_SOURCE).map_or(0, str::len);
    }
    drop(std::hint::black_box(pods));
    std::hint::black_box(bytes);
    start.elapsed()
}

fn rate(deltas: usize, elapsed: Duration) -> f64 {
    deltas as f64 / elapsed.as_secs_f64()
}
