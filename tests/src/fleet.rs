//! Hollow Outpost nodes (B13): N nodes in this process against one [`TestApiServer`],
//! each the real agent (`outpost::commands::run::hollow`: sources, merge, pod workers,
//! status sync, Node and Lease, the objects and Services watches, certificates) with
//! its pods on the simulated runtime ([`Hollow`]): pods "run" at once, and containers
//! exit when the test says ([`HollowNode::exit`]).
//!
//! Each node has its own name (`hollow-0001`, ...), directory under the fleet's temp dir
//! (manifests, state, run, logs, CNI), settings, metrics registry and tasks. What the
//! nodes share, being one process: the tracing subscriber (the fleet's log level is one
//! [`outpost::logging::detached`] filter, so a node's `/debug/log-level` changes it for
//! all), tokio's signal handlers (each node's SIGHUP listener; SIGTERM is not used, a
//! node stops on its token), and the process's RSS (memory per node is a delta over N).
//! No node reads an environment variable or a fixed path that another writes: eBPF is
//! off, the local API listens on a free port and the healthz port is off.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use outpost::config::Settings;
use outpost::worker::hollow::Hollow;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::apiserver::TestApiServer;

pub mod load;
pub mod scenario;

/// Why the fleet could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot make the fleet's directories under {}: {source}", dir.display())]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the fleet's kubeconfig: {0}")]
    Kubeconfig(#[source] std::io::Error),
    #[error("cannot make the fleet's log filter: {0}")]
    Logging(#[source] outpost::logging::Error),
}

/// One hollow node: its name, its simulated runtime and its agent's task.
#[derive(Debug)]
pub struct HollowNode {
    pub name: String,
    pub hollow: Arc<Hollow>,
    task: JoinHandle<Result<(), outpost::commands::run::Error>>,
}

impl HollowNode {
    /// Makes container `container` of pod `namespace/pod` on this node exit with `code`
    /// (its restart then follows the pod's restartPolicy, as on a real node).
    pub fn exit(&self, namespace: &str, pod: &str, container: &str, code: u32) -> bool {
        self.hollow.exit(namespace, pod, container, code)
    }

    /// Whether the node's agent has ended (an error stops it; a hollow node runs until
    /// the fleet stops).
    pub fn has_ended(&self) -> bool {
        self.task.is_finished()
    }
}

/// What the fleet harness drives (B13): N nodes on one test API server, named
/// [`node_name`]`(1..=N)`, either Outpost's hollow nodes ([`Fleet`]) or the
/// kubelet-shaped client model (`kubelet::KubeletModel`), so both run the same
/// scenarios side by side.
pub trait Nodes: Send + Sync {
    /// The nodes' names, in order (`hollow-0001`, ...).
    fn names(&self) -> Vec<String>;

    /// Makes container `container` of pod `namespace/pod` on node `node` (its index in
    /// [`Nodes::names`]) exit with `code`; the restart then follows the pod's
    /// restartPolicy. False when the node runs no such container.
    fn exit(&self, node: usize, namespace: &str, pod: &str, container: &str, code: u32) -> bool;

    /// The name of a node whose task has ended (it should run until the fleet stops).
    fn ended(&self) -> Option<String>;

    /// Stops every node and waits for them: each node's error, if it had one.
    fn stop(self: Box<Self>) -> BoxFuture<'static, Vec<Result<(), String>>>;
}

/// N hollow nodes; stopping (or dropping) it stops them and removes their directories.
#[derive(Debug)]
pub struct Fleet {
    pub nodes: Vec<HollowNode>,
    stop: CancellationToken,
    dir: tempfile::TempDir,
    /// Keeps the nodes' shared (detached) log filter alive.
    _logging: Box<dyn std::any::Any + Send + Sync>,
}

/// The name of node `index` (`hollow-0001` for 1).
pub fn node_name(index: usize) -> String {
    format!("hollow-{index:04}")
}

impl Fleet {
    /// Starts `nodes` hollow nodes against `server` (named `hollow-0001`, ...), all at
    /// once, as a site whose power comes back. `log` is the nodes' log filter (EnvFilter
    /// syntax, e.g. `warn`), written nowhere unless the process installed a subscriber.
    pub async fn start(server: &TestApiServer, nodes: usize, log: &str) -> Result<Fleet, Error> {
        Fleet::start_with(server, nodes, log, |_| {}).await
    }

    /// [`Fleet::start`] with each node's settings changed by `tune` first (a lever
    /// measured: e.g. `node_lease_duration_seconds`).
    pub async fn start_with(
        server: &TestApiServer,
        nodes: usize,
        log: &str,
        tune: impl Fn(&mut Settings),
    ) -> Result<Fleet, Error> {
        let dir = tempfile::Builder::new()
            .prefix("outpost-fleet-")
            .tempdir()
            .map_err(|source| Error::Dir { dir: std::env::temp_dir(), source })?;
        let (log_level, subscriber) = outpost::logging::detached(log).map_err(Error::Logging)?;
        let stop = CancellationToken::new();
        let mut started = Vec::with_capacity(nodes);
        for index in 1..=nodes {
            let name = node_name(index);
            // Each node as itself, under the Node authorizer and NodeRestriction (K5).
            let node_dir = dir.path().join(&name);
            std::fs::create_dir_all(&node_dir)
                .map_err(|source| Error::Dir { dir: node_dir.clone(), source })?;
            let kubeconfig = server.node_kubeconfig(&node_dir, &name).map_err(Error::Kubeconfig)?;
            let mut settings = settings(dir.path(), &name, &kubeconfig)?;
            tune(&mut settings);
            let hollow = Arc::new(Hollow::default());
            let run = outpost::commands::run::hollow(
                settings,
                hollow.clone(),
                log_level.clone(),
                stop.child_token(),
            );
            let task = tokio::spawn(run);
            started.push(HollowNode { name, hollow, task });
        }
        Ok(Fleet { nodes: started, stop, dir, _logging: Box::new(subscriber) })
    }

    /// The fleet's directory (each node's under `NAME/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops every node (as SIGTERM would, pods left "running") and waits for them.
    pub async fn stop(mut self) -> Vec<Result<(), String>> {
        self.stop.cancel();
        let mut results = Vec::with_capacity(self.nodes.len());
        for node in std::mem::take(&mut self.nodes) {
            results.push(match node.task.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => {
                    Err(format!("{}: {}", node.name, outpost::error_chain::describe(&error)))
                }
                Err(error) => Err(format!("{}: {error}", node.name)),
            });
        }
        results
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Nodes for Fleet {
    fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|node| node.name.clone()).collect()
    }

    fn exit(&self, node: usize, namespace: &str, pod: &str, container: &str, code: u32) -> bool {
        self.nodes.get(node).is_some_and(|node| node.exit(namespace, pod, container, code))
    }

    fn ended(&self) -> Option<String> {
        self.nodes.iter().find(|node| node.has_ended()).map(|node| node.name.clone())
    }

    fn stop(self: Box<Self>) -> BoxFuture<'static, Vec<Result<(), String>>> {
        Box::pin(Fleet::stop(*self))
    }
}

/// A hollow node's settings, as its config file would give them: its name, its own
/// directories under `root/NAME`, the cluster's kubeconfig, no eBPF, a free local API
/// port and no healthz port.
fn settings(root: &Path, name: &str, kubeconfig: &Path) -> Result<Settings, Error> {
    let node = root.join(name);
    let sub = |part: &str| -> Result<PathBuf, Error> {
        let dir = node.join(part);
        std::fs::create_dir_all(&dir).map_err(|source| Error::Dir { dir: dir.clone(), source })?;
        Ok(dir)
    };
    // The state dir as the agent wants it (it holds pod specs): the owner's only.
    let state = sub("state")?;
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .map_err(|source| Error::Dir { dir: state.clone(), source })?;
    Ok(Settings {
        node_name: Some(name.to_owned()),
        manifest_dir: Some(sub("manifests")?),
        kubeconfig: Some(kubeconfig.to_owned()),
        state_dir: Some(state),
        root_dir: Some(sub("kubelet")?),
        run_dir: Some(sub("run")?),
        pod_log_dir: Some(sub("logs")?),
        cni_conf_dir: Some(sub("cni")?),
        listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        healthz_port: Some(0),
        node_ip: Some(std::net::IpAddr::from([127, 0, 0, 1])),
        ebpf: Some(false),
        anonymous_loopback_reads: Some(true),
        ..Settings::default()
    })
}

pub mod kubelet;

/// Waits until `check` holds, for the fleet's tests (taking longer than `patience`
/// fails the test).
#[cfg(test)]
async fn until(what: &str, patience: std::time::Duration, mut check: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(patience, async {
        while !check() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for {what}");
}

#[cfg(test)]
mod tests;
