use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use super::{Instance, Plan, Policy, plan};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

/// Instance `restart_count` of container `container` of pod `uid`, created at second
/// `created`.
fn dead(uid: &str, container: &str, restart_count: u32, created: i64) -> Instance {
    Instance {
        id: format!("{uid}-{container}-{restart_count}"),
        pod_uid: uid.to_owned(),
        container: container.to_owned(),
        restart_count,
        created_at: at(created),
        running: false,
    }
}

fn running(uid: &str, container: &str, restart_count: u32, created: i64) -> Instance {
    Instance { running: true, ..dead(uid, container, restart_count, created) }
}

fn policy(per_container: i32, node: i32, min_age: u64) -> Policy {
    Policy {
        min_age: Duration::from_secs(min_age),
        max_per_pod_container: per_container,
        max_containers: node,
    }
}

fn removed(instances: &[Instance], policy: Policy, now: i64) -> Vec<String> {
    plan(instances, &BTreeSet::new(), &policy, at(now)).remove
}

#[test]
fn the_defaults_are_kubelets() {
    assert_eq!(Policy::default(), policy(1, -1, 0));
}

#[test]
fn a_restarted_container_keeps_its_previous_instance_only() {
    let instances = [
        dead("u", "c", 0, 0),
        dead("u", "c", 1, 10),
        dead("u", "c", 2, 20),
        running("u", "c", 3, 30),
    ];
    assert_eq!(removed(&instances, Policy::default(), 100), ["u-c-0", "u-c-1"]);
}

#[test]
fn a_container_waiting_for_its_restart_keeps_its_last_exit_only() {
    let instances = [dead("u", "c", 0, 0), dead("u", "c", 1, 10), dead("u", "c", 2, 20)];
    assert_eq!(removed(&instances, Policy::default(), 100), ["u-c-0", "u-c-1"]);
}

#[test]
fn a_negative_count_keeps_every_dead_instance() {
    let instances = [dead("u", "c", 0, 0), dead("u", "c", 1, 10), running("u", "c", 2, 20)];
    assert!(removed(&instances, policy(-1, -1, 0), 100).is_empty());
}

#[test]
fn zero_per_container_keeps_only_the_instance_the_worker_stands_on() {
    let waiting = [dead("u", "c", 0, 0), dead("u", "c", 1, 10)];
    assert_eq!(removed(&waiting, policy(0, -1, 0), 100), ["u-c-0"]);
    let restarted = [dead("u", "c", 0, 0), dead("u", "c", 1, 10), running("u", "c", 2, 20)];
    assert_eq!(removed(&restarted, policy(0, -1, 0), 100), ["u-c-0", "u-c-1"]);
}

#[test]
fn units_are_pod_and_container() {
    let instances = [
        dead("u", "a", 0, 0),
        running("u", "a", 1, 5),
        dead("u", "b", 0, 1),
        running("u", "b", 1, 6),
        dead("v", "a", 0, 2),
        running("v", "a", 1, 7),
    ];
    assert!(removed(&instances, Policy::default(), 100).is_empty());
    assert_eq!(removed(&instances, policy(0, -1, 0), 100), ["u-a-0", "u-b-0", "v-a-0"]);
}

#[test]
fn young_dead_containers_stay_and_do_not_count() {
    // Created at 0, 50 and 90; the TTL is 30 s at 100: the one of 90 is too young, and
    // of the others (which are old enough) the newest stays.
    let instances = [dead("u", "c", 0, 0), dead("u", "c", 1, 50), dead("u", "c", 2, 90)];
    let plan = plan(&instances, &BTreeSet::new(), &policy(1, -1, 30), at(100));
    assert_eq!(plan, Plan { remove: vec!["u-c-0".into()], revisit_at: Some(at(120)), held: false });
    // Once it comes of age, the one of 50 goes too.
    assert_eq!(removed(&instances, policy(1, -1, 30), 120), ["u-c-0", "u-c-1"]);
}

#[test]
fn nothing_to_revisit_without_a_ttl() {
    let instances = [dead("u", "c", 0, 0), running("u", "c", 1, 10)];
    assert_eq!(plan(&instances, &BTreeSet::new(), &Policy::default(), at(100)).revisit_at, None);
}

#[test]
fn running_containers_are_never_removed_nor_counted() {
    let instances = [running("u", "c", 0, 0), running("u", "c", 1, 10)];
    assert!(removed(&instances, policy(0, 0, 0), 100).is_empty());
}

#[test]
fn the_node_limit_shares_out_then_removes_the_oldest() {
    // Three pods with two dead instances each besides a running one; at most 2 dead on
    // the node: each unit down to 1 (2 / 3 units, at least 1), then the oldest of the
    // node go until 2 are left.
    let mut instances = Vec::new();
    for (i, uid) in ["a", "b", "c"].into_iter().enumerate() {
        let base = i64::try_from(i).unwrap();
        instances.push(dead(uid, "x", 0, base));
        instances.push(dead(uid, "x", 1, 10 + base));
        instances.push(running(uid, "x", 2, 20 + base));
    }
    assert_eq!(removed(&instances, policy(-1, 2, 0), 100), ["a-x-0", "b-x-0", "c-x-0", "a-x-1"]);
}

#[test]
fn the_node_limit_spares_the_instance_a_worker_stands_on() {
    let instances = [dead("a", "x", 0, 0), dead("b", "x", 0, 1), dead("b", "x", 1, 2)];
    // Each unit's newest is protected: only b's older one can go.
    assert_eq!(removed(&instances, policy(-1, 0, 0), 100), ["b-x-0"]);
}

#[test]
fn within_the_node_limit_nothing_more_goes() {
    let instances = [dead("a", "x", 0, 0), running("a", "x", 1, 1), dead("b", "x", 0, 2)];
    assert!(removed(&instances, policy(1, 5, 0), 100).is_empty());
}

/// The plan with `named` instances in the pods' statuses.
fn plan_naming(instances: &[Instance], named: &[&str], policy: Policy, now: i64) -> Plan {
    plan(instances, &named.iter().copied().collect(), &policy, at(now))
}

#[test]
fn the_last_termination_the_status_still_names_stays() {
    // The crash loop of issue 31: run 1 ended and the status names it as lastState; run 2
    // started and exited, and the collector runs on that exit before the worker's next
    // status names run 2. kubelet's count alone (1 dead kept) would remove run 1.
    let instances = [dead("u", "c", 1, 10), dead("u", "c", 2, 20)];
    let kept = plan_naming(&instances, &["u-c-1"], Policy::default(), 100);
    assert_eq!(kept, Plan { remove: vec![], revisit_at: None, held: true });
    // Once the status names run 2, run 1 goes.
    let moved_on = plan_naming(&instances, &["u-c-2"], Policy::default(), 100);
    assert_eq!(moved_on, Plan { remove: vec!["u-c-1".into()], revisit_at: None, held: false });
}

#[test]
fn an_instance_named_as_the_newest_is_not_held() {
    // Named and the unit's newest: protected anyway, nothing to look at again.
    let instances = [dead("u", "c", 0, 0), dead("u", "c", 1, 10)];
    let plan = plan_naming(&instances, &["u-c-1"], policy(2, 1, 0), 100);
    assert_eq!(plan, Plan { remove: vec!["u-c-0".into()], revisit_at: None, held: false });
}

#[test]
fn keeping_no_dead_container_keeps_none_a_status_names() {
    // `--maximum-dead-containers-per-container 0`: only what the worker stands on stays.
    let instances = [dead("u", "c", 0, 0), dead("u", "c", 1, 10), running("u", "c", 2, 20)];
    let plan = plan_naming(&instances, &["u-c-1", "u-c-2"], policy(0, -1, 0), 100);
    assert_eq!(
        plan,
        Plan { remove: vec!["u-c-0".into(), "u-c-1".into()], revisit_at: None, held: false }
    );
}

#[test]
fn the_node_limit_holds_what_a_status_names() {
    let instances = [dead("a", "x", 0, 0), dead("a", "x", 1, 5), running("a", "x", 2, 9)];
    let plan = plan_naming(&instances, &["a-x-0", "a-x-1"], policy(-1, 0, 0), 100);
    assert_eq!(plan, Plan { remove: vec![], revisit_at: None, held: true });
    let plan = plan_naming(&instances, &["a-x-1"], policy(-1, 0, 0), 100);
    assert_eq!(plan, Plan { remove: vec!["a-x-0".into()], revisit_at: None, held: true });
}

fn arb_instances() -> impl Strategy<Value = Vec<Instance>> {
    let one = (0..3usize, 0..2usize, 0..6u32, 0..200i64, any::<bool>());
    proptest::collection::vec(one, 0..30).prop_map(|raw| {
        let mut seen = BTreeSet::new();
        raw.into_iter()
            .filter(|(p, c, r, _, _)| seen.insert((*p, *c, *r)))
            .map(|(p, c, r, created, run)| {
                let (uid, container) = (["p0", "p1", "p2"][p], ["a", "b"][c]);
                if run {
                    running(uid, container, r, created)
                } else {
                    dead(uid, container, r, created)
                }
            })
            .collect()
    })
}

proptest! {
    /// Never a running one, never a unit's newest, never one younger than the TTL; without
    /// a node limit, never one of the newest N dead of its unit, and each unit ends with
    /// at most N evictable dead (besides its protected newest).
    #[test]
    fn never_removes_the_newest_n_nor_a_running_one(
        instances in arb_instances(),
        per in -1..4i32,
        node in -1..6i32,
        ttl in 0..100u64,
    ) {
        let policy = policy(per, node, ttl);
        let now = at(200);
        let chosen: BTreeSet<String> =
            plan(&instances, &BTreeSet::new(), &policy, now).remove.into_iter().collect();
        let mut units: BTreeMap<(&str, &str), Vec<&Instance>> = BTreeMap::new();
        for i in &instances {
            units.entry((i.pod_uid.as_str(), i.container.as_str())).or_default().push(i);
        }
        for list in units.values_mut() {
            list.sort_by_key(|i| std::cmp::Reverse((i.restart_count, i.created_at)));
            prop_assert!(!chosen.contains(&list[0].id), "the newest of a unit");
            let dead_newest_first: Vec<&&Instance> = list.iter().filter(|i| !i.running).collect();
            for (rank, instance) in dead_newest_first.iter().enumerate() {
                if !chosen.contains(&instance.id) {
                    continue;
                }
                prop_assert!(!instance.running);
                let age = now.duration_since(instance.created_at).as_secs();
                prop_assert!(u64::try_from(age).unwrap() >= ttl, "younger than the TTL");
                if node < 0 {
                    let old_enough_newer = dead_newest_first[..rank]
                        .iter()
                        .filter(|i| u64::try_from(now.duration_since(i.created_at).as_secs()).unwrap() >= ttl)
                        .count();
                    prop_assert!(per >= 0 && old_enough_newer >= usize::try_from(per).unwrap());
                }
            }
        }
        if node >= 0 {
            let evictable_left = instances
                .iter()
                .filter(|i| !i.running && !chosen.contains(&i.id))
                .filter(|i| u64::try_from(now.duration_since(i.created_at).as_secs()).unwrap() >= ttl)
                .count();
            let protected = units.len();
            prop_assert!(evictable_left <= usize::try_from(node).unwrap() + protected);
        }
    }
}

proptest! {
    /// An instance a status names is never removed; without names the plan is the same
    /// as kubelet's count; naming more never removes more.
    #[test]
    fn never_removes_what_a_status_names(
        instances in arb_instances(),
        picks in proptest::collection::vec(any::<proptest::sample::Index>(), 0..6),
        per in -1..4i32,
        node in -1..6i32,
    ) {
        let policy = policy(per, node, 0);
        let named: BTreeSet<&str> = if instances.is_empty() {
            BTreeSet::new()
        } else {
            picks.iter().map(|i| instances[i.index(instances.len())].id.as_str()).collect()
        };
        let with = plan(&instances, &named, &policy, at(200));
        let without = plan(&instances, &BTreeSet::new(), &policy, at(200));
        for id in with.remove.iter().filter(|_| per != 0) {
            prop_assert!(!named.contains(id.as_str()), "removed {id}, which a status names");
        }
        prop_assert!(with.remove.len() <= without.remove.len());
        prop_assert!(!without.held);
        if with.remove != without.remove {
            prop_assert!(with.held, "kept a named instance without saying so");
        }
    }
}
