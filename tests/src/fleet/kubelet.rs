//! A kubelet-shaped client model (B13): N clients in this process that make the
//! requests a real kubelet (1.31, default configuration) makes to the API server, on
//! kubelet's and client-go's clocks, with no real pods. The fleet harness runs it
//! through [`Nodes`] beside Outpost's hollow nodes ([`super::Fleet`]) to put the two
//! side by side: requests per node-minute, and what a whole-fleet outage costs.
//!
//! Each node ([`node_name`]`(i)`) has its own HTTP client (connection pool) and these
//! tasks, each in a `kubelet-model` span named by `node` and `task`:
//! - `node-status`: registration, then the node status loop (module `node`;
//!   `pkg/kubelet/kubelet_node_status.go`, `pkg/kubelet/kubelet.go`'s `Run`);
//! - `lease`: the node lease controller (module `node`;
//!   `staging/src/k8s.io/component-helpers/apimachinery/lease/controller.go`);
//! - `pods-reflector`, `node-reflector`, `services-reflector`: the informers kubelet
//!   has: its pods (`fieldSelector=spec.nodeName=NAME`, `pkg/kubelet/config/apiserver.go`),
//!   its Node (`metadata.name=NAME`) and every Service (`pkg/kubelet/kubelet.go`'s
//!   `NewMainKubelet`), each a client-go reflector (module `reflector`;
//!   `staging/src/k8s.io/client-go/tools/cache/reflector.go`,
//!   `staging/src/k8s.io/apimachinery/pkg/util/wait/backoff.go`);
//! - `pleg` and `status-manager`: the pods' simulated runtime, seen by kubelet's PLEG,
//!   and kubelet's status manager (module `pods`; `pkg/kubelet/pleg/generic.go`,
//!   `pkg/kubelet/status/status_manager.go`).
//!
//! After an outage each part comes back on its own clock, as kubelet's do: the
//! reflectors retry their watches (a refused connect backs off, 800 ms doubling to 30 s
//! with jitter) and re-LIST when the server's history no longer has their
//! resourceVersion (410), the lease controller GETs the Lease back and UPDATEs it, the
//! node status loop (which reads the Node from its informer's cache) PATCHes it only
//! if due (5 minutes since the last report) or changed, and the status manager writes
//! every pending pod status, each with its GET, on its next 10 s tick.
//!
//! What it leaves out: protobuf (JSON only), client-side rate limiting (kubelet's
//! `kubeAPIQPS` 50, burst 100, not reached here), `fastStatusUpdateOnce`, the
//! RuntimeClass and CSIDriver informers, the ConfigMap/Secret watches and TokenRequests
//! of the pods' volumes, Events, CrashLoopBackOff (every restart is at once) and the
//! node lifecycle controller's side (no one marks a silent node `Unknown`).

pub(crate) mod client;
mod node;
mod patch;
mod pods;
mod reflector;
mod timing;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Nodes, node_name};
use crate::apiserver::TestApiServer;

pub use client::Error;

/// One model node: its name, its pods and its tasks.
#[derive(Debug)]
pub struct KubeletNode {
    pub name: String,
    pods: Arc<pods::Pods>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl KubeletNode {
    /// Makes container `container` of pod `namespace/pod` exit with `code`; the PLEG
    /// sees it at its next relist and the container restarts.
    pub fn exit(&self, namespace: &str, pod: &str, container: &str, code: u32) -> bool {
        self.pods.exit(namespace, pod, container, code)
    }

    /// The first of the node's tasks that ended (they run until the model stops).
    fn ended(&self) -> Option<&'static str> {
        self.tasks.iter().find(|(_, task)| task.is_finished()).map(|(name, _)| *name)
    }
}

/// N kubelet-shaped nodes on one test API server; stopping (or dropping) it stops them.
#[derive(Debug)]
pub struct KubeletModel {
    pub nodes: Vec<KubeletNode>,
    stop: CancellationToken,
}

impl KubeletModel {
    /// Starts `nodes` model nodes against `server` (named as Outpost's hollow nodes,
    /// [`node_name`]), all at once, as kubelets whose site's power comes back.
    pub fn start(server: &TestApiServer, nodes: usize) -> Result<KubeletModel, Error> {
        let stop = CancellationToken::new();
        let config = server.client_config().map_err(|e| Error::Config(e.to_string()))?;
        let mut started = Vec::with_capacity(nodes);
        for index in 1..=nodes {
            let name = node_name(index);
            let token = stop.child_token();
            let client = client::Client::new(&config, token.clone())?;
            let pods = pods::Pods::new(index);
            let mut tasks = Vec::new();
            let mut spawn = |task: &'static str, future: BoxFuture<'static, ()>| {
                let span = tracing::info_span!("kubelet-model", node = %name, task);
                tasks.push((task, tokio::spawn(future.instrument(span))));
            };
            let lister = node::NodeLister::default();
            let heartbeat = client.with_timeout(node::NODE_STATUS_UPDATE_FREQUENCY);
            spawn(
                "node-status",
                Box::pin(node::run_node_status(
                    heartbeat.clone(),
                    lister.clone(),
                    name.clone(),
                    token.clone(),
                )),
            );
            spawn("lease", Box::pin(node::run_lease(heartbeat, name.clone(), token.clone())));
            let feed_pods: reflector::OnChange = {
                let pods = pods.clone();
                Box::new(move |store: &reflector::Store| pods.sync(store))
            };
            let reflectors: [(&str, &str, Option<String>, reflector::OnChange); 3] = [
                (
                    "pods-reflector",
                    "/api/v1/pods",
                    Some(format!("spec.nodeName={name}")),
                    feed_pods,
                ),
                (
                    "node-reflector",
                    "/api/v1/nodes",
                    Some(format!("metadata.name={name}")),
                    Box::new(move |store: &reflector::Store| lister.set(store.values().next())),
                ),
                (
                    "services-reflector",
                    "/api/v1/services",
                    None,
                    Box::new(|_: &reflector::Store| {}),
                ),
            ];
            for (task, path, selector, on_change) in reflectors {
                let reflector = reflector::Reflector::new(
                    client.clone(),
                    path,
                    selector,
                    on_change,
                    token.clone(),
                );
                spawn(task, Box::pin(reflector.run()));
            }
            spawn("pleg", Box::pin(pods::run_pleg(pods.clone(), token.clone())));
            spawn(
                "status-manager",
                Box::pin(pods::run_status_manager(client.clone(), pods.clone(), token.clone())),
            );
            started.push(KubeletNode { name, pods, tasks });
        }
        Ok(KubeletModel { nodes: started, stop })
    }

    /// Stops every node and waits for its tasks: a node's error if a task panicked.
    pub async fn stop(mut self) -> Vec<Result<(), String>> {
        self.stop.cancel();
        let mut results = Vec::with_capacity(self.nodes.len());
        for node in std::mem::take(&mut self.nodes) {
            let mut result = Ok(());
            for (task, handle) in node.tasks {
                if let Err(error) = handle.await {
                    result = Err(format!("{}: task {task}: {error}", node.name));
                }
            }
            results.push(result);
        }
        results
    }
}

impl Drop for KubeletModel {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Nodes for KubeletModel {
    fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|node| node.name.clone()).collect()
    }

    fn exit(&self, node: usize, namespace: &str, pod: &str, container: &str, code: u32) -> bool {
        self.nodes.get(node).is_some_and(|node| node.exit(namespace, pod, container, code))
    }

    fn ended(&self) -> Option<String> {
        let (node, task) = self.nodes.iter().find_map(|node| Some((node, node.ended()?)))?;
        tracing::error!(node = %node.name, task, "a model node's task ended before the stop");
        Some(node.name.clone())
    }

    fn stop(self: Box<Self>) -> BoxFuture<'static, Vec<Result<(), String>>> {
        Box::pin(KubeletModel::stop(*self))
    }
}
