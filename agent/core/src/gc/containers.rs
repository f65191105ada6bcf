//! Dead containers, as kubelet's container garbage collector keeps them: per container
//! of a pod (an "evict unit": pod UID and container name) the newest
//! `maximum-dead-containers-per-container` dead instances stay, node-wide at most
//! `maximum-dead-containers`, and none goes before it is `minimum-container-ttl-duration`
//! old (counted from its creation, as kubelet does). The rest go, oldest first.
//!
//! Two rules beyond kubelet's:
//! - The newest instance of each unit is never chosen while its pod is there. It is the
//!   one the pod worker stands on (running, starting, or the last exit waiting for its
//!   restart, whose status and termination message it reports); with
//!   `maximum-dead-containers-per-container` 0, kubelet would remove it, Outpost keeps it
//!   until the pod goes (and the pod takes all its containers with it).
//! - An instance the pod's published status names (`containerID`, `state.terminated`,
//!   `lastState.terminated`) is never chosen while the status names it. kubelet collects
//!   once a minute; Outpost collects on every exit, which is before the worker's next
//!   status names the run that just ended. Without this rule the run the status still
//!   shows as `lastState` (what `kubectl logs --previous` reads, with its termination
//!   message) went at every crash-loop restart. Such an instance is held, not counted
//!   out: the plan is kubelet's as if no status named anything, less what they name, so
//!   a name never makes another container go; once the status moves on, the next pass
//!   removes it ([`Plan::held`]). With
//!   `maximum-dead-containers-per-container` 0 no dead container is wanted, and this rule
//!   does not apply (the last termination goes, as on kubelet).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// kubelet's `--maximum-dead-containers-per-container` default.
pub const DEFAULT_MAX_PER_POD_CONTAINER: i32 = 1;
/// kubelet's `--maximum-dead-containers` default: no node-wide limit.
pub const DEFAULT_MAX_CONTAINERS: i32 = -1;

/// kubelet's container GC policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `--minimum-container-ttl-duration`: a dead container younger than this stays.
    pub min_age: Duration,
    /// `--maximum-dead-containers-per-container`: dead instances kept per container of a
    /// pod; negative: no limit.
    pub max_per_pod_container: i32,
    /// `--maximum-dead-containers`: dead containers kept on the node; negative: no limit.
    pub max_containers: i32,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            min_age: Duration::ZERO,
            max_per_pod_container: DEFAULT_MAX_PER_POD_CONTAINER,
            max_containers: DEFAULT_MAX_CONTAINERS,
        }
    }
}

/// One container instance of a pod, as the runtime lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    pub pod_uid: String,
    /// The container's name in the pod spec.
    pub container: String,
    pub restart_count: u32,
    pub created_at: Timestamp,
    /// Its task runs (or is paused): never removed.
    pub running: bool,
}

impl Instance {
    fn unit(&self) -> (&str, &str) {
        (&self.pod_uid, &self.container)
    }

    /// Newer first: the higher restart count, then the later creation.
    fn newer_first(a: &&Instance, b: &&Instance) -> std::cmp::Ordering {
        (b.restart_count, b.created_at).cmp(&(a.restart_count, a.created_at))
    }
}

/// What the collector does now, and when it has to look again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The containers to remove, with their logs, oldest first.
    pub remove: Vec<String>,
    /// When a dead container still too young to be removed comes of age (and the policy
    /// may then choose it): look again then.
    pub revisit_at: Option<Timestamp>,
    /// A container the policy would remove stays because a pod's status names it: look
    /// again when the statuses change.
    pub held: bool,
}

/// kubelet's choice among `instances` at `now` under `policy`, keeping the instances
/// `named` by the pods' statuses (see the module's rules): kubelet's plan without the
/// names, less what they name. So a name never makes the collector remove more (were the
/// names counted in the limits, keeping one could push the node over its limit and
/// trim every pod's containers to an equal share).
pub fn plan(
    instances: &[Instance],
    named: &BTreeSet<&str>,
    policy: &Policy,
    now: Timestamp,
) -> Plan {
    let plan = kubelet_plan(instances, policy, now);
    if policy.max_per_pod_container == 0 {
        return plan;
    }
    let held = plan.remove.iter().any(|id| named.contains(id.as_str()));
    let remove = plan.remove.into_iter().filter(|id| !named.contains(id.as_str())).collect();
    Plan { remove, revisit_at: plan.revisit_at, held }
}

/// kubelet's choice among `instances` at `now` under `policy`.
fn kubelet_plan(instances: &[Instance], policy: &Policy, now: Timestamp) -> Plan {
    let oldest_allowed = now.checked_sub(policy.min_age).unwrap_or(Timestamp::MIN);
    let mut units: BTreeMap<(&str, &str), Vec<&Instance>> = BTreeMap::new();
    for instance in instances {
        units.entry(instance.unit()).or_default().push(instance);
    }
    let mut revisit_at: Option<Timestamp> = None;
    // Per unit, newest first: its evictable instances (dead and old enough), and which of
    // them is protected (the unit's newest).
    let mut evictable: Vec<Unit<'_>> = Vec::new();
    for list in units.values_mut() {
        list.sort_by(Instance::newer_first);
        let newest = list.first().map(|i| i.id.as_str());
        let mut unit = Unit { protected: BTreeSet::new(), dead: Vec::new() };
        for instance in list.iter().filter(|i| !i.running) {
            if instance.created_at > oldest_allowed {
                let due = instance.created_at.checked_add(policy.min_age).ok();
                revisit_at = match (revisit_at, due) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                continue;
            }
            if Some(instance.id.as_str()) == newest {
                unit.protected.insert(instance.id.as_str());
            }
            unit.dead.push(instance);
        }
        if !unit.dead.is_empty() {
            evictable.push(unit);
        }
    }
    let mut remove: Vec<&Instance> = Vec::new();
    if let Ok(keep) = usize::try_from(policy.max_per_pod_container) {
        for unit in &mut evictable {
            remove.extend(unit.trim(keep));
        }
    }
    if let Ok(max) = usize::try_from(policy.max_containers) {
        let total = |units: &[Unit<'_>]| units.iter().map(|u| u.dead.len()).sum::<usize>();
        if total(&evictable) > max {
            // First every unit down to an equal share (at least one), then the oldest
            // across the node.
            let share = (max / evictable.len().max(1)).max(1);
            for unit in &mut evictable {
                remove.extend(unit.trim(share));
            }
            let mut rest: Vec<(&Instance, bool)> = evictable
                .iter()
                .flat_map(|u| u.dead.iter().map(|i| (*i, u.protected.contains(i.id.as_str()))))
                .collect();
            let excess = rest.len().saturating_sub(max);
            rest.sort_by_key(|(i, _)| (i.created_at, i.restart_count));
            let mut chosen = 0;
            for (instance, protected) in rest {
                if chosen == excess {
                    break;
                }
                if protected {
                    continue;
                }
                remove.push(instance);
                chosen += 1;
            }
        }
    }
    remove.sort_by_key(|i| (i.created_at, i.restart_count));
    Plan { remove: remove.into_iter().map(|i| i.id.clone()).collect(), revisit_at, held: false }
}

/// One container of a pod: its evictable dead instances, newest first.
struct Unit<'a> {
    /// Among the dead, the unit's newest instance: never removed.
    protected: BTreeSet<&'a str>,
    dead: Vec<&'a Instance>,
}

impl<'a> Unit<'a> {
    /// Keeps the newest `keep` (and the protected one); returns the others.
    fn trim(&mut self, keep: usize) -> Vec<&'a Instance> {
        if self.dead.len() <= keep {
            return Vec::new();
        }
        let beyond = self.dead.split_off(keep);
        let (kept, removed): (Vec<&Instance>, Vec<&Instance>) =
            beyond.into_iter().partition(|i| self.protected.contains(i.id.as_str()));
        self.dead.extend(kept);
        removed
    }
}

#[cfg(test)]
mod tests;
