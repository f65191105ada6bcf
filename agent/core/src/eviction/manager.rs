//! The eviction manager's decisions over time (kubelet's `synchronize`, without the IO):
//! each pass takes the signals' observations and returns the node's pressure conditions
//! and, when a threshold is met past its grace period, the resource to reclaim.
//!
//! - A threshold is met when the signal's available amount is below it. Once met, it
//!   stays met until the amount is back above the threshold plus its minimum reclaim.
//! - A soft threshold drives eviction only after it has been met for its grace period
//!   without a break; a hard one at once.
//! - A pressure condition (MemoryPressure, DiskPressure, PIDPressure) is on while one of
//!   its signals' thresholds is met, grace period or not, and stays on until
//!   `evictionPressureTransitionPeriod` has passed without one.
//! - Memory is reclaimed before anything else.

use std::time::Instant;

use super::signal::{Condition, Observations, Resource, Signal};
use super::threshold::{Config, Threshold};

/// The node's pressure conditions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
}

impl Pressure {
    fn set(&mut self, condition: Condition) {
        *self.slot(condition) = true;
    }

    fn slot(&mut self, condition: Condition) -> &mut bool {
        match condition {
            Condition::MemoryPressure => &mut self.memory,
            Condition::DiskPressure => &mut self.disk,
            Condition::PidPressure => &mut self.pid,
        }
    }

    pub fn any(self) -> bool {
        self.memory || self.disk || self.pid
    }
}

/// What to reclaim now: the first threshold met (memory first) and by how much.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reclaim {
    pub threshold: Threshold,
    pub resource: Resource,
    /// The threshold as a quantity of the signal's capacity.
    pub threshold_quantity: i64,
    pub available: i64,
    /// How much must be freed for the threshold (plus its minimum reclaim) to be
    /// resolved.
    pub to_reclaim: i64,
}

impl Reclaim {
    pub fn signal(&self) -> Signal {
        self.threshold.signal
    }
}

/// One pass's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub pressure: Pressure,
    /// The thresholds that drive eviction (grace periods satisfied), memory first.
    pub met: Vec<Threshold>,
    pub reclaim: Option<Reclaim>,
    /// When the outcome changes with no new observation (a soft threshold's grace period
    /// ends, a pressure condition's transition period ends): pass again then.
    pub next_pass: Option<Instant>,
}

/// The manager's memory between passes.
#[derive(Debug, Clone)]
pub struct Manager {
    config: Config,
    first_observed: Vec<(Threshold, Instant)>,
    conditions_observed: Vec<(Condition, Instant)>,
    met: Vec<Threshold>,
}

impl Manager {
    pub fn new(config: Config) -> Manager {
        Manager {
            config,
            first_observed: Vec::new(),
            conditions_observed: Vec::new(),
            met: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// One pass over `observations` made at `now`.
    pub fn observe(&mut self, observations: &Observations, now: Instant) -> Outcome {
        let mut met = thresholds_met(&self.config.thresholds, observations, false);
        for unresolved in thresholds_met(&self.met, observations, true) {
            if !met.contains(&unresolved) {
                met.push(unresolved);
            }
        }
        self.first_observed = met
            .iter()
            .map(|t| {
                let at = self.first_observed.iter().find(|(p, _)| p == t).map(|(_, at)| *at);
                (*t, at.unwrap_or(now))
            })
            .collect();
        for threshold in &met {
            let condition = threshold.signal.condition();
            self.conditions_observed.retain(|(c, _)| *c != condition);
            self.conditions_observed.push((condition, now));
        }
        let period = self.config.pressure_transition_period;
        self.conditions_observed.retain(|(_, at)| now.saturating_duration_since(*at) < period);
        let mut pressure = Pressure::default();
        for (condition, _) in &self.conditions_observed {
            pressure.set(*condition);
        }
        let mut driving: Vec<Threshold> = self
            .first_observed
            .iter()
            .filter(|(t, at)| now.saturating_duration_since(*at) >= t.grace_period)
            .map(|(t, _)| *t)
            .collect();
        driving.sort_by_key(|t| !t.signal.is_memory());
        self.met = driving.clone();
        let reclaim = driving.first().and_then(|threshold| {
            let observed = observations.get(threshold.signal)?;
            let quantity = threshold.value.quantity(observed.capacity);
            let min = threshold.min_reclaim.map_or(0, |m| m.quantity(observed.capacity));
            Some(Reclaim {
                threshold: *threshold,
                resource: threshold.signal.resource(),
                threshold_quantity: quantity,
                available: observed.available,
                to_reclaim: quantity.saturating_add(min).saturating_sub(observed.available),
            })
        });
        let grace_ends = self
            .first_observed
            .iter()
            .filter(|(t, at)| now.saturating_duration_since(*at) < t.grace_period)
            .map(|(t, at)| *at + t.grace_period);
        let transitions_end =
            self.conditions_observed.iter().filter(|(_, at)| *at < now).map(|(_, at)| *at + period);
        let next_pass = grace_ends.chain(transitions_end).min();
        Outcome { pressure, met: driving, reclaim, next_pass }
    }
}

/// The thresholds whose signal is observed below them (kubelet's `thresholdsMet`).
fn thresholds_met(
    thresholds: &[Threshold],
    observations: &Observations,
    enforce_min_reclaim: bool,
) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            observations
                .get(t.signal)
                .is_some_and(|o| t.met(o.available, o.capacity, enforce_min_reclaim))
        })
        .copied()
        .collect()
}
