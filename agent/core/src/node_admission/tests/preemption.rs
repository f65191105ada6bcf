//! K4: critical pods and kubelet's preemption; the admitter's invariants.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn critical(name: &str, requests: Value) -> Pod {
    let mut p = requesting(name, requests);
    p.spec.as_mut().unwrap().priority = Some(SYSTEM_CRITICAL_PRIORITY);
    p
}

fn with_limits(name: &str, resources: Value) -> Pod {
    pod(
        name,
        json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": resources, "limits": resources}}]}),
    )
}

#[test]
fn k4_critical_pods_are_known() {
    assert!(is_critical(&pod("p", json!({})), Source::File));
    assert!(!is_critical(&pod("p", json!({})), Source::Api));
    assert!(is_critical(&critical("p", json!({})), Source::Api));
    let mut mirror = pod("p", json!({}));
    mirror.metadata.annotations = Some(BTreeMap::from([(CONFIG_MIRROR.into(), "h".into())]));
    assert!(is_critical(&mirror, Source::Api));
}

#[test]
fn k4_a_critical_pod_preempts_the_fewest_lowest_pods() {
    let active = [
        api(&pod("best-effort", json!({}))),
        api(&requesting("burstable", json!({"cpu": "500m"}))),
        api(&with_limits("guaranteed", json!({"cpu": "1", "memory": "1Gi"}))),
    ];
    // 2000m allocatable, 1500m used: 1000m more is needed for 1500m.
    let p = requesting("static", json!({"cpu": "1500m"}));
    // As kubelet decides: the guaranteed pods needed even if every lower pod went (the
    // burstable 500m leaves 500m: the guaranteed pod), then the burstable pods still
    // needed (none: the guaranteed pod's 1000m covers it).
    let verdict = admit(&node(), &active, &p, Source::File);
    assert_eq!(verdict, Verdict::Preempt(vec!["guaranteed".into()]));
    // 500m missing: the burstable pod alone, not the guaranteed one.
    let p = requesting("static", json!({"cpu": "1"}));
    assert_eq!(
        admit(&node(), &active, &p, Source::File),
        Verdict::Preempt(vec!["burstable".into()])
    );
    // An API pod is not critical: rejected.
    assert_eq!(rejected(admit(&node(), &active, &p, Source::Api)).0, "OutOfcpu");
}

#[test]
fn k4_preemption_prefers_the_closest_and_then_the_smaller_pod() {
    let active = [
        api(&requesting("small", json!({"cpu": "300m", "memory": "10Mi"}))),
        api(&requesting("exact", json!({"cpu": "600m", "memory": "20Mi"}))),
        api(&requesting("large", json!({"cpu": "1", "memory": "30Mi"}))),
    ];
    // Used 1900m of 2000m: 600m needs 500m more: exact and large both cover it; exact is smaller.
    let p = requesting("static", json!({"cpu": "600m"}));
    assert_eq!(admit(&node(), &active, &p, Source::File), Verdict::Preempt(vec!["exact".into()]));
}

#[test]
fn k4_preemption_takes_lower_priorities_first() {
    let mut low = requesting("low", json!({"cpu": "600m"}));
    low.spec.as_mut().unwrap().priority = Some(0);
    let mut high = requesting("high", json!({"cpu": "500m"}));
    high.spec.as_mut().unwrap().priority = Some(100);
    let other = requesting("other", json!({"cpu": "800m"}));
    let active = [api(&high), api(&low), api(&other)];
    // 1900m used: 600m needs 500m more; "high" alone is closest, but its group comes
    // after the lower one, which covers it.
    let p = requesting("static", json!({"cpu": "600m"}));
    assert_eq!(admit(&node(), &active, &p, Source::File), Verdict::Preempt(vec!["low".into()]));
}

#[test]
fn k4_preemption_of_pod_slots() {
    let mut n = node();
    n.allocatable.insert("pods".into(), 2);
    let active = [api(&pod("a", json!({}))), api(&pod("b", json!({})))];
    let verdict = admit(&n, &active, &pod("static", json!({})), Source::File);
    assert!(matches!(&verdict, Verdict::Preempt(v) if v.len() == 1), "{verdict:?}");
}

#[test]
fn k4_critical_pods_are_not_preempted_and_failure_is_kubelets_error() {
    let active = [admitted(requesting("other-static", json!({"cpu": "2"})), Source::File)];
    let (reason, message) =
        rejected(admit(&node(), &active, &requesting("static", json!({"cpu": "1"})), Source::File));
    assert_eq!(reason, "UnexpectedAdmissionError");
    assert_eq!(
        message,
        "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 1000), ]"
    );
}

#[test]
fn k4_higher_priority_preempts_lower_among_critical_pods() {
    let low = critical("low", json!({"cpu": "2"}));
    let mut high = critical("high", json!({"cpu": "1"}));
    high.spec.as_mut().unwrap().priority = Some(SYSTEM_CRITICAL_PRIORITY + 1000);
    let verdict = admit(&node(), &[api(&low)], &high, Source::Api);
    assert_eq!(verdict, Verdict::Preempt(vec!["low".into()]));
}

#[test]
fn k4_a_critical_pod_failing_otherwise_is_rejected() {
    let active = [api(&requesting("a", json!({"cpu": "2"})))];
    let p = pod(
        "static",
        json!({"nodeSelector": {"zone": "south"}, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}),
    );
    assert_eq!(rejected(admit(&node(), &active, &p, Source::File)).0, "NodeAffinity");
}

fn arbitrary_pod() -> impl Strategy<Value = (u32, u32, bool)> {
    (0u32..1500, 0u32..2048, any::<bool>())
}

proptest! {
    /// K4: admitting pods one by one never takes more than allocatable, and a pod once
    /// admitted is still admitted against the pods that came after it (nothing admitted
    /// is pushed out by later pods).
    #[test]
    fn k4_admitted_pods_never_exceed_allocatable(pods in prop::collection::vec(arbitrary_pod(), 0..30), max in 0i64..20) {
        let mut n = node();
        n.allocatable.insert("pods".into(), max);
        let mut active: Vec<Admitted> = Vec::new();
        for (i, (cpu, memory, requests)) in pods.into_iter().enumerate() {
            let name = format!("p{i}");
            let p = if requests {
                requesting(&name, json!({"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")}))
            } else {
                pod(&name, json!({}))
            };
            if admit(&n, &active, &p, Source::Api) == Verdict::Admit {
                active.push(api(&p));
            }
        }
        prop_assert!(i64::try_from(active.len()).unwrap() <= max);
        let total = |r: &str| active.iter().map(|a| pod_requests(&a.pod).get(r).copied().unwrap_or(0)).sum::<i64>();
        prop_assert!(total("cpu") <= n.allocatable["cpu"]);
        prop_assert!(total("memory") <= n.allocatable["memory"]);
        for i in 0..active.len() {
            let mut others = active.clone();
            let me = others.remove(i);
            prop_assert_eq!(admit(&n, &others, &me.pod, Source::Api), Verdict::Admit);
        }
    }

    /// K4: the pods a critical pod preempts make room for it.
    #[test]
    fn k4_preemption_makes_room(pods in prop::collection::vec(arbitrary_pod(), 1..12), cpu in 1u32..2000) {
        let mut active: Vec<Admitted> = Vec::new();
        let n = node();
        for (i, (c, m, requests)) in pods.into_iter().enumerate() {
            let name = format!("p{i}");
            let p = if requests { requesting(&name, json!({"cpu": format!("{c}m"), "memory": format!("{m}Mi")})) } else { pod(&name, json!({})) };
            if admit(&n, &active, &p, Source::Api) == Verdict::Admit {
                active.push(api(&p));
            }
        }
        let p = requesting("static", json!({"cpu": format!("{cpu}m")}));
        match admit(&n, &active, &p, Source::File) {
            Verdict::Admit => {}
            Verdict::Preempt(victims) => {
                prop_assert!(!victims.is_empty());
                let left: Vec<Admitted> = active.iter().filter(|a| !victims.contains(&a.uid)).cloned().collect();
                prop_assert_eq!(admit(&n, &left, &p, Source::File), Verdict::Admit);
            }
            Verdict::Reject(r) => prop_assert!(false, "rejected: {:?}", r),
        }
    }
}
