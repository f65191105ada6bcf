//! The pod status manager (kubelet's `status.Manager`): writes the status the runtime
//! reports for each API pod, and for each static pod to its mirror pod, to the API
//! server (SEMANTICS.md O3).
//!
//! - A status is sent only when it differs from the one last sent successfully, as a
//!   merge patch of `pods/{name}/status` carrying the object's UID as a precondition,
//!   so a pod replaced under the same name is never patched (409).
//! - While the API server is unreachable nothing is sent; each pod keeps only its latest
//!   status. Once it is back, each changed pod is sent once, oldest pod first, paced by
//!   the client's token bucket (after a long outage, spread over a window that grows
//!   with the time away and the refusals met: B13); a failure backs that pod off
//!   (jittered, exponential, honouring `Retry-After`) and keeps its latest status.
//!   When the server takes writes again after refusing them all for a while (a storm of
//!   403, 429 or 503: [`Connectivity::writes_accepted`](crate::apiserver::Connectivity)),
//!   every pod that backs off is sent at once rather than at its next retry.
//! - 409: the pod is re-read; still the same pod (UID) → the status is sent again in
//!   full, else (or 404) the pod is forgotten.
//! - An API pod being deleted, once its worker has stopped it and dropped its status:
//!   its final status (made from the last one seen) is sent, then the pod is deleted
//!   with grace 0 and a UID precondition, as kubelet does once its containers are gone.
//!
//! The decisions are pure: [`outpost_core::status_queue`] (coalescing, order, backoff),
//! `target` (which object gets which status) and `report` (final status, patch body).

mod report;
mod target;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, GetParams, Patch, PatchParams, Preconditions};
use kube::core::Request;
use outpost_core::backoff::Backoff;
use outpost_core::status_queue::{Action, StatusQueue};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use self::target::{LastSeen, Target};
use super::{Context, sleep_until};
use crate::apiserver::{CallError, Reconnects};

/// Each pod's retries: from 800 ms doubling to 30 s, jittered.
const BACKOFF: Backoff = Backoff::WATCH;

/// A request about one pod that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot update the status of pod {pod} in the API server: {source}")]
    Patch {
        pod: String,
        #[source]
        source: CallError,
    },
    #[error("cannot re-read pod {pod} after a conflict on its status: {source}")]
    Reread {
        pod: String,
        #[source]
        source: CallError,
    },
    #[error(
        "cannot delete pod {pod} from the API server once its containers are gone \
         (it stays Terminating until this succeeds): {source}"
    )]
    Delete {
        pod: String,
        #[source]
        source: CallError,
    },
}

impl Error {
    fn call(&self) -> &CallError {
        match self {
            Error::Patch { source, .. }
            | Error::Reread { source, .. }
            | Error::Delete { source, .. } => source,
        }
    }
}

/// Runs until aborted. Wakes on a change of what it reads (the runtime's statuses, the
/// mirror view, the merge snapshot's change feed, connectivity) and when something it
/// waits for falls due (a retry, a grace period); never on a period: kubelet's status
/// manager also goes over every pod every 10 s, in case a change came with no wake-up,
/// which the snapshot's feed rules out here.
pub async fn run(context: Arc<Context>) {
    let mut manager = Manager::new(context.clone());
    let mut statuses = context.statuses.subscribe();
    let mut mirrors = context.mirrors.subscribe();
    let mut snapshot = context.snapshot.subscribe();
    let mut connectivity = context.client.connectivity().subscribe();
    let mut writes_back = context.client.connectivity().writes_accepted();
    loop {
        statuses.mark_unchanged();
        mirrors.mark_unchanged();
        snapshot.mark_unchanged();
        connectivity.mark_unchanged();
        writes_back.mark_unchanged();
        let wake = manager.sync().await.map(|wait| Instant::now() + wait);
        tokio::select! {
            Ok(()) = statuses.changed() => {}
            Ok(()) = mirrors.changed() => {}
            Ok(()) = snapshot.changed() => {}
            Ok(()) = connectivity.changed() => {}
            // O3: a storm of refused writes is over; what backed off goes now.
            Ok(()) = writes_back.changed() => manager.queue.retry_now(),
            () = sleep_until(wake), if wake.is_some() => {}
        }
    }
}

/// What a request's outcome leaves to do.
enum Next {
    Continue,
    /// The server is unreachable: stop sending until it is back.
    Offline,
}

struct Manager {
    context: Arc<Context>,
    /// Keyed by the API object's UID, ordered by creation.
    queue: StatusQueue<String, Timestamp, PodStatus>,
    last_seen: LastSeen,
    targets: HashMap<String, Target>,
    /// Objects the server no longer has (404, replaced, deleted by us): not written
    /// again while the desired pods still list them.
    gone: HashSet<String>,
    origin: Instant,
    /// The server's returns seen, to spread what waited after a long outage.
    reconnects: Reconnects,
}

impl Manager {
    fn new(context: Arc<Context>) -> Manager {
        Manager {
            context,
            queue: StatusQueue::new(BACKOFF),
            last_seen: LastSeen::new(),
            targets: HashMap::new(),
            gone: HashSet::new(),
            origin: Instant::now(),
            reconnects: Reconnects::default(),
        }
    }

    /// After a long outage, what waits is spread over a window (B13,
    /// [`outpost_core::pace::spread_window`]): each pod's status at its own random point.
    fn spread_after_reconnect(&mut self) {
        let Some(window) = self.reconnects.next_window(&self.context.client) else { return };
        if !window.is_zero() {
            let waiting = self.queue.pending();
            info!(?window, waiting, "spreading the pod statuses that waited for the API server");
            self.queue.spread(self.origin.elapsed(), window, fastrand::f64);
        }
    }

    /// Takes in the current statuses and sends what is due (if the server is
    /// reachable). Returns how long until something else falls due.
    async fn sync(&mut self) -> Option<Duration> {
        let snapshot = self.context.snapshot.load();
        let version = self.context.statuses.version();
        let statuses = self.context.statuses.all();
        let mirrors = self.context.mirrors.current();
        // Clock: the local wall clock, for the times the statuses record.
        let now = Timestamp::now();
        let found =
            target::targets(&snapshot.pods, &statuses, mirrors.as_ref(), &mut self.last_seen, now);
        self.targets = found.list.into_iter().map(|t| (t.uid.clone(), t)).collect();
        self.gone.retain(|uid| self.targets.contains_key(uid));
        for target in self.targets.values().filter(|t| !self.gone.contains(&t.uid)) {
            if let Some(status) = &target.status {
                self.queue.update(target.uid.clone(), target.created, status.clone());
            }
            if target.finish {
                self.queue.finish(target.uid.clone(), target.created);
            }
        }
        self.queue.retain(|uid| self.targets.contains_key(uid) && !self.gone.contains(uid));
        let deadline = found.deadline.map(|d| {
            Duration::try_from(d.duration_since(now)).unwrap_or_default() + Duration::from_millis(1)
        });
        if self.context.client.connectivity().is_reachable() {
            self.spread_after_reconnect();
            while let Some((uid, action)) = self.queue.next(self.origin.elapsed()) {
                if let Next::Offline = self.perform(&uid, action).await {
                    break;
                }
            }
        }
        let backlog = crate::apiserver::StatusBacklog {
            version,
            queued: self.queue.pending(),
            due: self.queue.due(self.origin.elapsed()),
        };
        self.context.status_backlog.send_if_modified(|b| std::mem::replace(b, backlog) != backlog);
        let retry = self.queue.next_retry().map(|at| at.saturating_sub(self.origin.elapsed()));
        match (retry, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn perform(&mut self, uid: &str, action: Action<PodStatus>) -> Next {
        let Some(target) = self.targets.get(uid).cloned() else { return Next::Continue };
        let span = info_span!(
            "pod",
            pod.namespace = %target.namespace,
            pod.name = %target.name,
            pod.uid = %uid,
        );
        let result = match action {
            Action::Send(status) => self.send(&target, status).instrument(span.clone()).await,
            Action::Delete => self.delete(&target).instrument(span.clone()).await,
        };
        let _entered = span.enter();
        match result {
            Ok(()) => Next::Continue,
            Err(error) if error.call().is_unreachable() => {
                debug!(%error, "the API server went away; the status waits for it");
                Next::Offline
            }
            Err(error) => {
                let now = self.origin.elapsed();
                let wait = self.queue.failed(&target.uid, now, |b| error.call().retry_delay(b));
                warn!(error = %crate::error_chain::describe(&error), retry_in = ?wait, "pod status");
                Next::Continue
            }
        }
    }

    /// Sends `status`; a conflict re-reads the pod and, if it is the same one, sends the
    /// whole status once more.
    async fn send(&mut self, target: &Target, status: PodStatus) -> Result<(), Error> {
        let previous = self.queue.last_sent(&target.uid);
        let first = self.patch(target, previous, &status).await;
        let result = match first {
            Err(e) if e.is_conflict() => match self.reread(target).await? {
                Some(_) => {
                    self.queue.unknown(&target.uid);
                    self.patch(target, None, &status).await
                }
                None => {
                    info!("pod replaced in the API server; its status is not written");
                    self.forget(&target.uid);
                    return Ok(());
                }
            },
            other => other,
        };
        match result {
            Ok(()) => {
                debug!(phase = status.phase.as_deref(), "pod status sent");
                self.queue.sent(&target.uid, status);
                Ok(())
            }
            Err(e) if e.is_not_found() => {
                debug!("pod gone from the API server; its status is not written");
                self.forget(&target.uid);
                Ok(())
            }
            Err(source) => Err(Error::Patch { pod: target.full_name(), source }),
        }
    }

    async fn patch(
        &self,
        target: &Target,
        previous: Option<&PodStatus>,
        status: &PodStatus,
    ) -> Result<(), CallError> {
        let body = report::patch(&target.uid, previous, status);
        let request = pods(&target.namespace).patch_subresource(
            "status",
            &target.name,
            &PatchParams::default(),
            &Patch::Merge(&body),
        );
        self.context.client.send(request).await.map(drop)
    }

    /// The pod as the server has it now, if it is still the same pod.
    async fn reread(&self, target: &Target) -> Result<Option<Pod>, Error> {
        let request = pods(&target.namespace).get(&target.name, &GetParams::default());
        match self.context.client.call::<Pod>(request).await {
            Ok(pod) if pod.metadata.uid.as_deref() == Some(&target.uid) => Ok(Some(pod)),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(source) => Err(Error::Reread { pod: target.full_name(), source }),
        }
    }

    /// Deletes the pod now that its final status is in (grace 0, UID precondition).
    async fn delete(&mut self, target: &Target) -> Result<(), Error> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(target.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let request = pods(&target.namespace).delete(&target.name, &params);
        match self.context.client.send(request).await {
            Ok(_) => info!("pod terminated; deleted from the API server"),
            // Gone already, or replaced by a pod of the same name: nothing to delete.
            Err(e) if e.is_not_found() || e.is_conflict() => {}
            Err(source) => return Err(Error::Delete { pod: target.full_name(), source }),
        }
        self.forget(&target.uid);
        Ok(())
    }

    fn forget(&mut self, uid: &str) {
        self.queue.forget(&uid.to_owned());
        self.gone.insert(uid.to_owned());
    }
}

impl Target {
    fn full_name(&self) -> String {
        format!("{}/{} (uid {})", self.namespace, self.name, self.uid)
    }
}

fn pods(namespace: &str) -> Request {
    Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
}
