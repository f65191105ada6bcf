//! The local API as the agent starts it: every metric registered on the agent's registry
//! and the scrape-time collectors, its address bound at once (a taken port stops the
//! agent before anything runs).

use std::sync::Arc;

use prometheus_client::registry::Registry;

use super::{Config, Error, Options, bind, runtime::RuntimeSlot, stats, status};
use crate::apiserver::{self, Recorder};
use crate::audit::ManifestAudit;
use crate::config::node::Node;
use crate::logging::LogLevel;
use crate::podconfig::SnapshotHandle;
use crate::runtime::cgroups::PodCgroups;
use crate::source::{Refresh, push};
use crate::status::{RuntimeReady, StatusStore};
use crate::task::Task;

/// What the local API serves, from the other components.
pub struct Deps {
    /// The agent's one registry, every component's metrics on it.
    pub registry: Registry,
    /// `/metrics/probes`' registry.
    pub probes: Registry,
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
    pub events: Recorder,
    pub ebpf: crate::ebpf::Handle,
    /// The pods' cgroups (their usage is a metric); `None` in a dry run.
    pub cgroups: Option<Arc<PodCgroups>>,
    /// The host's kernel, as the agent reads it (the node's stats).
    pub host: Arc<dyn crate::host::Host>,
    /// Whether containerd is connected, and where the API finds it; `None` in a dry run.
    pub runtime: Option<(RuntimeReady, RuntimeSlot)>,
    /// Where containerd is; `None` in a dry run.
    pub runtime_info: Option<status::RuntimeInfo>,
    pub push: Option<push::PushHandle>,
    pub refresh: Option<Refresh>,
    /// How the manifest directory is watched.
    pub watcher: String,
    /// The API server's health, with a kubeconfig.
    pub sync: Option<apiserver::Health>,
    pub audit: ManifestAudit,
    pub log_level: LogLevel,
    /// The API server's client, for the node API's reviews (N1).
    pub apiserver: Option<apiserver::ApiClient>,
    /// J2: the managed certificates' status (`client`, `server`).
    pub certificates: Vec<(&'static str, crate::certificates::Status)>,
    /// J2: the serving certificate from the cluster, with `serverTLSBootstrap`.
    pub serving: Option<Arc<dyn rustls::server::ResolvesServerCert>>,
    /// `/configz`: the configuration in kubelet's shape.
    pub configz: serde_json::Value,
    /// X4: the ephemeral containers `outpost debug` adds to static pods.
    pub debug: crate::debug_containers::DebugContainers,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps").field("watcher", &self.watcher).finish_non_exhaustive()
    }
}

impl Config {
    /// The `local_api` task.
    pub async fn build(self, node: &Node, deps: Deps) -> Result<Task, Error> {
        let Deps { mut registry, snapshot, statuses, events, ebpf, cgroups, .. } = deps;
        // The node's stats: the Summary API's and cAdvisor's reading, and the pods' usage
        // `/metrics` reports.
        let node_stats = crate::stats::Stats::new(crate::stats::Sources {
            node_name: node.name.clone(),
            snapshot: snapshot.clone(),
            statuses: statuses.clone(),
            cgroups,
            state_dir: node.state_dir.clone(),
            pod_log_dir: node.pod_log_dir.clone(),
            host: deps.host.clone(),
        });
        crate::metrics::register(
            &mut registry,
            snapshot.clone(),
            crate::metrics::Sources {
                sync: deps.sync.clone(),
                events: events.clone(),
                statuses: statuses.clone(),
                ebpf: ebpf.clone(),
                stats: node_stats.clone(),
                certificates: deps.certificates.clone(),
            },
        );
        let stats = stats::Endpoints {
            stats: node_stats,
            probes: Arc::new(deps.probes),
            configz: Arc::new(deps.configz),
        };
        let info = status::Info {
            node_name: node.name.clone(),
            started: k8s_openapi::jiff::Timestamp::now(),
            watcher: deps.watcher,
            runtime: deps.runtime_info,
            sync: deps.sync,
            certificates: deps
                .certificates
                .into_iter()
                .map(|(name, status)| (name.to_owned(), status))
                .collect(),
        };
        let (runtime, runtime_slot) = deps.runtime.unzip();
        let server = bind(Options {
            listen: self.listen,
            auth: self.auth,
            snapshot,
            push: deps.push,
            refresh: deps.refresh,
            statuses,
            runtime,
            metrics: registry,
            events,
            ebpf,
            pod_log_dir: node.pod_log_dir.clone(),
            log_level: deps.log_level,
            info,
            audit: deps.audit,
            runtime_slot,
            apiserver: deps.apiserver,
            stats,
            serving: deps.serving,
            debug: deps.debug,
            streaming: crate::api::streams::Limits {
                idle_timeout: self.streaming_idle_timeout,
                ..Default::default()
            },
        })
        .await?;
        Ok(Task::new("local_api", server))
    }
}
