//! The model's pods: a runtime where containers start at once and exit on demand, seen
//! through kubelet's PLEG (`pkg/kubelet/pleg/generic.go`, a relist every second), and
//! kubelet's status manager (`pkg/kubelet/status/status_manager.go`).
//!
//! - A pod bound to the node (from the pods reflector) is created: its first status is
//!   `Pending` with its containers `ContainerCreating`; the next PLEG relist sees them
//!   running (`Running`, ready, started).
//! - [`Pods::exit`] ends a container; the next relist reports it terminated (not
//!   ready) and restarts it at once (the first restart has no CrashLoopBackOff); the
//!   one after reports it running again with `restartCount` + 1 and `lastState`
//!   terminated with the exit code.
//! - A pod being deleted (its `deletionTimestamp` set) is killed: its containers end
//!   (exit 0), and once that status is written the status manager deletes the pod
//!   (grace period 0, the pod's uid as precondition).
//! - The status manager keeps each pod's latest status with a version; each change
//!   wakes it (`podStatusChannel`) and a 10 s tick (`syncPeriod`) retries what is not
//!   written. For each pod behind, one by one, no coalescing across pods: GET the pod,
//!   then PATCH `pods/status` with the difference (nothing when there is none). A
//!   failed GET or PATCH leaves the status pending for the next tick.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::client::{self, Client, Error};
use super::node::sleep;
use super::patch;
use super::reflector::Store;
use status::{pod_status, ready};

mod status;

#[cfg(test)]
mod tests;

/// The PLEG's relist period (`genericPlegRelistPeriod`).
const PLEG_RELIST_PERIOD: Duration = Duration::from_secs(1);
/// The status manager's `syncPeriod`.
const STATUS_SYNC_PERIOD: Duration = Duration::from_secs(10);

/// A container, as the runtime has it and as the PLEG last reported it.
#[derive(Debug, Clone, PartialEq)]
enum Container {
    /// Created, not yet seen running.
    Creating,
    Running {
        started_at: String,
    },
    /// Exited; the PLEG has not seen it yet.
    Exited {
        code: u32,
        started_at: String,
        finished_at: String,
    },
    /// Seen exited and restarted; the PLEG sees it running at its next relist.
    Restarting {
        started_at: String,
    },
    /// Killed for the pod's deletion (seen by the next relist).
    Killed {
        started_at: String,
        finished_at: String,
    },
    /// Seen ended for good.
    Terminated {
        code: u32,
        started_at: String,
        finished_at: String,
    },
}

#[derive(Debug, Clone)]
struct ContainerState {
    name: String,
    image: String,
    state: Container,
    restart_count: u32,
    /// The exit code and times of the previous run.
    last: Option<(u32, String, String)>,
}

/// One pod on the node.
#[derive(Debug, Clone)]
struct Pod {
    namespace: String,
    name: String,
    uid: String,
    qos_class: Value,
    start_time: String,
    pod_ip: String,
    containers: Vec<ContainerState>,
    deleting: bool,
    /// Since when the pod is (not) ready.
    ready_since: String,
    /// The latest status and its version; the version the server has.
    status: Value,
    version: u64,
    written: u64,
}

/// The node's pods and their statuses.
#[derive(Debug)]
pub struct Pods {
    node_index: usize,
    pods: Mutex<BTreeMap<String, Pod>>,
    next_ip: Mutex<u32>,
    changed: Notify,
}

impl Pods {
    pub fn new(node_index: usize) -> Arc<Pods> {
        Arc::new(Pods {
            node_index,
            pods: Mutex::default(),
            next_ip: Mutex::new(1),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Pod>> {
        self.pods.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the pods reflector holds now (kubelet's pod config): new pods start,
    /// deleted ones are killed, gone ones are forgotten.
    pub fn sync(&self, store: &Store) {
        let mut pods = self.lock();
        pods.retain(|key, _| store.contains_key(key));
        let mut woke = false;
        for (key, object) in store {
            let uid = object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
            let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
            let known = pods.get(key).is_some_and(|pod| pod.uid == uid);
            if !known {
                if deleting {
                    continue;
                }
                let pod = self.admit(object);
                pods.insert(key.clone(), pod);
                woke = true;
            } else if let Some(pod) = pods.get_mut(key)
                && deleting
                && !pod.deleting
            {
                pod.deleting = true;
                let (now, _) = client::now();
                for container in &mut pod.containers {
                    let started_at = match &container.state {
                        Container::Running { started_at }
                        | Container::Restarting { started_at } => started_at.clone(),
                        _ => now.clone(),
                    };
                    container.state = Container::Killed { started_at, finished_at: now.clone() };
                }
            }
        }
        drop(pods);
        if woke {
            self.changed.notify_one();
        }
    }

    /// A new pod: its containers being created, its first status.
    fn admit(&self, object: &Value) -> Pod {
        let (now, _) = client::now();
        let containers = object
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| ContainerState {
                name: c["name"].as_str().unwrap_or_default().to_owned(),
                image: c["image"].as_str().unwrap_or_default().to_owned(),
                state: Container::Creating,
                restart_count: 0,
                last: None,
            })
            .collect();
        let ip = {
            let mut next = self.next_ip.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let ip = *next;
            *next += 1;
            ip
        };
        let meta = |field: &str| {
            object
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let mut pod = Pod {
            namespace: meta("namespace").to_owned(),
            name: meta("name").to_owned(),
            uid: meta("uid").to_owned(),
            qos_class: object.pointer("/status/qosClass").cloned().unwrap_or(json!("BestEffort")),
            start_time: now.clone(),
            pod_ip: format!(
                "10.{}.{}.{}",
                (self.node_index >> 8) & 0xff,
                self.node_index & 0xff,
                ip % 250 + 2
            ),
            containers,
            deleting: false,
            ready_since: now,
            status: Value::Null,
            version: 0,
            written: 0,
        };
        pod.status = pod_status(&pod);
        pod.version = 1;
        pod
    }

    /// Ends container `container` of `namespace/name` with `code`; false when no such
    /// container runs.
    pub fn exit(&self, namespace: &str, name: &str, container: &str, code: u32) -> bool {
        let mut pods = self.lock();
        let Some(pod) = pods.get_mut(&format!("{namespace}/{name}")) else { return false };
        let Some(state) = pod.containers.iter_mut().find(|c| c.name == container) else {
            return false;
        };
        let Container::Running { started_at } = &state.state else { return false };
        let (now, _) = client::now();
        state.state = Container::Exited { code, started_at: started_at.clone(), finished_at: now };
        true
    }

    /// One PLEG relist: each container moves one step, and a pod whose status changed
    /// gets a new version.
    fn relist(&self) {
        let (now, _) = client::now();
        let mut woke = false;
        for pod in self.lock().values_mut() {
            let ready_before = ready(pod);
            for container in &mut pod.containers {
                container.state = match std::mem::replace(&mut container.state, Container::Creating)
                {
                    Container::Creating => Container::Running { started_at: now.clone() },
                    Container::Exited { code, started_at, finished_at } => {
                        container.last = Some((code, started_at.clone(), finished_at.clone()));
                        if pod.deleting {
                            Container::Terminated { code, started_at, finished_at }
                        } else {
                            Container::Restarting { started_at: now.clone() }
                        }
                    }
                    Container::Restarting { started_at } => {
                        container.restart_count += 1;
                        Container::Running { started_at }
                    }
                    Container::Killed { started_at, finished_at } => {
                        Container::Terminated { code: 0, started_at, finished_at }
                    }
                    other => other,
                };
            }
            if ready(pod) != ready_before {
                pod.ready_since = now.clone();
            }
            let status = pod_status(pod);
            if status != pod.status {
                pod.status = status;
                pod.version += 1;
                woke = true;
            }
        }
        if woke {
            self.changed.notify_one();
        }
    }

    /// The pods whose latest status the server does not have: (key, version, status).
    fn behind(&self) -> Vec<(String, u64, Pod)> {
        self.lock()
            .iter()
            .filter(|(_, pod)| pod.version > pod.written)
            .map(|(key, pod)| (key.clone(), pod.version, pod.clone()))
            .collect()
    }

    fn written(&self, key: &str, uid: &str, version: u64) {
        if let Some(pod) = self.lock().get_mut(key)
            && pod.uid == uid
        {
            pod.written = pod.written.max(version);
        }
    }
}

/// The PLEG, until stopped.
pub async fn run_pleg(pods: Arc<Pods>, stop: CancellationToken) {
    while sleep(&stop, PLEG_RELIST_PERIOD).await {
        pods.relist();
    }
}

/// The status manager, until stopped.
pub async fn run_status_manager(client: Client, pods: Arc<Pods>, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = pods.changed.notified() => {}
            () = tokio::time::sleep(STATUS_SYNC_PERIOD) => {}
            () = stop.cancelled() => return,
        }
        for (key, version, pod) in pods.behind() {
            match sync_pod(&client, &pod).await {
                Ok(()) => pods.written(&key, &pod.uid, version),
                Err(Error::Stopped { .. }) => return,
                Err(error) => {
                    debug!(pod = %key, %error, "status write failed, kept for the next sync")
                }
            }
        }
    }
}

/// `syncPod`: GET the pod, PATCH its status when it differs, and delete a terminated
/// pod that is being deleted.
async fn sync_pod(client: &Client, pod: &Pod) -> Result<(), Error> {
    let path = format!("/api/v1/namespaces/{}/pods/{}", pod.namespace, pod.name);
    let current = match client.get(&path).await {
        Err(error) if error.is_not_found() => return Ok(()),
        current => current?,
    };
    if current.pointer("/metadata/uid").and_then(Value::as_str) != Some(pod.uid.as_str()) {
        return Ok(());
    }
    if let Some(diff) = patch::merge_diff(&current["status"], &pod.status) {
        let body = json!({ "metadata": { "uid": pod.uid }, "status": diff });
        client.merge_patch(&format!("{path}/status"), &body).await?;
    }
    let finished = pod.containers.iter().all(|c| matches!(c.state, Container::Terminated { .. }));
    if pod.deleting && finished {
        let options = json!({
            "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
            "preconditions": { "uid": pod.uid },
        });
        match client.delete(&path, &options).await {
            Err(error) if error.is_not_found() => {}
            deleted => {
                deleted?;
            }
        }
    }
    Ok(())
}
