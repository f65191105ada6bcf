//! Probes and hooks run off the worker's path: each is one task in the worker's
//! [`JoinSet`](tokio::task::JoinSet) that ends in an input (its result). No task sleeps
//! for a probe: the worker's one timer says when each is due.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use outpost_core::pod_worker::Input;
use outpost_core::probe::{Handler, Hook, Outcome, ProbeKind};
use tracing::Instrument as _;

use super::PodWorker;
use crate::worker::metrics::ProbeLabels;
use crate::worker::pod_runtime::PodRuntime;

/// A postStart hook has no time limit of its own (kubelet's has none); it is abandoned
/// when its container is killed or removed. This bounds a run that nothing abandons.
const UNBOUNDED_HOOK: Duration = Duration::from_secs(24 * 60 * 60);

impl<R: PodRuntime> PodWorker<R> {
    /// Runs a probe of a running container → [`Input::Probed`]; counts it.
    pub(super) fn probe(
        &mut self,
        pod: &Arc<Pod>,
        container: String,
        container_id: String,
        kind: ProbeKind,
        handler: Handler,
        timeout: Duration,
    ) {
        let shared = self.shared.clone();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = outpost_core::pod::uid(pod).to_owned();
        let span = tracing::debug_span!("probe", container, probe = kind.as_str());
        let id = container_id.clone();
        let run = async move {
            let began = tokio::time::Instant::now();
            let outcome = shared.prober.run(&shared.runtime, &id, &handler, timeout).await;
            let labels = ProbeLabels {
                probe_type: kind.as_str(),
                namespace: &namespace,
                pod: &name,
                pod_uid: &uid,
                container: &container,
            };
            shared.metrics.probed(&labels, outcome.metric_label(), began.elapsed());
            Input::Probed { container_id: id, kind, outcome }
        };
        self.spawn_run(container_id, run.instrument(span));
    }

    /// Runs a hook in a container → [`Input::HookDone`].
    pub(super) fn run_hook(
        &mut self,
        pod: &Arc<Pod>,
        container: &str,
        container_id: String,
        hook: Hook,
        handler: Handler,
        timeout: Option<Duration>,
    ) {
        let shared = self.shared.clone();
        let span = tracing::info_span!(
            "hook",
            container,
            hook = hook.as_str(),
            pod.uid = outpost_core::pod::uid(pod)
        );
        let id = container_id.clone();
        let run = async move {
            let timeout = timeout.unwrap_or(UNBOUNDED_HOOK);
            tracing::debug!(handler = handler.describe(), "running hook");
            let result = match shared.prober.run(&shared.runtime, &id, &handler, timeout).await {
                Outcome::Success | Outcome::Warning(_) => Ok(()),
                Outcome::Failure(message) => Err(message),
            };
            Input::HookDone { container_id: id, hook, result }
        };
        self.spawn_run(container_id, run.instrument(span));
    }

    fn spawn_run(
        &mut self,
        container_id: String,
        run: impl Future<Output = Input> + Send + 'static,
    ) {
        let handle = self.runs.spawn(run);
        let handles = self.runs_of.entry(container_id).or_default();
        handles.retain(|h| !h.is_finished());
        handles.push(handle);
    }

    /// Abandons the probes and hooks running in a container (killed or removed).
    pub(super) fn abandon_runs(&mut self, container_id: &str) {
        for handle in self.runs_of.remove(container_id).into_iter().flatten() {
            handle.abort();
        }
    }
}
