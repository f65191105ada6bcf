//! `logs --previous` through a crash loop (issue 31): the worker's status, the container
//! garbage collector (G1) and kubelet's choice of the instance a log request reads, run
//! together on a model of the runtime. The invariant: whatever the published status names
//! (the running instance, the last termination) still exists when a log request follows
//! it, however the collector's passes, the exits and the status reads interleave with the
//! worker's rounds.

use std::collections::{BTreeSet, VecDeque};
use std::iter::Peekable;

use k8s_openapi::api::core::v1::Container;

use super::*;
use crate::container_log;
use crate::gc::containers::{self as gc, Instance};

/// What can happen besides the worker's own steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// The collector runs a pass (it reads the published statuses, lists, removes).
    Gc,
    /// A log request reads the published status: `previous`, then the current run.
    Read,
    /// The running instance's process exits; the kernel's and containerd's reports of
    /// it go to the worker's inbox.
    Crash,
    /// The worker takes its inbox: one round, then its status is published.
    Deliver,
    /// Time passes; a round if the worker's wake-up came due.
    Wait(u64),
}

/// A worker for `default/web`, the runtime's containers, and the status it published.
struct Sim {
    d: Driver,
    /// The runtime's containers of the pod.
    instances: Vec<Instance>,
    /// Exits reported and not yet taken by the worker.
    inbox: VecDeque<Input>,
    /// The status published at the end of the last round (what readers and the
    /// collector see).
    published: Option<PodStatus>,
    /// What happens at the next container start, after its instance is made and before
    /// the worker hears it started.
    at_start: Vec<Op>,
    /// Log requests answered with an instance, and instances the collector removed.
    reads: usize,
    removed: usize,
}

impl Sim {
    fn new() -> Sim {
        Sim {
            d: Driver::new(),
            instances: Vec::new(),
            inbox: VecDeque::new(),
            published: None,
            at_start: Vec::new(),
            reads: 0,
            removed: 0,
        }
    }

    /// One round of the worker's executor: each action performed in turn, the runtime's
    /// results fed back, and between any two actions whatever `ops` says happens
    /// meanwhile (a collector pass, a read, an exit); the status is published at the end.
    fn round(&mut self, input: Input, ops: &mut Peekable<impl Iterator<Item = Op>>) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let actions = self.d.step(input);
            for action in actions {
                self.meanwhile(ops);
                match action {
                    Action::SetUpSandbox { .. } => {
                        queue.push_back(Input::SandboxReady { ips: vec![pod_ip()], fresh: false });
                    }
                    Action::StartContainer { container, restart_count, .. } => {
                        let id = self.d.next_id(&container);
                        self.instances.push(Instance {
                            id: id.clone(),
                            pod_uid: "u1".into(),
                            container: container.clone(),
                            restart_count,
                            created_at: self.d.now().wall,
                            running: true,
                        });
                        // It may exit before the worker hears it started.
                        for op in std::mem::take(&mut self.at_start) {
                            self.apply(op, ops);
                        }
                        self.meanwhile(ops);
                        queue.push_back(self.d.started(&container, &id));
                    }
                    Action::RemoveContainer { container_id, .. } => {
                        self.instances.retain(|i| i.id != container_id);
                    }
                    _ => {}
                }
            }
        }
        self.published = self.d.w.status(self.d.now().wall).map(|(_, status)| status);
        self.check();
    }

    /// Takes what happens meanwhile: the next ops that are not the worker's own.
    fn meanwhile(&mut self, ops: &mut Peekable<impl Iterator<Item = Op>>) {
        while let Some(op) = ops.next_if(|op| matches!(op, Op::Gc | Op::Read | Op::Crash)) {
            self.apply(op, ops);
        }
    }

    fn apply(&mut self, op: Op, ops: &mut Peekable<impl Iterator<Item = Op>>) {
        match op {
            Op::Gc => self.collect(),
            Op::Read => self.read(),
            Op::Crash => self.crash(),
            Op::Deliver => {
                let inputs: Vec<Input> = self.inbox.drain(..).collect();
                for input in inputs {
                    self.round(input, ops);
                }
            }
            Op::Wait(seconds) => {
                self.d.pass(secs(seconds));
                if self.d.wake.is_some_and(|at| at <= self.d.now().at) {
                    self.round(Input::Tick, ops);
                }
            }
        }
    }

    fn crash(&mut self) {
        let Some(instance) = self.instances.iter_mut().find(|i| i.running) else { return };
        instance.running = false;
        let id = instance.id.clone();
        self.inbox.push_back(self.d.kernel_exit(&id, 1, None));
        self.inbox.push_back(self.d.exit(&id, 1));
    }

    /// A collector pass as the agent's runs it: the published statuses' names, then the
    /// plan of kubelet's default policy.
    fn collect(&mut self) {
        let named: BTreeSet<&str> =
            self.published.iter().flat_map(container_log::named_instances).collect();
        let plan = gc::plan(&self.instances, &named, &gc::Policy::default(), self.d.now().wall);
        self.removed += plan.remove.len();
        self.instances.retain(|i| !plan.remove.contains(&i.id));
        self.check();
    }

    /// `previous`, then the current run, of every container the status shows.
    fn read(&mut self) {
        let Some(status) = &self.published else { return };
        for container in ["init", "c"] {
            for previous in [true, false] {
                if let Ok(id) = container_log::choose(status, "default/web", container, previous) {
                    self.reads += 1;
                    assert!(
                        self.instances.iter().any(|i| i.id == id),
                        "{container} (previous: {previous}) reads {id}, which is gone; \
                         the status: {status:?}; the runtime has {:?}",
                        self.instances.iter().map(|i| &i.id).collect::<Vec<_>>()
                    );
                }
            }
        }
    }

    /// The invariant: every instance the published status names exists.
    fn check(&self) {
        let Some(status) = &self.published else { return };
        for id in container_log::named_instances(status) {
            assert!(
                self.instances.iter().any(|i| i.id == id),
                "the status names {id}, which is gone"
            );
        }
    }
}

/// `default/web` with app container `c`, and with `init` before it if `with_init`.
fn crash_looping(with_init: bool) -> P {
    let mut p = web();
    if with_init {
        let init = Container {
            name: "init".into(),
            image: Some("busybox:1".into()),
            ..Container::default()
        };
        p.spec().init_containers = Some(vec![init]);
    }
    p
}

/// Runs `ops` on a pod that has just started.
fn simulate(with_init: bool, ops: impl IntoIterator<Item = Op>) -> Sim {
    let mut sim = Sim::new();
    sim.round(crash_looping(with_init).input(), &mut std::iter::empty().peekable());
    let mut ops = ops.into_iter().peekable();
    while let Some(op) = ops.next() {
        sim.apply(op, &mut ops);
    }
    sim
}

#[test]
fn the_run_the_status_names_as_last_survives_the_exit_before_the_start_and_the_gc_on_it() {
    // The order of issue 31's log: run 1 of the init container exits, the restart is
    // immediate (the first one), run 2 exits before the worker hears it started, the
    // collector runs on that exit, and a log request reads the status between them.
    let mut sim = simulate(true, []);
    let mut ops = std::iter::empty().peekable();
    // Run 1 (`init-1`) exits; the worker takes it and starts run 2 in the same round,
    // which exits at once, before `Started`; then the collector and a reader.
    sim.crash();
    sim.at_start = vec![Op::Crash, Op::Gc, Op::Read];
    let exits: Vec<Input> = sim.inbox.drain(..).collect();
    for exit in exits {
        sim.round(exit, &mut ops);
    }
    let status = sim.published.clone().unwrap();
    let init = &status.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        init.last_state.as_ref().unwrap().terminated.as_ref().unwrap().container_id.as_deref(),
        Some("containerd://init-1")
    );
    // Both runs are still there: run 1 because the status names it, run 2 as the newest.
    let ids: Vec<&str> = sim.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["init-1", "init-2"]);
    let previous = container_log::choose(&status, "default/web", "init", true).unwrap();
    assert_eq!(previous, "init-1");

    // The worker takes run 2's exit: back-off, and the status names run 2 as last; the
    // collector runs on the exit, and a reader reads, before the status is published.
    let mut ops = [Op::Gc, Op::Read].into_iter().peekable();
    let exits: Vec<Input> = sim.inbox.drain(..).collect();
    for exit in exits {
        sim.round(exit, &mut ops);
    }
    let status = sim.published.clone().unwrap();
    let init = &status.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        init.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(container_log::choose(&status, "default/web", "init", true).unwrap(), "init-2");
    // The status moved on: the next pass removes run 1, and run 2 stays.
    sim.collect();
    let ids: Vec<&str> = sim.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["init-2"]);
    sim.read();
}

#[test]
fn a_crash_loop_keeps_previous_readable_at_every_restart() {
    // Each restart: the exit taken, a pass, a read, the back-off waited out (up to its
    // cap of 300 s, 10 s at a time), a pass and a read while the next run runs.
    let taken = [Op::Crash, Op::Gc, Op::Read, Op::Deliver, Op::Gc, Op::Read];
    let one: Vec<Op> =
        taken.into_iter().chain([Op::Wait(10); 31]).chain([Op::Gc, Op::Read]).collect();
    let sim = simulate(false, one.iter().copied().cycle().take(one.len() * 7));
    let restarts = sim.d.restart_count("c");
    assert_eq!(restarts, 7, "each crash restarted");
    assert_eq!(sim.removed, 6, "each run but the last two collected");
    // Three reads a restart, each of `previous` and the current run (a read finds the
    // instance it names, or it fails the test), but before the first exit is taken.
    assert!(sim.reads >= 7 * 3 * 2 - 2, "{} reads answered", sim.reads);
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Gc),
        3 => Just(Op::Read),
        2 => Just(Op::Crash),
        2 => Just(Op::Deliver),
        1 => (0..40u64).prop_map(Op::Wait),
        1 => Just(Op::Wait(301)),
    ]
}

proptest! {
    /// However exits, starts, collector passes and status reads interleave, what the
    /// published status names exists, so `previous` (and the current run) resolve while
    /// the pod exists.
    #[test]
    fn previous_always_resolves_while_the_pod_exists(
        with_init in any::<bool>(),
        ops in proptest::collection::vec(arb_op(), 0..80),
    ) {
        simulate(with_init, ops);
    }
}
