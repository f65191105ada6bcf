//! A container's own `restartPolicy` and `restartPolicyRules` (I4) in the worker: what an
//! exit leads to, and the phase.

use k8s_openapi::api::core::v1::{ContainerRestartRule, ContainerRestartRuleOnExitCodes};

use super::init::Initializing;
use super::*;

/// `p` with the container (or init container) `name` given its own `policy` and a rule
/// restarting it on the exit codes `In` `codes`.
fn own(mut p: P, name: &str, policy: &str, codes: &[i32]) -> P {
    let spec = p.spec();
    let all = spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten());
    let c = all.into_iter().find(|c| c.name == name).unwrap();
    c.restart_policy = Some(policy.into());
    c.restart_policy_rules = (!codes.is_empty()).then(|| {
        vec![ContainerRestartRule {
            action: "Restart".into(),
            exit_codes: Some(ContainerRestartRuleOnExitCodes {
                operator: "In".into(),
                values: Some(codes.to_vec()),
            }),
        }]
    });
    p
}

#[test]
fn i4_a_restart_rule_restarts_a_container_of_a_never_pod_on_its_exit_code() {
    let mut d = Driver::new();
    d.run(&own(web().policy("Never"), "c", "Never", &[42]));
    assert_eq!(
        shown(&d.drive(d.exit("c-1", 42))),
        [
            "DeleteTask c-1",
            "KeepDead c-1",
            "StartContainer u1/c rc=1",
            "Count ContainerRestarted file"
        ]
    );
    assert_eq!(d.phase(), "Running");
    assert_eq!(d.restart_count("c"), 1);
    // Another exit code: the container's Never decides, and the pod fails.
    let actions = shown(&d.drive(d.exit("c-2", 1)));
    assert!(!actions.iter().any(|a| a.starts_with("StartContainer")), "{actions:?}");
    assert_eq!(d.terminated("c").exit_code, 1);
    assert_eq!(d.phase(), "Failed");
    assert_eq!(d.restart_count("c"), 1);
}

#[test]
fn i4_an_exit_no_rule_matches_goes_by_the_container_policy() {
    for (code, phase) in [(0, "Succeeded"), (1, "Failed")] {
        let mut d = Driver::new();
        d.run(&own(web().policy("Never"), "c", "Never", &[42]));
        d.drive(d.exit("c-1", code));
        assert_eq!(d.terminated("c").exit_code, code);
        assert_eq!((d.phase().as_str(), d.restart_count("c")), (phase, 0), "exit {code}");
    }
}

#[test]
fn i4_the_container_policy_overrides_the_pods() {
    // OnFailure in an Always pod: an exit 0 is the end of it.
    let mut d = Driver::new();
    d.run(&own(web(), "c", "OnFailure", &[]));
    d.drive(d.exit("c-1", 0));
    assert_eq!(d.terminated("c").exit_code, 0);
    assert_eq!(d.phase(), "Succeeded");
    // ... and a failure restarts it.
    let mut d = Driver::new();
    d.run(&own(web(), "c", "OnFailure", &[]));
    assert_eq!(started(&d.drive(d.exit("c-1", 3))), ["c"]);
    assert_eq!(d.phase(), "Running");
    // Always in a Never pod: restarted after a success too.
    let mut d = Driver::new();
    d.run(&own(web().policy("Never"), "c", "Always", &[]));
    assert_eq!(started(&d.drive(d.exit("c-1", 0))), ["c"]);
}

#[test]
fn i4_the_pod_runs_while_one_container_restarts_by_its_own_policy() {
    let p = own(pod("u1", &[("a", "img:a"), ("b", "img:b")]).policy("Never"), "b", "Always", &[]);
    let mut d = Driver::new();
    d.run(&p);
    d.drive(d.exit("a-1", 1));
    assert_eq!(d.terminated("a").exit_code, 1);
    assert_eq!(d.phase(), "Running");
}

#[test]
fn i4_an_init_container_with_its_own_policy_is_retried_in_a_never_pod() {
    let p = own(web().init("a", false).policy("Never"), "a", "OnFailure", &[]);
    let mut d = Driver::new();
    d.drive(p.input());
    d.pass(secs(1));
    assert_eq!(started(&d.drive(d.exit("a-1", 2))), ["a"]);
    assert_eq!(d.phase(), "Pending");
    // Never on the init container of an Always pod: its failure fails the pod (I2).
    let p = own(web().init("a", false), "a", "Never", &[]);
    let mut d = Driver::new();
    d.drive(p.input());
    d.pass(secs(1));
    assert!(started(&d.drive(d.exit("a-1", 2))).is_empty());
    assert_eq!(d.phase(), "Failed");
    // A rule on it: retried on that code only.
    let p = own(web().init("a", false).policy("Never"), "a", "Never", &[7]);
    let mut d = Driver::new();
    d.drive(p.input());
    d.pass(secs(1));
    assert_eq!(started(&d.drive(d.exit("a-1", 7))), ["a"]);
}
