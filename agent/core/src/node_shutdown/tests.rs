//! J3: kubelet's shutdown grace periods as priority groups, and the pods' order.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn group(priority: i32, grace: u64) -> PriorityGroup {
    PriorityGroup { priority, grace: secs(grace) }
}

#[test]
fn j3_nothing_set_means_no_graceful_shutdown() {
    assert_eq!(priority_groups(Duration::ZERO, Duration::ZERO, &[]), Ok(vec![]));
}

#[test]
fn j3_by_priority_with_no_time_at_all_means_no_graceful_shutdown() {
    let groups = [group(0, 0), group(100, 0)];
    assert_eq!(priority_groups(Duration::ZERO, Duration::ZERO, &groups), Ok(vec![]));
}

#[test]
fn j3_two_settings_become_kubelets_two_groups() {
    let groups = priority_groups(secs(30), secs(10), &[]).unwrap();
    assert_eq!(groups, [group(0, 20), group(2_000_000_000, 10)]);
    assert_eq!(total(&groups), secs(30));
}

#[test]
fn j3_grace_period_alone_leaves_critical_pods_no_time() {
    let groups = priority_groups(secs(30), Duration::ZERO, &[]).unwrap();
    assert_eq!(groups, [group(0, 30), group(SYSTEM_CRITICAL_PRIORITY, 0)]);
}

#[test]
fn j3_all_of_the_time_for_critical_pods() {
    let groups = priority_groups(secs(30), secs(30), &[]).unwrap();
    assert_eq!(groups, [group(0, 0), group(SYSTEM_CRITICAL_PRIORITY, 30)]);
}

#[test]
fn j3_critical_pods_cannot_have_more_than_the_whole() {
    assert_eq!(
        priority_groups(secs(10), secs(20), &[]),
        Err(Error::CriticalExceedsTotal { total: secs(10), critical: secs(20) })
    );
    assert!(matches!(
        priority_groups(Duration::ZERO, secs(5), &[]),
        Err(Error::CriticalExceedsTotal { .. })
    ));
}

#[test]
fn j3_one_form_only() {
    let by = [group(0, 10)];
    assert_eq!(priority_groups(secs(30), Duration::ZERO, &by), Err(Error::BothForms));
    assert_eq!(priority_groups(Duration::ZERO, secs(3), &by), Err(Error::BothForms));
}

#[test]
fn j3_by_priority_is_sorted() {
    let by = [group(100_000, 120), group(-10, 30), group(10_000, 60)];
    let groups = priority_groups(Duration::ZERO, Duration::ZERO, &by).unwrap();
    assert_eq!(groups, [group(-10, 30), group(10_000, 60), group(100_000, 120)]);
    assert_eq!(total(&groups), secs(210));
}

#[test]
fn j3_a_priority_twice_is_refused() {
    let by = [group(5, 10), group(5, 20)];
    assert_eq!(
        priority_groups(Duration::ZERO, Duration::ZERO, &by),
        Err(Error::DuplicatePriority(5))
    );
}

#[test]
fn j3_a_pod_belongs_to_the_last_group_not_above_it() {
    let groups = [group(0, 10), group(10_000, 20), group(SYSTEM_CRITICAL_PRIORITY, 30)];
    assert_eq!(group_of(&groups, i32::MIN), 0, "below every group: the first");
    assert_eq!(group_of(&groups, -1), 0);
    assert_eq!(group_of(&groups, 0), 0);
    assert_eq!(group_of(&groups, 9_999), 0);
    assert_eq!(group_of(&groups, 10_000), 1, "a group's own priority is in it");
    assert_eq!(group_of(&groups, 1_999_999_999), 1);
    assert_eq!(group_of(&groups, 2_000_000_000), 2, "system-cluster-critical");
    assert_eq!(group_of(&groups, 2_000_001_000), 2, "system-node-critical");
    assert_eq!(group_of(&groups, i32::MAX), 2);
}

#[test]
fn j3_a_pods_grace_is_its_own_cut_to_its_groups() {
    assert_eq!(pod_grace(secs(30), secs(10)), secs(10));
    assert_eq!(pod_grace(secs(5), secs(10)), secs(5));
    assert_eq!(pod_grace(secs(0), secs(10)), secs(0));
    assert_eq!(pod_grace(secs(10), secs(0)), secs(0));
}

#[test]
fn j3_pods_stop_lowest_priority_first_and_empty_groups_are_skipped() {
    let groups = priority_groups(secs(30), secs(10), &[]).unwrap();
    let pods =
        [("node-critical", 2_000_001_000), ("web", 0), ("batch", -5), ("dns", 2_000_000_000)];
    let stages = plan(&groups, pods);
    assert_eq!(
        stages,
        [
            Stage { priority: 0, grace: secs(20), pods: vec!["web", "batch"] },
            Stage {
                priority: SYSTEM_CRITICAL_PRIORITY,
                grace: secs(10),
                pods: vec!["node-critical", "dns"]
            },
        ]
    );
    let only_critical = plan(&groups, [("dns", 2_000_000_000)]);
    assert_eq!(only_critical.len(), 1, "no wait for a group without pods");
    assert_eq!(only_critical[0].grace, secs(10));
    assert!(plan(&groups, Vec::<(&str, i32)>::new()).is_empty());
    assert!(plan(&[], [("web", 0)]).is_empty(), "off: no plan");
}

#[test]
fn j3_kubelets_reasons() {
    assert_eq!(POD_REASON, "Terminated");
    assert_eq!(DISRUPTION_REASON, "TerminationByKubelet");
    assert_eq!(POD_MESSAGE, "Pod was terminated in response to imminent node shutdown.");
    assert_eq!(NODE_NOT_READY_MESSAGE, "node is shutting down");
}

fn groups() -> impl Strategy<Value = Vec<PriorityGroup>> {
    proptest::collection::btree_map(any::<i32>(), 0u64..600, 1..6)
        .prop_map(|m| m.into_iter().map(|(priority, grace)| group(priority, grace)).collect())
}

proptest! {
    /// Every pod is in exactly one step; steps go up in priority; a pod's priority is
    /// within its group's range (or below every group, in the first).
    #[test]
    fn j3_plan_places_every_pod_once_in_its_range(
        groups in groups(),
        priorities in proptest::collection::vec(any::<i32>(), 0..40),
    ) {
        let pods: Vec<(usize, i32)> = priorities.iter().copied().enumerate().collect();
        let stages = plan(&groups, pods.clone());
        let mut seen: Vec<usize> = stages.iter().flat_map(|s| s.pods.clone()).collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..pods.len()).collect::<Vec<_>>());
        prop_assert!(stages.windows(2).all(|w| w[0].priority < w[1].priority));
        for stage in &stages {
            prop_assert!(!stage.pods.is_empty());
            let index = groups.iter().position(|g| g.priority == stage.priority).unwrap();
            prop_assert_eq!(stage.grace, groups[index].grace);
            let next = groups.get(index + 1).map(|g| g.priority);
            for &pod in &stage.pods {
                let priority = priorities[pod];
                prop_assert!(index == 0 || priority >= stage.priority);
                prop_assert!(next.is_none_or(|next| priority < next));
            }
        }
        prop_assert!(total(&stages.iter().map(|s| group(s.priority, s.grace.as_secs())).collect::<Vec<_>>()) <= total(&groups));
    }

    /// The two-setting form always makes two groups that add up to shutdownGracePeriod.
    #[test]
    fn j3_two_settings_add_up(total_s in 1u64..10_000, critical_s in 0u64..10_000) {
        match priority_groups(secs(total_s), secs(critical_s), &[]) {
            Ok(groups) => {
                prop_assert!(critical_s <= total_s);
                prop_assert_eq!(groups.len(), 2);
                prop_assert_eq!(total(&groups), secs(total_s));
                prop_assert_eq!(groups[1], group(SYSTEM_CRITICAL_PRIORITY, critical_s));
            }
            Err(e) => {
                prop_assert!(critical_s > total_s);
                prop_assert_eq!(e, Error::CriticalExceedsTotal { total: secs(total_s), critical: secs(critical_s) });
            }
        }
    }

    /// A pod's grace in a shutdown never exceeds its own nor its group's, and is one of them.
    #[test]
    fn j3_pod_grace_is_the_smaller(own in 0u64..100_000, group in 0u64..100_000) {
        let g = pod_grace(secs(own), secs(group));
        prop_assert!(g <= secs(own) && g <= secs(group));
        prop_assert!(g == secs(own) || g == secs(group));
    }
}
