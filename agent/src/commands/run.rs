//! `outpost run`: start the sources, the merge and the local API.
//!
//! - `pods`: the pod runtime side (containerd, images dir, CNI, pod workers).

mod pods;

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use outpost_core::merge::PodDelta;
use outpost_core::pod::{self, CONFIG_HASH, Source};
use serde::Serialize;
use tokio::signal::unix::{SignalKind, signal as unix_signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use self::pods::{RuntimeHandles, containerd_choice, managed_options, run_pods};
use crate::audit::ManifestAudit;
use crate::checkpoint::Checkpoints;
use crate::config::{self, Config, Settings};
use crate::error_chain::describe;
use crate::logging::LogLevel;
use crate::metrics::counted::Metrics;
use crate::podconfig::{self, Batch, Snapshot};
use crate::runtime::host;
use crate::runtime::image::credentials;
use crate::runtime::managed::{self, Choice, ManagedContainerd};
use crate::source::api::ApiSource;
use crate::source::file::{self, FileSource};
use crate::source::url::{self, UrlSource};
use crate::source::{self, Refresh, push};
use crate::status::{RuntimeReady, StatusStore};
use crate::sync::{self, ApiClient, Connectivity, MirrorView, Recorder};
use crate::{api, permissions, shutdown, systemd};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::Error),
    #[error(transparent)]
    Permissions(#[from] permissions::Error),
    #[error(transparent)]
    FileSource(#[from] file::Error),
    #[error(transparent)]
    Api(#[from] api::Error),
    #[error(transparent)]
    UrlSource(#[from] url::Error),
    #[error(transparent)]
    PushSource(#[from] push::Error),
    #[error(transparent)]
    ApiClient(#[from] crate::sync::client::ConfigError),
    #[error("cannot install the SIGHUP handler: {0}")]
    Signal(#[source] io::Error),
    #[error("cannot find this executable (containerd's shims run it as the container logger)")]
    Exe(#[source] io::Error),
    #[error(transparent)]
    Managed(#[from] managed::Error),
    #[error(transparent)]
    Containerd(#[from] crate::runtime::containerd::Error),
    #[error(transparent)]
    ImagesDir(#[from] crate::runtime::image::watch::Error),
    #[error("cannot read the image credentials file {}", path.display())]
    CredentialsFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("image credentials file {}", path.display())]
    Credentials {
        path: PathBuf,
        #[source]
        source: credentials::Error,
    },
    #[error("the pod runtime task failed")]
    Task(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Systemd(#[from] systemd::Error),
    #[error("cannot write deltas to stdout: {0}")]
    Stdout(#[source] io::Error),
}

/// At a node shutdown with `--stop-pods-on-shutdown`, how long the stopped pods' last
/// statuses may take to reach the API server before the agent exits anyway.
const SHUTDOWN_FLUSH: std::time::Duration = std::time::Duration::from_secs(10);

/// One delta as `--dry-run` prints it, one JSON object per line.
#[derive(Debug, Serialize)]
pub struct DeltaLine<'a> {
    pub op: outpost_core::merge::DeltaOp,
    pub source: Source,
    pub uid: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub hash: Option<&'a str>,
}

impl<'a> DeltaLine<'a> {
    pub fn of(delta: &'a PodDelta) -> DeltaLine<'a> {
        let meta = &delta.pod.metadata;
        DeltaLine {
            op: delta.op,
            source: delta.source,
            uid: pod::uid(&delta.pod),
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref().unwrap_or_default(),
            hash: pod::annotation(&delta.pod, CONFIG_HASH),
        }
    }
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

/// Runs until SIGINT/SIGTERM. `systemd` says whether and how to notify systemd.
pub async fn run(
    flags: Settings,
    dry_run: bool,
    systemd: systemd::Env,
    log_level: LogLevel,
) -> Result<(), Error> {
    let mut config = Config::resolve(flags)?;
    // The node's address: given, or the default route's interface's, looked up once.
    config.node_ip = config.node_ip.or_else(host::default_address);
    info!(node = %config.node_name, manifests = %config.manifest_dir.display(), dry_run, "starting");
    secure_dirs(&config)?;
    // Resolved now: a binary replaced while running keeps its old path in /proc/self/exe.
    let exe = std::env::current_exe().map_err(Error::Exe)?;

    // Before anything is announced: SIGHUP's default action would end the agent.
    let mut hangup = unix_signal(SignalKind::hangup()).map_err(Error::Signal)?;
    let metrics = Metrics::default();
    let checkpoints = Checkpoints::new(&config.state_dir).with_metrics(metrics.clone());
    let events = Recorder::default();
    // The eBPF exec history is set on it once BPF is loaded (`set_exec_history`).
    let audit = ManifestAudit::default();
    let files = FileSource::new(file::Config {
        path: config.manifest_dir.clone(),
        node_name: config.node_name.clone(),
        watcher: config.watcher,
    })?
    .with_events(events.clone())
    .with_metrics(metrics.clone())
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
        .with_metrics(metrics.clone());
        sources.push((Source::Url, source.into_stream()));
    }
    // The push endpoint changes state, so it exists only when callers can authenticate.
    let push = if config.auth.token_file.is_some() || config.auth.client_ca_file.is_some() {
        let (handle, stream) = push::open(push::Config {
            node_name: config.node_name.clone(),
            checkpoints: checkpoints.clone(),
            metrics: metrics.clone(),
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

    // The kernel's side (eBPF): loaded before anything reads it; a dry run runs no pods.
    let ebpf = if dry_run {
        crate::ebpf::Handle::default()
    } else {
        crate::ebpf::Handle::start(config.ebpf)
    };
    if ebpf.is_loaded() {
        audit.set_exec_history(Some(Arc::new(ebpf.clone())));
    }
    let snapshot = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let statuses = StatusStore::default();
    let runtime_ready = (!dry_run).then(RuntimeReady::default);
    let runtime_ready_probe = runtime_ready.clone();
    let runtime_version = Arc::new(OnceLock::new());
    let stop_pods = CancellationToken::new();
    let status_backlog = tokio::sync::watch::Sender::<sync::StatusBacklog>::default();
    let sync_health = client.as_ref().map(|client| sync::Health {
        connectivity: client.connectivity().clone(),
        status_backlog: status_backlog.subscribe(),
    });
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
    let server = api::bind(api::Options {
        listen: config.listen,
        auth: config.auth.clone(),
        snapshot: snapshot.clone(),
        push,
        refresh: config.manifest_url.is_some().then(|| refresh.clone()),
        statuses: statuses.clone(),
        runtime: runtime_ready.clone(),
        metrics: crate::metrics::Sources {
            sync: sync_health.clone(),
            events: events.clone(),
            statuses: statuses.clone(),
            metrics: metrics.clone(),
            ebpf: ebpf.clone(),
        },
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
    })
    .await?;
    let (tx, rx) = mpsc::channel::<Batch>(64);
    let merge = tokio::spawn(podconfig::run(sources, tx, snapshot.clone(), metrics.clone()));
    // Status goes to the API server only when the agent runs pods (not in a dry run).
    let sync = match (client, &runtime_ready) {
        (Some(client), Some(runtime)) => Some(sync::spawn(sync::Context {
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
                state_dir: config.state_dir.clone(),
                runtime: runtime.clone(),
                runtime_version: runtime_version.clone(),
                shutdown: stop_pods.clone(),
            },
            status_backlog,
        })),
        _ => None,
    };
    let server = tokio::spawn(server);
    let mut managed = None;
    let mut pods = if let Some(containerd) = containerd {
        let socket = match containerd {
            (Choice::External, _) => config.containerd_socket.clone(),
            (Choice::Managed, binary) => {
                let started = ManagedContainerd::start(managed_options(&config, binary)).await?;
                let socket = started.socket().to_owned();
                managed = Some(started);
                socket
            }
        };
        let handles = RuntimeHandles {
            statuses,
            ready: runtime_ready.unwrap_or_default(),
            version: runtime_version,
            events,
            metrics,
            stop_pods: stop_pods.clone(),
            ebpf,
        };
        tokio::spawn(run_pods(config.clone(), socket, exe, rx, handles))
    } else {
        tokio::spawn(print_deltas(rx))
    };
    let notifier = systemd::Notifier::open(&systemd)?;
    let supervisor = notifier.clone().map(|notifier| {
        systemd::spawn(
            notifier,
            systemd::Watch {
                ready: ready_check(snapshot.clone(), runtime_ready_probe),
                alive: vec![("merge", merge.abort_handle()), ("pod runtime", pods.abort_handle())],
                watchdog: systemd.watchdog,
            },
        )
    });

    let result = loop {
        tokio::select! {
            ended = &mut pods => {
                break match ended {
                    Ok(result) => result,
                    Err(e) => Err(Error::Task(e)),
                };
            }
            _ = hangup.recv() => {
                info!("SIGHUP: refreshing the manifest URL");
                refresh.request();
            }
            signal = shutdown::signal() => {
                if let Some(notifier) = &notifier {
                    notifier.notify_or_warn(&systemd::Message::Stopping {
                        status: format!("{signal}: shutting down"),
                    });
                }
                if config.stop_pods_on_shutdown && !dry_run {
                    info!(signal, "shutting down; stopping every pod first (--stop-pods-on-shutdown)");
                    stop_pods.cancel();
                    let stopped = match (&mut pods).await {
                        Ok(result) => result,
                        Err(e) => Err(Error::Task(e)),
                    };
                    if let Some(sync) = &sync
                        && !sync.flush(SHUTDOWN_FLUSH).await
                    {
                        warn!("the pods' last statuses could not all be sent to the API server");
                    }
                    break stopped;
                }
                info!(signal, "shutting down; pods keep running");
                break Ok(());
            }
        }
    };
    // Unless told otherwise, pods keep running: the agent's exit is not the workloads'
    // (an edge box restarts the agent, and the next one adopts them).
    if let Some(supervisor) = supervisor {
        supervisor.abort();
    }
    pods.abort();
    merge.abort();
    drop(sync);
    server.abort();
    if let Some(managed) = managed {
        // Its containers keep running: shims outlive containerd.
        if let Err(e) = managed.stop().await {
            warn!(error = %describe(&e), "cannot stop the managed containerd cleanly");
        }
    }
    result
}

/// Ready (systemd's `READY=1`) once every pod source was seen (M9) and, unless in a dry
/// run (`runtime` is `None`), containerd is connected.
fn ready_check(
    snapshot: Arc<ArcSwap<Snapshot>>,
    runtime: Option<RuntimeReady>,
) -> Box<dyn Fn() -> Option<String> + Send> {
    Box::new(move || {
        let runtime_up =
            runtime.as_ref().is_none_or(|ready| ready.load(std::sync::atomic::Ordering::Relaxed));
        (snapshot.load().synced() && runtime_up).then(|| match runtime {
            Some(_) => "all pod sources seen; containerd connected".to_owned(),
            None => "all pod sources seen (dry run: no pods run)".to_owned(),
        })
    })
}

/// `--dry-run`: one JSON line per delta on stdout, nothing run.
async fn print_deltas(mut batches: mpsc::Receiver<Batch>) -> Result<(), Error> {
    while let Some(batch) = batches.recv().await {
        let written = (|| {
            let mut out = io::stdout().lock();
            for delta in &batch.deltas {
                serde_json::to_writer(&mut out, &DeltaLine::of(delta))?;
                out.write_all(b"\n")?;
            }
            out.flush()
        })();
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(Error::Stdout(e)),
        }
    }
    Ok(())
}
