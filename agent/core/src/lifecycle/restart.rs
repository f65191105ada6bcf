//! Whether an exited container starts again, as kubelet 1.34 decides it with container
//! restart rules (KEP-5307, `ContainerRestartRules`): the container's
//! `restartPolicyRules` in order, the first whose exit codes match deciding; else the
//! container's own `restartPolicy`; else the pod's (I4).

use k8s_openapi::api::core::v1::{Container, ContainerRestartRule, Pod};

use super::RestartPolicy;

/// What decides a container's restarts: its pod's `restartPolicy`, and its own
/// `restartPolicy` and `restartPolicyRules` where it has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRestart {
    pod: RestartPolicy,
    /// The container's `restartPolicy` (`None`: unset, or a value validation refuses).
    own: Option<RestartPolicy>,
    /// The container's rules; kubelet reads them only when it sets `restartPolicy`.
    rules: Vec<RestartRule>,
}

/// One entry of `restartPolicyRules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartRule {
    /// `action: Restart` (the one action validation allows); a matching rule with another
    /// action leaves the decision to the policies.
    pub restart: bool,
    /// `exitCodes` (kubelet skips a rule without them).
    pub exit_codes: Option<ExitCodes>,
}

/// `exitCodes`: which exit codes a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitCodes {
    pub operator: Operator,
    pub values: Vec<i32>,
}

/// `exitCodes.operator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    /// A value validation refuses: the rule never matches.
    Unknown,
}

impl ContainerRestart {
    /// The restarts of `container` (its spec, if the pod has it) in `pod`.
    pub fn of(pod: &Pod, container: Option<&Container>) -> ContainerRestart {
        let pod = RestartPolicy::of(pod);
        let Some(policy) = container.and_then(|c| c.restart_policy.as_deref()) else {
            return ContainerRestart::new(pod, None, Vec::new());
        };
        let rules = container.and_then(|c| c.restart_policy_rules.as_deref()).unwrap_or_default();
        let rules = rules.iter().map(RestartRule::of).collect();
        ContainerRestart::new(pod, RestartPolicy::parse(policy), rules)
    }

    /// The restarts of the container `name` of `pod`.
    pub fn of_named(pod: &Pod, name: &str) -> ContainerRestart {
        ContainerRestart::of(pod, crate::pod::container(pod, name))
    }

    /// A container with its own policy and rules; `rules` only count with a policy, as
    /// validation requires one beside them.
    pub fn new(
        pod: RestartPolicy,
        own: Option<RestartPolicy>,
        rules: Vec<RestartRule>,
    ) -> ContainerRestart {
        ContainerRestart { pod, own, rules }
    }

    /// kubelet's `ContainerShouldRestart`: whether a container that exited with
    /// `exit_code` starts again (I4).
    pub fn after_exit(&self, exit_code: i32) -> bool {
        let matched = self.rules.iter().find(|r| r.matches(exit_code));
        if matched.is_some_and(|r| r.restart) {
            return true;
        }
        self.own.unwrap_or(self.pod).restarts(exit_code)
    }

    /// Whether a container killed for a failed liveness or startup probe starts again:
    /// it was running, so there is no exit code for the rules; its own policy decides
    /// (anything but Never restarts), else the pod's (I4, P3).
    pub fn after_probe(&self) -> bool {
        self.own.unwrap_or(self.pod) != RestartPolicy::Never
    }
}

impl RestartRule {
    fn of(rule: &ContainerRestartRule) -> RestartRule {
        let exit_codes = rule.exit_codes.as_ref().map(|codes| ExitCodes {
            operator: match codes.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                _ => Operator::Unknown,
            },
            values: codes.values.clone().unwrap_or_default(),
        });
        RestartRule { restart: rule.action == "Restart", exit_codes }
    }

    /// Whether the rule applies to `exit_code`.
    pub fn matches(&self, exit_code: i32) -> bool {
        let Some(codes) = &self.exit_codes else { return false };
        let listed = codes.values.contains(&exit_code);
        match codes.operator {
            Operator::In => listed,
            Operator::NotIn => !listed,
            Operator::Unknown => false,
        }
    }
}

#[cfg(test)]
mod tests;
