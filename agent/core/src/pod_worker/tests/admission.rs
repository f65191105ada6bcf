//! Admission through the pod worker's step (A1): a pod asking for what the node does not
//! do runs nothing, and reports itself Failed with the reason, in an Event and the status.

use k8s_openapi::api::core::v1::{AppArmorProfile, PodSecurityContext};

use super::*;

/// `web` with `hostUsers: false` (user namespaces, which Outpost does not do).
fn user_namespaced() -> P {
    let mut p = web();
    p.spec().host_users = Some(false);
    p
}

#[test]
fn a1_a_refused_pod_runs_nothing_and_reports_why() {
    let mut d = Driver::new();
    let actions = d.drive(user_namespaced().input());
    let said = shown(&actions);
    assert_eq!(said.len(), 1, "only the Event: {said:?}");
    assert!(said[0].starts_with("Event Warning UnsupportedField -: "), "{said:?}");
    assert!(said[0].contains("hostUsers"), "the message names the field: {said:?}");
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("UnsupportedField"));
    assert!(status.message.unwrap().contains("hostUsers"));
    assert_eq!(d.w.uid(), Some("u1"));
    assert_eq!(d.wake, None);
    // Said once: the same pod again changes nothing.
    assert!(d.drive(user_namespaced().input()).is_empty());
    // No longer desired: its status goes, and the worker is done.
    assert_eq!(shown(&d.step(undesired())), ["RemoveStatus u1"]);
    assert!(d.w.is_done());
}

#[test]
fn a1_apparmor_is_refused_with_kubelets_reason_where_the_node_has_none() {
    let mut p = web();
    p.spec().security_context = Some(PodSecurityContext {
        app_armor_profile: Some(AppArmorProfile {
            type_: "RuntimeDefault".into(),
            ..AppArmorProfile::default()
        }),
        ..PodSecurityContext::default()
    });
    let mut d = Driver::new();
    d.drive(p.input());
    let status = d.status();
    assert_eq!(status.reason.as_deref(), Some("AppArmor"));
    let message = status.message.unwrap();
    assert!(
        message.starts_with("Cannot enforce AppArmor: AppArmor is not enabled on the host"),
        "kubelet's words first: {message}"
    );
}

#[test]
fn a1_a_refused_pod_replaced_by_an_admissible_one_runs_that_one() {
    let mut d = Driver::new();
    d.drive(user_namespaced().input());
    let actions = shown(&d.drive(pod("u2", &[("c", "img:1")]).input()));
    assert_eq!(actions[0], "RemoveStatus u1", "{actions:?}");
    assert!(actions.contains(&"StartContainer u2/c rc=0".to_owned()), "{actions:?}");
    assert_eq!(d.phase(), "Running");
}

#[test]
fn a1_containers_left_for_a_pod_now_refused_are_stopped() {
    let p = user_namespaced();
    let mut d = Driver::with_found(vec![found("old-c", "u1", "c", 0, &p.hash("c"))]);
    let actions = shown(&d.step(p.input()));
    assert!(actions.contains(&"Signal Term old-c".to_owned()), "{actions:?}");
    assert_eq!(d.status().reason.as_deref(), Some("UnsupportedField"));
}

/// `web` on the host's network, from `source`.
fn host_network_from(source: Source) -> Input {
    let mut p = web();
    p.spec().host_network = Some(true);
    Input::Desired(Some(Desired {
        source,
        pod: Arc::new(p.0),
        rejected: None,
        answers: Answers::ALL,
        resize_pending: None,
    }))
}

#[test]
fn a_pushed_pod_the_policy_forbids_is_refused_naming_the_source_and_the_config_key() {
    let mut d = Driver::new();
    let said = shown(&d.drive(host_network_from(Source::Push)));
    assert_eq!(said.len(), 1, "only the Event: {said:?}");
    assert!(said[0].starts_with("Event Warning CapabilitiesForbidden -: "), "{said:?}");
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("CapabilitiesForbidden"));
    let message = status.message.unwrap();
    for part in ["spec.hostNetwork", "the push endpoint", "admissionPolicy.push.hostNetwork"] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
}

#[test]
fn the_same_pod_from_the_manifest_directory_runs() {
    let mut d = Driver::new();
    let actions = shown(&d.drive(host_network_from(Source::File)));
    assert!(actions.contains(&"StartContainer u1/c rc=0".to_owned()), "{actions:?}");
    assert_eq!(d.phase(), "Running");
}

#[test]
fn a_running_pod_the_policy_now_forbids_is_stopped_after_a_restart() {
    // An agent restarted with a stricter policy finds the pod's container running.
    let mut p = web();
    p.spec().host_network = Some(true);
    let mut d = Driver::with_found(vec![found("old-c", "u1", "c", 0, &p.hash("c"))]);
    let input = Input::Desired(Some(Desired {
        source: Source::Url,
        pod: Arc::new(p.0),
        rejected: None,
        answers: Answers::ALL,
        resize_pending: None,
    }));
    let actions = shown(&d.step(input));
    assert!(actions.contains(&"Signal Term old-c".to_owned()), "{actions:?}");
    assert_eq!(d.status().reason.as_deref(), Some("CapabilitiesForbidden"));
}
