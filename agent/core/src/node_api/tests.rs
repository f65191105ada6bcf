//! N1: kubelet's path → attributes mapping, the decision over several attribute sets,
//! the refusal message and the review cache.

use std::time::Duration;

use proptest::prelude::*;

use super::attributes::{is_below, subresources};
use super::*;

const NODE: &str = "edge-1";

fn subs(method: &str, upgrade: bool, path: &str) -> (Verb, Vec<&'static str>) {
    let attributes = request_attributes(NODE, method, upgrade, path);
    assert!(attributes.iter().all(|a| a.name == NODE && a.verb == attributes[0].verb));
    (attributes[0].verb, attributes.iter().map(|a| a.subresource).collect())
}

/// N1: every path family of kubelet's API (and Outpost's own) maps as kubelet 1.33 maps it.
#[test]
fn n1_every_path_family_maps_to_its_subresources() {
    let cases: &[(&str, &[&str])] = &[
        ("/stats", &["stats"]),
        ("/stats/", &["stats"]),
        ("/stats/summary", &["stats"]),
        ("/stats/summary/extra", &["stats"]),
        ("/metrics", &["metrics"]),
        ("/metrics/cadvisor", &["metrics"]),
        ("/metrics/resource", &["metrics"]),
        ("/metrics/probes", &["metrics"]),
        ("/metrics/slis", &["metrics"]),
        ("/logs", &["log"]),
        ("/logs/", &["log"]),
        ("/logs/syslog", &["log"]),
        ("/checkpoint/default/web/app", &["checkpoint"]),
        ("/pods", &["pods", "proxy"]),
        ("/pods/default/web", &["pods", "proxy"]),
        ("/pods/default/web/events", &["pods", "proxy"]),
        ("/runningpods", &["pods", "proxy"]),
        ("/runningpods/", &["pods", "proxy"]),
        ("/healthz", &["healthz", "proxy"]),
        ("/healthz/ping", &["healthz", "proxy"]),
        ("/healthz/syncloop", &["healthz", "proxy"]),
        ("/configz", &["configz", "proxy"]),
        ("/exec/default/web/app", &["proxy"]),
        ("/attach/default/web/app", &["proxy"]),
        ("/portForward/default/web", &["proxy"]),
        ("/run/default/web/app", &["proxy"]),
        ("/containerLogs/default/web/app", &["proxy"]),
        ("/spec", &["proxy"]),
        ("/readyz", &["proxy"]),
        ("/status", &["proxy"]),
        ("/manifests", &["proxy"]),
        ("/refresh", &["proxy"]),
        ("/debug/log-level", &["proxy"]),
        ("/", &["proxy"]),
        ("", &["proxy"]),
        // Not below: a longer name, a different case, a prefix without its slash.
        ("/statsfoo", &["proxy"]),
        ("/metricsx/cadvisor", &["proxy"]),
        ("/podsx", &["proxy"]),
        ("/Pods", &["proxy"]),
        ("/healthzz", &["proxy"]),
        ("/runningPods", &["proxy"]),
        ("/logsx", &["proxy"]),
        ("stats/summary", &["proxy"]),
    ];
    for (path, want) in cases {
        assert_eq!(subs("GET", false, path).1, *want, "path {path:?}");
        assert_eq!(subresources(path), *want, "path {path:?}");
    }
}

/// N1: the verb is the method's, as kubelet maps it; an upgrade is `create`.
#[test]
fn n1_verb_from_method_and_upgrade_is_create() {
    let methods = [
        ("GET", Verb::Get, "get"),
        ("POST", Verb::Create, "create"),
        ("PUT", Verb::Update, "update"),
        ("PATCH", Verb::Patch, "patch"),
        ("DELETE", Verb::Delete, "delete"),
        ("HEAD", Verb::Other, ""),
        ("OPTIONS", Verb::Other, ""),
        ("CONNECT", Verb::Other, ""),
        ("TRACE", Verb::Other, ""),
        ("get", Verb::Other, ""),
    ];
    for (method, verb, name) in methods {
        assert_eq!(Verb::of(method, false), verb, "{method}");
        assert_eq!(verb.as_str(), name);
        assert_eq!(verb.to_string(), name);
        // An upgrade (WebSocket GET, SPDY POST) is create whatever the method.
        assert_eq!(Verb::of(method, true), Verb::Create, "{method} upgrade");
    }
    assert_eq!(subs("GET", true, "/exec/default/web/app"), (Verb::Create, vec!["proxy"]));
    assert_eq!(subs("POST", true, "/portForward/default/web"), (Verb::Create, vec!["proxy"]));
    assert_eq!(subs("GET", false, "/exec/default/web/app"), (Verb::Get, vec!["proxy"]));
}

#[test]
fn is_below_is_kubelets_is_subpath() {
    assert!(is_below("/stats", "/stats/"));
    assert!(is_below("/stats/x", "/stats/"));
    assert!(is_below("/stats/", "/stats"));
    assert!(!is_below("/stat", "/stats"));
    assert!(!is_below("/statsx", "/stats/"));
    assert!(is_below("/anything", "/"));
}

fn attrs(path: &str) -> Vec<Attributes> {
    request_attributes(NODE, "GET", false, path)
}

/// N1: the refusal names the user, verb, resource and every subresource tried, as kubelet.
#[test]
fn n1_forbidden_message_is_kubelets() {
    assert_eq!(
        forbidden_message("system:serviceaccount:default:reader", &attrs("/pods")),
        "Forbidden (user=system:serviceaccount:default:reader, verb=get, resource=nodes, subresource(s)=[pods proxy])"
    );
    let exec = request_attributes(NODE, "GET", true, "/exec/default/web/app");
    assert_eq!(
        forbidden_message("system:anonymous", &exec),
        "Forbidden (user=system:anonymous, verb=create, resource=nodes, subresource(s)=[proxy])"
    );
}

const S: Duration = Duration::from_secs(1);

#[test]
fn cache_entries_turn_stale_at_their_ttl() {
    let mut cache = Cache::new(4);
    assert!(cache.is_empty());
    cache.insert("allowed", Decision::Allow, 300 * S, 10 * S);
    cache.insert("denied", Decision::Deny, 30 * S, 10 * S);
    assert_eq!(cache.get(&"allowed", 309 * S), Lookup::Fresh(Decision::Allow));
    assert_eq!(cache.get(&"allowed", 310 * S), Lookup::Stale(Decision::Allow));
    assert_eq!(cache.get(&"denied", 39 * S), Lookup::Fresh(Decision::Deny));
    assert_eq!(cache.get(&"denied", 40 * S), Lookup::Stale(Decision::Deny));
    assert_eq!(cache.get(&"other", 10 * S), Lookup::Missing);
    // A new answer replaces the old one and its expiry.
    cache.insert("denied", Decision::Allow, 300 * S, 50 * S);
    assert_eq!(cache.get(&"denied", 51 * S), Lookup::Fresh(Decision::Allow));
    // A zero TTL keeps nothing.
    cache.insert("zero", Decision::Allow, Duration::ZERO, 50 * S);
    assert_eq!(cache.get(&"zero", 50 * S), Lookup::Missing);
    assert_eq!(cache.len(), 2);
}

#[test]
fn a_full_cache_drops_stale_entries_then_the_first_to_expire() {
    let mut cache = Cache::new(2);
    cache.insert(1, (), 10 * S, Duration::ZERO);
    cache.insert(2, (), 100 * S, Duration::ZERO);
    // Full, none stale: the one expiring first (1) goes.
    cache.insert(3, (), 50 * S, S);
    assert_eq!(cache.get(&1, S), Lookup::Missing);
    assert_eq!(cache.get(&2, S), Lookup::Fresh(()));
    // At 60 s, 3 is stale: it goes, 2 stays.
    cache.insert(4, (), 10 * S, 60 * S);
    assert_eq!(cache.get(&3, 60 * S), Lookup::Missing);
    assert_eq!(cache.get(&2, 60 * S), Lookup::Fresh(()));
    assert_eq!(cache.get(&4, 60 * S), Lookup::Fresh(()));
    assert_eq!(Cache::<u8, ()>::new(0).capacity(), 1);
}

proptest! {
    /// N1: whatever the path and method, a request maps to one or two attribute sets on
    /// `nodes` named after the node, all with one verb; two only for the fine-grained
    /// subresources, which fall back to `proxy`; an upgrade is always `create`.
    #[test]
    fn n1_mapping_invariants(
        path in "(/[a-zA-Z]{0,12}){0,4}/?",
        method in prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        upgrade in any::<bool>(),
    ) {
        let attributes = request_attributes(NODE, method, upgrade, &path);
        prop_assert!(!attributes.is_empty() && attributes.len() <= 2);
        prop_assert!(attributes.iter().all(|a| a.name == NODE && a.verb == attributes[0].verb));
        if upgrade {
            prop_assert_eq!(attributes[0].verb, Verb::Create);
        }
        if attributes.len() == 2 {
            prop_assert!(["pods", "healthz", "configz"].contains(&attributes[0].subresource));
            prop_assert_eq!(attributes[1].subresource, "proxy");
        }
        // Anything under a path maps as the path does (kubelet matches prefixes).
        let below = format!("{}/more", path.trim_end_matches('/'));
        if path.trim_end_matches('/').len() > 1 {
            prop_assert_eq!(subresources(&below), subresources(&path));
        }
    }

    /// The cache never holds more than its capacity, and the newest insert is there.
    #[test]
    fn cache_stays_bounded(
        capacity in 1usize..8,
        inserts in prop::collection::vec((0u8..16, 0u64..100, 0u64..100), 0..64),
    ) {
        let mut cache = Cache::new(capacity);
        let mut now = Duration::ZERO;
        for (key, ttl, step) in inserts {
            now += Duration::from_secs(step);
            cache.insert(key, ttl, Duration::from_secs(ttl), now);
            prop_assert!(cache.len() <= capacity);
            if ttl > 0 {
                prop_assert_eq!(cache.get(&key, now), Lookup::Fresh(ttl));
            }
        }
    }
}
