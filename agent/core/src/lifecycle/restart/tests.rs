use k8s_openapi::api::core::v1::{
    Container, ContainerRestartRule, ContainerRestartRuleOnExitCodes, Pod, PodSpec,
};
use proptest::prelude::*;

use super::*;

const POLICIES: [RestartPolicy; 3] =
    [RestartPolicy::Always, RestartPolicy::OnFailure, RestartPolicy::Never];

fn rule(action: &str, operator: &str, values: &[i32]) -> ContainerRestartRule {
    ContainerRestartRule {
        action: action.to_owned(),
        exit_codes: Some(ContainerRestartRuleOnExitCodes {
            operator: operator.to_owned(),
            values: Some(values.to_vec()),
        }),
    }
}

/// A pod with `pod_policy` and one container with `own` policy and `rules`.
fn restart(
    pod_policy: Option<&str>,
    own: Option<&str>,
    rules: Vec<ContainerRestartRule>,
) -> ContainerRestart {
    let container = Container {
        name: "app".to_owned(),
        restart_policy: own.map(str::to_owned),
        restart_policy_rules: Some(rules),
        ..Container::default()
    };
    let pod = Pod {
        spec: Some(PodSpec {
            restart_policy: pod_policy.map(str::to_owned),
            containers: vec![container],
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let container = pod.spec.as_ref().and_then(|s| s.containers.first());
    ContainerRestart::of(&pod, container)
}

fn name(policy: RestartPolicy) -> &'static str {
    match policy {
        RestartPolicy::Always => "Always",
        RestartPolicy::OnFailure => "OnFailure",
        RestartPolicy::Never => "Never",
    }
}

#[test]
fn i4_without_a_container_policy_the_pods_decides() {
    for pod in POLICIES {
        let r = restart(Some(name(pod)), None, Vec::new());
        for code in [0, 1, 42, 137, -1] {
            assert_eq!(r.after_exit(code), pod.restarts(code), "{pod:?} exit {code}");
        }
        assert_eq!(r.after_probe(), pod != RestartPolicy::Never, "{pod:?}");
    }
    // An unset pod policy is Always; no container spec at all is the pod's policy.
    assert!(restart(None, None, Vec::new()).after_exit(0));
    let never = Pod {
        spec: Some(PodSpec { restart_policy: Some("Never".into()), ..PodSpec::default() }),
        ..Pod::default()
    };
    assert!(!ContainerRestart::of(&never, None).after_exit(1));
}

#[test]
fn i4_the_container_policy_overrides_the_pods() {
    for pod in POLICIES {
        for own in POLICIES {
            let r = restart(Some(name(pod)), Some(name(own)), Vec::new());
            for code in [0, 1, 42] {
                assert_eq!(r.after_exit(code), own.restarts(code), "{pod:?}/{own:?} exit {code}");
            }
            // A probe's kill: the container's own policy, anything but Never restarts.
            assert_eq!(r.after_probe(), own != RestartPolicy::Never, "{pod:?}/{own:?}");
        }
    }
    // A value validation refuses leaves the decision to the pod.
    let r = restart(Some("Never"), Some("Sometimes"), Vec::new());
    assert!(!r.after_exit(1));
}

#[test]
fn i4_a_matching_restart_rule_restarts_else_the_container_policy_decides() {
    let r = restart(Some("Never"), Some("Never"), vec![rule("Restart", "In", &[42])]);
    assert!(r.after_exit(42));
    assert!(!r.after_exit(0));
    assert!(!r.after_exit(1));
    // OnFailure with a rule for 0: an exit 0 restarts too.
    let r = restart(Some("Always"), Some("OnFailure"), vec![rule("Restart", "In", &[0])]);
    assert!(r.after_exit(0) && r.after_exit(3));
    // NotIn: every exit code but those listed.
    let r = restart(Some("Never"), Some("Never"), vec![rule("Restart", "NotIn", &[0, 1])]);
    assert!(!r.after_exit(0) && !r.after_exit(1) && r.after_exit(2) && r.after_exit(-1));
    // Empty values: In matches nothing, NotIn everything.
    let r = restart(Some("Never"), Some("Never"), vec![rule("Restart", "In", &[])]);
    assert!(!r.after_exit(0));
    let r = restart(Some("Never"), Some("Never"), vec![rule("Restart", "NotIn", &[])]);
    assert!(r.after_exit(0));
    // A probe's kill does not read the rules.
    let r = restart(Some("Always"), Some("Never"), vec![rule("Restart", "NotIn", &[])]);
    assert!(!r.after_probe());
}

#[test]
fn i4_the_first_matching_rule_decides() {
    // The first match is not a restart: the container's policy decides, later rules are
    // not read (kubelet's findMatchingContainerRestartRule returns the first).
    let rules = vec![rule("Ignore", "In", &[7]), rule("Restart", "In", &[7])];
    assert!(!restart(Some("Never"), Some("Never"), rules).after_exit(7));
    // A rule that does not match is passed over.
    let rules = vec![rule("Ignore", "In", &[8]), rule("Restart", "In", &[7])];
    assert!(restart(Some("Never"), Some("Never"), rules).after_exit(7));
    // Without exit codes, or with an operator validation refuses, a rule never matches.
    let mut without = rule("Restart", "In", &[7]);
    without.exit_codes = None;
    let rules = vec![without, rule("Restart", "Gt", &[1]), rule("Restart", "In", &[7])];
    let r = restart(Some("Never"), Some("Never"), rules);
    assert!(r.after_exit(7) && !r.after_exit(9));
}

#[test]
fn i4_rules_without_a_container_policy_are_not_read() {
    let r = restart(Some("Never"), None, vec![rule("Restart", "In", &[42])]);
    assert!(!r.after_exit(42));
}

fn policy() -> impl Strategy<Value = RestartPolicy> {
    prop::sample::select(POLICIES.to_vec())
}

fn rules() -> impl Strategy<Value = Vec<RestartRule>> {
    let operator = prop::sample::select(vec![Operator::In, Operator::NotIn, Operator::Unknown]);
    let codes = (operator, prop::collection::vec(-2i32..4, 0..4))
        .prop_map(|(operator, values)| ExitCodes { operator, values });
    let rule = (any::<bool>(), prop::option::of(codes))
        .prop_map(|(restart, exit_codes)| RestartRule { restart, exit_codes });
    prop::collection::vec(rule, 0..4)
}

proptest! {
    /// I4: without a container policy (so without rules), the decision is the pod's.
    #[test]
    fn i4_with_no_rules_and_no_container_policy_the_decision_is_the_pods(
        pod in policy(),
        code in any::<i32>(),
    ) {
        let r = ContainerRestart::new(pod, None, Vec::new());
        prop_assert_eq!(r.after_exit(code), pod.restarts(code));
    }

    /// I4: rules only add restarts to the container's policy, and a restart rule that is
    /// the first to match always restarts.
    #[test]
    fn i4_rules_only_add_restarts(
        pod in policy(),
        own in prop::option::of(policy()),
        rules in rules(),
        code in -2i32..4,
    ) {
        let without = ContainerRestart::new(pod, own, Vec::new()).after_exit(code);
        let first = rules.iter().find(|r| r.matches(code)).cloned();
        let with = ContainerRestart::new(pod, own, rules).after_exit(code);
        prop_assert!(with || !without, "rules took a restart away");
        if first.is_some_and(|r| r.restart) {
            prop_assert!(with);
        } else {
            prop_assert_eq!(with, without);
        }
    }
}
