//! A running container's probes (P1–P4): when each runs, one run at a time, consecutive
//! results against the thresholds, startup gating, and what a result changes.

use std::time::Instant;

use proptest::prelude::*;

use super::*;
use ProbeKind::{Liveness, Readiness, Startup};

const NS: Duration = Duration::from_nanos(1);

/// A fixed start for each test's clock.
fn t0() -> Instant {
    Instant::now()
}

fn check_probe() -> Probe {
    exec_probe(&["check"])
}

fn check_handler() -> Handler {
    Handler::Exec { command: vec!["check".into()] }
}

/// A probe of `check` with this initial delay and period (seconds).
fn every(initial_delay: i32, period: i32) -> Probe {
    Probe {
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        ..check_probe()
    }
}

fn thresholds(success: i32, failure: i32) -> Probe {
    Probe { success_threshold: Some(success), failure_threshold: Some(failure), ..every(0, 1) }
}

fn container(probes: &[(ProbeKind, Probe)]) -> Container {
    let mut c = web();
    for (kind, probe) in probes.iter().cloned() {
        match kind {
            ProbeKind::Startup => c.startup_probe = Some(probe),
            ProbeKind::Liveness => c.liveness_probe = Some(probe),
            ProbeKind::Readiness => c.readiness_probe = Some(probe),
        }
    }
    c
}

/// The probes of a container that started at `t0`, made then.
fn fresh(t0: Instant, probes: &[(ProbeKind, Probe)]) -> Probes {
    Probes::new(&container(probes), target(), t0, t0, None)
}

fn kinds(runs: &[Run]) -> Vec<ProbeKind> {
    runs.iter().map(|r| r.kind).collect()
}

/// Runs the probe of `kind` at `now` (it must be due) and records its result.
fn run(p: &mut Probes, now: Instant, kind: ProbeKind, success: bool) -> Option<Verdict> {
    let runs = kinds(&p.due(now));
    assert!(runs.contains(&kind), "{kind:?} due at {now:?}: {runs:?}");
    p.record(kind, success)
}

// ---------------------------------------------------------------------------------------
// When probes run (P1)

#[test]
fn the_first_run_is_at_the_initial_delay_then_every_period() {
    let t0 = t0();
    let probe = Probe { timeout_seconds: Some(2), ..every(5, 10) };
    let mut p = fresh(t0, &[(Liveness, probe)]);
    assert!(!p.is_empty());
    assert_eq!(p.next_due(), Some(t0 + secs(5)));
    assert!(p.due(t0).is_empty());
    assert!(p.due(t0 + secs(5) - NS).is_empty());
    assert_eq!(
        p.due(t0 + secs(5)),
        [Run { kind: Liveness, handler: check_handler(), timeout: secs(2) }]
    );
    assert_eq!(p.record(Liveness, true), None);
    assert_eq!(p.next_due(), Some(t0 + secs(15)));
    assert!(p.due(t0 + secs(15) - NS).is_empty());
    assert_eq!(kinds(&p.due(t0 + secs(15))), [Liveness]);
    p.record(Liveness, true);
    // Polled late: the next run is a period after this one.
    assert_eq!(kinds(&p.due(t0 + secs(28))), [Liveness]);
    p.record(Liveness, true);
    assert_eq!(p.next_due(), Some(t0 + secs(38)));
}

#[test]
fn a_probe_running_is_not_run_again_until_its_result() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Readiness, every(0, 10))]);
    assert_eq!(kinds(&p.due(t0)), [Readiness]);
    assert_eq!(p.next_due(), None, "nothing due while it runs");
    assert!(p.due(t0 + secs(10)).is_empty());
    assert!(p.due(t0 + secs(100)).is_empty());
    // Its result comes late: its next run (a period after it began) is overdue.
    assert_eq!(p.record(Readiness, true), Some(Verdict::Ready(true)));
    assert_eq!(p.next_due(), Some(t0 + secs(10)));
    assert_eq!(kinds(&p.due(t0 + secs(100))), [Readiness]);
    assert_eq!(p.next_due(), None);
}

#[test]
fn a_result_not_asked_for_is_ignored() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Liveness, thresholds(1, 1))]);
    assert_eq!(p.record(Liveness, false), None, "not running: not counted");
    assert_eq!(p.record(Readiness, false), None, "no such probe");
    assert_eq!(p.record(Startup, true), None, "no such probe");
    assert_eq!(kinds(&p.due(t0)), [Liveness]);
    assert_eq!(p.record(Liveness, true), None);
    assert_eq!(p.record(Liveness, false), None, "a second result for one run");
    assert_eq!(
        run(&mut p, t0 + secs(1), Liveness, false),
        Some(Verdict::Kill { kind: Liveness, grace: None })
    );
}

#[test]
fn probes_due_together_run_together() {
    let t0 = t0();
    let probe = Probe { timeout_seconds: Some(4), ..every(3, 10) };
    let mut p = fresh(t0, &[(Readiness, probe.clone()), (Liveness, probe)]);
    assert_eq!(p.next_due(), Some(t0 + secs(3)));
    let runs = p.due(t0 + secs(3));
    assert_eq!(kinds(&runs), [Liveness, Readiness]);
    assert!(runs.iter().all(|r| r.timeout == secs(4) && r.handler == check_handler()));
}

#[test]
fn the_next_run_is_the_earliest_of_the_probes_not_running() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Liveness, every(0, 10)), (Readiness, every(4, 3))]);
    assert_eq!(p.next_due(), Some(t0));
    assert_eq!(kinds(&p.due(t0)), [Liveness]);
    assert_eq!(p.next_due(), Some(t0 + secs(4)), "readiness; liveness runs");
    assert_eq!(kinds(&p.due(t0 + secs(4))), [Readiness]);
    assert_eq!(p.next_due(), None, "both run");
    p.record(Readiness, true);
    assert_eq!(p.next_due(), Some(t0 + secs(7)));
    p.record(Liveness, true);
    assert_eq!(p.next_due(), Some(t0 + secs(7)), "liveness is next at 10");
    assert_eq!(kinds(&p.due(t0 + secs(7))), [Readiness]);
    assert_eq!(p.next_due(), Some(t0 + secs(10)));
}

#[test]
fn a_container_without_probes_is_started_and_ready_with_nothing_to_run() {
    let t0 = t0();
    let mut p = fresh(t0, &[]);
    assert!(p.is_empty());
    assert!(p.started() && p.ready());
    assert_eq!(p.next_due(), None);
    assert!(p.due(t0 + secs(3600)).is_empty());
    assert_eq!(p.errors().count(), 0);
}

// ---------------------------------------------------------------------------------------
// Thresholds (P1, P3)

#[test]
fn liveness_kills_after_failure_threshold_consecutive_failures() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Liveness, thresholds(1, 3))]);
    let mut now = t0;
    // Failures not in a row do not add up: a success starts the count over.
    for success in [false, false, true, false, false, true, false, false] {
        assert_eq!(run(&mut p, now, Liveness, success), None, "at {:?}", now - t0);
        now += secs(1);
    }
    assert!(p.started() && p.ready(), "liveness says nothing of readiness");
    assert_eq!(
        run(&mut p, now, Liveness, false),
        Some(Verdict::Kill { kind: Liveness, grace: None })
    );
    // On hold: it never runs again for this container, and nothing counts.
    assert_eq!(p.next_due(), None);
    assert!(p.due(now + secs(3600)).is_empty());
    assert_eq!(p.record(Liveness, false), None);
    assert_eq!(p.record(Liveness, true), None);
}

#[test]
fn a_kill_carries_the_probes_own_grace_period() {
    let t0 = t0();
    for kind in [Liveness, Startup] {
        let probe = Probe { termination_grace_period_seconds: Some(7), ..thresholds(1, 1) };
        let mut p = fresh(t0, &[(kind, probe)]);
        assert_eq!(
            run(&mut p, t0, kind, false),
            Some(Verdict::Kill { kind, grace: Some(secs(7)) })
        );
    }
}

#[test]
fn a_failure_threshold_of_one_kills_at_the_first_failure() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Liveness, thresholds(1, 1))]);
    assert_eq!(run(&mut p, t0, Liveness, true), None);
    assert_eq!(
        run(&mut p, t0 + secs(1), Liveness, false),
        Some(Verdict::Kill { kind: Liveness, grace: None })
    );
}

#[test]
fn readiness_passes_after_success_threshold_consecutive_successes() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Readiness, thresholds(2, 2))]);
    let mut now = t0;
    let mut step = |p: &mut Probes, success| {
        let verdict = run(p, now, Readiness, success);
        now += secs(1);
        (verdict, p.ready())
    };
    assert!(!p.ready(), "not ready before its first success");
    assert_eq!(step(&mut p, true), (None, false));
    assert_eq!(step(&mut p, false), (None, false), "a failure starts the count over");
    assert_eq!(step(&mut p, true), (None, false));
    assert_eq!(step(&mut p, true), (Some(Verdict::Ready(true)), true));
    assert_eq!(step(&mut p, true), (None, true));
    assert_eq!(step(&mut p, false), (None, true), "one failure is below the threshold");
    assert_eq!(step(&mut p, true), (None, true));
    assert_eq!(step(&mut p, false), (None, true));
    assert_eq!(step(&mut p, false), (Some(Verdict::Ready(false)), false));
    assert_eq!(step(&mut p, false), (None, false));
    assert_eq!(step(&mut p, true), (None, false), "two successes again");
    assert_eq!(step(&mut p, true), (Some(Verdict::Ready(true)), true));
    assert!(p.started());
}

#[test]
fn readiness_failures_never_kill_and_it_keeps_running() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Readiness, thresholds(1, 1))]);
    assert_eq!(run(&mut p, t0, Readiness, false), None, "not ready already");
    assert_eq!(run(&mut p, t0 + secs(1), Readiness, true), Some(Verdict::Ready(true)));
    assert_eq!(run(&mut p, t0 + secs(2), Readiness, false), Some(Verdict::Ready(false)));
    for n in 3..50 {
        assert_eq!(run(&mut p, t0 + secs(n), Readiness, false), None);
    }
    assert_eq!(p.next_due(), Some(t0 + secs(50)));
}

// ---------------------------------------------------------------------------------------
// Startup gating (P2)

#[test]
fn startup_gates_liveness_and_readiness() {
    let t0 = t0();
    let startup = Probe { failure_threshold: Some(10), ..every(0, 2) };
    let mut p =
        fresh(t0, &[(Startup, startup), (Liveness, every(5, 10)), (Readiness, every(20, 5))]);
    assert!(!p.started() && !p.ready());
    // Failures below its threshold: it runs again a period later, alone.
    for n in [0, 2, 4, 6] {
        assert_eq!(p.next_due(), Some(t0 + secs(n)), "only the startup probe is due");
        assert_eq!(kinds(&p.due(t0 + secs(n))), [Startup]);
        assert_eq!(p.record(Startup, false), None);
        assert!(!p.started());
    }
    // Liveness and readiness did not run though their delays passed.
    assert_eq!(kinds(&p.due(t0 + secs(8))), [Startup]);
    assert_eq!(p.record(Startup, true), Some(Verdict::Started));
    assert!(p.started());
    assert!(!p.ready(), "readiness has not passed");
    // Liveness's initial delay is over: at once; readiness at its own (20 s).
    assert_eq!(p.next_due(), Some(t0 + secs(5)));
    assert_eq!(kinds(&p.due(t0 + secs(8))), [Liveness]);
    assert_eq!(p.next_due(), Some(t0 + secs(20)));
    assert!(p.due(t0 + secs(20) - NS).is_empty());
    assert_eq!(p.record(Liveness, true), None);
    assert_eq!(kinds(&p.due(t0 + secs(20))), [Liveness, Readiness]);
    assert_eq!(p.record(Readiness, true), Some(Verdict::Ready(true)));
    assert!(p.ready());
    // The startup probe never runs again.
    p.record(Liveness, true);
    for n in 21..100 {
        assert!(!kinds(&p.due(t0 + secs(n))).contains(&Startup));
        p.record(Liveness, true);
        p.record(Readiness, true);
    }
    assert!(p.started() && p.ready());
}

#[test]
fn without_a_readiness_probe_ready_follows_started() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Startup, every(0, 1))]);
    assert!(!p.started() && !p.ready());
    assert_eq!(run(&mut p, t0, Startup, true), Some(Verdict::Started));
    assert!(p.started() && p.ready());
    assert_eq!(p.next_due(), None, "nothing more to run");
}

#[test]
fn a_failed_startup_probe_kills_and_liveness_never_runs() {
    let t0 = t0();
    let startup = Probe { termination_grace_period_seconds: Some(3), ..thresholds(1, 2) };
    let mut p = fresh(t0, &[(Startup, startup), (Liveness, every(0, 1))]);
    assert_eq!(run(&mut p, t0, Startup, false), None);
    assert_eq!(
        run(&mut p, t0 + secs(1), Startup, false),
        Some(Verdict::Kill { kind: Startup, grace: Some(secs(3)) })
    );
    assert!(!p.started() && !p.ready());
    assert_eq!(p.next_due(), None);
    assert!(p.due(t0 + secs(100)).is_empty());
    assert_eq!(p.record(Startup, true), None, "on hold");
    assert!(!p.started());
}

#[test]
fn a_result_of_a_gated_probe_is_ignored() {
    let t0 = t0();
    let mut p = fresh(t0, &[(Startup, every(0, 1)), (Readiness, thresholds(1, 1))]);
    assert_eq!(p.record(Readiness, true), None);
    assert!(!p.ready());
    run(&mut p, t0, Startup, true);
    assert!(!p.ready(), "the early result did not count");
    assert_eq!(p.record(Startup, false), None, "the startup probe is done");
    assert!(p.started());
}

// ---------------------------------------------------------------------------------------
// Probes that cannot run

#[test]
fn an_unresolvable_probe_never_runs_and_keeps_its_initial_result() {
    let t0 = t0();
    let bad = tcp_probe(named("nope"));
    let late = t0 + secs(3600);

    // Readiness: never ready.
    let mut p = fresh(t0, &[(Readiness, bad.clone()), (Liveness, every(0, 10))]);
    let errors: Vec<(ProbeKind, String)> = p.errors().map(|(k, e)| (k, e.to_string())).collect();
    assert_eq!(
        errors,
        [(Readiness, "port \"nope\" is not the name of one of container web's ports".to_owned())]
    );
    assert_eq!(kinds(&p.due(t0)), [Liveness]);
    p.record(Liveness, true);
    assert_eq!(p.record(Readiness, true), None);
    assert!(p.due(late).iter().all(|r| r.kind == Liveness));
    assert!(p.started() && !p.ready());

    // Startup: never started, so nothing else runs.
    let mut p = fresh(t0, &[(Startup, bad.clone()), (Liveness, every(0, 1))]);
    assert_eq!(p.errors().map(|(k, _)| k).collect::<Vec<_>>(), [Startup]);
    assert_eq!(p.next_due(), None);
    assert!(p.due(late).is_empty());
    assert!(!p.started() && !p.ready());

    // Liveness: never kills.
    let mut p = fresh(t0, &[(Liveness, bad)]);
    assert!(!p.is_empty());
    assert_eq!(p.next_due(), None);
    assert!(p.due(late).is_empty());
    assert_eq!(p.record(Liveness, false), None);
    assert!(p.started() && p.ready());
}

// ---------------------------------------------------------------------------------------
// A container found running after an agent restart

#[test]
fn an_adopted_containers_first_runs_are_spread_within_one_period() {
    let t0 = t0();
    // It started an hour before the agent found it.
    let now = t0 + secs(3600);
    let c = container(&[(Liveness, every(0, 10)), (Readiness, every(30, 4))]);
    for fraction in [0.0, 0.25, 0.5, 0.999] {
        let mut p = Probes::new(&c, target(), t0, now, Some(fraction));
        let first = p.next_due().unwrap();
        assert!(first >= now && first < now + secs(4), "{fraction}: the shorter period");
        // Each probe's first run is within its own period from now.
        let mut seen = Vec::new();
        let mut at = now;
        while seen.len() < 2 {
            for run in p.due(at) {
                let period = if run.kind == Liveness { secs(10) } else { secs(4) };
                assert!(at < now + period, "{fraction}: {:?} first at {:?}", run.kind, at - now);
                assert_eq!(at - now, period.mul_f64(fraction), "{fraction}: {:?}", run.kind);
                seen.push(run.kind);
            }
            at = p.next_due().unwrap_or(at + secs(1));
        }
    }
    // Out of range: at most a period.
    let p = Probes::new(&c, target(), t0, now, Some(7.0));
    assert_eq!(p.next_due(), Some(now + secs(4)));
    let p = Probes::new(&c, target(), t0, now, Some(-1.0));
    assert_eq!(p.next_due(), Some(now));
}

#[test]
fn an_adopted_container_still_waits_out_its_initial_delay() {
    let t0 = t0();
    // Started 100 s before it was found; the probe's delay is 300 s.
    let now = t0 + secs(100);
    let c = container(&[(Liveness, every(300, 10))]);
    let p = Probes::new(&c, target(), t0, now, Some(0.5));
    assert_eq!(p.next_due(), Some(t0 + secs(300)));
    // Without a spread (it started under this agent) the delay is all there is.
    let p = Probes::new(&c, target(), t0, now, None);
    assert_eq!(p.next_due(), Some(t0 + secs(300)));
}

// ---------------------------------------------------------------------------------------
// Invariants, for any sequence of results

#[derive(Debug, Clone)]
enum Op {
    /// Time passes (seconds) and what is due runs.
    Wait(u8),
    /// A result for the probe of this kind (ignored by the model if not running).
    Result(ProbeKind, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0u8..6).prop_map(Op::Wait),
        3 => (prop::sample::select(ProbeKind::ALL.to_vec()), prop::bool::weighted(0.6))
            .prop_map(|(k, ok)| Op::Result(k, ok)),
    ]
}

/// (success threshold, failure threshold, initial delay, period) of each probe, if set.
type Settings = [Option<(i32, i32, i32, i32)>; 3];

fn settings() -> impl Strategy<Value = Settings> {
    let one = prop::option::of((1..4, 1..5, 0..8, 1..6));
    [one.clone(), one.clone(), one]
}

/// What one probe's results have been, as the rules say.
#[derive(Debug, Default, Clone)]
struct Model {
    running: bool,
    /// Consecutive failures and successes (of results counted).
    failures: u32,
    successes: u32,
    passed: Option<bool>,
    killed: bool,
}

fn index(kind: ProbeKind) -> usize {
    ProbeKind::ALL.iter().position(|k| *k == kind).unwrap()
}

fn run_ops(settings: Settings, ops: &[Op]) -> Result<(), TestCaseError> {
    let t0 = t0();
    let probes: Vec<(ProbeKind, Probe)> = ProbeKind::ALL
        .into_iter()
        .zip(settings)
        .filter_map(|(kind, s)| {
            let (success, failure, delay, period) = s?;
            let probe = Probe {
                success_threshold: Some(if kind == Readiness { success } else { 1 }),
                failure_threshold: Some(failure),
                ..every(delay, period)
            };
            Some((kind, probe))
        })
        .collect();
    let threshold = |kind: ProbeKind| {
        let (success, failure, ..) = settings[index(kind)].unwrap();
        let success = if kind == Readiness { success } else { 1 };
        (u32::try_from(success).unwrap(), u32::try_from(failure).unwrap())
    };
    let has = |kind: ProbeKind| settings[index(kind)].is_some();
    let mut p = fresh(t0, &probes);
    let mut model: [Model; 3] = Default::default();
    let mut now = t0;
    let mut kills = 0;
    let started = |m: &[Model; 3]| !has(Startup) || m[0].passed == Some(true);
    let ready = |m: &[Model; 3]| started(m) && (!has(Readiness) || m[2].passed == Some(true));
    for op in ops {
        match *op {
            Op::Wait(s) => {
                now += secs(u64::from(s));
                for run in p.due(now) {
                    let m = &mut model[index(run.kind)];
                    prop_assert!(has(run.kind));
                    prop_assert!(!m.running, "{:?} runs twice at once", run.kind);
                    prop_assert!(!m.killed, "{:?} runs after its kill", run.kind);
                    let gate = started(&model);
                    prop_assert_eq!(
                        run.kind == Startup,
                        !gate,
                        "{:?} and the startup gate",
                        run.kind
                    );
                    model[index(run.kind)].running = true;
                }
                // A next run is due exactly when some probe may run: set, not running, not
                // killed, and on its side of the startup gate.
                let gate = started(&model);
                let runnable = ProbeKind::ALL.iter().any(|k| {
                    let m = &model[index(*k)];
                    has(*k) && !m.running && !m.killed && (*k == Startup) != gate
                });
                prop_assert_eq!(p.next_due().is_some(), runnable);
            }
            Op::Result(kind, success) => {
                let was_started = started(&model);
                let was_ready = ready(&model);
                let verdict = p.record(kind, success);
                let m = &mut model[index(kind)];
                if !m.running {
                    prop_assert_eq!(verdict, None, "a result not asked for counts");
                    continue;
                }
                m.running = false;
                let (success_threshold, failure_threshold) = threshold(kind);
                if success {
                    m.successes += 1;
                    m.failures = 0;
                    if m.successes >= success_threshold {
                        m.passed = Some(true);
                    }
                } else {
                    m.failures += 1;
                    m.successes = 0;
                    if m.failures >= failure_threshold {
                        m.passed = Some(false);
                    }
                }
                match verdict {
                    Some(Verdict::Kill { kind: killed, grace }) => {
                        kills += 1;
                        prop_assert_eq!(killed, kind);
                        prop_assert_ne!(kind, Readiness, "readiness never kills");
                        prop_assert_eq!(grace, None);
                        prop_assert_eq!(
                            m.failures,
                            failure_threshold,
                            "a kill after exactly failureThreshold failures in a row"
                        );
                        m.killed = true;
                    }
                    other => {
                        prop_assert!(
                            kind == Readiness || m.failures < failure_threshold,
                            "{:?} reached its failure threshold without a kill: {:?}",
                            kind,
                            other
                        );
                        let expected = if !was_started && started(&model) {
                            Some(Verdict::Started)
                        } else if ready(&model) != was_ready {
                            Some(Verdict::Ready(ready(&model)))
                        } else {
                            None
                        };
                        prop_assert_eq!(other, expected);
                    }
                }
            }
        }
        prop_assert!(kills <= 1, "at most one kill");
        prop_assert_eq!(p.started(), started(&model));
        prop_assert_eq!(p.ready(), ready(&model));
        prop_assert!(!p.ready() || p.started(), "ready implies started");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// For any results: a probe is never run twice at once nor after its kill; startup
    /// gates liveness and readiness; liveness and startup kill once, after exactly
    /// failureThreshold failures in a row; readiness follows its thresholds and never
    /// kills; ready implies started.
    #[test]
    fn the_schedule_keeps_the_rules(settings in settings(), ops in prop::collection::vec(op(), 1..120)) {
        run_ops(settings, &ops)?;
    }
}
