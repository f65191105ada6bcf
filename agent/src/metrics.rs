//! `/metrics`: Prometheus figures in the OpenMetrics text format. This module holds the
//! collectors read at scrape time (the merge's snapshot, the pod workers' statuses, the
//! sync's health, the kernel's counters, the cgroups, `/proc/self`: [`register`]); it sits
//! at the top of the agent, beside the local API, and reads every component. What must
//! be counted where it happens is each component's own: its `metrics.rs` holds a handle
//! that registers its families under the component's prefix. All of them go on the one
//! registry `outpost run` makes at start. Nothing on the merge's or the workers' path
//! allocates for a metric but the probes' (labelled with pod and container names, as
//! kubelet's).
//!
//! Sources and merge (`pods`):
//! - `outpost_source_state{source,state}`: 1 for the source's current state
//!   (`live`, `checkpoint`, `never_seen`), 0 for the others.
//! - `outpost_source_errors_total{source}`: failures to reach or read the source.
//! - `outpost_source_last_success_timestamp_seconds{source}`: when the source last
//!   delivered or confirmed its pods.
//! - `outpost_pods{source}`: desired pods by source; `outpost_pod_conflicts`: pods not
//!   run because another pod holds their name (M2, M11).
//! - `outpost_running_pods{source}`, `outpost_running_containers{source}`: desired pods
//!   in phase Running and their running containers, from the pod workers' statuses.
//!
//! Counted where it happens, each by its component:
//! - `outpost_pod_deltas_total{op,source}`: deltas the merge handed to the pod workers
//!   (`podconfig::metrics`).
//! - `outpost_manifest_errors_total{source}`: manifests (file), documents (URL) and
//!   bodies (push) rejected (`source::metrics`).
//! - `outpost_container_restarts_total{source}`: containers started again after they ran
//!   (`worker::metrics`, as the three below).
//! - `outpost_pod_start_duration_seconds{source}`: histogram, from the pod's
//!   `config.seen` (when the merge first saw it) to its first container running.
//! - `outpost_image_import_duration_seconds` (`runtime::image::metrics`),
//!   `outpost_image_pull_duration_seconds`: histograms of images-dir imports and
//!   successful registry pulls.
//! - `outpost_prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}`
//!   (kubelet's `prober_probe_total`; `result` is `successful`, `failed` or `unknown`) and
//!   the histogram `outpost_prober_probe_duration_seconds{probe_type,container,pod,namespace}`:
//!   probe runs; a probe's series go with its container.
//! - `outpost_checkpoint_writes_total{source}`,
//!   `outpost_checkpoint_write_failures_total{source}`: checkpoint writes and failures
//!   (`checkpoint::metrics`).
//! - `outpost_manifest_watcher_info{backend}`: the file source's kernel interface,
//!   `fanotify` or `inotify` (`source::metrics`).
//! - `outpost_evictions_total{signal}` (`eviction::metrics`); the garbage collector's
//!   `outpost_image_gc_*` and `outpost_container_gc_removed_total` (`gc::metrics`).
//!
//! API server (`sync::metrics`), with a kubeconfig: `outpost_apiserver_reachable` (1 or 0) and
//! `outpost_pod_status_updates_queued` (waiting to be sent: offline, or backing off).
//! Always: `outpost_events_recorded_total`, `outpost_events_rate_limited_total`,
//! `outpost_events_dropped_total`: Kubernetes Events recorded, refused by the spam
//! filter, and lost unwritten (the offline backlog is bounded; after a reconnect one per
//! pod and reason is written; the server's 429s drop them).
//!
//! The kernel (`kernel`, eBPF): `outpost_ebpf_loaded` (1 or 0);
//! `outpost_pod_network_{receive,transmit}_{bytes,packets}_total{namespace,pod}` from the
//! pod cgroups' packet counters, read at scrape time; and
//! `outpost_pod_process_execs_total{namespace,pod,container}` from the exec events.
//!
//! The pods' cgroups (`usage`), read at scrape time by the node's stats' reading of them
//! (`stats::Stats::usage`): `outpost_pod_cpu_usage_seconds_total` and
//! `outpost_pod_memory_working_set_bytes{namespace,pod}`,
//! `outpost_container_cpu_usage_seconds_total` and
//! `outpost_container_memory_working_set_bytes{namespace,pod,container}` (kubelet's
//! resource metrics).
//!
//! The process (`process`): `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_start_time_seconds`, `process_open_fds`, `process_max_fds`, `process_threads`.

mod kernel;
mod pods;
mod process;
mod usage;

use prometheus_client::registry::Registry;

use crate::podconfig::SnapshotHandle;
use crate::status::StatusStore;

/// The content type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the metrics read at scrape time besides the merge's snapshot.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The sync to the API server, when a kubeconfig is given.
    pub sync: Option<crate::apiserver::Health>,
    pub events: crate::apiserver::Recorder,
    /// The pod workers' statuses (running pods and containers).
    pub statuses: StatusStore,
    /// The BPF side: pod traffic and exec counts.
    pub ebpf: crate::ebpf::Handle,
    /// The node's stats: what pods and containers use, from their cgroups when pods run.
    pub stats: crate::stats::Stats,
    /// J2: the client certificate's manager, with bootstrapping or rotation.
    /// `client` and `server` (the serving certificate), when managed.
    pub certificates: Vec<(&'static str, crate::certificates::Status)>,
}

/// Registers on `registry` (the root: the process metrics have no `outpost_` prefix) the
/// collectors that read `snapshot` and `sources` at scrape time.
pub fn register(registry: &mut Registry, snapshot: SnapshotHandle, sources: Sources) {
    registry.register_collector(Box::new(process::Process::default()));
    let outpost = registry.sub_registry_with_prefix("outpost");
    outpost.register_collector(Box::new(pods::PodSources(snapshot.clone())));
    for (kind, status) in sources.certificates {
        outpost.register_collector(Box::new(crate::certificates::metrics::Certificate {
            kind,
            status,
        }));
    }
    outpost.register_collector(Box::new(pods::Running {
        snapshot: snapshot.clone(),
        statuses: sources.statuses.clone(),
    }));
    if sources.stats.sources().cgroups.is_some() {
        outpost.register_collector(Box::new(usage::Usage { stats: sources.stats }));
    }
    outpost.register_collector(Box::new(crate::sync::metrics::Sync {
        health: sources.sync,
        events: sources.events,
    }));
    outpost.register_collector(Box::new(kernel::Kernel { snapshot, ebpf: sources.ebpf }));
}

/// The registry's metrics in the OpenMetrics text format.
pub fn render(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

#[cfg(test)]
mod tests;
