//! Graceful node shutdown (J3), decided as kubelet's node shutdown manager decides it:
//! the shutdown grace periods as priority groups, the pods sorted into those groups, the
//! order the groups stop in (lowest priority first), each pod's grace period within its
//! group's, and what a pod stopped by a shutdown and the node report.
//!
//! No IO: the agent's `node_shutdown` holds logind's inhibitor lock, hears
//! `PrepareForShutdown` and has the pod workers stop each group in turn.

use std::time::Duration;

use crate::admission::SYSTEM_CLUSTER_CRITICAL;

/// A critical pod's priority and up: system-cluster-critical's value (kubelet's
/// `SystemCriticalPriority`). The two-setting form's second group starts here.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = SYSTEM_CLUSTER_CRITICAL.1;

/// The first group of the two-setting form: every pod below the critical ones (kubelet's
/// `DefaultPriorityWhenNoDefaultClassExists`; lower priorities fall into it too).
pub const DEFAULT_PRIORITY: i32 = 0;

/// The status reason of a pod stopped by a node shutdown (phase Failed).
pub const POD_REASON: &str = "Terminated";

/// The status message of a pod stopped by a node shutdown, and of its `DisruptionTarget`
/// condition (reason [`DISRUPTION_REASON`]).
pub const POD_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";

/// The reason of the `DisruptionTarget` condition of a pod stopped by a node shutdown.
pub const DISRUPTION_REASON: &str = "TerminationByKubelet";

/// The message of the Node's `Ready` condition (False) from the shutdown on.
pub const NODE_NOT_READY_MESSAGE: &str = "node is shutting down";

/// One of `shutdownGracePeriodByPodPriority`'s entries: pods from `priority` up to the
/// next group's have `grace` to stop, after the groups below them stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityGroup {
    pub priority: i32,
    pub grace: Duration,
}

/// Settings that do not describe a shutdown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "shutdownGracePeriodCriticalPods ({critical:?}) is longer than shutdownGracePeriod \
         ({total:?}): the critical pods' time is part of the whole; raise shutdownGracePeriod"
    )]
    CriticalExceedsTotal { total: Duration, critical: Duration },
    #[error(
        "shutdownGracePeriodByPodPriority cannot be set together with shutdownGracePeriod or \
         shutdownGracePeriodCriticalPods; use one form"
    )]
    BothForms,
    #[error(
        "shutdownGracePeriodByPodPriority lists priority {0} twice; give each priority one \
         grace period"
    )]
    DuplicatePriority(i32),
}

/// The priority groups of the settings, sorted by priority, as kubelet builds them:
/// `by_priority` as given, or `grace_period` split into the pods below
/// [`SYSTEM_CRITICAL_PRIORITY`] (`grace_period - critical`) and the critical ones
/// (`critical`). Empty when the feature is off: no grace period at all.
pub fn priority_groups(
    grace_period: Duration,
    critical: Duration,
    by_priority: &[PriorityGroup],
) -> Result<Vec<PriorityGroup>, Error> {
    let two_settings = !grace_period.is_zero() || !critical.is_zero();
    let mut groups = if by_priority.is_empty() {
        let Some(others) = grace_period.checked_sub(critical) else {
            return Err(Error::CriticalExceedsTotal { total: grace_period, critical });
        };
        vec![
            PriorityGroup { priority: DEFAULT_PRIORITY, grace: others },
            PriorityGroup { priority: SYSTEM_CRITICAL_PRIORITY, grace: critical },
        ]
    } else if two_settings {
        return Err(Error::BothForms);
    } else {
        by_priority.to_vec()
    };
    groups.sort_by_key(|g| g.priority);
    if let Some(twice) = groups.windows(2).find(|w| w[0].priority == w[1].priority) {
        return Err(Error::DuplicatePriority(twice[0].priority));
    }
    if total(&groups).is_zero() {
        return Ok(Vec::new());
    }
    Ok(groups)
}

/// The whole shutdown's time: every group's grace period, one after the other. logind's
/// `InhibitDelayMaxUSec` should be at least this long.
pub fn total(groups: &[PriorityGroup]) -> Duration {
    groups.iter().map(|g| g.grace).sum()
}

/// The index of the group a pod of `priority` belongs to in `groups` (sorted): the last
/// group whose priority is not above the pod's; a pod below every group is in the first.
pub fn group_of(groups: &[PriorityGroup], priority: i32) -> usize {
    groups.partition_point(|g| g.priority <= priority).saturating_sub(1)
}

/// A pod's grace period in a shutdown: its own (`terminationGracePeriodSeconds`), cut to
/// its group's.
pub fn pod_grace(own: Duration, group: Duration) -> Duration {
    own.min(group)
}

/// One step of a shutdown: these pods get SIGTERM together and `grace` to stop before
/// the next step begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage<K> {
    /// The group's priority (the lowest a pod in it may have, but for the first group).
    pub priority: i32,
    pub grace: Duration,
    pub pods: Vec<K>,
}

/// The shutdown's steps for `pods` (each with its priority), lowest priority first.
/// Groups without pods are left out (kubelet does not wait for them); the pods keep
/// their order within a step. `groups` must be sorted, as [`priority_groups`] makes them.
pub fn plan<K>(
    groups: &[PriorityGroup],
    pods: impl IntoIterator<Item = (K, i32)>,
) -> Vec<Stage<K>> {
    let mut stages: Vec<Stage<K>> = groups
        .iter()
        .map(|g| Stage { priority: g.priority, grace: g.grace, pods: Vec::new() })
        .collect();
    if stages.is_empty() {
        return stages;
    }
    for (pod, priority) in pods {
        stages[group_of(groups, priority)].pods.push(pod);
    }
    stages.retain(|s| !s.pods.is_empty());
    stages
}

#[cfg(test)]
mod tests;
