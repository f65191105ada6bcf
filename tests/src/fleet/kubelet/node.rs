//! The model's Node and Lease: kubelet's registration and node status loop
//! (`pkg/kubelet/kubelet_node_status.go`, started in `kubelet.go`'s `Run`) and its node
//! lease controller (`k8s.io/component-helpers/apimachinery/lease/controller.go`).
//!
//! - Registration (`registerWithAPIServer`): wait 100 ms (doubled after each failure,
//!   at most 7 s), create the Node; on `AlreadyExists`, GET it.
//! - Node status (`syncNodeStatus`, every `nodeStatusUpdateFrequency` 10 s with jitter
//!   0.04, sliding): up to 5 tries (`nodeStatusUpdateRetry`) of reading the Node (the
//!   first from the node informer's cache, no request; the others a GET), then PATCH
//!   `nodes/status` only when the status changed (heartbeats aside) or
//!   `nodeStatusReportFrequency` (5 min) passed since the last report.
//! - Lease (`renewInterval` 10 s = 0.25 × 40 s, jitter 0.04, sliding): UPDATE the cached
//!   Lease with a new `renewTime` (5 tries); failing that, GET it back (creating it if
//!   404) with a backoff of 200 ms doubling to 7 s until the server answers, then UPDATE.
//!   A new Lease is owned by the Node (one GET of the Node for its uid).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::client::{self, Client, Error};
use super::patch;
use super::timing;

/// kubelet's `nodeStatusUpdateFrequency`.
pub const NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// kubelet's `nodeStatusReportFrequency`.
pub const NODE_STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(300);
/// kubelet's `nodeLeaseDurationSeconds`.
pub const LEASE_DURATION: Duration = Duration::from_secs(40);
/// The jitter factor of both periodic loops.
const JITTER: f64 = 0.04;
/// `nodeStatusUpdateRetry`, and the lease controller's `maxUpdateRetries`.
const RETRIES: u32 = 5;
const LEASE_NAMESPACE: &str = "kube-node-lease";

fn node_path(name: &str) -> String {
    format!("/api/v1/nodes/{name}")
}

fn lease_path(name: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}")
}

/// Sleeps `wait`; false when stopped first.
pub async fn sleep(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => true,
        () = stop.cancelled() => false,
    }
}

/// The node's status as kubelet reports it (four conditions, all healthy), with
/// `heartbeat` as every condition's `lastHeartbeatTime` and `since` as their
/// `lastTransitionTime`.
pub fn node_status(name: &str, since: &str, heartbeat: &str) -> Value {
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": kind, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": since,
        })
    };
    let resources = json!({
        "cpu": "2", "memory": "4025836Ki", "pods": "110", "ephemeral-storage": "30832548Ki",
    });
    json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID",
                "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            { "type": "InternalIP", "address": "127.0.0.1" },
            { "type": "Hostname", "address": name },
        ],
        "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
            "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.31.0",
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
        },
    })
}

/// Registration, then the node status loop, until stopped.
pub async fn run_node_status(
    client: Client,
    lister: NodeLister,
    name: String,
    stop: CancellationToken,
) {
    let (since, _) = client::now();
    if !register(&client, &name, &since, &stop).await {
        return;
    }
    let mut last_report: Option<Instant> = None;
    loop {
        for attempt in 0..RETRIES {
            let update =
                try_update_node_status(&client, &lister, &name, &since, attempt, last_report);
            match update.await {
                Ok(reported) => {
                    if reported {
                        last_report = Some(Instant::now());
                    }
                    break;
                }
                Err(Error::Stopped { .. }) => return,
                Err(error) => debug!(node = %name, %error, attempt, "node status update failed"),
            }
        }
        let wait = timing::jitter(NODE_STATUS_UPDATE_FREQUENCY, JITTER, fastrand::f64());
        if !sleep(&stop, wait).await {
            return;
        }
    }
}

/// `registerWithAPIServer`: false when stopped first.
async fn register(client: &Client, name: &str, since: &str, stop: &CancellationToken) -> bool {
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
            "annotations": { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
        },
        "spec": {},
        "status": node_status(name, since, since),
    });
    let mut step = Duration::from_millis(100);
    loop {
        if !sleep(stop, step).await {
            return false;
        }
        step = (step * 2).min(Duration::from_secs(7));
        match client.create("/api/v1/nodes", &node).await {
            Ok(_) => return true,
            Err(error) if error.is_already_exists() => match client.get(&node_path(name)).await {
                Ok(_) => return true,
                Err(error) => debug!(node = %name, %error, "cannot get the existing node"),
            },
            Err(Error::Stopped { .. }) => return false,
            Err(error) => debug!(node = %name, %error, "registration failed"),
        }
    }
}

/// `tryUpdateNodeStatus`: true when it reported the status. The first try reads the
/// Node from the node informer's cache, the others from the API server.
async fn try_update_node_status(
    client: &Client,
    lister: &NodeLister,
    name: &str,
    since: &str,
    attempt: u32,
    last_report: Option<Instant>,
) -> Result<bool, Error> {
    let path = node_path(name);
    let cached = if attempt == 0 { lister.get() } else { None };
    let original = match cached {
        Some(node) => node,
        None if attempt == 0 => return Err(Error::NotCached { what: format!("node {name}") }),
        None => client.get(&path).await?,
    };
    let (now, _) = client::now();
    let status = node_status(name, since, &now);
    let changed =
        patch::without_heartbeats(&original["status"]) != patch::without_heartbeats(&status);
    let due = last_report.is_none_or(|at| at.elapsed() >= NODE_STATUS_REPORT_FREQUENCY);
    if !changed && !due {
        return Ok(false);
    }
    if let Some(diff) = patch::merge_diff(&original["status"], &status) {
        client.merge_patch(&format!("{path}/status"), &json!({ "status": diff })).await?;
    }
    Ok(true)
}

/// The node informer's cache of the node's own Node (kubelet's `nodeLister`).
#[derive(Debug, Clone, Default)]
pub struct NodeLister(Arc<Mutex<Option<Value>>>);

impl NodeLister {
    fn get(&self) -> Option<Value> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Takes what the node reflector holds (its one Node, or none).
    pub fn set(&self, node: Option<&Value>) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = node.cloned();
    }
}

/// The node lease controller, until stopped.
pub async fn run_lease(client: Client, name: String, stop: CancellationToken) {
    let mut controller = LeaseController { client, name, latest: None, stop: stop.clone() };
    let period = timing::lease_renew_interval(LEASE_DURATION);
    loop {
        if !controller.sync().await {
            return;
        }
        if !sleep(&stop, timing::jitter(period, JITTER, fastrand::f64())).await {
            return;
        }
    }
}

struct LeaseController {
    client: Client,
    name: String,
    latest: Option<Value>,
    stop: CancellationToken,
}

impl LeaseController {
    /// One `sync`; false when stopped.
    async fn sync(&mut self) -> bool {
        if let Some(latest) = self.latest.clone() {
            match self.retry_update(latest).await {
                Ok(()) => return true,
                Err(Error::Stopped { .. }) => return false,
                Err(error) => debug!(node = %self.name, %error, "lease update failed, getting it"),
            }
        }
        let Some((lease, created)) = self.backoff_ensure().await else { return false };
        self.latest = Some(lease.clone());
        if !created {
            match self.retry_update(lease).await {
                Err(Error::Stopped { .. }) => return false,
                Err(error) => warn!(node = %self.name, %error, "lease update failed"),
                Ok(()) => {}
            }
        }
        true
    }

    /// `backoffEnsureLease`: the Lease and whether it was created; None when stopped.
    async fn backoff_ensure(&mut self) -> Option<(Value, bool)> {
        let mut wait = Duration::from_millis(100);
        loop {
            match self.ensure().await {
                Ok(found) => return Some(found),
                Err(Error::Stopped { .. }) => return None,
                Err(error) => debug!(node = %self.name, %error, "cannot ensure the lease"),
            }
            wait = timing::ensure_lease_wait(wait);
            if !sleep(&self.stop, wait).await {
                return None;
            }
        }
    }

    async fn ensure(&mut self) -> Result<(Value, bool), Error> {
        match self.client.get(&lease_path(&self.name)).await {
            Ok(lease) => Ok((lease, false)),
            Err(error) if error.is_not_found() => {
                let lease = self.new_lease(None).await;
                let path =
                    format!("/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases");
                Ok((self.client.create(&path, &lease).await?, true))
            }
            Err(error) => Err(error),
        }
    }

    /// `retryUpdateLease`: 5 UPDATEs at most; a conflict gets the Lease again first.
    async fn retry_update(&mut self, mut base: Value) -> Result<(), Error> {
        let path = lease_path(&self.name);
        for _ in 0..RETRIES {
            let lease = self.new_lease(Some(&base)).await;
            match self.client.update(&path, &lease).await {
                Ok(updated) => {
                    self.latest = Some(updated);
                    return Ok(());
                }
                Err(error @ Error::Stopped { .. }) => return Err(error),
                Err(error) if error.is_conflict() => {
                    let Some((lease, _)) = self.backoff_ensure().await else {
                        return Err(Error::Stopped { method: hyper::Method::PUT, path });
                    };
                    base = lease;
                }
                Err(error) => debug!(node = %self.name, %error, "lease update failed"),
            }
        }
        Err(Error::GaveUp { method: hyper::Method::PUT, path, tries: RETRIES })
    }

    /// `newLease`: `base` (or a new Lease) renewed now, owned by the Node when the
    /// Node can be read.
    async fn new_lease(&self, base: Option<&Value>) -> Value {
        let (_, now) = client::now();
        let mut lease = base.cloned().unwrap_or_else(|| {
            json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": { "name": self.name, "namespace": LEASE_NAMESPACE },
                "spec": {},
            })
        });
        lease["spec"]["holderIdentity"] = json!(self.name);
        lease["spec"]["leaseDurationSeconds"] = json!(LEASE_DURATION.as_secs());
        lease["spec"]["renewTime"] = json!(now);
        let owned = lease
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|owners| !owners.is_empty());
        if !owned && let Ok(node) = self.client.get(&node_path(&self.name)).await {
            lease["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "v1", "kind": "Node", "name": self.name,
                "uid": node.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
            }]);
        }
        lease
    }
}
