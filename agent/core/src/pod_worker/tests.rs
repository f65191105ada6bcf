//! The pod worker's pure step, driven with an injected clock: a fixed base `Instant` plus
//! offsets and a fixed wall time, no sleeps. A small driver answers the runtime's side
//! (the sandbox, starts) when asked to, and the tests assert on the exact actions, the
//! next wake and the `PodStatus` the worker reports.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Pod, PodCondition, PodSpec,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use super::slot::{SlotState, WaitingReason};
use super::*;
use crate::event_aggregate::EventType;
use crate::lifecycle::CrashLoopConfig;
use crate::pod::{CONFIG_SEEN, FullName, Source};

mod admission;
mod evict;
mod init;
mod logs;
mod objects;
mod probes;
mod qos;

const SECOND: Duration = Duration::from_secs(1);
const NS: Duration = Duration::from_nanos(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The wall time at offset zero.
fn wall0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

fn wall(offset: Duration) -> Timestamp {
    wall0() + SignedDuration::try_from(offset).unwrap()
}

fn wall_before(offset: Duration) -> Timestamp {
    wall0() - SignedDuration::try_from(offset).unwrap()
}

fn pod_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))
}

fn host_ip() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10))
}

// ---------------------------------------------------------------------------------------
// Pods

/// A pod `default/web` under construction.
#[derive(Debug, Clone)]
struct P(Pod);

fn pod(uid: &str, containers: &[(&str, &str)]) -> P {
    P(super::testing::pod(uid, containers))
}

/// The usual one: UID `u1`, one container `c` of image `img:1`.
fn web() -> P {
    pod("u1", &[("c", "img:1")])
}

impl P {
    fn policy(mut self, policy: &str) -> P {
        self.spec().restart_policy = Some(policy.into());
        self
    }

    fn grace(mut self, seconds: i64) -> P {
        self.spec().termination_grace_period_seconds = Some(seconds);
        self
    }

    fn image(mut self, container: &str, image: &str) -> P {
        let c = self.spec().containers.iter_mut().find(|c| c.name == container).unwrap();
        c.image = Some(image.into());
        self
    }

    /// Being deleted (deletionTimestamp set), with `deletionGracePeriodSeconds`.
    fn deleting(mut self, grace: Option<i64>) -> P {
        self.0.metadata.deletion_timestamp = Some(Time(wall0()));
        self.0.metadata.deletion_grace_period_seconds = grace;
        self
    }

    fn seen(mut self, at: Timestamp) -> P {
        pod::set_annotation(&mut self.0, CONFIG_SEEN, at.to_string());
        self
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.as_mut().unwrap()
    }

    fn hash(&self, container: &str) -> String {
        let spec = self.0.spec.as_ref().unwrap();
        container_hash(spec.containers.iter().find(|c| c.name == container).unwrap())
    }

    fn input(&self) -> Input {
        Input::Desired(Some(Desired { source: Source::File, pod: Arc::new(self.0.clone()) }))
    }
}

fn undesired() -> Input {
    Input::Desired(None)
}

/// A container an earlier run left, running.
fn found(id: &str, uid: &str, container: &str, restart_count: u32, hash: &str) -> Found {
    Found {
        id: id.into(),
        pod_uid: Some(uid.into()),
        container: Some(container.into()),
        restart_count,
        hash: Some(hash.into()),
        started_at: None,
        grace: None,
        task: FoundTask::Running,
        recorded_exit: RecordedExit::default(),
    }
}

// ---------------------------------------------------------------------------------------
// The driver

/// A worker for `default/web` and its clock.
struct Driver {
    w: PodWorker,
    base: Instant,
    offset: Duration,
    wake: Option<Instant>,
    /// Generated container ids: `<name>-<n>`.
    ids: u32,
}

impl Driver {
    fn new() -> Driver {
        Driver::with_found(Vec::new())
    }

    fn with_found(found: Vec<Found>) -> Driver {
        let settings = Settings {
            crash_loop: CrashLoopConfig::default(),
            host_ip: Some(host_ip()),
            seed: 7,
            facts: Arc::default(),
        };
        let name = FullName { namespace: "default".into(), name: "web".into() };
        Driver {
            w: PodWorker::new(name, settings, found),
            base: Instant::now(),
            offset: Duration::ZERO,
            wake: None,
            ids: 0,
        }
    }

    fn now(&self) -> Now {
        Now { at: self.base + self.offset, wall: wall(self.offset) }
    }

    /// The instant at `offset`.
    fn at(&self, offset: Duration) -> Instant {
        self.base + offset
    }

    fn set_time(&mut self, offset: Duration) {
        assert!(offset >= self.offset, "time goes forward");
        self.offset = offset;
    }

    fn pass(&mut self, d: Duration) {
        self.offset += d;
    }

    /// How long from now until the worker's next wake.
    fn wake_in(&self) -> Option<Duration> {
        self.wake.map(|w| w - self.now().at)
    }

    /// One step, nothing answered.
    fn step(&mut self, input: Input) -> Vec<Action> {
        let step = self.w.step(input, self.now());
        self.wake = step.wake;
        step.actions
    }

    /// Steps, answering every SetUpSandbox with SandboxReady and every StartContainer
    /// with Started (a new id) at once; all the actions, in order.
    fn drive(&mut self, input: Input) -> Vec<Action> {
        let mut queue = std::collections::VecDeque::from([input]);
        let mut all = Vec::new();
        while let Some(input) = queue.pop_front() {
            let actions = self.step(input);
            for action in &actions {
                match action {
                    Action::SetUpSandbox { .. } => {
                        queue.push_back(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
                    }
                    Action::StartContainer { container, .. } => {
                        let id = self.next_id(container);
                        queue.push_back(self.started(container, &id));
                    }
                    _ => {}
                }
            }
            all.extend(actions);
        }
        all
    }

    fn next_id(&mut self, container: &str) -> String {
        self.ids += 1;
        format!("{container}-{}", self.ids)
    }

    fn started(&self, container: &str, id: &str) -> Input {
        Input::Started {
            container: container.into(),
            started: Started {
                id: id.into(),
                image_id: format!("sha256:{id}"),
                started_at: self.now().wall,
            },
        }
    }

    /// Ticks at `offset` (answering starts).
    fn tick_at(&mut self, offset: Duration) -> Vec<Action> {
        self.set_time(offset);
        self.drive(Input::Tick)
    }

    /// Ticks at an instant (answering starts).
    fn tick_at_instant(&mut self, at: Instant) -> Vec<Action> {
        self.set_time(at - self.base);
        self.drive(Input::Tick)
    }

    /// containerd's exit, now.
    fn exit(&self, id: &str, exit_code: i32) -> Input {
        Input::Exited(Exit {
            container_id: id.into(),
            exit_code,
            finished_at: Some(self.now().wall),
            signal: None,
            by: ExitSource::Containerd,
        })
    }

    /// The kernel's exit, now.
    fn kernel_exit(&self, id: &str, exit_code: i32, signal: Option<i32>) -> Input {
        Input::Exited(Exit {
            container_id: id.into(),
            exit_code,
            finished_at: Some(self.now().wall),
            signal,
            by: ExitSource::Kernel,
        })
    }

    fn status(&self) -> PodStatus {
        self.w.status(self.now().wall).unwrap().1
    }

    fn container(&self, name: &str) -> ContainerStatus {
        let status = self.status();
        status.container_statuses.unwrap().into_iter().find(|c| c.name == name).unwrap()
    }

    fn phase(&self) -> String {
        self.status().phase.unwrap()
    }

    fn waiting(&self, name: &str) -> ContainerStateWaiting {
        self.container(name).state.unwrap().waiting.unwrap()
    }

    fn terminated(&self, name: &str) -> ContainerStateTerminated {
        self.container(name).state.unwrap().terminated.unwrap()
    }

    fn last_terminated(&self, name: &str) -> ContainerStateTerminated {
        self.container(name).last_state.unwrap().terminated.unwrap()
    }

    fn condition(&self, kind: &str) -> PodCondition {
        let conditions = self.status().conditions.unwrap();
        conditions.into_iter().find(|c| c.type_ == kind).unwrap()
    }

    fn restart_count(&self, name: &str) -> i32 {
        self.container(name).restart_count
    }

    /// Runs `p` to all containers running; the actions.
    fn run(&mut self, p: &P) -> Vec<Action> {
        let actions = self.drive(p.input());
        assert!(self.w.current.as_ref().unwrap().slots.iter().all(|s| s.is_running()));
        actions
    }
}

/// An action, in short.
fn show(action: &Action) -> String {
    let ids = |ids: &[String]| ids.join(",");
    match action {
        Action::TrackPod { uid } => format!("TrackPod {uid}"),
        Action::ForgetPod { uid } => format!("ForgetPod {uid}"),
        Action::Watch { container_id } => format!("Watch {container_id}"),
        Action::SetUpSandbox { pod: p } => format!("SetUpSandbox {}", pod::uid(p)),
        Action::TearDownSandbox { uid } => format!("TearDownSandbox {uid}"),
        Action::StartContainer { pod: p, container, restart_count, .. } => {
            format!("StartContainer {}/{container} rc={restart_count}", pod::uid(p))
        }
        Action::Signal { container_ids, signal } => {
            format!("Signal {signal:?} {}", ids(container_ids))
        }
        Action::CheckExited { container_ids } => format!("CheckExited {}", ids(container_ids)),
        Action::DeleteTask { container_id, reap: true } => {
            format!("DeleteTask {container_id} reap")
        }
        Action::DeleteTask { container_id, reap: false } => format!("DeleteTask {container_id}"),
        Action::ReadTerminationMessage { container_id, .. } => {
            format!("ReadTerminationMessage {container_id}")
        }
        Action::RecordExit { container_id, terminated } => format!(
            "RecordExit {container_id} {} {}",
            terminated.exit_code,
            terminated.reason.as_str()
        ),
        Action::KeepDead { container_id } => format!("KeepDead {container_id}"),
        Action::RemoveContainer { container_id, background: true } => {
            format!("KeepDead {container_id}")
        }
        Action::RemoveContainer { container_id, background: false } => {
            format!("RemoveContainer {container_id}")
        }
        Action::Event { container, kind, reason, message, .. } => format!(
            "Event {} {reason} {}: {message}",
            kind.as_str(),
            container.as_deref().unwrap_or("-")
        ),
        Action::Count(Metric::ContainerRestarted { source }) => {
            format!("Count ContainerRestarted {source}")
        }
        Action::Count(Metric::PodStarted { source, latency }) => {
            format!("Count PodStarted {source} {latency:?}")
        }
        Action::RemoveStatus { uid } => format!("RemoveStatus {uid}"),
        Action::RefreshVolumes { pod: p } => format!("RefreshVolumes {}", pod::uid(p)),
        Action::ReleaseVolumes { uid } => format!("ReleaseVolumes {uid}"),
        Action::Probe { container, container_id, kind, handler, timeout, .. } => format!(
            "Probe {} {container}/{container_id} {} {timeout:?}",
            kind.as_str(),
            handler.describe()
        ),
        Action::RunHook { container, container_id, hook, handler, timeout, .. } => format!(
            "RunHook {} {container}/{container_id} {} {timeout:?}",
            hook.as_str(),
            handler.describe()
        ),
    }
}

/// The actions in short, without the termination message read that follows every exit
/// (`an_exit_reads_the_termination_message_into_the_status` checks that one).
fn shown(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter(|a| !matches!(a, Action::ReadTerminationMessage { .. }))
        .map(show)
        .collect()
}

/// The containers started by `actions`, by name.
fn started(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StartContainer { container, .. } => Some(container.clone()),
            _ => None,
        })
        .collect()
}

/// The containers signalled by `actions`, with the signal.
fn signalled(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal { container_ids, signal } => {
                Some(format!("{signal:?} {}", container_ids.join(",")))
            }
            _ => None,
        })
        .collect()
}

fn starts(actions: &[Action]) -> usize {
    actions.iter().filter(|a| matches!(a, Action::StartContainer { .. })).count()
}

const CRASH_MESSAGE: &str = "Back-off restarting failed container c in pod web_default(u1)";

// ---------------------------------------------------------------------------------------
// Starting

#[test]
fn sets_up_the_sandbox_then_starts_every_container() {
    let mut d = Driver::new();
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "SetUpSandbox u1"]);
    assert_eq!(d.wake, None, "waits for the sandbox's result");
    assert_eq!(d.phase(), "Pending");
    assert_eq!(d.waiting("a").reason.as_deref(), Some("ContainerCreating"));

    let actions = d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
    assert_eq!(shown(&actions), ["StartContainer u1/a rc=0", "StartContainer u1/b rc=0"]);
    let Action::StartContainer { hash, .. } = &actions[0] else { unreachable!() };
    assert_eq!(hash, &p.hash("a"), "the container's spec hash labels it");
    assert_eq!(d.waiting("a").reason.as_deref(), Some("ContainerCreating"));
    assert_eq!(d.phase(), "Pending");

    assert!(d.step(d.started("a", "a-1")).is_empty());
    assert_eq!(d.phase(), "Pending", "b still waits");
    assert!(d.step(d.started("b", "b-2")).is_empty());
    assert_eq!(d.wake, None);

    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.0.0.7"));
    assert_eq!(status.host_ip.as_deref(), Some("192.168.1.10"));
    assert_eq!(status.start_time, Some(Time(wall0())));
    assert_eq!(d.condition("Ready").status, "True");
    assert_eq!(d.condition("ContainersReady").status, "True");
    assert_eq!(d.condition("PodReadyToStartContainers").status, "True");
    let a = d.container("a");
    assert_eq!(a.container_id.as_deref(), Some("containerd://a-1"));
    assert_eq!(a.image, "img:a");
    assert_eq!(a.image_id, "sha256:a-1");
    assert_eq!(a.restart_count, 0);
    assert!(a.ready);
    assert_eq!(a.state.unwrap().running.unwrap().started_at, Some(Time(wall0())));
    assert_eq!(d.w.uid(), Some("u1"));
    assert_eq!(d.w.container_name("b-2"), Some("b"));
    assert_eq!(d.w.container_name("x"), None);
    assert!(!d.w.is_done());
}

#[test]
fn an_exit_reads_the_termination_message_into_the_status() {
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    let actions = d.step(d.exit("c-1", 2));
    let asked: Vec<String> = actions
        .iter()
        .filter(|a| matches!(a, Action::ReadTerminationMessage { .. }))
        .map(show)
        .collect();
    assert_eq!(asked, ["ReadTerminationMessage c-1"]);
    assert_eq!(d.terminated("c").message, None, "nothing until it is read");
    let message = Input::TerminationMessage {
        container_id: "c-1".into(),
        message: "config invalid: port".into(),
    };
    assert!(shown(&d.step(message)).is_empty());
    assert_eq!(d.terminated("c").message.as_deref(), Some("config invalid: port"));
    // A message for a container the pod no longer knows changes nothing.
    let stray = Input::TerminationMessage { container_id: "c-9".into(), message: "x".into() };
    assert!(shown(&d.step(stray)).is_empty());
    assert_eq!(d.terminated("c").message.as_deref(), Some("config invalid: port"));
}

#[test]
fn restart_policy_decides_on_every_exit() {
    // (policy, exit code, restarted, phase, reason)
    let cases = [
        ("Always", 0, true, "Running", "Completed"),
        ("Always", 1, true, "Running", "Error"),
        ("OnFailure", 0, false, "Succeeded", "Completed"),
        ("OnFailure", 1, true, "Running", "Error"),
        ("Never", 0, false, "Succeeded", "Completed"),
        ("Never", 1, false, "Failed", "Error"),
    ];
    for (policy, code, restarted, phase, reason) in cases {
        let case = format!("{policy} after exit {code}");
        let mut d = Driver::new();
        d.run(&web().policy(policy));
        d.pass(secs(5));
        let actions = d.step(d.exit("c-1", code));
        if restarted {
            // The first restart is immediate: no record of the exit, no BackOff event.
            assert_eq!(
                shown(&actions),
                ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1"],
                "{case}"
            );
            assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"), "{case}");
            let last = d.last_terminated("c");
            assert_eq!((last.exit_code, last.reason.as_deref()), (code, Some(reason)), "{case}");
            assert_eq!(last.started_at, Some(Time(wall0())), "{case}");
            assert_eq!(last.finished_at, Some(Time(wall(secs(5)))), "{case}");
            assert_eq!(d.restart_count("c"), 0, "{case}: counted once started");
            assert_eq!(
                shown(&d.step(d.started("c", "c-2"))),
                ["Count ContainerRestarted file"],
                "{case}"
            );
            assert_eq!(d.restart_count("c"), 1, "{case}");
        } else {
            assert_eq!(
                shown(&actions),
                [
                    "DeleteTask c-1".to_owned(),
                    format!("RecordExit c-1 {code} {reason}"),
                    "ReleaseVolumes u1".to_owned()
                ],
                "{case}"
            );
            let t = d.terminated("c");
            assert_eq!((t.exit_code, t.reason.as_deref()), (code, Some(reason)), "{case}");
            assert_eq!(t.container_id.as_deref(), Some("containerd://c-1"), "{case}");
            assert_eq!(d.wake, None, "{case}");
            assert!(d.step(Input::Tick).is_empty(), "{case}");
        }
        assert_eq!(d.phase(), phase, "{case}");
        let ready = if restarted { "True" } else { "False" };
        assert_eq!(d.condition("Ready").status, ready, "{case}");
    }
}

#[test]
fn phase_adds_up_every_container() {
    let mut d = Driver::new();
    d.run(&pod("u1", &[("a", "img:a"), ("b", "img:b")]).policy("Never"));
    d.step(d.exit("a-1", 0));
    assert_eq!(d.phase(), "Running", "b still runs");
    assert_eq!(
        d.condition("Ready").message.as_deref(),
        Some("containers with unready status: [a]")
    );
    d.step(d.exit("b-2", 2));
    assert_eq!(d.phase(), "Failed", "Never and one failed");
    assert!(!d.w.is_done(), "a pod that ended stays desired");
}

// ---------------------------------------------------------------------------------------
// CrashLoopBackOff

#[test]
fn crash_loop_waits_longer_after_every_exit_up_to_the_max() {
    let mut d = Driver::new();
    d.run(&web());
    let delays = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300];
    let mut id = "c-1".to_owned();
    for (n, delay) in (1u32..).zip(delays) {
        let delay = secs(delay);
        let actions = d.step(d.exit(&id, 1));
        let restart = [format!("KeepDead {id}"), format!("StartContainer u1/c rc={n}")];
        if delay.is_zero() {
            assert_eq!(shown(&actions)[1..], restart, "the first restart is at once");
            assert_eq!(shown(&actions)[0], format!("DeleteTask {id}"));
        } else {
            assert_eq!(
                shown(&actions),
                [
                    format!("DeleteTask {id}"),
                    format!("RecordExit {id} 1 Error"),
                    format!("Event Warning BackOff c: {CRASH_MESSAGE}"),
                ],
                "exit {n}"
            );
            assert_eq!(d.wake_in(), Some(delay), "exit {n}");
            let waiting = d.waiting("c");
            assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
            assert_eq!(
                waiting.message,
                Some(format!(
                    "back-off {delay:?} restarting failed container=c pod=web_default(u1)"
                ))
            );
            assert_eq!(d.restart_count("c"), i32::try_from(n - 1).unwrap());
            let at = d.wake.unwrap();
            assert!(d.tick_at_instant(at - NS).is_empty(), "no start before the wake time");
            d.set_time(at - d.base);
            assert_eq!(shown(&d.step(Input::Tick)), restart, "exit {n}: one start at the wake");
        }
        id = d.next_id("c");
        assert_eq!(shown(&d.step(d.started("c", &id))), ["Count ContainerRestarted file"]);
        assert_eq!(d.restart_count("c"), i32::try_from(n).unwrap());
        assert!(d.wake_in().is_none());
    }
}

#[test]
fn crash_loop_starts_over_after_a_container_ran_ten_minutes() {
    let mut d = Driver::new();
    d.run(&web());
    // Three quick exits: 0 s, 1 s, 2 s; the next would wait 4 s.
    for id in ["c-1", "c-2", "c-3"] {
        d.drive(d.exit(id, 1));
        if let Some(at) = d.wake {
            d.tick_at_instant(at);
        }
    }
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-4"));
    // 599 s is not enough to start over.
    d.pass(secs(599));
    d.step(d.exit("c-4", 1));
    assert_eq!(d.wake_in(), Some(secs(4)));
    d.tick_at_instant(d.wake.unwrap());
    // 600 s is: the restart is at once again, unrecorded, without an event.
    d.pass(secs(600));
    assert_eq!(
        shown(&d.step(d.exit("c-5", 1))),
        ["DeleteTask c-5", "KeepDead c-5", "StartContainer u1/c rc=5"]
    );
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ContainerCreating"));
    d.step(d.started("c", "c-6"));
    // And the one after waits the initial second.
    d.step(d.exit("c-6", 1));
    assert_eq!(d.wake_in(), Some(SECOND));
}

// ---------------------------------------------------------------------------------------
// Image pulls

fn pull_failed(message: &str) -> Input {
    Input::StartFailed {
        container: "c".into(),
        failure: StartFailure::new(WaitingReason::ErrImagePull, message.into()),
    }
}

fn start_failed(reason: WaitingReason, message: &str) -> Input {
    Input::StartFailed { container: "c".into(), failure: StartFailure::new(reason, message.into()) }
}

/// A pod `c` whose first start is under way (not answered).
fn starting(p: &P) -> Driver {
    let mut d = Driver::new();
    d.step(p.input());
    let actions = d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
    assert_eq!(starts(&actions), p.0.spec.as_ref().unwrap().containers.len());
    d
}

#[test]
fn image_pulls_back_off_apart_with_jitter() {
    let mut d = starting(&web().image("c", "nginx:1.27"));
    assert_eq!(
        shown(&d.step(pull_failed("pull access denied"))),
        ["Event Warning Failed c: Error: ErrImagePull"],
        "the first failure: ErrImagePull, no back-off event"
    );
    let waiting = d.waiting("c");
    assert_eq!(waiting.reason.as_deref(), Some("ErrImagePull"));
    assert_eq!(waiting.message.as_deref(), Some("pull access denied"));
    assert_eq!(d.phase(), "Pending");
    let mut base = SECOND;
    for round in 0..12 {
        let delay = d.wake_in().unwrap();
        assert!(delay >= base / 2 && delay <= base, "round {round}: {delay:?} within {base:?}");
        let at = d.wake.unwrap();
        assert!(d.tick_at_instant(at - NS).is_empty());
        d.set_time(at - d.base);
        assert_eq!(shown(&d.step(Input::Tick)), ["StartContainer u1/c rc=0"]);
        assert_eq!(
            shown(&d.step(pull_failed("pull access denied"))),
            [
                "Event Normal BackOff c: Back-off pulling image \"nginx:1.27\"",
                "Event Warning Failed c: Error: ImagePullBackOff",
            ]
        );
        assert_eq!(d.waiting("c").reason.as_deref(), Some("ImagePullBackOff"));
        assert_eq!(d.waiting("c").message.as_deref(), Some("pull access denied"));
        base = (base * 2).min(secs(300));
    }
    assert!(d.wake_in().unwrap() <= secs(300));
}

#[test]
fn image_pull_backoff_starts_over_after_a_start() {
    let mut d = starting(&web());
    for _ in 0..3 {
        d.step(pull_failed("timeout"));
        let at = d.wake.unwrap();
        d.set_time(at - d.base);
        d.step(Input::Tick);
    }
    assert!(d.wake_in().is_none());
    assert!(d.step(d.started("c", "c-1")).is_empty(), "a first start is no restart");
    assert!(d.container("c").ready);
    // Restarted at once after an exit, the pull fails: ErrImagePull again, 0.5–1 s.
    d.pass(secs(1));
    assert_eq!(starts(&d.step(d.exit("c-1", 0))), 1);
    assert_eq!(
        shown(&d.step(pull_failed("timeout"))),
        ["Event Warning Failed c: Error: ErrImagePull"]
    );
    assert_eq!(d.waiting("c").reason.as_deref(), Some("ErrImagePull"));
    let delay = d.wake_in().unwrap();
    assert!(delay >= SECOND / 2 && delay <= SECOND, "{delay:?}");
}

#[test]
fn other_start_failures_use_the_crash_loop() {
    let mut d = starting(&web());
    assert_eq!(
        shown(&d.step(start_failed(WaitingReason::CreateContainerError, "no such file"))),
        ["Event Warning Failed c: Error: no such file", "StartContainer u1/c rc=0"],
        "the first retry is at once"
    );
    assert_eq!(d.wake, None);
    for (round, delay) in [1, 2, 4].into_iter().enumerate() {
        assert_eq!(
            shown(&d.step(start_failed(WaitingReason::RunContainerError, "exec format error"))),
            ["Event Warning Failed c: Error: exec format error"],
            "round {round}"
        );
        let waiting = d.waiting("c");
        assert_eq!(waiting.reason.as_deref(), Some("RunContainerError"));
        assert_eq!(waiting.message.as_deref(), Some("exec format error"));
        assert_eq!(d.wake_in(), Some(secs(delay)));
        d.tick_at_instant(d.wake.unwrap() - NS);
        let at = d.wake.unwrap();
        d.set_time(at - d.base);
        assert_eq!(shown(&d.step(Input::Tick)), ["StartContainer u1/c rc=0"]);
    }
    // The pull backoff was not touched: a pull failure now is a first one.
    assert_eq!(
        shown(&d.step(pull_failed("denied"))),
        ["Event Warning Failed c: Error: ErrImagePull"]
    );
}

#[test]
fn a_start_result_for_no_start_under_way_is_ignored() {
    let mut d = Driver::new();
    d.run(&web());
    assert!(d.step(d.started("c", "c-9")).is_empty());
    assert!(d.step(pull_failed("x")).is_empty());
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-1"));
    assert!(d.step(d.started("nope", "n-1")).is_empty());
}

// ---------------------------------------------------------------------------------------
// The sandbox

fn sandbox_failed(message: &str) -> Input {
    Input::SandboxFailed(SandboxProblem {
        reason: SandboxReason::NetworkNotReady,
        message: message.into(),
    })
}

#[test]
fn sandbox_failures_back_off_and_show_in_the_status() {
    let mut d = Driver::new();
    d.step(web().input());
    let mut base = SECOND;
    for round in 0..9 {
        assert_eq!(
            shown(&d.step(sandbox_failed("cni: no route"))),
            ["Event Warning FailedCreatePodSandBox -: Failed to create pod sandbox: cni: no route"]
        );
        let ready = d.condition("PodReadyToStartContainers");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("NetworkNotReady"));
        assert_eq!(ready.message.as_deref(), Some("cni: no route"));
        let waiting = d.waiting("c");
        assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
        assert_eq!(waiting.message.as_deref(), Some("cni: no route"));
        assert_eq!(d.phase(), "Pending");
        let delay = d.wake_in().unwrap();
        assert!(delay >= base / 2 && delay <= base, "round {round}: {delay:?} within {base:?}");
        let at = d.wake.unwrap();
        assert!(d.tick_at_instant(at - NS).is_empty());
        d.set_time(at - d.base);
        assert_eq!(shown(&d.step(Input::Tick)), ["SetUpSandbox u1"]);
        assert_eq!(d.wake, None);
        base = (base * 2).min(secs(60));
    }
    assert_eq!(base, secs(60), "capped at a minute");
    // Recovery: the containers start, the condition clears.
    assert_eq!(
        shown(&d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false })),
        ["StartContainer u1/c rc=0"]
    );
    let ready = d.condition("PodReadyToStartContainers");
    assert_eq!((ready.status.as_str(), ready.reason), ("True", None));
    assert_eq!(d.waiting("c").message, None);
    d.step(d.started("c", "c-1"));
    assert_eq!(d.phase(), "Running");
}

#[test]
fn sandbox_results_without_a_pod_are_ignored() {
    let mut d = Driver::new();
    assert!(d.step(sandbox_failed("x")).is_empty());
    assert!(d.step(Input::SandboxReady { ips: vec![], fresh: false }).is_empty());
    assert!(d.step(Input::Tick).is_empty());
    assert!(d.w.is_done());
}

// ---------------------------------------------------------------------------------------
// Stopping

/// `a` and `b` running as `a-1` and `b-2`, grace `grace` s.
fn running_pair(grace: Option<i64>) -> (Driver, P) {
    let mut d = Driver::new();
    let mut p = pod("u1", &[("a", "img:a"), ("b", "img:b")]);
    if let Some(g) = grace {
        p = p.grace(g);
    }
    d.run(&p);
    (d, p)
}

const STOP_PAIR: [&str; 4] = [
    "Event Normal Killing a: Stopping container a",
    "Event Normal Killing b: Stopping container b",
    "Signal Term a-1,b-2",
    "CheckExited a-1,b-2",
];

const REMOVE_PAIR: [&str; 5] = [
    "RemoveContainer a-1",
    "RemoveContainer b-2",
    "TearDownSandbox u1",
    "RemoveStatus u1",
    "ForgetPod u1",
];

#[test]
fn a_pod_no_longer_desired_stops_gracefully_and_is_removed() {
    let (mut d, _) = running_pair(Some(20));
    d.set_time(secs(10));
    assert_eq!(shown(&d.step(undesired())), STOP_PAIR);
    assert_eq!(d.wake, Some(d.at(secs(30))), "the grace period");
    assert!(!d.w.is_done());
    assert!(d.w.status(wall0()).is_none() && d.w.uid().is_none());
    assert!(d.step(d.exit("a-1", 143)).is_empty());
    assert_eq!(d.wake, Some(d.at(secs(30))));
    assert!(d.step(Input::Tick).is_empty());
    d.pass(secs(3));
    assert_eq!(shown(&d.step(d.exit("b-2", 0))), REMOVE_PAIR);
    assert!(d.w.is_done());
    assert_eq!(d.wake, None);
}

#[test]
fn the_grace_period_defaults_and_a_shorter_deletion_grace_wins() {
    // (terminationGracePeriodSeconds, deletionGracePeriodSeconds when deleted, wait)
    let cases = [
        (None, None, 30),
        (Some(10), None, 10),
        (Some(30), Some(Some(5)), 5),
        (Some(10), Some(Some(60)), 10),
        (None, Some(Some(3)), 3),
        (Some(12), Some(None), 12),
    ];
    for (grace, deletion, wait) in cases {
        let case = format!("grace {grace:?}, deletion {deletion:?}");
        let (mut d, p) = running_pair(grace);
        d.set_time(secs(1));
        let input = match deletion {
            Some(g) => p.clone().deleting(g).input(),
            None => undesired(),
        };
        assert_eq!(shown(&d.step(input)), STOP_PAIR, "{case}");
        assert_eq!(d.wake_in(), Some(secs(wait)), "{case}");
        d.step(d.exit("a-1", 0));
        assert_eq!(shown(&d.step(d.exit("b-2", 0))), REMOVE_PAIR, "{case}");
        // A deleted pod stays desired (deleting) until the source drops it.
        assert_eq!(d.w.is_done(), deletion.is_none(), "{case}");
        assert!(d.step(Input::Tick).is_empty(), "{case}");
        assert!(shown(&d.step(undesired())).is_empty());
        assert!(d.w.is_done(), "{case}");
    }
}

#[test]
fn no_exit_by_the_deadline_is_killed_then_removed_anyway() {
    let (mut d, _) = running_pair(None);
    d.step(undesired());
    let deadline = d.wake.unwrap();
    assert_eq!(deadline, d.at(secs(30)));
    assert!(d.tick_at_instant(deadline - NS).is_empty());
    assert_eq!(shown(&d.tick_at_instant(deadline)), ["Signal Kill a-1,b-2"]);
    assert_eq!(d.wake, Some(deadline + KILL_WAIT));
    assert!(d.step(d.exit("a-1", 137)).is_empty(), "b still awaited");
    assert!(d.tick_at_instant(deadline + KILL_WAIT - NS).is_empty());
    assert_eq!(shown(&d.tick_at_instant(deadline + KILL_WAIT)), REMOVE_PAIR);
    assert!(d.w.is_done());
}

#[test]
fn a_kill_goes_only_to_what_has_not_exited() {
    let (mut d, _) = running_pair(Some(5));
    d.step(undesired());
    d.step(d.exit("b-2", 0));
    assert_eq!(shown(&d.tick_at(secs(5))), ["Signal Kill a-1"]);
    assert_eq!(shown(&d.step(d.exit("a-1", 137))), REMOVE_PAIR);
}

#[test]
fn the_kernels_exit_does_not_end_a_stops_wait() {
    let (mut d, _) = running_pair(None);
    d.step(undesired());
    assert!(d.step(d.kernel_exit("a-1", 143, Some(15))).is_empty());
    assert!(d.step(d.kernel_exit("b-2", 143, Some(15))).is_empty());
    assert_eq!(d.wake_in(), Some(secs(30)), "still waiting for containerd");
    assert!(d.step(d.exit("a-1", 143)).is_empty());
    assert_eq!(shown(&d.step(d.exit("b-2", 143))), REMOVE_PAIR);
}

#[test]
fn a_pod_with_nothing_running_is_removed_at_once() {
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    d.step(d.exit("c-1", 0));
    assert_eq!(
        shown(&d.step(undesired())),
        ["RemoveContainer c-1", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert!(d.w.is_done());
}

#[test]
fn a_pod_backing_off_is_removed_with_its_exited_container() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1));
    d.step(d.exit("c-2", 1));
    assert_eq!(d.waiting("c").reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(
        shown(&d.step(undesired())),
        ["RemoveContainer c-2", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert_eq!(d.wake, None, "no restart is due any more");
    assert!(d.w.is_done());
}

#[test]
fn a_stop_waits_for_the_sandbox_being_set_up() {
    let mut d = Driver::new();
    d.step(web().input());
    assert!(d.step(undesired()).is_empty(), "the sandbox's result first");
    assert!(!d.w.is_done());
    assert_eq!(
        shown(&d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false })),
        ["TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert!(d.w.is_done());
}

#[test]
fn a_stop_waits_for_a_start_under_way_and_stops_what_it_started() {
    let mut d = starting(&web().grace(7));
    assert!(d.step(undesired()).is_empty(), "the start's result first");
    assert_eq!(d.wake, None);
    d.pass(secs(2));
    assert_eq!(
        shown(&d.step(d.started("c", "c-1"))),
        ["Event Normal Killing c: Stopping container c", "Signal Term c-1", "CheckExited c-1"]
    );
    assert_eq!(d.wake_in(), Some(secs(7)));
    assert_eq!(
        shown(&d.step(d.exit("c-1", 143))),
        ["RemoveContainer c-1", "TearDownSandbox u1", "RemoveStatus u1", "ForgetPod u1"]
    );
    assert!(d.w.is_done());
    // A failed start leaves nothing to stop.
    let mut d = starting(&web());
    assert!(d.step(undesired()).is_empty());
    assert_eq!(
        shown(&d.step(pull_failed("denied"))),
        [
            "Event Warning Failed c: Error: ErrImagePull",
            "TearDownSandbox u1",
            "RemoveStatus u1",
            "ForgetPod u1",
        ]
    );
    assert!(d.w.is_done());
}

// ---------------------------------------------------------------------------------------
// M10: a replaced pod stops before the new one starts

#[test]
fn m10_the_old_pod_stops_before_the_new_one_starts() {
    // M10: the new pod's containers start only after the old pod with the same full name
    // has stopped.
    let (mut d, _) = running_pair(Some(30));
    d.set_time(secs(1));
    let new = pod("u2", &[("a", "img:a2")]);
    assert_eq!(shown(&d.drive(new.input())), STOP_PAIR);
    assert_eq!(d.wake, Some(d.at(secs(31))));
    // Updates meanwhile (another spec, even another UID) wait for the stop.
    assert!(d.drive(new.clone().image("a", "img:a3").input()).is_empty());
    let newest = pod("u3", &[("a", "img:a4")]);
    assert!(d.drive(newest.input()).is_empty());
    // containerd restarted: the containers the stop waits for are looked at again.
    assert_eq!(shown(&d.step(Input::Resync)), ["CheckExited a-1,b-2"]);
    assert!(d.tick_at(secs(31) - NS).is_empty());
    assert!(d.drive(d.exit("a-1", 0)).is_empty());
    let actions = d.drive(d.exit("b-2", 0));
    assert_eq!(
        shown(&actions),
        [
            "RemoveContainer a-1",
            "RemoveContainer b-2",
            "TearDownSandbox u1",
            "RemoveStatus u1",
            "ForgetPod u1",
            "TrackPod u3",
            "SetUpSandbox u3",
            "StartContainer u3/a rc=0",
        ]
    );
    assert_eq!(d.w.uid(), Some("u3"));
    assert_eq!(d.container("a").image, "img:a4");
    assert_eq!(d.container("a").restart_count, 0, "a new pod's containers count anew");
}

#[test]
fn m10_a_replaced_pod_stops_with_its_own_grace_period() {
    // M10 (and kubelet): the old pod is killed with its own grace period, not the new
    // pod's.
    let (mut d, _) = running_pair(Some(5));
    assert_eq!(shown(&d.step(pod("u2", &[("a", "img:a")]).grace(60).input())), STOP_PAIR);
    assert_eq!(d.wake_in(), Some(secs(5)));
    assert_eq!(shown(&d.tick_at(secs(5))), ["Signal Kill a-1,b-2"]);
}

#[test]
fn m10_nothing_new_starts_while_the_old_pod_is_killed() {
    // M10, through SIGKILL and KILL_WAIT.
    let (mut d, _) = running_pair(Some(2));
    d.drive(pod("u2", &[("a", "img:a")]).input());
    assert_eq!(shown(&d.tick_at(secs(2))), ["Signal Kill a-1,b-2"]);
    assert!(d.drive(d.kernel_exit("a-1", 137, Some(9))).is_empty());
    assert!(d.tick_at(secs(12) - NS).is_empty());
    let actions = shown(&d.tick_at(secs(12)));
    assert_eq!(&actions[..5], REMOVE_PAIR);
    assert_eq!(&actions[5..], ["TrackPod u2", "SetUpSandbox u2", "StartContainer u2/a rc=0"]);
}

#[test]
fn m10_a_start_under_way_finishes_before_the_replacement() {
    // M10: a start under way when the new UID arrives belongs to the old pod: its
    // container is stopped before anything of the new pod starts.
    let mut d = starting(&web());
    assert!(d.step(pod("u2", &[("c", "img:2")]).input()).is_empty());
    assert_eq!(
        shown(&d.step(d.started("c", "c-1"))),
        ["Event Normal Killing c: Stopping container c", "Signal Term c-1", "CheckExited c-1"]
    );
    assert_eq!(
        shown(&d.drive(d.exit("c-1", 143))),
        [
            "RemoveContainer c-1",
            "TearDownSandbox u1",
            "RemoveStatus u1",
            "ForgetPod u1",
            "TrackPod u2",
            "SetUpSandbox u2",
            "StartContainer u2/c rc=0",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Adoption

#[test]
fn adopts_a_running_container_without_starting_it() {
    let p = web().seen(wall_before(secs(10)));
    let mut f = found("old-c", "u1", "c", 3, &p.hash("c"));
    f.started_at = Some(wall_before(secs(3600)));
    let mut d = Driver::with_found(vec![f]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "Watch old-c", "SetUpSandbox u1"]);
    assert!(
        d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false }).is_empty(),
        "no start, no metric"
    );
    let c = d.container("c");
    assert_eq!(c.container_id.as_deref(), Some("containerd://old-c"));
    assert_eq!(c.restart_count, 3, "from its label");
    assert!(c.ready);
    assert_eq!(c.state.unwrap().running.unwrap().started_at, Some(Time(wall_before(secs(3600)))));
    assert_eq!(d.phase(), "Running");
    assert_eq!(d.wake, None);
    // Its exit is the worker's like any other: restarted as run number 4.
    assert_eq!(
        shown(&d.drive(d.exit("old-c", 1))),
        [
            "DeleteTask old-c",
            "KeepDead old-c",
            "StartContainer u1/c rc=4",
            "Count ContainerRestarted file",
        ]
    );
    assert_eq!(d.restart_count("c"), 4);
}

#[test]
fn adopts_an_exited_container_and_restarts_it_by_policy() {
    let p = web();
    let mut f = found("old-c", "u1", "c", 3, &p.hash("c"));
    f.task = FoundTask::NotRunning { exit_code: 2, exited_at: Some(wall_before(secs(5))) };
    let mut d = Driver::with_found(vec![f.clone()]);
    assert_eq!(shown(&d.step(p.input())), ["TrackPod u1", "DeleteTask old-c", "SetUpSandbox u1"]);
    let last = d.last_terminated("c");
    assert_eq!((last.exit_code, last.reason.as_deref()), (2, Some("Error")));
    assert_eq!(last.finished_at, Some(Time(wall_before(secs(5)))));
    assert_eq!(d.restart_count("c"), 3);
    assert_eq!(
        shown(&d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false })),
        ["KeepDead old-c", "StartContainer u1/c rc=4"]
    );
    assert_eq!(shown(&d.step(d.started("c", "c-1"))), ["Count ContainerRestarted file"]);
    assert_eq!(d.restart_count("c"), 4);

    // Never, exited 0: terminated, not started.
    let p = web().policy("Never");
    f.hash = Some(p.hash("c"));
    f.task = FoundTask::NotRunning { exit_code: 0, exited_at: None };
    let mut d = Driver::with_found(vec![f]);
    d.drive(p.input());
    let t = d.terminated("c");
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(d.phase(), "Succeeded");
    assert_eq!(d.wake, None);
}

#[test]
fn adopts_how_a_container_without_its_task_ended_from_its_labels() {
    for (policy, restarted) in [("Never", false), ("OnFailure", true)] {
        let p = web().policy(policy);
        let mut f = found("old-c", "u1", "c", 0, &p.hash("c"));
        f.task = FoundTask::None;
        f.recorded_exit = RecordedExit {
            exit_code: Some(137),
            reason: Some("OOMKilled".into()),
            finished_at: Some(wall_before(secs(60))),
        };
        let mut d = Driver::with_found(vec![f]);
        let actions = shown(&d.drive(p.input()));
        assert_eq!(actions[..2], ["TrackPod u1", "SetUpSandbox u1"], "no task to delete");
        let t = if restarted {
            assert_eq!(actions[2..4], ["KeepDead old-c", "StartContainer u1/c rc=1"]);
            d.last_terminated("c")
        } else {
            // It finished: nothing of it runs, its emptyDirs go.
            assert_eq!(actions[2..], ["ReleaseVolumes u1"]);
            d.terminated("c")
        };
        assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some("OOMKilled")), "{policy}");
        assert_eq!(t.finished_at, Some(Time(wall_before(secs(60)))));
    }
}

#[test]
fn adoption_removes_changed_duplicate_and_unknown_containers() {
    let p = pod("u1", &[("c", "img:c"), ("d", "img:d")]);
    let d_hash = p.hash("d");
    let found = vec![
        found("x-c", "u1", "c", 0, "deadbeef"),
        found("x-e", "u1", "e", 0, &d_hash),
        found("d-old", "u1", "d", 1, &d_hash),
        found("d-new", "u1", "d", 2, &d_hash),
    ];
    let mut d = Driver::with_found(found);
    assert_eq!(
        shown(&d.drive(p.seen(wall0()).input())),
        [
            "TrackPod u1",
            "Watch d-new",
            "RemoveContainer d-old",
            "RemoveContainer x-e",
            "RemoveContainer x-c",
            "SetUpSandbox u1",
            "StartContainer u1/c rc=0",
        ],
        "the newest of each kept; no start latency (one of them ran)"
    );
    assert_eq!(d.restart_count("d"), 2);
    assert_eq!(d.container("c").container_id.as_deref(), Some("containerd://c-1"));
}

#[test]
fn g1_adoption_leaves_earlier_exits_to_the_garbage_collector() {
    // The dead instances an earlier run kept stay (the collector counts them); a newer
    // one than the adopted, or a running older one, does not.
    let p = pod("u1", &[("c", "img:c")]);
    let hash = p.hash("c");
    let exited = FoundTask::NotRunning { exit_code: 1, exited_at: None };
    let dead = |id: &str, restart_count| Found {
        task: exited.clone(),
        ..found(id, "u1", "c", restart_count, &hash)
    };
    let found = vec![dead("c-0", 0), dead("c-1", 1), found("c-2", "u1", "c", 2, &hash)];
    let mut d = Driver::with_found(found);
    let shown = shown(&d.drive(p.seen(wall0()).input()));
    assert!(shown.contains(&"Watch c-2".to_owned()), "{shown:?}");
    assert!(!shown.iter().any(|a| a.contains("c-0") || a.contains("c-1")), "{shown:?}");
    assert_eq!(d.restart_count("c"), 2);
}

#[test]
fn m10_containers_of_another_pod_stop_before_the_desired_one_starts() {
    // M10: what an earlier run left for another UID under this name stops, with the
    // grace its pod had (the longest), and is removed before the desired pod starts.
    let p = web();
    let mut s1 = found("s-1", "u0", "c", 0, "h");
    s1.grace = Some(secs(10));
    let mut s2 = found("s-2", "u0", "d", 0, "h");
    s2.grace = Some(secs(20));
    let mut s3 = found("s-3", "u0", "e", 0, "h");
    s3.task = FoundTask::NotRunning { exit_code: 0, exited_at: None };
    let mine = found("m-1", "u1", "c", 1, &p.hash("c"));
    let mut d = Driver::with_found(vec![s1, mine, s2, s3]);
    assert_eq!(
        shown(&d.drive(p.input())),
        ["Watch s-1", "Watch s-2", "Signal Term s-1,s-2", "CheckExited s-1,s-2"]
    );
    assert_eq!(d.wake_in(), Some(secs(20)));
    assert!(d.w.status(wall0()).is_none(), "not taken on yet");
    assert!(d.drive(d.exit("s-1", 0)).is_empty());
    assert!(d.drive(d.kernel_exit("s-2", 0, None)).is_empty());
    assert_eq!(
        shown(&d.drive(d.exit("s-2", 0))),
        [
            "RemoveContainer s-1",
            "RemoveContainer s-2",
            "RemoveContainer s-3",
            "TearDownSandbox u0",
            "TrackPod u1",
            "Watch m-1",
            "SetUpSandbox u1",
        ]
    );
    assert_eq!(d.restart_count("c"), 1);
}

#[test]
fn unlabelled_stale_containers_get_thirty_seconds() {
    let mut d = Driver::with_found(vec![found("s-1", "u0", "c", 0, "h")]);
    assert_eq!(shown(&d.drive(undesired())), ["Watch s-1", "Signal Term s-1", "CheckExited s-1"]);
    assert_eq!(d.wake_in(), Some(secs(30)));
    assert_eq!(shown(&d.tick_at(secs(30))), ["Signal Kill s-1"]);
    assert_eq!(shown(&d.tick_at(secs(40))), ["RemoveContainer s-1", "TearDownSandbox u0"]);
    assert!(d.w.is_done());
}

#[test]
fn a_deleted_pods_containers_are_stale() {
    let p = web().deleting(Some(0));
    let mut d = Driver::with_found(vec![found("m-1", "u1", "c", 0, &p.hash("c"))]);
    assert_eq!(shown(&d.drive(p.input())), ["Watch m-1", "Signal Term m-1", "CheckExited m-1"]);
    assert_eq!(d.wake_in(), Some(secs(30)), "the label's grace, default 30 s");
}

#[test]
fn start_latency_counts_once_from_config_seen() {
    let p = pod("u1", &[("a", "img:a"), ("b", "img:b")]).seen(wall_before(secs(3)));
    let mut d = Driver::new();
    d.set_time(secs(2));
    let actions = shown(&d.drive(p.input()));
    assert_eq!(
        actions.iter().filter(|a| a.starts_with("Count")).collect::<Vec<_>>(),
        ["Count PodStarted file 5s"]
    );
    d.pass(secs(1));
    assert_eq!(
        shown(&d.drive(d.exit("a-1", 1)))
            .into_iter()
            .filter(|a| a.starts_with("Count"))
            .collect::<Vec<_>>(),
        ["Count ContainerRestarted file"]
    );
}

// ---------------------------------------------------------------------------------------
// The kernel and containerd both report an exit

#[test]
fn the_kernels_exit_first_decides_once() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1)); // the immediate restart
    d.pass(secs(1));
    assert_eq!(
        shown(&d.step(d.kernel_exit("c-2", 137, Some(9)))),
        [
            "DeleteTask c-2 reap".to_owned(),
            "RecordExit c-2 137 Error".to_owned(),
            format!("Event Warning BackOff c: {CRASH_MESSAGE}"),
        ]
    );
    assert_eq!(d.wake_in(), Some(SECOND));
    assert!(d.step(d.exit("c-2", 137)).is_empty(), "containerd's word changes nothing");
    assert_eq!(d.wake_in(), Some(SECOND));
    assert_eq!(d.last_terminated("c").signal, Some(9));
    assert_eq!(
        shown(&d.tick_at(secs(2))),
        ["KeepDead c-2", "StartContainer u1/c rc=2", "Count ContainerRestarted file"]
    );
}

#[test]
fn containerds_exit_first_then_the_kernel_only_adds_the_signal() {
    let mut d = Driver::new();
    d.run(&web());
    assert_eq!(
        shown(&d.step(d.exit("c-1", 137))),
        ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1"]
    );
    assert_eq!(d.last_terminated("c").signal, None);
    assert!(d.step(d.kernel_exit("c-1", 137, Some(9))).is_empty());
    assert_eq!(d.last_terminated("c").signal, Some(9));
    assert!(d.step(d.kernel_exit("c-1", 143, Some(15))).is_empty());
    assert_eq!(d.last_terminated("c").signal, Some(9), "the first signal known stays");
    // Not restarted (Never): the terminated state gets it.
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    d.step(d.exit("c-1", 143));
    assert!(d.step(d.kernel_exit("c-1", 143, Some(15))).is_empty());
    let t = d.terminated("c");
    assert_eq!((t.exit_code, t.signal), (143, Some(15)));
}

// ---------------------------------------------------------------------------------------
// The OOM killer

fn oom(id: &str, victim: Option<&str>) -> Input {
    Input::Oom { container_id: id.into(), victim: victim.map(str::to_owned) }
}

const OOM_EVENT: &str = "Event Warning OOMKilled c: Container c was killed by the kernel: out of memory (it chose pid 42 (tail))";

#[test]
fn an_oom_kill_before_the_exit_names_the_victim() {
    let mut d = Driver::new();
    d.run(&web().policy("Never"));
    assert!(d.step(oom("c-1", Some("pid 42 (tail)"))).is_empty());
    assert_eq!(
        shown(&d.step(d.exit("c-1", 137))),
        [OOM_EVENT, "DeleteTask c-1", "RecordExit c-1 137 OOMKilled", "ReleaseVolumes u1"]
    );
    let t = d.terminated("c");
    assert_eq!(t.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(t.message.as_deref(), Some("The OOM killer chose pid 42 (tail)"));
}

#[test]
fn containerds_oom_then_the_kernels_still_names_the_victim() {
    for order in [[None, Some("pid 42 (tail)")], [Some("pid 42 (tail)"), None]] {
        let mut d = Driver::new();
        d.run(&web());
        for victim in order {
            assert!(d.step(oom("c-1", victim)).is_empty());
        }
        let actions = shown(&d.step(d.exit("c-1", 137)));
        assert_eq!(actions[0], OOM_EVENT, "{order:?}");
        let last = d.last_terminated("c");
        assert_eq!(last.reason.as_deref(), Some("OOMKilled"));
        assert_eq!(last.message.as_deref(), Some("The OOM killer chose pid 42 (tail)"));
    }
}

#[test]
fn an_oom_kill_without_a_victim_is_still_oomkilled() {
    let mut d = Driver::new();
    d.run(&web());
    d.step(oom("c-1", None));
    let actions = shown(&d.step(d.exit("c-1", 137)));
    assert_eq!(
        actions[0],
        "Event Warning OOMKilled c: Container c was killed by the kernel: out of memory"
    );
    let last = d.last_terminated("c");
    assert_eq!((last.reason.as_deref(), last.message), (Some("OOMKilled"), None));
}

#[test]
fn a_late_kernel_oom_corrects_the_reason() {
    let mut d = Driver::new();
    d.run(&web());
    d.step(d.exit("c-1", 137));
    assert_eq!(d.last_terminated("c").reason.as_deref(), Some("Error"));
    assert!(d.step(oom("c-1", None)).is_empty(), "containerd's late word has no victim");
    assert_eq!(d.last_terminated("c").reason.as_deref(), Some("Error"));
    assert!(d.step(oom("c-1", Some("pid 42 (tail)"))).is_empty());
    let last = d.last_terminated("c");
    assert_eq!(last.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(last.message.as_deref(), Some("The OOM killer chose pid 42 (tail)"));
}

#[test]
fn an_oom_kill_counts_for_one_run_only() {
    let mut d = Driver::new();
    d.run(&web());
    d.step(oom("c-1", Some("pid 42 (tail)")));
    d.drive(d.exit("c-1", 137));
    d.pass(secs(1));
    let actions = shown(&d.step(d.exit("c-2", 1)));
    assert!(!actions.iter().any(|a| a.contains("OOMKilled")), "{actions:?}");
    assert_eq!(d.last_terminated("c").reason.as_deref(), Some("Error"));
}

// ---------------------------------------------------------------------------------------
// Node shutdown

#[test]
fn shutdown_stops_the_pod_and_leaves_its_containers() {
    let (mut d, p) = running_pair(Some(15));
    d.set_time(secs(1));
    assert_eq!(shown(&d.step(Input::Shutdown)), ["Signal Term a-1,b-2", "CheckExited a-1,b-2"]);
    assert_eq!(d.wake_in(), Some(secs(15)));
    assert!(!d.w.is_done());
    assert!(d.step(d.kernel_exit("a-1", 0, None)).is_empty());
    assert!(d.step(d.exit("a-1", 0)).is_empty());
    assert!(d.step(d.exit("b-2", 143)).is_empty(), "nothing removed");
    assert!(d.w.is_done());
    assert_eq!(d.wake, None);
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("Terminated"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was terminated in response to imminent node shutdown.")
    );
    let disruption = d.condition("DisruptionTarget");
    assert_eq!(disruption.status, "True");
    assert_eq!(disruption.reason.as_deref(), Some("TerminationByKubelet"));
    let a = d.terminated("a");
    assert_eq!((a.exit_code, a.reason.as_deref()), (0, Some("Completed")));
    let b = d.terminated("b");
    assert_eq!((b.exit_code, b.reason.as_deref()), (143, Some("Error")));
    assert_eq!(d.restart_count("b"), 0, "not restarted");
    // Nothing more happens.
    assert!(d.step(pod("u2", &[("a", "img:a")]).input()).is_empty());
    assert!(d.step(p.input()).is_empty());
    assert!(d.step(Input::Tick).is_empty());
    assert!(d.step(Input::Shutdown).is_empty());
}

#[test]
fn shutdown_kills_after_the_grace_period_and_counts_them_killed() {
    let (mut d, _) = running_pair(None);
    d.step(Input::Shutdown);
    assert_eq!(shown(&d.tick_at(secs(30))), ["Signal Kill a-1,b-2"]);
    d.step(d.exit("a-1", 137));
    assert!(d.tick_at(secs(40)).is_empty(), "no removal");
    assert!(d.w.is_done());
    let b = d.terminated("b");
    assert_eq!((b.exit_code, b.reason.as_deref()), (137, Some("Error")));
    assert_eq!(b.finished_at, Some(Time(wall(secs(40)))));
    assert_eq!(d.phase(), "Failed");
}

#[test]
fn shutdown_waits_for_a_start_under_way_and_stops_it_too() {
    let mut d = starting(&pod("u1", &[("a", "img:a"), ("b", "img:b")]));
    d.step(d.started("a", "a-1"));
    assert!(d.step(Input::Shutdown).is_empty(), "b's start reports first");
    assert_eq!(d.wake, None);
    assert_eq!(
        shown(&d.step(d.started("b", "b-2"))),
        ["Signal Term a-1,b-2", "CheckExited a-1,b-2"]
    );
    d.step(d.exit("a-1", 0));
    d.step(d.exit("b-2", 0));
    assert!(d.w.is_done());
    assert!(d.terminated("b").exit_code == 0 && d.terminated("a").exit_code == 0);
}

#[test]
fn shutdown_while_backing_off_asks_for_no_wake() {
    let mut d = Driver::new();
    d.run(&pod("u1", &[("a", "img:a"), ("b", "img:b")]));
    d.drive(d.exit("b-2", 1));
    d.step(d.exit("b-3", 1));
    assert_eq!(d.wake_in(), Some(SECOND));
    d.step(Input::Shutdown);
    assert_eq!(shown(&d.step(d.exit("a-1", 0))), [] as [&str; 0]);
    assert!(d.w.is_done());
    assert_eq!(d.wake, None, "b's restart is not due any more");
    assert_eq!(d.waiting("b").reason.as_deref(), Some("CrashLoopBackOff"));
    assert!(d.tick_at(secs(5)).is_empty());
}

#[test]
fn shutdown_without_a_pod_is_done_at_once() {
    let mut d = Driver::new();
    assert!(d.step(Input::Shutdown).is_empty());
    assert!(d.w.is_done());
    assert!(d.step(web().input()).is_empty(), "nothing starts after a shutdown");
    assert!(d.w.is_done());
}

// ---------------------------------------------------------------------------------------
// Spec changes and resyncs

#[test]
fn a_changed_container_is_replaced() {
    let mut d = Driver::new();
    d.run(&web());
    d.pass(secs(1));
    let changed = web().image("c", "img:2");
    // It stops gracefully first (SIGTERM, the grace period), then is recreated.
    assert_eq!(
        shown(&d.drive(changed.input())),
        [
            "Event Normal Killing c: Container c definition changed, will be restarted",
            "Signal Term c-1",
            "CheckExited c-1",
        ]
    );
    assert_eq!(d.wake_in(), Some(secs(30)), "the pod's grace period");
    let actions = d.step(d.exit("c-1", 143));
    assert_eq!(shown(&actions), ["DeleteTask c-1", "KeepDead c-1", "StartContainer u1/c rc=1",]);
    let Some(Action::StartContainer { hash, .. }) = actions.last() else { unreachable!() };
    assert_eq!(hash, &changed.hash("c"));
    d.step(d.started("c", "c-2"));
    let c = d.container("c");
    assert_eq!((c.image.as_str(), c.restart_count), ("img:2", 1));
    assert_eq!(c.last_state, None, "the replaced container's end is not shown");
    assert!(d.drive(changed.input()).is_empty(), "the same spec again changes nothing");
}

#[test]
fn a_changed_container_that_ignores_sigterm_is_killed_after_its_grace_period() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(web().image("c", "img:2").input());
    d.pass(secs(30));
    assert_eq!(shown(&d.step(Input::Tick)), ["Signal Kill c-1", "CheckExited c-1"]);
    d.pass(KILL_WAIT);
    let actions = shown(&d.step(Input::Tick));
    assert!(
        actions.contains(&"StartContainer u1/c rc=1".to_owned()),
        "taken as killed after KILL_WAIT, and replaced: {actions:?}"
    );
}

#[test]
fn a_change_while_backing_off_starts_the_new_spec_at_once() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1));
    d.step(d.exit("c-2", 1));
    assert_eq!(d.wake_in(), Some(SECOND));
    assert_eq!(
        shown(&d.step(web().image("c", "img:2").input())),
        ["KeepDead c-2", "StartContainer u1/c rc=2"],
        "no Killing event: nothing ran"
    );
}

#[test]
fn a_change_while_starting_waits_for_the_start() {
    let mut d = starting(&web());
    let changed = web().image("c", "img:2");
    assert!(d.step(changed.input()).is_empty(), "one start at a time");
    let actions = d.step(d.started("c", "c-1"));
    assert_eq!(
        shown(&actions),
        [
            "Event Normal Killing c: Container c definition changed, will be restarted",
            "Signal Term c-1",
            "CheckExited c-1",
        ]
    );
    let actions = d.step(d.exit("c-1", 0));
    let Some(Action::StartContainer { hash, .. }) = actions.last() else {
        panic!("the new spec starts once the old one exited: {:?}", shown(&actions))
    };
    assert_eq!(hash, &changed.hash("c"));
    // A failed start: the new spec goes at once.
    let mut d = starting(&web());
    d.step(changed.input());
    assert_eq!(
        shown(&d.step(pull_failed("denied"))),
        ["Event Warning Failed c: Error: ErrImagePull", "StartContainer u1/c rc=0"]
    );
}

#[test]
fn resync_checks_the_running_containers_only() {
    let mut d = Driver::new();
    d.run(&pod("u1", &[("a", "img:a"), ("b", "img:b"), ("e", "img:e")]).policy("OnFailure"));
    d.step(d.exit("b-2", 0)); // terminated
    d.drive(d.exit("e-3", 1)); // restarted at once as e-4
    d.step(d.exit("e-4", 1)); // backing off
    assert_eq!(shown(&d.step(Input::Resync)), ["CheckExited a-1"]);
    d.step(d.exit("a-1", 0));
    assert!(d.step(Input::Resync).is_empty());
    assert!(Driver::new().step(Input::Resync).is_empty());
}

/// containerd restarted while a pod stops: the containers the stop still waits for are
/// looked at again (their exits may have been missed), and their exits finish the stop.
#[test]
fn resync_during_a_stop_checks_the_containers_it_waits_for() {
    let (mut d, _) = running_pair(Some(20));
    assert_eq!(shown(&d.step(undesired())), STOP_PAIR);
    assert!(d.step(d.exit("a-1", 143)).is_empty());
    assert_eq!(shown(&d.step(Input::Resync)), ["CheckExited b-2"]);
    assert_eq!(shown(&d.step(d.exit("b-2", 143))), REMOVE_PAIR);
}

#[test]
fn events_name_the_pod_object() {
    let mut d = Driver::new();
    d.run(&web());
    d.drive(d.exit("c-1", 1));
    let actions = d.step(d.exit("c-2", 1));
    let Some(Action::Event { pod: p, kind, .. }) =
        actions.iter().find(|a| matches!(a, Action::Event { .. }))
    else {
        unreachable!()
    };
    assert_eq!(*kind, EventType::Warning);
    assert_eq!(pod::uid(p), "u1");
}

// ---------------------------------------------------------------------------------------
// Invariants, for any sequence of inputs

#[derive(Debug, Clone)]
enum Op {
    /// Pod `u{uid}` with containers a and b of image `img:{image}`.
    Desired {
        uid: u8,
        image: u8,
        policy: u8,
        grace: u8,
    },
    Deleting {
        grace: u8,
    },
    Undesired,
    /// Answers the `pick`th request under way.
    Answer {
        pick: usize,
        ok: bool,
        pull: bool,
    },
    /// A running container exits.
    Exit {
        pick: usize,
        code: i32,
        kernel: bool,
    },
    Oom {
        pick: usize,
        victim: bool,
    },
    Resync,
    Pass {
        ms: u64,
    },
    TickAtWake,
    Shutdown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u8..3, 0u8..2, 0u8..3, 0u8..3)
            .prop_map(|(uid, image, policy, grace)| Op::Desired { uid, image, policy, grace }),
        1 => (0u8..3).prop_map(|grace| Op::Deleting { grace }),
        1 => Just(Op::Undesired),
        6 => (0usize..8, prop::bool::weighted(0.8), any::<bool>())
            .prop_map(|(pick, ok, pull)| Op::Answer { pick, ok, pull }),
        4 => (0usize..8, prop_oneof![Just(0), Just(1), Just(137)], any::<bool>())
            .prop_map(|(pick, code, kernel)| Op::Exit { pick, code, kernel }),
        1 => (0usize..8, any::<bool>()).prop_map(|(pick, victim)| Op::Oom { pick, victim }),
        1 => Just(Op::Resync),
        3 => (0u64..20_000).prop_map(|ms| Op::Pass { ms }),
        3 => Just(Op::TickAtWake),
        1 => Just(Op::Shutdown),
    ]
}

fn model_pod(uid: u8, image: u8, policy: u8, grace: u8) -> P {
    let image = format!("img:{image}");
    let mut p = pod(&format!("u{uid}"), &[("a", &image), ("b", &image)])
        .policy(["Always", "OnFailure", "Never"][usize::from(policy)]);
    if uid == 2 {
        // An init container, then a sidecar, before the app containers (I1, I3).
        let init =
            |name: &str, restart_policy: Option<&str>| k8s_openapi::api::core::v1::Container {
                name: name.into(),
                image: Some(image.clone()),
                restart_policy: restart_policy.map(Into::into),
                ..Default::default()
            };
        p.spec().init_containers = Some(vec![init("i", None), init("s", Some("Always"))]);
    }
    match grace {
        0 => p,
        g => p.grace(i64::from(g) * 2),
    }
}

/// What the runtime would hold, as the worker's actions made it.
#[derive(Debug, Default)]
struct Model {
    /// Requests under way: (uid, container name) of a start, (uid, None) of a sandbox.
    pending: Vec<(String, Option<String>)>,
    /// Every container that exists, by id: its pod's UID.
    existing: BTreeMap<String, String>,
    /// Of those, the ones whose task runs (as containerd sees it).
    running: BTreeSet<String>,
    /// Reported exited by the kernel only.
    kernel_exited: BTreeSet<String>,
    /// The pod whose kernel events resolve to it (TrackPod .. ForgetPod).
    tracked: Option<String>,
    sandboxes: BTreeSet<String>,
    last_desired: Option<P>,
}

impl Model {
    /// Checks `actions` against the runtime's state and applies them.
    fn apply(&mut self, actions: &[Action]) -> Result<(), TestCaseError> {
        for action in actions {
            match action {
                Action::TrackPod { uid } => {
                    // M10: one pod under this name at a time, and nothing of another left.
                    prop_assert_eq!(&self.tracked, &None, "TrackPod {} while tracking", uid);
                    prop_assert!(
                        self.existing.values().all(|u| u == uid),
                        "TrackPod {} with {:?} left",
                        uid,
                        self.existing
                    );
                    prop_assert!(self.sandboxes.iter().all(|u| u == uid));
                    self.tracked = Some(uid.clone());
                }
                Action::ForgetPod { uid } => {
                    prop_assert_eq!(self.tracked.as_ref(), Some(uid));
                    self.tracked = None;
                }
                Action::SetUpSandbox { pod: p } => {
                    let uid = pod::uid(p).to_owned();
                    prop_assert_eq!(self.tracked.as_ref(), Some(&uid));
                    prop_assert!(!self.pending.contains(&(uid.clone(), None)));
                    self.pending.push((uid.clone(), None));
                    self.sandboxes.insert(uid);
                }
                Action::StartContainer { pod: p, container, .. } => {
                    let uid = pod::uid(p).to_owned();
                    prop_assert_eq!(
                        self.tracked.as_ref(),
                        Some(&uid),
                        "a start of an untracked pod"
                    );
                    prop_assert!(
                        !self.pending.contains(&(uid.clone(), None)),
                        "start before its sandbox"
                    );
                    prop_assert!(
                        !self.pending.iter().any(|(_, c)| c.as_ref() == Some(container)),
                        "two starts of {} under way",
                        container
                    );
                    self.pending.push((uid, Some(container.clone())));
                }
                Action::TearDownSandbox { uid } => {
                    prop_assert!(
                        !self.existing.values().any(|u| u == uid),
                        "sandbox {} torn down with containers left: {:?}",
                        uid,
                        self.existing
                    );
                    prop_assert!(
                        !self.pending.iter().any(|(u, _)| u == uid),
                        "sandbox {} torn down with {:?} under way",
                        uid,
                        self.pending
                    );
                    self.sandboxes.remove(uid);
                }
                Action::RemoveContainer { container_id, .. } => {
                    self.existing.remove(container_id);
                    self.running.remove(container_id);
                }
                // A dead container kept: the garbage collector's, or the sandbox
                // teardown's with its pod.
                Action::KeepDead { container_id } => {
                    self.existing.remove(container_id);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// I1, I3: at most one init container runs or starts at a time, and app containers run
/// or start only once the pod is initialized (every init container completed, every
/// sidecar started once).
fn check_init_order(d: &Driver) -> Result<(), TestCaseError> {
    let Some(current) = &d.w.current else { return Ok(()) };
    let active =
        |s: &&Slot| matches!(s.state, SlotState::Starting { .. } | SlotState::Running { .. });
    let inits = current.slots.iter().filter(|s| s.kind == slot::SlotKind::Init);
    prop_assert!(inits.filter(active).count() <= 1, "two init containers at once");
    let apps = current.slots.iter().filter(|s| s.kind == slot::SlotKind::App);
    if apps.filter(active).count() > 0 {
        prop_assert!(current.initialized, "an app container before the pod was initialized");
    }
    if current.initialized && current.failed.is_none() {
        let pending_init =
            current.slots.iter().any(|s| s.kind == slot::SlotKind::Init && !s.is_completed());
        prop_assert!(!pending_init, "initialized with an init container not completed");
    }
    Ok(())
}

fn check_wake(d: &Driver) -> Result<(), TestCaseError> {
    if let Some(wake) = d.wake {
        let now = d.now().at;
        prop_assert!(wake > now, "a wake at or before now would spin");
        // The longest wait: the crash loop's and the image pull's max (300 s); grace
        // periods here are at most 30 s + KILL_WAIT.
        prop_assert!(wake - now <= CrashLoopConfig::default().max, "{:?}", wake - now);
    }
    if let Some(current) = &d.w.current {
        for slot in &current.slots {
            if let SlotState::Waiting { retry_at, .. } = slot.state {
                prop_assert!(retry_at.saturating_duration_since(d.now().at) <= secs(300));
            }
        }
    }
    Ok(())
}

fn run_ops(stale: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut m = Model::default();
    let mut d = if stale {
        m.existing.insert("s-0".into(), "u0".into());
        m.running.insert("s-0".into());
        m.sandboxes.insert("u0".into());
        let mut f = found("s-0", "u0", "a", 0, "h");
        f.grace = Some(secs(3));
        Driver::with_found(vec![f])
    } else {
        Driver::new()
    };
    let mut shut_down_before = false;
    for op in ops {
        let input = match op {
            Op::Desired { uid, image, policy, grace } => {
                let p = model_pod(uid, image, policy, grace);
                let input = p.input();
                m.last_desired = Some(p);
                input
            }
            Op::Deleting { grace } => match &m.last_desired {
                Some(p) => p.clone().deleting(Some(i64::from(grace))).input(),
                None => continue,
            },
            Op::Undesired => {
                m.last_desired = None;
                undesired()
            }
            Op::Answer { pick, ok, pull } => {
                if m.pending.is_empty() {
                    continue;
                }
                let (uid, container) = m.pending.remove(pick % m.pending.len());
                match (container, ok) {
                    (None, true) => Input::SandboxReady { ips: vec![pod_ip()], fresh: false },
                    (None, false) => sandbox_failed("no"),
                    (Some(container), true) => {
                        let id = d.next_id(&container);
                        m.existing.insert(id.clone(), uid);
                        m.running.insert(id.clone());
                        d.started(&container, &id)
                    }
                    (Some(container), false) => Input::StartFailed {
                        container,
                        failure: StartFailure::new(
                            if pull {
                                WaitingReason::ErrImagePull
                            } else {
                                WaitingReason::CreateContainerError
                            },
                            "no".into(),
                        ),
                    },
                }
            }
            Op::Exit { pick, code, kernel } => {
                let Some(id) = m.running.iter().nth(pick % m.running.len().max(1)).cloned() else {
                    continue;
                };
                if kernel && !m.kernel_exited.contains(&id) {
                    m.kernel_exited.insert(id.clone());
                    d.kernel_exit(&id, code, Some(9))
                } else {
                    m.running.remove(&id);
                    d.exit(&id, code)
                }
            }
            Op::Oom { pick, victim } => {
                let Some(id) = m.running.iter().nth(pick % m.running.len().max(1)).cloned() else {
                    continue;
                };
                oom(&id, victim.then_some("pid 1 (x)"))
            }
            Op::Resync => Input::Resync,
            Op::Pass { ms } => {
                d.pass(Duration::from_millis(ms));
                Input::Tick
            }
            Op::TickAtWake => match d.wake {
                Some(at) => {
                    d.set_time(at - d.base);
                    Input::Tick
                }
                None => continue,
            },
            Op::Shutdown => Input::Shutdown,
        };
        let actions = d.step(input);
        m.apply(&actions)?;
        if d.w.shutdown == super::Shutdown::Done {
            prop_assert!(d.w.is_done());
            let starts_something = actions
                .iter()
                .any(|a| matches!(a, Action::StartContainer { .. } | Action::SetUpSandbox { .. }));
            prop_assert!(!starts_something, "a start at a shutdown");
            prop_assert!(
                !shut_down_before || actions.is_empty(),
                "after a shutdown: {:?}",
                shown(&actions)
            );
            prop_assert_eq!(d.wake, None);
            shut_down_before = true;
            continue;
        }
        check_wake(&d)?;
        check_init_order(&d)?;
        if d.w.stopping.is_some() {
            prop_assert!(
                !actions.iter().any(|a| matches!(a, Action::SetUpSandbox { .. })),
                "a sandbox set up while a stop is under way"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever happens: one start per container at a time, nothing of a pod starts
    /// while another pod (or what an earlier run left) is still there (M10), a sandbox
    /// is torn down only once its containers are removed and nothing of it is under way,
    /// and no wait is longer than the crash loop's max or already due.
    #[test]
    fn the_worker_keeps_its_invariants(stale in any::<bool>(), ops in prop::collection::vec(op(), 1..60)) {
        run_ops(stale, ops)?;
    }
}
