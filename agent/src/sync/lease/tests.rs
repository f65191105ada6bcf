use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use std::time::Duration;

use outpost_core::backoff::Backoff;
use proptest::prelude::*;

use super::{
    DURATION_SECONDS, Error, NAMESPACE, PROBE, RENEW_INTERVAL, beats_per_renewal, named, renewed,
};
use crate::apiserver::CallError;
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

fn probe() -> Backoff {
    PROBE
}

fn refused(retry_after: Option<u64>) -> Error {
    Error::Call {
        verb: "update",
        lease: "edge-1".into(),
        source: CallError::Status {
            code: 429,
            reason: "TooManyRequests".into(),
            message: "too many requests, please try again later".into(),
            retry_after: retry_after.map(Duration::from_secs),
        },
    }
}

#[test]
fn a_refusal_s_retry_after_is_honoured_up_to_the_renew_interval() {
    // The server's flow control asks for a second: the first retry waits it.
    assert_eq!(refused(Some(1)).retry_delay(&mut probe()), Duration::from_secs(1));
    assert_eq!(refused(Some(4)).retry_delay(&mut probe()), Duration::from_secs(4));
    // A proxy's minute (or hour) would let the 40 s Lease lapse: the renew interval.
    for seconds in [11, 60, 3600] {
        assert_eq!(refused(Some(seconds)).retry_delay(&mut probe()), RENEW_INTERVAL);
    }
    // Without one, the probe's backoff: jittered in [0.5 s, 1 s] at first.
    let first = refused(None).retry_delay(&mut probe());
    assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1), "{first:?}");
}

proptest! {
    /// However the renewals failed before, and whatever the server asks, the next try
    /// comes within the renew interval: the Lease (40 s) never lapses for a wait the
    /// agent chose.
    #[test]
    fn a_failed_renewal_is_retried_within_the_renew_interval(
        failures in 0usize..20,
        retry_after in proptest::option::of(0u64..100_000),
        timed_out in any::<bool>(),
    ) {
        let mut backoff = PROBE;
        for _ in 0..failures {
            backoff.next_delay(fastrand::f64());
        }
        let error = if timed_out { Error::Timeout { lease: "edge-1".into() } } else { refused(retry_after) };
        let delay = error.retry_delay(&mut backoff);
        prop_assert!(delay <= RENEW_INTERVAL, "{delay:?}");
        if let (false, Some(seconds)) = (timed_out, retry_after) {
            prop_assert!(delay >= Duration::from_secs(seconds).min(RENEW_INTERVAL), "{delay:?}");
        }
    }
}
