//! One running container's probes: when each runs next, its consecutive results, and
//! what they add up to (P1–P4). One instance per container run: a restarted container
//! gets new probes, as kubelet's prober workers are per container ID.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Container;

use super::{Error, Handler, ProbeKind, ProbeSpec, Target};

/// A probe to run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub kind: ProbeKind,
    pub handler: Handler,
    pub timeout: Duration,
}

/// What a result changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The startup probe passed: liveness and readiness begin.
    Started,
    /// The readiness probe's result changed.
    Ready(bool),
    /// The liveness or startup probe failed `failureThreshold` times in a row: kill the
    /// container, with the probe's own grace period if it has one.
    Kill { kind: ProbeKind, grace: Option<Duration> },
}

#[derive(Debug, Clone)]
struct State {
    kind: ProbeKind,
    /// `Err`: the probe cannot be run (a port name the container lacks): it never runs,
    /// so its result stays what it starts as (as kubelet, which keeps the last result
    /// when a probe errs).
    spec: Result<ProbeSpec, Error>,
    next_at: Instant,
    in_flight: bool,
    successes: u32,
    failures: u32,
    /// The probe's current result (`None`: none yet).
    passed: Option<bool>,
    /// Failed for good (liveness, startup): no more runs for this container.
    on_hold: bool,
}

/// A running container's probes.
#[derive(Debug, Clone)]
pub struct Probes {
    states: Vec<State>,
}

impl Probes {
    /// The probes of `container`, which started at `started`. A container found running
    /// after an agent restart (`spread`: a fraction in [0, 1)) has its first runs spread
    /// over a period, so that the agent does not probe every pod at once (kubelet does
    /// the same after a restart).
    pub fn new(
        container: &Container,
        target: Target,
        started: Instant,
        now: Instant,
        spread: Option<f64>,
    ) -> Probes {
        let states = ProbeKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let spec = ProbeSpec::of(kind, container, target)?;
                let (delay, period) = match &spec {
                    Ok(s) => (s.initial_delay, s.period),
                    Err(_) => (Duration::ZERO, Duration::ZERO),
                };
                let mut next_at = started + delay;
                if let Some(fraction) = spread {
                    next_at = next_at.max(now + period.mul_f64(fraction.clamp(0.0, 1.0)));
                }
                Some(State {
                    kind,
                    spec,
                    next_at,
                    in_flight: false,
                    successes: 0,
                    failures: 0,
                    passed: None,
                    on_hold: false,
                })
            })
            .collect();
        Probes { states }
    }

    /// No probes: nothing to schedule.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Probes that cannot be run, and why (for an event).
    pub fn errors(&self) -> impl Iterator<Item = (ProbeKind, &Error)> {
        self.states.iter().filter_map(|s| Some((s.kind, s.spec.as_ref().err()?)))
    }

    /// The startup probe passed (or there is none): P2.
    pub fn started(&self) -> bool {
        self.state(ProbeKind::Startup).is_none_or(|s| s.passed == Some(true))
    }

    /// Started, and the readiness probe (if any) passes: P4.
    pub fn ready(&self) -> bool {
        self.started() && self.state(ProbeKind::Readiness).is_none_or(|s| s.passed == Some(true))
    }

    /// The probes due at `now`; each is marked running until its result is recorded.
    pub fn due(&mut self, now: Instant) -> Vec<Run> {
        let started = self.started();
        let mut runs = Vec::new();
        for state in &mut self.states {
            if !runnable(state, started) || state.next_at > now {
                continue;
            }
            let Ok(spec) = &state.spec else { continue };
            state.in_flight = true;
            state.next_at = now + spec.period;
            runs.push(Run {
                kind: state.kind,
                handler: spec.handler.clone(),
                timeout: spec.timeout,
            });
        }
        runs
    }

    /// When a probe is due next (none while every due probe is running).
    pub fn next_due(&self) -> Option<Instant> {
        let started = self.started();
        self.states.iter().filter(|s| runnable(s, started)).map(|s| s.next_at).min()
    }

    /// A run of the probe of `kind` is awaited (a result of it counts).
    pub fn awaits(&self, kind: ProbeKind) -> bool {
        self.state(kind).is_some_and(|s| s.in_flight && !s.on_hold && s.spec.is_ok())
    }

    /// Records a result of the probe of `kind`; what it changed, if anything.
    pub fn record(&mut self, kind: ProbeKind, success: bool) -> Option<Verdict> {
        let was_started = self.started();
        let was_ready = self.ready();
        let state = self.states.iter_mut().find(|s| s.kind == kind)?;
        let Ok(spec) = &state.spec else { return None };
        if !state.in_flight || state.on_hold {
            return None;
        }
        state.in_flight = false;
        if success {
            state.successes += 1;
            state.failures = 0;
            if state.successes >= spec.success_threshold {
                state.passed = Some(true);
            }
        } else {
            state.failures += 1;
            state.successes = 0;
            if state.failures >= spec.failure_threshold {
                state.passed = Some(false);
            }
        }
        if state.passed == Some(false) && kind != ProbeKind::Readiness {
            state.on_hold = true;
            return Some(Verdict::Kill { kind, grace: spec.grace });
        }
        if !was_started && self.started() {
            // Liveness and readiness begin now (they have not run: each is due at its
            // initial delay from the container's start, or at once if that has passed).
            return Some(Verdict::Started);
        }
        let ready = self.ready();
        (ready != was_ready).then_some(Verdict::Ready(ready))
    }

    fn state(&self, kind: ProbeKind) -> Option<&State> {
        self.states.iter().find(|s| s.kind == kind)
    }
}

/// Whether the probe may run: not running already, not failed for good, its spec
/// runnable; liveness and readiness only once started, startup only until then.
fn runnable(state: &State, started: bool) -> bool {
    let gate = match state.kind {
        ProbeKind::Startup => !started,
        ProbeKind::Liveness | ProbeKind::Readiness => started,
    };
    gate && !state.in_flight && !state.on_hold && state.spec.is_ok()
}
