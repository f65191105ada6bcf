//! Invariants, for any sequence of inputs.

use super::*;

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
