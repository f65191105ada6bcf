//! Which API objects get which status (pure): every API pod the runtime reports on, and
//! the mirror pod of every static pod that has one.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use outpost_core::pod::{self, CONFIG_HASH, CONFIG_SEEN, FullName, Source};

use super::report;
use crate::apiserver::Mirrors;

/// One API object and the status it should have.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The API object's UID (the mirror pod's, for a static pod).
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// When the pod was created (API pods) or first seen (static pods): oldest first.
    pub created: Timestamp,
    /// `None`: nothing to report (a deleted pod that never ran here).
    pub status: Option<PodStatus>,
    /// An API pod being deleted whose containers are gone: send the final status, then
    /// delete it.
    pub finish: bool,
}

/// The targets, and when to look again for a deleted pod that never ran here.
#[derive(Debug, Default)]
pub struct Targets {
    pub list: Vec<Target>,
    pub deadline: Option<Timestamp>,
}

/// The status of each pod as last reported by the runtime, kept after the worker drops
/// it: a deleted pod's final status is made from it.
pub type LastSeen = HashMap<String, Arc<PodStatus>>;

/// The targets for the desired `pods`, the runtime's `statuses` (by the pod's own UID)
/// and the mirror pods known; updates `last_seen`.
pub fn targets(
    pods: &[(Source, Arc<Pod>)],
    statuses: &HashMap<String, Arc<PodStatus>>,
    mirrors: Option<&Mirrors>,
    last_seen: &mut LastSeen,
    now: Timestamp,
) -> Targets {
    let mut out = Targets::default();
    let desired: std::collections::HashSet<&str> = pods.iter().map(|(_, p)| pod::uid(p)).collect();
    last_seen.retain(|uid, _| desired.contains(uid.as_str()));
    for (source, pod) in pods {
        let uid = pod::uid(pod);
        let meta = &pod.metadata;
        let api_status = pod.status.as_ref();
        let mut target = Target {
            uid: uid.to_owned(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            created: Timestamp::UNIX_EPOCH,
            status: None,
            finish: false,
        };
        if *source == Source::Api {
            target.created =
                meta.creation_timestamp.as_ref().map_or(Timestamp::UNIX_EPOCH, |t| t.0);
            match (statuses.get(uid), &meta.deletion_timestamp) {
                (Some(status), _) => {
                    last_seen.insert(uid.to_owned(), status.clone());
                    target.status = Some(report::merged(status, api_status));
                }
                (None, Some(deadline)) => {
                    // The worker removed the status: the containers are gone. One that
                    // never ran here is done once its grace period is over.
                    if let Some(last) = last_seen.get(uid) {
                        let last = report::terminal(last, now);
                        target.status = Some(report::merged(&last, api_status));
                    } else if deadline.0 > now {
                        out.deadline = Some(out.deadline.map_or(deadline.0, |d| d.min(deadline.0)));
                        continue;
                    }
                    target.finish = true;
                }
                (None, None) => continue,
            }
        } else {
            let Some(status) = statuses.get(uid) else { continue };
            let Some(mirror) = mirrors.and_then(|m| m.get(&FullName::of(pod))) else { continue };
            // A stale or deleting mirror is the mirror task's to replace (R2).
            if mirror.deleting || pod::annotation(pod, CONFIG_HASH) != Some(&*mirror.mirror_of) {
                continue;
            }
            target.uid.clone_from(&mirror.uid);
            target.created = pod::annotation(pod, CONFIG_SEEN)
                .and_then(|seen| seen.parse().ok())
                .unwrap_or(Timestamp::UNIX_EPOCH);
            let mut status = report::merged(status, mirror.pod.status.as_ref());
            // X4: the mirror pod has no ephemeral containers (the API server refuses
            // them on one); those `outpost debug` adds are reported locally only.
            status.ephemeral_container_statuses = None;
            target.status = Some(status);
        }
        out.list.push(target);
    }
    out
}

#[cfg(test)]
mod tests;
