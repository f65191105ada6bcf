use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use super::{DURATION_SECONDS, NAMESPACE, beats_per_renewal, named, renewed};
use crate::sync::NodeRef;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + second).unwrap()
}

fn node(uid: &str) -> NodeRef {
    NodeRef { name: "edge-1".into(), uid: uid.into() }
}

fn owners(lease: &Lease) -> Vec<(String, String, String)> {
    let refs = lease.metadata.owner_references.clone().unwrap_or_default();
    refs.into_iter().map(|o| (o.kind, o.name, o.uid)).collect()
}

#[test]
fn a_new_lease_is_held_by_the_node_for_40_seconds() {
    let lease = renewed(named("edge-1"), "edge-1", None, DURATION_SECONDS, at(0));
    assert_eq!(lease.metadata.name.as_deref(), Some("edge-1"));
    assert_eq!(lease.metadata.namespace.as_deref(), Some(NAMESPACE));
    let spec = lease.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("edge-1"));
    assert_eq!(spec.lease_duration_seconds, Some(DURATION_SECONDS));
    assert_eq!(spec.renew_time, Some(MicroTime(at(0))));
    assert!(owners(&lease).is_empty(), "no ownerReference before the Node's UID is known");
}

#[test]
fn renewal_moves_the_renew_time_and_keeps_the_rest() {
    let mut first = renewed(named("edge-1"), "edge-1", Some(&node("u1")), DURATION_SECONDS, at(0));
    first.metadata.resource_version = Some("42".into());
    let second = renewed(first.clone(), "edge-1", Some(&node("u1")), DURATION_SECONDS, at(10));
    assert_eq!(second.metadata.resource_version.as_deref(), Some("42"), "an update of the latest");
    assert_eq!(second.spec.unwrap().renew_time, Some(MicroTime(at(10))));
    assert_eq!(owners(&first), [("Node".into(), "edge-1".into(), "u1".into())]);
    assert_eq!(second.metadata.owner_references, first.metadata.owner_references);
}

#[test]
fn a_new_node_uid_replaces_the_old_owner_and_keeps_others() {
    let mut lease = renewed(named("edge-1"), "edge-1", Some(&node("u1")), DURATION_SECONDS, at(0));
    lease.metadata.owner_references.get_or_insert_default().push(OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Gadget".into(),
        name: "g".into(),
        uid: "g1".into(),
        ..OwnerReference::default()
    });
    let lease = renewed(lease, "edge-1", Some(&node("u2")), DURATION_SECONDS, at(10));
    assert_eq!(
        owners(&lease),
        [("Gadget".into(), "g".into(), "g1".into()), ("Node".into(), "edge-1".into(), "u2".into())]
    );
    let node_ref = lease.metadata.owner_references.unwrap().pop().unwrap();
    assert_eq!(node_ref.api_version, "v1");
    assert_eq!(node_ref.controller, None, "kubelet sets no controller flag on its lease");
}

#[test]
fn a_longer_lease_is_renewed_on_every_nth_beat_within_a_quarter_of_it() {
    // (nodeLeaseDurationSeconds, beats apart): a quarter of it or sooner, on 10 s beats.
    for (seconds, beats) in
        [(40, 1), (59, 1), (60, 1), (79, 1), (80, 2), (119, 2), (120, 3), (3600, 90)]
    {
        assert_eq!(beats_per_renewal(seconds), beats, "{seconds} s");
    }
    for seconds in [-1, 0, 10, 39] {
        assert_eq!(beats_per_renewal(seconds), 1, "{seconds} s (refused by the config)");
    }
}

#[test]
fn the_lease_carries_the_configured_duration() {
    let lease = renewed(named("edge-1"), "edge-1", None, 120, at(0));
    assert_eq!(lease.spec.unwrap().lease_duration_seconds, Some(120));
}
