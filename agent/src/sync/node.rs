//! The Node object: registration on first contact and node status, as kubelet does them.
//!
//! Once the API server is reachable the Node is created (or, if it exists, adopted with
//! its well-known labels set right) and its identity published in [`Context::node`].
//! The machine is read every [`node_status::STATUS_UPDATE_FREQUENCY`] (local files, no
//! requests; on the writers' [beat](super::beat)); the status is patched only when it
//! changed in a way that matters or when [`node_status::STATUS_REPORT_FREQUENCY`]
//! passed, and once after a time offline (O3).
//! Nothing is sent while the server is unreachable. A 404 on the status (someone deleted
//! the Node) registers it again, with a new UID. The Node is also watched by name
//! ([`informer`]), so that admission (K4) sees its labels and taints as the server has
//! them.

mod informer;
mod machine;
mod registration;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeStatus, Taint};
use k8s_openapi::jiff::Timestamp;
use outpost_core::backoff::Backoff;
use outpost_core::node_admission;
use outpost_core::node_status::{self, Conditions};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::beat::Beats;
use super::{Context, sleep_until};
use crate::apiserver::CallError;
use crate::error_chain::describe;

/// What the Node is registered with and reports.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--node-labels` (the well-known hostname/os/arch labels are added).
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// `--node-ip` or the default route's address (status.addresses InternalIP).
    pub node_ip: Option<IpAddr>,
    /// The local API's port (status.daemonEndpoints.kubeletEndpoint), if known.
    pub kubelet_port: Option<u16>,
    /// The state dir: DiskPressure and ephemeral-storage are read from its filesystem.
    pub state_dir: PathBuf,
    /// Whether containerd is connected (the Ready condition).
    pub runtime: crate::status::RuntimeReady,
    /// containerd's version once connected (`nodeInfo.containerRuntimeVersion`).
    pub runtime_version: Arc<OnceLock<String>>,
    /// Cancelled when the node shuts down with `--stop-pods-on-shutdown`: Ready turns
    /// False ("node is shutting down") and is reported at once.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Set once the API server has the Node not Ready for the shutdown (J3: logind's
    /// lock is released after it).
    pub shutdown_reported: watch::Sender<bool>,
    /// The pressure conditions as the eviction manager holds them; a change is reported
    /// at once.
    pub pressure: watch::Receiver<outpost_core::eviction::Pressure>,
    /// What allocatable keeps from pods (`--system-reserved`, `--kube-reserved`, hard
    /// eviction thresholds).
    pub reservation: node_status::Reservation,
    /// `--max-pods` (`maxPods`): the node's `pods` capacity and allocatable (K4).
    pub max_pods: u32,
    /// Where the node as admission sees it is published (K4): the Node as the server
    /// has it once seen, else the Node this agent would register.
    pub admission: watch::Sender<outpost_core::node_admission::Node>,
    /// J2: the certificates the node keeps (`client`, `server`), for the
    /// `CertificateExpired` condition.
    pub certificates: Vec<(&'static str, crate::certificates::Status)>,
    /// The host the machine is read from (`machine`).
    pub host: Arc<dyn crate::host::Host>,
    /// D1: the device plugins' resources, as the device manager holds them; a change is
    /// reported at once.
    pub devices: watch::Receiver<outpost_core::devices::Capacity>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot register the Node {node}: {source}{hint}", hint = hint(.source, "create nodes"))]
    Register {
        node: String,
        #[source]
        source: CallError,
    },
    #[error("the Node {node} exists but cannot be read: {source}")]
    Get {
        node: String,
        #[source]
        source: CallError,
    },
    #[error(
        "cannot set the well-known labels of the existing Node {node}: {source}{hint}",
        hint = hint(.source, "patch nodes")
    )]
    Labels {
        node: String,
        #[source]
        source: CallError,
    },
    #[error(
        "cannot update the status of the Node {node}: {source}{hint}",
        hint = hint(.source, "patch nodes/status")
    )]
    Status {
        node: String,
        #[source]
        source: CallError,
    },
    #[error("cannot encode the Node {node}: {source}")]
    Encode {
        node: String,
        #[source]
        source: serde_json::Error,
    },
}

/// What to do about a refused request: a 401, or a 403 of the authorizer ("User … cannot
/// create resource …"), is the credentials'; any other 403 is an admission plugin's
/// (NodeRestriction: labels or taints a node may not set), whose reason the server's
/// message gives (K5).
fn hint(error: &CallError, verb_resource: &str) -> String {
    match error {
        CallError::Status { code: 401, .. } => {
            format!("; check that the agent's credentials are valid and may {verb_resource}")
        }
        CallError::Status { code: 403, message, .. } if message.contains("User \"") => {
            format!("; check that the agent's credentials may {verb_resource}")
        }
        CallError::Status { code: 403, .. } => "; the API server's admission (NodeRestriction) \
            refused what the agent would write: change what its message names (--node-labels, \
            --register-with-taints)"
            .to_owned(),
        _ => String::new(),
    }
}

impl Error {
    fn call(&self) -> Option<&CallError> {
        match self {
            Error::Register { source, .. }
            | Error::Get { source, .. }
            | Error::Labels { source, .. }
            | Error::Status { source, .. } => Some(source),
            Error::Encode { .. } => None,
        }
    }
}

/// Retries of failed requests: from 1 s, doubling, up to 1 minute (jittered).
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// The node task's state between two passes.
struct NodeSync {
    context: Arc<Context>,
    kubelet_version: String,
    conditions: Conditions,
    /// The Node's status as the server last returned it; `None` until registered.
    server: Option<NodeStatus>,
    /// The Node as the server last returned it or its watch last told (its labels and
    /// taints for admission, K4).
    seen: Option<Node>,
    /// The status the last pass read (what a Node told by the watch is published with).
    read: Option<NodeStatus>,
    /// The last status reported and when.
    reported: Option<(NodeStatus, Timestamp)>,
    /// The server was seen unreachable since the last report: send once when back.
    offline_since_report: bool,
    retry: Backoff,
}

/// When the node task passes again.
enum Next {
    /// On the writers' beat (every [`node_status::STATUS_UPDATE_FREQUENCY`]).
    Beat,
    After(Duration),
}

pub async fn run(context: Arc<Context>, mut beats: Beats) {
    let mut wakeups = context.client.connectivity().wakeups();
    let mut node = NodeSync {
        context,
        kubelet_version: node_status::kubelet_version(env!("CARGO_PKG_VERSION")),
        conditions: Conditions::default(),
        server: None,
        seen: None,
        read: None,
        reported: None,
        offline_since_report: false,
        retry: RETRY,
    };
    let mut reported_shutdown = false;
    let mut pressure = node.context.node_config.pressure.clone();
    let mut devices = node.context.node_config.devices.clone();
    let mut own_node = std::pin::pin!(informer::own_node(&node.context));
    loop {
        let next = node.pass().await;
        // A beat that came during the pass is not a reason to pass again at once.
        beats.mark_unchanged();
        let retry = match next {
            Next::Beat => None,
            Next::After(delay) => Some(Instant::now() + delay),
        };
        let shutdown = node.context.node_config.shutdown.clone();
        // Kept across the Node's watch events: it remembers that the server went away.
        let mut woken = std::pin::pin!(wakeups.woken(false));
        loop {
            tokio::select! {
                Ok(()) = beats.changed(), if retry.is_none() => {}
                () = sleep_until(retry), if retry.is_some() => {}
                Ok(()) = pressure.changed() => {}
                Ok(()) = devices.changed() => {}
                _ = &mut woken => node.offline_since_report = true,
                // Once: after it, the flag is read with the machine on every pass.
                () = shutdown.cancelled(), if !reported_shutdown => reported_shutdown = true,
                // K4: a Node the watch tells is published for admission; no pass is due.
                Some(event) = own_node.next() => {
                    if let Some(seen) = informer::node_of(event) {
                        node.seen = Some(seen);
                        node.publish_read();
                    }
                    continue;
                }
            }
            break;
        }
    }
}

impl NodeSync {
    /// Reads the machine, registers or reports if due; returns when to pass again. The
    /// machine is read inline: a few small files of /proc and one statfs, every 10 s,
    /// cost less than handing them to a blocking thread (two more wakeups, and at this
    /// period a thread made and ended each time, as tokio's idle out after 10 s).
    async fn pass(&mut self) -> Next {
        let readings = machine::readings(&self.context.node_config, &self.context.node_name);
        let now = now();
        let conditions = self.conditions.observe(&readings, now);
        let reservation = &self.context.node_config.reservation;
        let status = node_status::status(&readings, conditions, reservation, &self.kubelet_version);
        self.publish(&status);
        self.read = Some(status.clone());
        if !self.context.client.connectivity().is_reachable() {
            self.offline_since_report = true;
            return Next::Beat;
        }
        let shutting_down = readings.shutting_down;
        let result = if self.server.is_none() {
            self.register(status).await.map(|()| Next::After(Duration::ZERO))
        } else {
            self.report(status, now).await.map(|()| Next::Beat)
        };
        match result {
            Ok(next) => {
                self.retry.reset();
                if shutting_down && self.server.is_some() {
                    self.context.node_config.shutdown_reported.send_replace(true);
                }
                next
            }
            Err(e) if e.call().is_some_and(CallError::is_not_found) => {
                warn!("the Node was deleted; registering it again");
                self.server = None;
                self.reported = None;
                Next::After(Duration::ZERO)
            }
            Err(e) => {
                let delay = match e.call() {
                    Some(call) => call.retry_delay(&mut self.retry),
                    None => self.retry.next_delay(fastrand::f64()),
                };
                warn!(error = %describe(&e), retry_in = ?delay, "node sync failed");
                Next::After(delay)
            }
        }
    }

    async fn register(&mut self, status: NodeStatus) -> Result<(), Error> {
        let node = registration::register(&self.context, status).await?;
        let identity = registration::node_ref(&node);
        let existing =
            node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
        if self.context.node.borrow().as_ref() != Some(&identity) {
            info!(node.uid = %identity.uid, "the Node is registered");
        }
        if !existing.is_empty() {
            self.conditions = Conditions::adopt(existing);
        }
        self.adopt(node);
        self.reported = None;
        self.context.node.send_replace(Some(identity));
        Ok(())
    }

    async fn report(&mut self, status: NodeStatus, now: Timestamp) -> Result<(), Error> {
        let last = self.reported.as_ref().map(|(s, at)| (s, *at));
        if !self.offline_since_report && !node_status::report_due(last, &status, now) {
            return Ok(());
        }
        let node = registration::patch_status(&self.context, self.server.as_ref(), &status).await?;
        self.adopt(node);
        self.reported = Some((status, now));
        self.offline_since_report = false;
        Ok(())
    }

    fn adopt(&mut self, mut node: Node) {
        self.server = Some(node.status.take().unwrap_or_default());
        self.seen = Some(node);
    }

    /// [`NodeSync::publish`] with the status the last pass read.
    fn publish_read(&self) {
        if let Some(status) = &self.read {
            self.publish(status);
        }
    }

    /// K4: the node admission sees: the Node as the server has it once seen (its
    /// labels and taints as the server has them, as kubelet's node informer), else the
    /// one this agent would register; allocatable as this pass reads it, with the
    /// resources only the server's has (extended resources someone advertised).
    fn publish(&self, status: &NodeStatus) {
        let config = &self.context.node_config;
        let local = || {
            node_status::node(
                &self.context.node_name,
                &config.labels,
                &config.taints,
                status.clone(),
            )
        };
        let mut node = self.seen.clone().unwrap_or_else(local);
        let mut allocatable = status.allocatable.clone().unwrap_or_default();
        let server = self.server.as_ref().and_then(|s| s.allocatable.as_ref());
        for (name, quantity) in server.into_iter().flatten() {
            allocatable.entry(name.clone()).or_insert_with(|| quantity.clone());
        }
        node.status = Some(NodeStatus { allocatable: Some(allocatable), ..status.clone() });
        let view = node_admission::Node::from_api(&node);
        config.admission.send_if_modified(|old| {
            if (&old.labels, &old.taints) != (&view.labels, &view.taints) {
                let taints: Vec<String> = view.taints.iter().map(taint).collect();
                info!(labels = ?view.labels, taints = ?taints, "admission sees the Node's labels and taints");
            }
            let changed = *old != view;
            if changed {
                *old = view;
            }
            changed
        });
    }
}

/// A taint as kubectl prints it: `key=value:Effect`.
fn taint(taint: &Taint) -> String {
    match &taint.value {
        Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

/// K4: the node admission sees before the node task's first pass: the Node this agent
/// would register, its allocatable read now.
pub fn initial_admission_node(config: &Config, node_name: &str) -> node_admission::Node {
    let readings = machine::readings(config, node_name);
    let version = node_status::kubelet_version(env!("CARGO_PKG_VERSION"));
    let status = node_status::status(&readings, Vec::new(), &config.reservation, &version);
    node_admission::Node::from_api(&node_status::node(
        node_name,
        &config.labels,
        &config.taints,
        status,
    ))
}

/// Now, in whole seconds (the API server keeps condition times to the second).
fn now() -> Timestamp {
    // Clock: the local wall clock, as kubelet stamps its conditions.
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> CallError {
        let reason = if code == 403 { "Forbidden" } else { "Unauthorized" }.to_owned();
        CallError::Status { code, reason, message: message.to_owned(), retry_after: None }
    }

    /// K5: a registration NodeRestriction refuses names the server's reason and what to
    /// change, not the credentials.
    #[test]
    fn k5_a_refused_registration_says_who_refused_it() {
        let admission = status(
            403,
            "nodes \"edge-1\" is forbidden: node \"edge-1\" is not allowed to set the following labels: node-role.kubernetes.io/edge",
        );
        let error = Error::Register { node: "edge-1".into(), source: admission };
        let text = error.to_string();
        assert!(text.contains("is not allowed to set the following labels"), "{text}");
        assert!(text.contains("NodeRestriction") && !text.contains("credentials"), "{text}");

        let authorizer = status(
            403,
            "nodes is forbidden: User \"system:anonymous\" cannot create resource \"nodes\" in API group \"\" at the cluster scope",
        );
        let text = Error::Register { node: "edge-1".into(), source: authorizer }.to_string();
        assert!(text.ends_with("check that the agent's credentials may create nodes"), "{text}");
        let text = Error::Status { node: "edge-1".into(), source: status(401, "Unauthorized") }
            .to_string();
        assert!(text.contains("credentials are valid and may patch nodes/status"), "{text}");
    }
}
