//! A pod's lifecycle decisions, as pure functions: whether an exited container is started
//! again (restartPolicy), how long it waits first (CrashLoopBackOff), and the pod phase
//! its containers add up to (kubelet's `getPhase`). The pod workers do the waiting and the
//! runtime calls; every rule they follow is here, tested with plain values.
//!
//! Fields the API server would default and a static manifest may leave out take the API
//! server's defaults here (restartPolicy `Always`, terminationGracePeriodSeconds 30,
//! imagePullPolicy `Always` for `:latest` or untagged images, else `IfNotPresent`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ImageVolumeSource, Pod};

pub use self::restart::{ContainerRestart, ExitCodes, Operator, RestartRule};

pub mod restart;

/// `spec.restartPolicy`, or a container's (I4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// The pod's policy; `Always` when unset (validation rejects other values).
    pub fn of(pod: &Pod) -> RestartPolicy {
        let policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
        policy.and_then(RestartPolicy::parse).unwrap_or(RestartPolicy::Always)
    }

    /// A policy's value; `None` for one validation refuses.
    pub fn parse(value: &str) -> Option<RestartPolicy> {
        match value {
            "Always" => Some(RestartPolicy::Always),
            "OnFailure" => Some(RestartPolicy::OnFailure),
            "Never" => Some(RestartPolicy::Never),
            _ => None,
        }
    }

    /// Whether a container that exited with `exit_code` is started again.
    pub fn restarts(self, exit_code: i32) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }
}

/// `terminationGracePeriodSeconds`, or the API default of 30 s. A deleting pod's
/// `deletionGracePeriodSeconds` wins when it is shorter, as with kubelet.
pub fn grace_period(pod: &Pod) -> Duration {
    let spec = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds);
    let deletion = pod.metadata.deletion_grace_period_seconds;
    let seconds = match (spec, deletion) {
        (Some(s), Some(d)) => s.min(d),
        (s, d) => s.or(d).unwrap_or(30),
    };
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    /// The container's policy, defaulted by its image's tag as the API server does.
    pub fn of(container: &Container) -> PullPolicy {
        Self::parse(
            container.image_pull_policy.as_deref(),
            container.image.as_deref().unwrap_or_default(),
        )
    }

    /// An image volume's `pullPolicy` (KEP-4639), defaulted by its reference's tag as the
    /// API server defaults it (`SetDefaults_ImageVolumeSource`): `Always` for `:latest`
    /// or no tag, else `IfNotPresent`. An unknown value (the API server refuses it) is
    /// read as the default.
    pub fn of_image_volume(source: &ImageVolumeSource) -> PullPolicy {
        Self::parse(source.pull_policy.as_deref(), source.reference.as_deref().unwrap_or_default())
    }

    fn parse(policy: Option<&str>, image: &str) -> PullPolicy {
        match policy {
            Some("Always") => PullPolicy::Always,
            Some("IfNotPresent") => PullPolicy::IfNotPresent,
            Some("Never") => PullPolicy::Never,
            _ if latest_or_untagged(image) => PullPolicy::Always,
            _ => PullPolicy::IfNotPresent,
        }
    }
}

/// Whether an image reference has no tag or the tag `latest` (a digest counts as pinned).
fn latest_or_untagged(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        None => true,
        Some((_, tag)) => tag == "latest",
    }
}

/// CrashLoopBackOff settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashLoopConfig {
    /// The wait before the second restart (the first is immediate).
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
    /// A container that ran at least this long before exiting starts over at `initial`.
    pub reset_after: Duration,
}

impl Default for CrashLoopConfig {
    fn default() -> Self {
        CrashLoopConfig {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

/// A container's restart backoff, kubelet's way: the first restart is immediate, each
/// later one waits `initial`, doubled every time up to `max`; a container that ran
/// `reset_after` without exiting starts over (immediate again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashLoop {
    config: CrashLoopConfig,
    /// The wait before the next restart (`None`: restart at once).
    next: Option<Duration>,
}

impl CrashLoop {
    pub fn new(config: CrashLoopConfig) -> CrashLoop {
        CrashLoop { config, next: None }
    }

    /// The wait before restarting a container that ran for `ran_for` and exited.
    pub fn after_exit(&mut self, ran_for: Duration) -> Duration {
        if ran_for >= self.config.reset_after {
            self.next = None;
        }
        let delay = self.next.unwrap_or(Duration::ZERO);
        let following = self.next.map_or(self.config.initial, |d| d.saturating_mul(2));
        self.next = Some(following.min(self.config.max));
        delay
    }
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// What the phase needs to know about one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerPhase {
    /// Never started (creating, pulling, backing off before a first start).
    Waiting,
    /// Waiting to be restarted after it ran and exited.
    Restarting,
    Running,
    /// Exited; `restarts`: what its restart policy and rules say of its exit code
    /// ([`ContainerRestart::after_exit`]), which the phase counts as restarting.
    Exited {
        exit_code: i32,
        restarts: bool,
    },
}

/// kubelet's `getPhase` for a pod's regular containers, as kubelet 1.34 counts them with
/// container restart rules (I4): once none runs, the pod runs on while one of them is
/// restarting or would be restarted by its exit code; else it succeeded if all exited 0.
pub fn pod_phase(containers: &[ContainerPhase]) -> Phase {
    let (mut waiting, mut running, mut restarting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in containers {
        match c {
            ContainerPhase::Waiting => waiting += 1,
            ContainerPhase::Restarting => restarting += 1,
            ContainerPhase::Running => running += 1,
            ContainerPhase::Exited { exit_code, restarts } => {
                stopped += 1;
                restarting += u32::from(*restarts);
                if *exit_code == 0 {
                    succeeded += 1;
                }
            }
        }
    }
    if waiting > 0 || containers.is_empty() {
        return Phase::Pending;
    }
    if running > 0 {
        return Phase::Running;
    }
    if restarting > 0 {
        Phase::Running
    } else if stopped == succeeded {
        Phase::Succeeded
    } else {
        Phase::Failed
    }
}

#[cfg(test)]
mod tests;
