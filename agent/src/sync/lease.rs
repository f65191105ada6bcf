//! The node Lease in `kube-node-lease`, as kubelet's lease controller keeps it: holder
//! and name = the node, 40 s duration (`nodeLeaseDurationSeconds`), renewed every 10 s,
//! a quarter of it (on the writers' [beat](super::beat); a longer Lease on every n-th
//! beat, [`beats_per_renewal`]) by an update of the latest Lease it has (a 409 Conflict reads it
//! again, a 404 creates it), with an ownerReference to the Node once its UID is known.
//!
//! While the API server is unreachable the lease is not renewed on the 10 s tick; the
//! renewal is then the agent's probe, retried with jittered backoff (1 s up to 10 s), so
//! the agent notices the server coming back even with no watch open. It tries at once
//! when the kernel reports a network change (the uplink back), and the lease is renewed
//! at once as soon as anything else finds the server reachable again (the API source's
//! watch, another writer).
//!
//! A renewal that gets no answer in 10 s (kubelet's heartbeat client timeout: the
//! status update frequency, at most the lease duration) counts as the server being
//! unreachable: a connection that died with the uplink gives no error of its own.
//!
//! A renewal that failed (refused for load, unanswered, a 5xx) is retried from the
//! Lease the agent holds, without reading it first: only a 409 Conflict says the held
//! copy is stale. The Lease has no client-side bucket (kubelet's heartbeat client), and
//! a `Retry-After` holds its retry for at most the renew interval: the server asked
//! for no more than the pace the Lease keeps anyway, and a longer hold would let it
//! lapse (B13: behind a 200 QPS server, 34 of 1,000 nodes' Leases were never renewed).

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::core::Request;
use kube::core::params::{GetParams, PostParams};
use outpost_core::backoff::Backoff;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::beat::Beats;
use super::{Context, NodeRef, sleep_until};
use crate::apiserver::{ApiClient, CallError};
use crate::error_chain::describe;

pub const NAMESPACE: &str = "kube-node-lease";
/// kubelet's default `nodeLeaseDurationSeconds`, and the shortest the agent takes.
pub const DURATION_SECONDS: i32 = outpost_core::node_status::NODE_LEASE_DURATION_SECONDS;
/// kubelet renews at a quarter of the default duration: on the writers' beat.
pub const RENEW_INTERVAL: Duration = super::beat::PERIOD;
/// The probe's backoff while the server is unreachable.
const PROBE: Backoff = Backoff::new(Duration::from_secs(1), RENEW_INTERVAL);
/// How long a renewal may wait for its answers (kubelet's heartbeat client timeout).
const TIMEOUT: Duration = RENEW_INTERVAL;
/// Updates tried in a row after conflicts (kubelet's `maxUpdateRetries`).
const MAX_UPDATE_TRIES: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot {verb} the Lease {NAMESPACE}/{lease}: {source}; check that the agent's credentials may {verb} leases in {NAMESPACE}"
    )]
    Call {
        verb: &'static str,
        lease: String,
        #[source]
        source: CallError,
    },
    #[error("cannot encode the Lease {NAMESPACE}/{lease}: {source}")]
    Encode {
        lease: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the Lease {NAMESPACE}/{lease} kept changing under the agent ({MAX_UPDATE_TRIES} conflicts in a row)"
    )]
    Conflicts { lease: String },
    #[error(
        "the API server did not answer the renewal of the Lease {NAMESPACE}/{lease} within {TIMEOUT:?}"
    )]
    Timeout { lease: String },
}

impl Error {
    /// When to try again: the backoff, or the server's `Retry-After` if longer, but
    /// never later than the renew interval.
    fn retry_delay(&self, backoff: &mut Backoff) -> Duration {
        let delay = match self {
            Error::Call { source, .. } => source.retry_delay(backoff),
            Error::Encode { .. } | Error::Conflicts { .. } | Error::Timeout { .. } => {
                backoff.next_delay(fastrand::f64())
            }
        };
        delay.min(RENEW_INTERVAL)
    }
}

/// How many beats apart the Lease of `duration_seconds` is renewed: the most whole
/// beats within a quarter of the duration (kubelet's renew interval), at least one.
pub fn beats_per_renewal(duration_seconds: i32) -> u64 {
    let quarter = Duration::from_secs(u64::try_from(duration_seconds.max(0)).unwrap_or(0)) / 4;
    (quarter.as_millis() / RENEW_INTERVAL.as_millis()).max(1) as u64
}

/// `lease` as this renewal writes it: held by the node for `duration_seconds` from
/// `now`, owned by the Node when its identity is known (an ownerReference to an older
/// Node is replaced).
pub fn renewed(
    mut lease: Lease,
    node_name: &str,
    node: Option<&NodeRef>,
    duration_seconds: i32,
    now: Timestamp,
) -> Lease {
    lease.metadata.name = Some(node_name.to_owned());
    lease.metadata.namespace = Some(NAMESPACE.to_owned());
    let spec = lease.spec.get_or_insert_default();
    spec.holder_identity = Some(node_name.to_owned());
    spec.lease_duration_seconds = Some(duration_seconds);
    spec.renew_time = Some(MicroTime(now));
    if let Some(node) = node {
        let owners = lease.metadata.owner_references.get_or_insert_default();
        if !owners.iter().any(|o| o.kind == "Node" && o.uid == node.uid) {
            owners.retain(|o| !(o.kind == "Node" && o.api_version == "v1"));
            owners.push(OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Node".to_owned(),
                name: node.name.clone(),
                uid: node.uid.clone(),
                ..OwnerReference::default()
            });
        }
    }
    lease
}

/// A Lease with nothing but its name (before the first read).
fn named(node_name: &str) -> Lease {
    Lease {
        metadata: ObjectMeta { name: Some(node_name.to_owned()), ..ObjectMeta::default() },
        spec: Some(LeaseSpec::default()),
    }
}

struct LeaseSync {
    context: Arc<Context>,
    /// The agent's heartbeat client: no client-side bucket (kubelet's, QPS -1).
    client: ApiClient,
    /// The latest Lease the server returned (kept when a renewal fails for any reason
    /// but a conflict); `None`: read it first.
    latest: Option<Lease>,
}

pub async fn run(context: Arc<Context>, mut beats: Beats) {
    context.client.connectivity().set_probed();
    let mut wakeups = context.client.connectivity().wakeups();
    let mut node = context.node.subscribe();
    let duration = context.lease_duration_seconds;
    // A beat that comes less than half a beat before the renew interval is up (after a
    // renewal off the beat, a retry) is left to the next.
    let due = RENEW_INTERVAL * u32::try_from(beats_per_renewal(duration)).unwrap_or(1)
        - RENEW_INTERVAL / 2;
    let client = context.client.heartbeat();
    let mut lease = LeaseSync { context, client, latest: None };
    let mut probe = PROBE;
    loop {
        let result = match tokio::time::timeout(TIMEOUT, lease.renew()).await {
            Ok(result) => result,
            Err(_) => Err(lease.timed_out()),
        };
        let renewed = Instant::now();
        let probing = result.is_err();
        // `None`: renewed; the next renewal is on the writers' beat.
        let retry = match result {
            Ok(()) => {
                probe.reset();
                None
            }
            Err(e) => {
                let delay = e.retry_delay(&mut probe);
                if lease.context.client.connectivity().is_reachable() {
                    warn!(error = %describe(&e), retry_in = ?delay, "cannot renew the node lease");
                } else {
                    debug!(error = %describe(&e), retry_in = ?delay, "the API server is still unreachable");
                }
                Some(renewed + delay)
            }
        };
        node.mark_unchanged();
        loop {
            tokio::select! {
                () = sleep_until(retry), if retry.is_some() => break,
                // Every 10 s (every n-th beat for a longer Lease).
                Ok(()) = beats.changed(), if retry.is_none() => {
                    if renewed.elapsed() >= due {
                        break;
                    }
                }
                // Found back by another request; or, while probing, the uplink may be
                // back: the probe goes now rather than at its backoff's end.
                _ = wakeups.woken(probing) => break,
                // A (new) Node UID: the ownerReference is set at once.
                Ok(()) = node.changed() => break,
            }
        }
    }
}

impl LeaseSync {
    /// A renewal that got no answer in time: the server is taken as unreachable. The
    /// next renewal updates the held Lease again (if the lost update landed, its 409
    /// reads the Lease first).
    fn timed_out(&mut self) -> Error {
        let error = Error::Timeout { lease: self.context.node_name.clone() };
        self.context.client.connectivity().unreachable(&error.to_string());
        error
    }

    async fn renew(&mut self) -> Result<(), Error> {
        let name = self.context.node_name.clone();
        for _ in 0..MAX_UPDATE_TRIES {
            let current = match &self.latest {
                Some(lease) => lease.clone(),
                None => match self.get(&name).await? {
                    Some(lease) => self.latest.insert(lease).clone(),
                    None => {
                        self.latest = Some(self.create(&name).await?);
                        info!("created the node lease");
                        return Ok(());
                    }
                },
            };
            let node = self.context.node.borrow().clone();
            let duration = self.context.lease_duration_seconds;
            // Clock: the local wall clock, as kubelet writes `renewTime` (the node lifecycle controller
            // takes a change of it as the heartbeat, whatever its value); when to renew is monotonic.
            let lease = renewed(current, &name, node.as_ref(), duration, Timestamp::now());
            let body = serde_json::to_vec(&lease)
                .map_err(|source| Error::Encode { lease: name.clone(), source })?;
            let request = Self::request().replace(&name, &PostParams::default(), body);
            match self.client.call::<Lease>(request).await {
                Ok(updated) => {
                    self.latest = Some(updated);
                    return Ok(());
                }
                // Stale: read the latest and update that. Deleted: created on the next try.
                Err(e) if e.is_conflict() || e.is_not_found() => {
                    self.latest = None;
                    continue;
                }
                // Kept: the next renewal updates the held copy again.
                Err(source) => return Err(Error::Call { verb: "update", lease: name, source }),
            }
        }
        Err(Error::Conflicts { lease: name })
    }

    fn request() -> Request {
        Request::new(format!("/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"))
    }

    async fn get(&self, name: &str) -> Result<Option<Lease>, Error> {
        let request = Self::request().get(name, &GetParams::default());
        match self.client.call::<Lease>(request).await {
            Ok(lease) => Ok(Some(lease)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(source) => Err(Error::Call { verb: "get", lease: name.to_owned(), source }),
        }
    }

    async fn create(&self, name: &str) -> Result<Lease, Error> {
        let node = self.context.node.borrow().clone();
        let duration = self.context.lease_duration_seconds;
        // Clock: the local wall clock, as in `renew`.
        let lease = renewed(named(name), name, node.as_ref(), duration, Timestamp::now());
        let body = serde_json::to_vec(&lease)
            .map_err(|source| Error::Encode { lease: name.to_owned(), source })?;
        let request = Self::request().create(&PostParams::default(), body);
        self.client.call::<Lease>(request).await.map_err(|source| Error::Call {
            verb: "create",
            lease: name.to_owned(),
            source,
        })
    }
}
