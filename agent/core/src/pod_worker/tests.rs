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
mod adopt;
mod changes;
mod ephemeral;
mod evict;
mod exits;
mod init;
mod invariants;
mod logs;
mod node_admission;
mod objects;
mod probes;
mod qos;
mod resize;
mod restart_rules;
mod start;
mod stop;

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
        Input::Desired(Some(Desired {
            source: Source::File,
            pod: Arc::new(self.0.clone()),
            rejected: None,
            answers: Answers::ALL,
            resize_pending: None,
        }))
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
        resources: None,
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
        Action::ResizeContainers { containers, .. } => {
            let resized: Vec<String> =
                containers.iter().map(|c| format!("{}/{}", c.name, c.container_id)).collect();
            format!("ResizeContainers {}", resized.join(","))
        }
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

/// A pod `c` whose first start is under way (not answered).
fn starting(p: &P) -> Driver {
    let mut d = Driver::new();
    d.step(p.input());
    let actions = d.step(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
    assert_eq!(starts(&actions), p.0.spec.as_ref().unwrap().containers.len());
    d
}

fn pull_failed(message: &str) -> Input {
    Input::StartFailed {
        container: "c".into(),
        failure: StartFailure::new(WaitingReason::ErrImagePull, message.into()),
    }
}

fn start_failed(reason: WaitingReason, message: &str) -> Input {
    Input::StartFailed { container: "c".into(), failure: StartFailure::new(reason, message.into()) }
}

fn sandbox_failed(message: &str) -> Input {
    Input::SandboxFailed(SandboxProblem {
        reason: SandboxReason::NetworkNotReady,
        message: message.into(),
    })
}

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

fn oom(id: &str, victim: Option<&str>) -> Input {
    Input::Oom { container_id: id.into(), victim: victim.map(str::to_owned) }
}
