//! Building `outpost run`'s parts from the settings: the config resolved and the
//! directories checked, the pod sources, the merge, the local API (bound), the sync to the
//! API server and the pod runtime. Each part registers its metrics on the one registry
//! made here. Nothing runs yet: [`super::run`] spawns the parts and awaits them.

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use outpost_core::eviction::Pressure;
use outpost_core::pod::Source;
use prometheus_client::registry::Registry;
use tokio::signal::unix::{Signal, SignalKind, signal as unix_signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Error;
use super::pods::{
    EvictionHandles, GcHandles, PodRuntime, RuntimeHandles, containerd_choice, managed_options,
};
use crate::api;
use crate::apiserver::{self, ApiClient, Connectivity, MirrorView, Recorder};
use crate::audit::ManifestAudit;
use crate::checkpoint::Checkpoints;
use crate::config::{Config, Settings};
use crate::host;
use crate::logging::LogLevel;
use crate::objects::Objects;
use crate::permissions;
use crate::podconfig::{self, Batch, SnapshotHandle};
use crate::runtime::cgroups::{Hierarchy, PodCgroups};
use crate::runtime::managed::Choice;
use crate::source::api::ApiSource;
use crate::source::file::{self, FileSource};
use crate::source::url::{self, UrlSource};
use crate::source::{self, Refresh, push};
use crate::status::{RuntimeReady, StatusStore};
use crate::sync;

/// The agent, built.
pub(super) struct Agent {
    pub(super) config: Config,
    pub(super) dry_run: bool,
    /// SIGHUP, caught from the start: its default action would end the agent.
    pub(super) hangup: Signal,
    /// Refreshes the manifest URL source (SIGHUP, `POST /refresh`).
    pub(super) refresh: Refresh,
    pub(super) snapshot: SnapshotHandle,
    /// The merge of the pod sources, feeding `pods`.
    pub(super) merge: BoxFuture<'static, ()>,
    /// The local API, its address bound.
    pub(super) server: BoxFuture<'static, Result<(), api::Error>>,
    /// The sync to the API server: with a kubeconfig, when pods run.
    pub(super) sync: Option<sync::Context>,
    pub(super) pods: Pods,
    /// Whether containerd is connected; `None` in a dry run.
    pub(super) runtime_ready: Option<RuntimeReady>,
    /// Cancelled on a node shutdown with `--stop-pods-on-shutdown`.
    pub(super) stop_pods: CancellationToken,
}

/// What takes the merge's batches.
pub(super) enum Pods {
    /// `--dry-run`: printed, nothing run.
    DryRun(mpsc::Receiver<Batch>),
    Run(Box<PodRuntime>),
}

/// Resolves `settings`, checks the directories, and builds every part of the agent.
pub(super) async fn build(
    settings: Settings,
    dry_run: bool,
    log_level: LogLevel,
) -> Result<Agent, Error> {
    let mut config = Config::resolve(settings)?;
    // The node's address: given, or the default route's interface's, looked up once.
    config.node_ip = config.node_ip.or_else(host::address::default_address);
    info!(node = %config.node_name, manifests = %config.manifest_dir.display(), dry_run, "starting");
    if !dry_run {
        let pid1 = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
        config.node_resources.check_driver(&pid1).map_err(crate::config::Error::from)?;
    }
    secure_dirs(&config)?;
    // Resolved now: a binary replaced while running keeps its old path in /proc/self/exe.
    let exe = std::env::current_exe().map_err(Error::Exe)?;
    let hangup = unix_signal(SignalKind::hangup()).map_err(Error::Signal)?;

    let mut registry = Registry::default();
    let outpost = registry.sub_registry_with_prefix("outpost");
    let checkpoints = Checkpoints::new(&config.state_dir)
        .with_metrics(crate::checkpoint::metrics::CheckpointWrites::register(outpost));
    let manifests = crate::source::metrics::SourceMetrics::register(outpost);
    let merge_metrics = crate::podconfig::metrics::Merge::register(outpost);
    let worker_metrics = crate::worker::metrics::Metrics::register(outpost);
    let image_metrics = crate::runtime::image::metrics::ImageImports::register(outpost);
    let gc_metrics = crate::gc::metrics::GarbageCollection::register(outpost);

    let events = Recorder::default();
    // The eBPF exec history is set on it once BPF is loaded (`set_exec_history`).
    let audit = ManifestAudit::default();
    audit.set_policy(config.admission_policy.clone());
    let files = FileSource::new(file::Config {
        path: config.manifest_dir.clone(),
        node_name: config.node_name.clone(),
        watcher: config.watcher,
    })?
    .with_events(events.clone())
    .with_metrics(manifests.clone())
    .with_audit(audit.clone());
    let watcher = files.backend().to_string();
    let mut sources = vec![(Source::File, files.into_stream())];
    let refresh = Refresh::default();
    if let Some(url) = &config.manifest_url {
        let source = UrlSource::new(url::Config {
            url: url.clone(),
            headers: config.manifest_url_headers.clone(),
            interval: config.manifest_url_interval,
            ca_file: config.manifest_url_ca_file.clone(),
            node_name: config.node_name.clone(),
            checkpoints: checkpoints.clone(),
            refresh: refresh.clone(),
        })?
        .with_metrics(manifests.clone())
        .with_audit(audit.clone());
        sources.push((Source::Url, source.into_stream()));
    }
    // The push endpoint changes state, so it exists only when callers can authenticate.
    let push = if config.auth.token_file.is_some() || config.auth.client_ca_file.is_some() {
        let (handle, stream) = push::open(push::Config {
            node_name: config.node_name.clone(),
            checkpoints: checkpoints.clone(),
            metrics: manifests,
        })?;
        sources.push((Source::Push, stream));
        Some(handle)
    } else {
        None
    };
    let mirrors = MirrorView::default();
    let client = match &config.kubeconfig {
        Some(kubeconfig) => {
            let client = ApiClient::from_kubeconfig(kubeconfig, Connectivity::default()).await?;
            let source = ApiSource::new(source::api::Config {
                client: client.clone(),
                node_name: config.node_name.clone(),
                checkpoints: checkpoints.clone(),
                mirrors: mirrors.clone(),
            });
            sources.push((Source::Api, source.into_stream()));
            Some(client)
        }
        None => None,
    };
    let (objects, changes) = match &client {
        Some(client) => Objects::start(client.clone(), checkpoints.clone()).await,
        None => (Objects::default(), tokio::sync::mpsc::unbounded_channel().1),
    };

    // The eviction manager's choices reach the pod workers through this channel.
    let (evict, evictions) = tokio::sync::mpsc::unbounded_channel();
    // The node's pressure conditions, as the eviction manager holds them.
    let (pressure, pressure_seen) = tokio::sync::watch::channel(Pressure::default());
    let eviction_metrics = crate::eviction::metrics::Evictions::register(outpost);
    // Ephemeral-storage limits evict through the same path (G1).
    let storage_evictions = evict.clone();
    // The garbage collector: the eviction manager may ask it to collect images now
    // (`collect_images_now`) on image filesystem pressure.
    let gc = crate::gc::Handle::default();

    // The kernel's side (eBPF): loaded before anything reads it; a dry run runs no pods.
    let ebpf = if dry_run {
        crate::ebpf::Handle::default()
    } else {
        crate::ebpf::Handle::start(config.ebpf, &config.node_resources.layout)
    };
    if ebpf.is_loaded() {
        audit.set_exec_history(Some(Arc::new(ebpf.clone())));
    }
    let snapshot = SnapshotHandle::default();
    let statuses = StatusStore::default();
    let runtime_ready = (!dry_run).then(RuntimeReady::default);
    let runtime_version = Arc::new(OnceLock::new());
    let stop_pods = CancellationToken::new();
    let status_backlog = tokio::sync::watch::Sender::<apiserver::StatusBacklog>::default();
    let sync_health = client.as_ref().map(|client| apiserver::Health {
        connectivity: client.connectivity().clone(),
        status_backlog: status_backlog.subscribe(),
    });
    // The pods' cgroups (made once containerd answers); their usage is a metric.
    let cgroups = (!dry_run).then(|| Arc::new(pod_cgroups(&config)));
    crate::metrics::register(
        &mut registry,
        snapshot.clone(),
        crate::metrics::Sources {
            sync: sync_health.clone(),
            events: events.clone(),
            statuses: statuses.clone(),
            ebpf: ebpf.clone(),
            cgroups: cgroups.clone(),
        },
    );
    // Chosen before the API starts, so that `/status` can say where the runtime is.
    let containerd = (!dry_run).then(|| containerd_choice(&config));
    let runtime_info = containerd.as_ref().map(|(choice, binary)| api::status::RuntimeInfo {
        socket: match choice {
            Choice::External => config.containerd_socket.clone(),
            Choice::Managed => managed_options(&config, binary.clone()).socket(),
        },
        namespace: config.containerd_namespace.clone(),
        managed: *choice == Choice::Managed,
    });
    // `/exec`, `/run`, `/containerLogs`: the pod runtime fills it in once containerd answers.
    let runtime_slot = (!dry_run).then(api::runtime::RuntimeSlot::default);
    let server = api::bind(api::Options {
        listen: config.listen,
        auth: config.auth.clone(),
        snapshot: snapshot.clone(),
        push,
        refresh: config.manifest_url.is_some().then(|| refresh.clone()),
        statuses: statuses.clone(),
        runtime: runtime_ready.clone(),
        metrics: registry,
        events: events.clone(),
        ebpf: ebpf.clone(),
        pod_log_dir: config.pod_log_dir.clone(),
        log_level,
        info: api::status::Info {
            node_name: config.node_name.clone(),
            started: k8s_openapi::jiff::Timestamp::now(),
            watcher,
            runtime: runtime_info,
            sync: sync_health,
        },
        audit,
        runtime_slot: runtime_slot.clone(),
    })
    .await?;

    let (tx, rx) = mpsc::channel::<Batch>(64);
    let merge = podconfig::run(sources, tx, snapshot.clone(), merge_metrics);
    // Status goes to the API server only when the agent runs pods (not in a dry run).
    let sync = match (client, &runtime_ready) {
        (Some(client), Some(runtime)) => Some(sync::Context {
            client,
            node_name: config.node_name.clone(),
            snapshot: snapshot.clone(),
            statuses: statuses.clone(),
            mirrors,
            node: tokio::sync::watch::Sender::new(None),
            events: events.clone(),
            node_config: sync::node::Config {
                labels: config.node_labels.clone(),
                taints: config.register_with_taints.clone(),
                node_ip: config.node_ip,
                kubelet_port: Some(config.listen.port()).filter(|port| *port != 0),
                state_dir: config.state_dir.clone(),
                runtime: runtime.clone(),
                runtime_version: runtime_version.clone(),
                shutdown: stop_pods.clone(),
                pressure: pressure_seen,
                reservation: config.node_resources.reservation,
            },
            status_backlog,
        }),
        _ => None,
    };
    let pods = match containerd {
        None => Pods::DryRun(rx),
        Some((choice, binary)) => Pods::Run(Box::new(PodRuntime {
            config: config.clone(),
            choice,
            binary,
            exe,
            batches: rx,
            handles: RuntimeHandles {
                statuses,
                ready: runtime_ready.clone().unwrap_or_default(),
                version: runtime_version,
                events,
                metrics: worker_metrics,
                images: image_metrics,
                stop_pods: stop_pods.clone(),
                ebpf,
                runtime_slot: runtime_slot.unwrap_or_default(),
                objects,
                changes,
                evictions,
                eviction: EvictionHandles {
                    evict,
                    pressure,
                    metrics: eviction_metrics,
                    snapshot: snapshot.clone(),
                    gc: gc.clone(),
                },
                gc: GcHandles {
                    handle: gc,
                    metrics: gc_metrics,
                    desired: snapshot.clone(),
                    evictions: storage_evictions,
                },
                cgroups: cgroups.unwrap_or_else(|| Arc::new(pod_cgroups(&config))),
            },
        })),
    };
    Ok(Agent {
        config,
        dry_run,
        hangup,
        refresh,
        snapshot,
        merge: Box::pin(merge),
        server: Box::pin(server),
        sync,
        pods,
        runtime_ready,
        stop_pods,
    })
}

/// The pods' cgroups under the configured layout, in this host's hierarchy.
fn pod_cgroups(config: &Config) -> PodCgroups {
    let resources = &config.node_resources;
    PodCgroups::new(resources.layout.clone(), Hierarchy::detect(), resources.pod_pids_limit)
}

/// The security defaults (see [`permissions`]), before any source reads a manifest.
fn secure_dirs(config: &Config) -> Result<(), permissions::Error> {
    if config.allow_writable_manifest_dir {
        warn!(
            "--allow-writable-manifest-dir: not checking who may write the manifest and images directories"
        );
    } else {
        permissions::check_trusted_dir("the manifest directory", &config.manifest_dir)?;
        if let Some(dir) = &config.images_dir {
            permissions::check_trusted_dir("the images directory", dir)?;
        }
    }
    permissions::secure_state_dir(&config.state_dir)
}
