//! containerd for the agent: chosen (a socket to connect to, or one the agent starts),
//! connected with backoff, and shared with every part that needs it once it answers.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use outpost_core::backoff::Backoff;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::node::Node;
use crate::config::values::ShimGrouping;
use crate::error_chain::describe;
use crate::runtime::Containerd;
use crate::runtime::managed::{self, Choice, ManagedContainerd};
use crate::status::RuntimeReady;
use crate::task::{Stop, Task};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Managed(#[from] managed::Error),
    #[error(transparent)]
    Containerd(#[from] crate::runtime::containerd::Error),
}

pub use crate::config::containerd::Config;

/// How long the managed containerd may take to stop at the agent's exit (SIGTERM, then
/// its own shutdown: it closes its plugins and the shims' connections). An external
/// containerd, or one that never answered, has nothing to wait for: the task ends at once.
const MANAGED_STOP: Duration = Duration::from_secs(30);

/// Where containerd is: its socket, or how the agent runs it.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The managed containerd's options; `None`: an external one's socket.
    managed: Option<managed::Options>,
}

impl Placement {
    /// `--containerd`: connect to a socket, or run containerd ourselves (with its binary):
    /// its data under the node's state dir, its sockets under its run dir.
    pub fn choose(config: &Config, node: &Node) -> Placement {
        let binary = managed::find_binary();
        let choice =
            managed::choose(config.mode.choice(), config.socket.exists(), binary.is_some());
        let managed = (choice == Choice::Managed).then(|| {
            // Without a binary, starting it fails with the error that says so.
            let binary = binary.unwrap_or_else(|| PathBuf::from("containerd"));
            let mut options = managed::Options::new(binary, &node.state_dir);
            options.run_dir = node.run_dir.join("containerd");
            options
        });
        Placement { managed }
    }

    /// The socket the agent connects to.
    pub fn socket(&self, config: &Config) -> PathBuf {
        match &self.managed {
            None => config.socket.clone(),
            Some(options) => options.socket(),
        }
    }

    /// Whether the agent runs containerd itself.
    pub fn is_managed(&self) -> bool {
        self.managed.is_some()
    }
}

/// containerd once connected, for the parts that wait for it.
#[derive(Debug, Clone)]
pub struct Connection(watch::Receiver<Option<Containerd>>);

impl Connection {
    /// containerd, once it answers; `None` if it never will (the node shut down first,
    /// or the connection task failed, which ends the agent).
    pub async fn connected(mut self) -> Option<Containerd> {
        self.0.wait_for(Option::is_some).await.ok().and_then(|connected| connected.clone())
    }
}

/// What the connection announces, and to whom.
pub struct Deps {
    pub ready: RuntimeReady,
    /// containerd's version, once connected (the Node's nodeInfo).
    pub version: Arc<OnceLock<String>>,
    /// Told once containerd answers, before anything waiting on the connection (the
    /// local API's `/exec`, `/run` and `/containerLogs` find it so).
    pub connected: Box<dyn FnOnce(&Containerd) + Send>,
    /// A node shutdown before containerd answered: there are no pods to stop.
    pub stop_pods: CancellationToken,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps").field("version", &self.version).finish_non_exhaustive()
    }
}

impl Config {
    /// The `containerd` task: starts containerd if it is the agent's to run, connects
    /// (retrying until it answers), announces it, and at the agent's exit stops the
    /// managed containerd (its containers keep running: shims outlive containerd).
    pub fn build(self, placement: &Placement, deps: Deps) -> (Connection, Task) {
        connect(self, placement.managed.clone(), deps)
    }
}

fn connect(config: Config, managed: Option<managed::Options>, deps: Deps) -> (Connection, Task) {
    let (connected, connection) = watch::channel(None);
    let stop = CancellationToken::new();
    let Config { socket, namespace, shim_grouping, .. } = config;
    let stopped = stop.clone();
    let task = async move {
        let (socket, managed) = match managed {
            None => (socket, None),
            Some(options) => {
                let started = ManagedContainerd::start(options).await?;
                (started.socket().to_owned(), Some(started))
            }
        };
        let connect = Containerd::connect_with_backoff(&socket, Backoff::WATCH);
        let containerd = tokio::select! {
            containerd = connect => {
                let containerd = containerd.with_namespace(&namespace)?;
                // One shim for the node: its kills and deletions take turns (issue 38).
                if shim_grouping == ShimGrouping::Node { containerd.with_shared_shim() } else { containerd }
            }
            // The agent leaves before containerd ever answered: no pod to wait for (O5).
            () = stopped.cancelled() => {
                stop_managed(managed).await;
                return Ok(());
            }
            () = deps.stop_pods.cancelled() => {
                // A node shutdown before containerd answered: no pods to stop. The
                // agent may stay (logind's shutdown: J3), and so does this task.
                drop(connected);
                stopped.cancelled().await;
                return Ok(());
            }
        };
        deps.ready.store(true, Ordering::Relaxed);
        (deps.connected)(&containerd);
        match containerd.version().await {
            Ok(v) => {
                info!(socket = %socket.display(), version = v.version, "connected to containerd");
                let _ = deps.version.set(v.version);
            }
            Err(e) => warn!(error = %describe(&e), "containerd did not report its version"),
        }
        connected.send_replace(Some(containerd));
        stopped.cancelled().await;
        stop_managed(managed).await;
        Ok::<(), Error>(())
    };
    let task = Task::new("containerd", task).main().stop(Stop::Cancel(stop, MANAGED_STOP));
    (Connection(connection), task)
}

/// Stops the managed containerd, if the agent runs one (its containers keep running).
async fn stop_managed(managed: Option<ManagedContainerd>) {
    if let Some(managed) = managed
        && let Err(e) = managed.stop().await
    {
        warn!(error = %describe(&e), "cannot stop the managed containerd cleanly");
    }
}
