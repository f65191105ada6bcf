//! `outpost run`: build the agent's parts, spawn their tasks, and supervise them until a
//! signal or a main task ends the agent.
//!
//! - `build`: the composition root: the config resolved, each component built by its
//!   own `Config::build` (sources, containerd, pod workers, garbage collector, eviction
//!   manager, images dir), which returns its handle and its task ([`crate::task`]).
//! - `cluster`: the API server's side, with a kubeconfig.

mod build;
mod cluster;
mod pod_resources;
mod state_key;

use std::io;

use tracing::{info, warn};

use self::build::Agent;
use crate::config::{self, Settings};
use crate::logging::LogLevel;
use crate::podconfig::SnapshotHandle;
use crate::status::RuntimeReady;
use crate::task::{Task, Tasks};
use crate::{api, permissions, shutdown, systemd};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::Error),
    #[error(transparent)]
    Permissions(#[from] permissions::Error),
    #[error(transparent)]
    Sources(#[from] crate::source::local::Error),
    #[error(transparent)]
    Api(#[from] api::Error),
    #[error(transparent)]
    ApiClient(#[from] crate::apiserver::client::ConfigError),
    #[error(transparent)]
    Certificates(#[from] crate::certificates::Error),
    #[error(transparent)]
    Shim(#[from] crate::runtime::shim::Error),
    #[error(transparent)]
    PodSide(#[from] crate::pod_side::Error),
    #[error(transparent)]
    Task(#[from] crate::task::Error),
    #[error(transparent)]
    Systemd(#[from] systemd::Error),
    #[error(transparent)]
    Devices(#[from] crate::devices::Error),
    #[error(transparent)]
    StateKey(#[from] crate::checkpoint::seal::Error),
}

/// At a node shutdown with `--stop-pods-on-shutdown`, how long the stopped pods' last
/// statuses may take to reach the API server before the agent exits anyway.
const SHUTDOWN_FLUSH: std::time::Duration = std::time::Duration::from_secs(10);

/// The agent's tokio worker threads: one. The agent waits on IO almost all the time (its
/// CPU is well under 1 % of a core with 100 probed pods, B8), so a second worker buys no
/// throughput, and it costs a wake-up of its own whenever work is queued while it is
/// parked: a worker that queues a task (a probe's result for its pod worker, a reply
/// for the request that waits on it) wakes its parked sibling to steal it. Measured on
/// the dev quick B8 (10 pods, 2 probes/s, 20 s): 147–323 voluntary context switches with
/// two workers, of which about half were one worker waking the other (`perf` sched
/// tracepoints), against 72 with one. Blocking work goes to the blocking pool
/// (`spawn_blocking`), as before.
pub const WORKER_THREADS: usize = 1;

/// The runtime `outpost run` runs on ([`WORKER_THREADS`]).
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(WORKER_THREADS).enable_all().build()
}

/// Runs until SIGINT/SIGTERM. `systemd` says whether and how to notify systemd.
pub async fn run(
    settings: Settings,
    dry_run: bool,
    systemd: systemd::Env,
    log_level: LogLevel,
) -> Result<(), Error> {
    // A heap profile, if one is asked for: written at the stop signal, before the agent
    // lets go of anything (or when the guard drops, if the agent ends otherwise).
    let _heap = crate::heap_profile::start();
    let stop = async {
        let signal = shutdown::signal().await;
        crate::heap_profile::finish();
        signal
    };
    let containerd = crate::pod_side::Runtime::Containerd;
    run_with(settings, dry_run, systemd, log_level, containerd, stop).await
}

/// Runs a hollow node (B13's fleet harness): the agent as [`run`] runs it, its pods on the
/// simulated runtime `hollow`, until `stop` is cancelled (as a SIGTERM would stop it).
/// Several run in one process: each has its own settings (node name, state dir, ports 0)
/// and metrics registry; `log_level` is a [`crate::logging::detached`] one or the
/// process's.
#[cfg(feature = "hollow")]
pub async fn hollow(
    settings: Settings,
    hollow: std::sync::Arc<crate::worker::hollow::Hollow>,
    log_level: LogLevel,
    stop: tokio_util::sync::CancellationToken,
) -> Result<(), Error> {
    let runtime = crate::pod_side::Runtime::Hollow(hollow);
    let stopped = async move {
        stop.cancelled().await;
        "stop"
    };
    run_with(settings, false, systemd::Env::default(), log_level, runtime, stopped).await
}

/// Builds the agent on `pod_runtime` and runs it until `stop` (a signal) or a main task
/// ends.
async fn run_with(
    settings: Settings,
    dry_run: bool,
    systemd: systemd::Env,
    log_level: LogLevel,
    pod_runtime: crate::pod_side::Runtime,
    stop: impl std::future::Future<Output = &'static str>,
) -> Result<(), Error> {
    let Agent { config, dry_run, tasks, snapshot, runtime_ready, sync, stop_pods, node_shutdown } =
        build::build(settings, dry_run, log_level, pod_runtime).await?;
    let mut node_shutdown = node_shutdown;
    let mut tasks = Tasks::spawn(tasks);
    let notifier = systemd::Notifier::open(&systemd)?;
    if let Some(notifier) = notifier.clone() {
        let watch = systemd::Watch {
            ready: ready_check(snapshot, runtime_ready),
            alive: tasks.main_tasks(),
            watchdog: systemd.watchdog,
        };
        tasks.spawn_first(Task::infallible("systemd", systemd::run(notifier, watch)));
    }
    let result = tokio::select! {
        ended = tasks.main_ended() => ended.map_err(Error::from),
        Some(shutdown) = next_shutdown(&mut node_shutdown) => {
            // J3: logind says the machine shuts down. The pods stop by priority group,
            // their statuses and the Node's Ready=False are sent, then logind may go on;
            // the agent stays until systemd stops it.
            if let Some(notifier) = &notifier {
                notifier.notify_or_warn(&systemd::Message::Stopping {
                    status: "the machine shuts down: stopping the pods".to_owned(),
                });
            }
            let stopped = stop_every_pod(&mut tasks, &stop_pods, sync.as_ref()).await;
            if let Some(sync) = &sync
                && !sync.node_shutdown_reported(SHUTDOWN_FLUSH).await
            {
                warn!("the Node's Ready=False (shutting down) could not be sent to the API server");
            }
            shutdown.release();
            match stopped {
                Ok(()) => tokio::select! {
                    ended = tasks.main_ended() => ended.map_err(Error::from),
                    signal = shutdown::signal() => {
                        info!(signal, "shutting down; the pods were stopped for the machine's shutdown");
                        Ok(())
                    }
                },
                Err(e) => Err(e),
            }
        }
        signal = stop => {
            if let Some(notifier) = &notifier {
                notifier.notify_or_warn(&systemd::Message::Stopping {
                    status: format!("{signal}: shutting down"),
                });
            }
            if config.shutdown.stop_pods && !dry_run {
                info!(signal, "shutting down; stopping every pod first (--stop-pods-on-shutdown)");
                stop_every_pod(&mut tasks, &stop_pods, sync.as_ref()).await
            } else {
                // Unless told otherwise, pods keep running: the agent's exit is not the
                // workloads' (an edge box restarts the agent, and the next one adopts them).
                info!(signal, "shutting down; pods keep running");
                Ok(())
            }
        }
    };
    tasks.stop().await;
    result
}

/// Stops every pod, waits for the pod workers to end, and gives their last statuses up
/// to [`SHUTDOWN_FLUSH`] to reach the API server.
async fn stop_every_pod(
    tasks: &mut Tasks,
    stop_pods: &tokio_util::sync::CancellationToken,
    sync: Option<&crate::sync::Handle>,
) -> Result<(), Error> {
    stop_pods.cancel();
    let stopped = tasks.join("pod_workers").await.map_err(Error::from);
    if let Some(sync) = sync
        && !sync.flush(SHUTDOWN_FLUSH).await
    {
        warn!("the pods' last statuses could not all be sent to the API server");
    }
    stopped
}

/// The next shutdown logind announces (J3); never, with graceful node shutdown off.
async fn next_shutdown(
    shutdowns: &mut Option<crate::node_shutdown::Shutdowns>,
) -> Option<crate::node_shutdown::Shutdown> {
    match shutdowns {
        Some(shutdowns) => shutdowns.recv().await,
        None => std::future::pending().await,
    }
}

/// Ready (systemd's `READY=1`) once every pod source was seen (M9) and, unless in a dry
/// run (`runtime` is `None`), containerd is connected.
fn ready_check(
    snapshot: SnapshotHandle,
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
