//! E1–E2 over time: the manager's step driven with plain values (readings, candidates,
//! statuses) and instants, as the agent's task drives it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    Pod, PodSpec, PodStatus,
};
use proptest::prelude::*;

use super::*;
use crate::eviction::{Memcg, PodStats, Settings};
use crate::pod::Source;

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The machine: memory and nodefs available (imagefs, inodes and PIDs plentiful).
fn reading(memory: i64, nodefs: i64) -> Reading {
    let observations = Observations::new()
        .with(Signal::MemoryAvailable, memory, 8 * GI)
        .with(Signal::NodeFsAvailable, nodefs, 100 * GI)
        .with(Signal::NodeFsInodesFree, 900_000, 1_000_000)
        .with(Signal::ImageFsAvailable, 80 * GI, 100 * GI)
        .with(Signal::ImageFsInodesFree, 900_000, 1_000_000)
        .with(Signal::PidAvailable, 30_000, 32_768);
    Reading { observations, root: None, pods: None }
}

fn calm() -> Reading {
    reading(4 * GI, 50 * GI)
}

/// Below `memory.available<100Mi`.
fn low_memory() -> Reading {
    reading(42 * MI, 50 * GI)
}

/// Below `nodefs.available<10%`.
fn low_disk() -> Reading {
    reading(4 * GI, 5 * GI)
}

/// Above `nodefs.available<10%` but within twice it.
fn near_disk_reading() -> Reading {
    reading(4 * GI, 15 * GI)
}

/// An API pod `name` (UID `uid-<name>`) using `memory` bytes and `disk` bytes.
fn pod(name: &str, memory: u64, disk: u64) -> Candidate {
    let pod = Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container { name: name.into(), ..Container::default() }],
            ..PodSpec::default()
        }),
        status: None,
    };
    let stats = PodStats { memory, disk, ..PodStats::default() };
    Candidate { pod: Arc::new(pod), source: Source::Api, stats: Some(stats) }
}

/// A static pod whose usage is unknown: ranked first, never evicted.
fn static_pod(name: &str) -> Candidate {
    Candidate { source: Source::File, stats: None, ..pod(name, 0, 0) }
}

fn status(phase: &str, running: bool) -> Arc<PodStatus> {
    let state = if running {
        ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() }
    } else {
        let terminated = ContainerStateTerminated { exit_code: 137, ..Default::default() };
        ContainerState { terminated: Some(terminated), ..Default::default() }
    };
    Arc::new(PodStatus {
        phase: Some(phase.into()),
        container_statuses: Some(vec![ContainerStatus {
            name: "c".into(),
            state: Some(state),
            ..Default::default()
        }]),
        ..PodStatus::default()
    })
}

/// A controller driven at instants counted from `t0`.
struct Driver {
    controller: Controller,
    t0: Instant,
    now: Instant,
    wake: Option<Instant>,
}

impl Driver {
    fn new(config: Config, collector: bool) -> Driver {
        let t0 = Instant::now();
        Driver { controller: Controller::new(config, collector), t0, now: t0, wake: None }
    }

    fn default() -> Driver {
        Driver::new(Config::default(), true)
    }

    fn at(&mut self, s: u64) -> &mut Driver {
        self.now = self.t0 + secs(s);
        self
    }

    fn step(&mut self, input: Input) -> Vec<Action> {
        let step = self.controller.step(input, self.now);
        self.wake = step.wake;
        step.actions
    }

    /// A whole pass: the reading, then (if asked) the candidates.
    fn pass(&mut self, reading: Reading, candidates: &[Candidate]) -> Vec<Action> {
        let mut actions = self.step(Input::Read(reading));
        if matches!(actions.last(), Some(Action::Candidates(_))) {
            actions.extend(self.step(Input::Candidates(candidates.to_vec())));
        }
        actions
    }

    /// The wake-up, in seconds from `t0`.
    fn wake(&self) -> Option<u64> {
        self.wake.map(|w| w.duration_since(self.t0).as_secs())
    }
}

fn evicted(actions: &[Action]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Evict(e) => Some(e.name.as_str()),
            _ => None,
        })
        .collect()
}

/// The actions without the pass's closing ones (arming, disk pace).
fn decisions(actions: &[Action]) -> Vec<Action> {
    actions
        .iter()
        .filter(|a| !matches!(a, Action::Arm(_) | Action::DiskChecks(_)))
        .cloned()
        .collect()
}

fn memory_pressure() -> Pressure {
    Pressure { memory: true, ..Pressure::default() }
}

fn disk_pressure() -> Pressure {
    Pressure { disk: true, ..Pressure::default() }
}

fn pool() -> Vec<Candidate> {
    vec![pod("small", 10 << 20, 0), static_pod("etcd"), pod("hog", 900 << 20, 0)]
}

// ---------------------------------------------------------------------------------------
// Passes and wake-ups

#[test]
fn the_first_tick_starts_a_pass_and_a_calm_one_waits_for_the_backstop() {
    let mut d = Driver::default();
    assert_eq!(d.step(Input::Tick), [Action::Read]);
    assert_eq!(d.wake(), None, "no pass yet");
    assert_eq!(d.step(Input::Read(calm())), [Action::Arm(vec![])]);
    assert_eq!(d.wake(), Some(60));
    d.at(60);
    assert_eq!(d.step(Input::Tick), [Action::Read]);
    assert_eq!(d.step(Input::Read(calm())), [Action::Arm(vec![])]);
    assert_eq!(d.wake(), Some(120));
}

#[test]
fn kernel_notifications_start_a_pass() {
    let mut d = Driver::default();
    d.pass(calm(), &[]);
    assert_eq!(d.step(Input::Crossed(Signal::MemoryAvailable)), [Action::Read]);
    assert_eq!(d.step(Input::Stalled), [Action::Read]);
    assert_eq!(d.wake(), Some(60), "the wake-up stays until a pass");
}

// E1: a write wakes a pass only near a disk threshold; the checks' pace follows.
#[test]
fn writes_pass_only_near_a_disk_threshold() {
    let mut d = Driver::default();
    d.pass(calm(), &[]);
    let far = calm().observations;
    let near = near_disk_reading().observations;
    assert!(d.step(Input::Written(far.clone())).is_empty());
    assert_eq!(d.step(Input::Written(near)), [Action::Read]);
    let actions = d.pass(near_disk_reading(), &[]);
    assert_eq!(actions, [Action::Arm(vec![]), Action::DiskChecks(DISK_CHECK_INTERVAL)]);
    assert_eq!(
        d.step(Input::Written(far.clone())),
        [Action::Read],
        "near at the last pass: a write passes whatever it reads"
    );
    let actions = d.pass(calm(), &[]);
    assert_eq!(actions, [Action::Arm(vec![]), Action::DiskChecks(DISK_CHECK_INTERVAL_FAR)]);
    assert!(d.step(Input::Written(far)).is_empty());
}

#[test]
fn a_read_replaces_a_pass_waiting_for_its_candidates() {
    let mut d = Driver::default();
    assert_eq!(
        d.step(Input::Read(low_memory())).last(),
        Some(&Action::Candidates(Resource::Memory))
    );
    assert_eq!(d.step(Input::Read(calm())), [Action::Arm(vec![])]);
    assert!(d.step(Input::Candidates(pool())).is_empty(), "no pass waits for them");
}

#[test]
fn candidates_without_a_pass_are_ignored() {
    let mut d = Driver::default();
    assert!(d.step(Input::Candidates(pool())).is_empty());
    assert_eq!(d.wake(), None);
}

// ---------------------------------------------------------------------------------------
// Pressure conditions

#[test]
fn e1_pressure_is_published_when_it_changes_and_held_for_the_transition_period() {
    let mut d = Driver::default();
    assert_eq!(
        decisions(&d.step(Input::Read(low_memory()))),
        [Action::Publish(memory_pressure()), Action::Candidates(Resource::Memory)]
    );
    d.step(Input::Candidates(vec![]));
    d.at(1);
    assert_eq!(decisions(&d.pass(low_memory(), &[])), [Action::Candidates(Resource::Memory)]);
    d.at(2);
    assert!(decisions(&d.pass(calm(), &[])).is_empty(), "held");
    assert_eq!(d.wake(), Some(62), "the backstop comes before the transition's end");
    d.at(301);
    assert_eq!(decisions(&d.pass(calm(), &[])), [Action::Publish(Pressure::default())]);
}

#[test]
fn e1_the_transition_periods_end_wakes_a_pass() {
    let config = Config { pressure_transition_period: secs(20), ..Config::default() };
    let mut d = Driver::new(config, true);
    d.pass(low_memory(), &[]);
    d.at(1);
    d.pass(calm(), &[]);
    assert_eq!(d.wake(), Some(20), "20 s after the pressure was last seen");
    d.at(20);
    assert_eq!(decisions(&d.pass(calm(), &[])), [Action::Publish(Pressure::default())]);
    assert_eq!(d.wake(), Some(80));
}

// ---------------------------------------------------------------------------------------
// Victims

// E1, E2: a hard threshold evicts the first pod ranked at once, with the immediate grace.
#[test]
fn e2_a_hard_memory_threshold_evicts_the_first_ranked_pod_at_once() {
    let mut d = Driver::default();
    d.step(Input::Tick);
    let actions = d.step(Input::Read(low_memory()));
    assert_eq!(actions, [Action::Publish(memory_pressure()), Action::Candidates(Resource::Memory)]);
    assert_eq!(d.wake(), None, "the pass waits for its candidates");
    let actions = d.step(Input::Candidates(pool()));
    let [Action::Evict(eviction), Action::Arm(_)] = actions.as_slice() else {
        panic!("{actions:?}")
    };
    assert_eq!((eviction.name.as_str(), eviction.uid.as_str()), ("hog", "uid-hog"));
    assert_eq!((eviction.signal, eviction.grace_period), (Signal::MemoryAvailable, secs(1)));
    assert!(eviction.message.starts_with("The node was low on resource: memory."));
    assert_eq!(d.controller.victim(), Some("uid-hog"));
    assert_eq!(d.wake(), Some(30), "the pod cleanup timeout");
}

// E2: the next pod is chosen only once the victim stopped.
#[test]
fn e2_one_victim_at_a_time_until_it_stopped() {
    let mut d = Driver::default();
    assert_eq!(evicted(&d.pass(low_memory(), &pool())), ["hog"]);
    d.at(1);
    assert_eq!(d.step(Input::Crossed(Signal::MemoryAvailable)), [Action::Read]);
    assert_eq!(d.pass(low_memory(), &pool()), [Action::Arm(vec![])], "no candidates asked");
    assert!(d.step(Input::VictimStatus(Some(status("Running", true)))).is_empty());
    assert!(
        d.step(Input::VictimStatus(Some(status("Failed", true)))).is_empty(),
        "Failed at once, still stopping"
    );
    assert!(d.step(Input::VictimStatus(Some(status("Running", false)))).is_empty());
    d.at(2);
    assert_eq!(d.step(Input::VictimStatus(Some(status("Failed", false)))), [Action::Read]);
    assert_eq!(d.controller.victim(), None);
    let rest = vec![pod("small", 10 << 20, 0), static_pod("etcd")];
    assert_eq!(evicted(&d.pass(low_memory(), &rest)), ["small"]);
}

#[test]
fn e2_a_victim_whose_status_is_gone_has_stopped() {
    let mut d = Driver::default();
    d.pass(low_memory(), &pool());
    assert_eq!(d.step(Input::VictimStatus(None)), [Action::Read]);
    assert_eq!(d.controller.victim(), None);
}

#[test]
fn e2_after_the_cleanup_timeout_the_next_victim_is_chosen() {
    let mut d = Driver::default();
    d.pass(low_memory(), &pool());
    d.at(29);
    assert!(evicted(&d.pass(low_memory(), &pool())).is_empty());
    assert_eq!(d.wake(), Some(30));
    d.at(30);
    assert_eq!(d.step(Input::Tick), [Action::Read]);
    assert_eq!(evicted(&d.pass(low_memory(), &pool())), ["hog"]);
    assert_eq!(d.wake(), Some(60));
}

#[test]
fn e2_when_no_pod_may_be_evicted_each_pass_asks_again() {
    let mut d = Driver::default();
    let critical = vec![static_pod("etcd")];
    assert!(evicted(&d.pass(low_memory(), &critical)).is_empty());
    assert_eq!(d.controller.victim(), None);
    assert_eq!(d.wake(), Some(60));
    d.at(1);
    let actions = d.step(Input::Read(low_memory()));
    assert_eq!(actions, [Action::Candidates(Resource::Memory)]);
}

#[test]
fn e2_a_soft_threshold_evicts_after_its_grace_period_with_the_shorter_grace() {
    let map = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), v.to_owned())]);
    let config = Config::resolve(&Settings {
        hard: Some(BTreeMap::new()),
        soft: map("memory.available", "1Gi"),
        soft_grace_period: map("memory.available", "30s"),
        max_pod_grace_period: Some(10),
        ..Settings::default()
    })
    .unwrap();
    let mut d = Driver::new(config, true);
    let low = reading(512 * MI, 50 * GI);
    assert_eq!(decisions(&d.pass(low.clone(), &pool())), [Action::Publish(memory_pressure())]);
    assert_eq!(d.wake(), Some(30), "the grace period's end");
    d.at(30);
    let actions = d.pass(low, &pool());
    let [Action::Candidates(Resource::Memory), Action::Evict(eviction), Action::Arm(_)] =
        actions.as_slice()
    else {
        panic!("{actions:?}")
    };
    assert_eq!(eviction.grace_period, secs(10), "30 s by the pod, at most 10");
}

// ---------------------------------------------------------------------------------------
// Node-level reclaim

// E1, G1: the garbage collector goes first; pods only if the pressure lasts.
#[test]
fn e1_disk_pressure_collects_garbage_first_and_evicts_only_if_it_lasts() {
    let mut d = Driver::default();
    let pods = vec![pod("quiet", 0, 1 << 20), pod("writer", 0, 10 << 30)];
    assert_eq!(
        d.pass(low_disk(), &pods),
        [
            Action::Publish(disk_pressure()),
            Action::CollectGarbage,
            Action::Arm(vec![]),
            Action::DiskChecks(DISK_CHECK_INTERVAL)
        ]
    );
    assert_eq!(d.wake(), Some(5));
    d.at(3);
    assert!(decisions(&d.pass(low_disk(), &pods)).is_empty(), "the collector is still at it");
    assert_eq!(d.wake(), Some(5));
    d.at(5);
    let actions = d.step(Input::Read(low_disk()));
    assert_eq!(actions, [Action::Candidates(Resource::EphemeralStorage)], "asked once");
    let actions = d.step(Input::Candidates(pods));
    assert_eq!(evicted(&actions), ["writer"]);
}

#[test]
fn e1_disk_pressure_the_collector_resolved_evicts_nobody() {
    let mut d = Driver::default();
    d.pass(low_disk(), &[]);
    d.at(5);
    assert_eq!(d.pass(calm(), &[]), [Action::Arm(vec![])], "held pressure keeps checks near");
}

#[test]
fn e1_without_a_collector_disk_pressure_evicts_at_once() {
    let mut d = Driver::new(Config::default(), false);
    let actions = d.pass(low_disk(), &[pod("writer", 0, 10 << 30)]);
    assert!(!actions.contains(&Action::CollectGarbage));
    assert_eq!(evicted(&actions), ["writer"]);
}

#[test]
fn e1_a_new_disk_signal_asks_the_collector_again() {
    let mut d = Driver::default();
    d.pass(low_disk(), &[]);
    d.at(5);
    let mut imagefs = calm();
    imagefs.observations.set(
        Signal::ImageFsAvailable,
        crate::eviction::Observation { available: 10 * GI, capacity: 100 * GI },
    );
    assert_eq!(decisions(&d.pass(imagefs, &[])), [Action::CollectGarbage]);
    assert_eq!(d.wake(), Some(10));
}

#[test]
fn e1_memory_pressure_never_waits_for_the_collector() {
    let mut d = Driver::default();
    let actions = d.pass(low_memory(), &pool());
    assert!(!actions.contains(&Action::CollectGarbage));
    assert_eq!(evicted(&actions), ["hog"]);
}

// ---------------------------------------------------------------------------------------
// The kernel's thresholds

#[test]
fn e1_memory_thresholds_are_armed_where_the_working_set_reaches_them() {
    let mut d = Driver::default();
    let mut machine = calm();
    machine.root = Some(Memcg { usage: 7000 << 20, inactive: 1000 << 20, capacity: 8192 << 20 });
    let actions = d.pass(machine.clone(), &[]);
    // 8 GiB less the 100 MiB threshold, plus the inactive file cache.
    let root = Arm { signal: Signal::MemoryAvailable, usage: (8192 - 100 + 1000) << 20 };
    assert_eq!(actions, [Action::Arm(vec![root])]);
    // A limited pods cgroup: its thresholds come, and are armed too.
    machine.pods = Some(Memcg { usage: 1500 << 20, inactive: 100 << 20, capacity: 2048 << 20 });
    machine.observations.set(
        Signal::AllocatableMemoryAvailable,
        crate::eviction::Observation { available: 648 * MI, capacity: 2 * GI },
    );
    d.at(1);
    let pods = Arm { signal: Signal::AllocatableMemoryAvailable, usage: (2048 - 100 + 100) << 20 };
    assert_eq!(d.pass(machine.clone(), &[]), [Action::Arm(vec![root, pods])]);
    // Below it: the allocatable signal drives eviction.
    machine.observations.set(
        Signal::AllocatableMemoryAvailable,
        crate::eviction::Observation { available: 50 * MI, capacity: 2 * GI },
    );
    d.at(2);
    let actions = d.pass(machine, &pool());
    let [Action::Publish(_), Action::Candidates(_), Action::Evict(eviction), Action::Arm(_)] =
        actions.as_slice()
    else {
        panic!("{actions:?}")
    };
    assert_eq!(eviction.signal, Signal::AllocatableMemoryAvailable);
}

// ---------------------------------------------------------------------------------------
// The victim's status

#[test]
fn e2_an_evicted_pod_has_stopped_only_once_no_container_runs() {
    let init_running = PodStatus {
        container_statuses: None,
        init_container_statuses: status("Failed", true).container_statuses.clone(),
        ..(*status("Failed", false)).clone()
    };
    let table = [
        (status("Failed", true), false),
        (status("Running", false), false),
        (status("Failed", false), true),
        (Arc::new(init_running), false),
        (Arc::new(PodStatus { phase: Some("Failed".into()), ..PodStatus::default() }), true),
    ];
    for (status, stopped) in table {
        assert_eq!(has_stopped(&status), stopped, "{status:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Invariants over any course of events

#[derive(Debug, Clone)]
enum Op {
    /// The machine changes: memory and nodefs available.
    Machine {
        memory: i64,
        nodefs: i64,
    },
    Wait(u64),
    Crossed,
    Stalled,
    Written,
    /// The victim's status changes (stopped or not).
    Victim {
        stopped: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..300 * MI, 0..30 * GI).prop_map(|(memory, nodefs)| Op::Machine { memory, nodefs }),
        (0u64..45).prop_map(Op::Wait),
        Just(Op::Crossed),
        Just(Op::Stalled),
        Just(Op::Written),
        any::<bool>().prop_map(|stopped| Op::Victim { stopped }),
    ]
}

/// One step as the task made it.
#[derive(Debug)]
struct Record {
    now: Instant,
    /// The input was a stopped victim's status while one was waited for.
    stopped: bool,
    actions: Vec<Action>,
    wake: Option<Instant>,
}

/// Runs `ops` as the agent's task would: reads and candidates answered at once, ticks at
/// the wake-ups.
fn simulate(ops: &[Op], collector: bool) -> Vec<Record> {
    let t0 = Instant::now();
    let mut controller = Controller::new(Config::default(), collector);
    let mut machine = calm();
    let mut now = t0;
    let mut wake = None;
    let mut records = Vec::new();
    let mut pods = 0;
    let mut feed = |input: Input, now: Instant, machine: &Reading, wake: &mut Option<Instant>| {
        let mut inputs = std::collections::VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            let stopped = matches!(&input, Input::VictimStatus(s) if s.as_deref().is_none_or(has_stopped))
                && controller.victim().is_some();
            let step = controller.step(input, now);
            for action in &step.actions {
                match action {
                    Action::Read => inputs.push_back(Input::Read(machine.clone())),
                    Action::Candidates(_) => {
                        pods += 1;
                        let n = pods;
                        inputs.push_back(Input::Candidates(vec![
                            static_pod(&format!("static{n}")),
                            pod(&format!("a{n}"), 100 << 20, 1 << 30),
                            pod(&format!("b{n}"), 200 << 20, 2 << 30),
                        ]));
                    }
                    _ => {}
                }
            }
            *wake = step.wake;
            records.push(Record { now, stopped, actions: step.actions, wake: step.wake });
        }
    };
    feed(Input::Tick, now, &machine, &mut wake);
    for op in ops {
        match op {
            Op::Machine { memory, nodefs } => machine = reading(*memory, *nodefs),
            Op::Wait(s) => {
                let until = now + secs(*s);
                while let Some(at) = wake.filter(|at| *at <= until) {
                    now = now.max(at);
                    feed(Input::Tick, now, &machine, &mut wake);
                }
                now = until;
            }
            Op::Crossed => feed(Input::Crossed(Signal::MemoryAvailable), now, &machine, &mut wake),
            Op::Stalled => feed(Input::Stalled, now, &machine, &mut wake),
            Op::Written => {
                feed(Input::Written(machine.observations.clone()), now, &machine, &mut wake)
            }
            Op::Victim { stopped } => {
                let status = status("Failed", !stopped);
                feed(Input::VictimStatus(Some(status)), now, &machine, &mut wake);
            }
        }
    }
    records
}

fn evictions(record: &Record) -> impl Iterator<Item = &Eviction> {
    record.actions.iter().filter_map(|a| match a {
        Action::Evict(e) => Some(e),
        _ => None,
    })
}

proptest! {
    // E2: never more than one victim pending: another is chosen only after the last one
    // stopped or its cleanup timeout passed; and never a static pod.
    #[test]
    fn e2_never_more_than_one_victim_pending(ops in proptest::collection::vec(op(), 0..60), collector in any::<bool>()) {
        let mut pending: Option<Instant> = None;
        for record in simulate(&ops, collector) {
            if record.stopped {
                pending = None;
            }
            let chosen: Vec<&Eviction> = evictions(&record).collect();
            prop_assert!(chosen.len() <= 1, "{:?}", record);
            for eviction in chosen {
                prop_assert!(eviction.source == Source::Api, "{:?}", eviction);
                if let Some(since) = pending {
                    prop_assert!(record.now >= since + POD_CLEANUP_TIMEOUT, "{:?}", record);
                }
                pending = Some(record.now);
            }
        }
    }

    // E1: with a garbage collector, no pod is evicted for disk before it had
    // NODE_RECLAIM_WAIT to work.
    #[test]
    fn e1_disk_evictions_wait_for_the_collector(ops in proptest::collection::vec(op(), 0..60)) {
        let mut asked: Option<Instant> = None;
        for record in simulate(&ops, true) {
            if record.actions.contains(&Action::CollectGarbage) {
                asked = Some(record.now);
            }
            for eviction in evictions(&record) {
                if eviction.signal.is_disk() {
                    let asked = asked.expect("the collector was asked first");
                    prop_assert!(record.now >= asked + NODE_RECLAIM_WAIT, "{:?}", record);
                }
            }
        }
    }

    // The task never sleeps past the backstop, and never wakes for a time gone by.
    #[test]
    fn every_pass_wakes_the_task_within_the_backstop(ops in proptest::collection::vec(op(), 0..60)) {
        for record in simulate(&ops, true) {
            if record.actions.iter().any(|a| matches!(a, Action::Arm(_))) {
                let wake = record.wake.expect("a pass sets a wake-up");
                prop_assert!(record.now < wake && wake <= record.now + BACKSTOP, "{:?}", record);
            }
        }
    }
}
