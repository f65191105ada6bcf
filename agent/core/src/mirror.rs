//! Mirror pods (SEMANTICS.md R1–R5): the API server's read-only copy of each running
//! static pod, and the plan that brings the server's mirror pods there. Pure: the sync
//! task observes, this module decides, the sync task writes.
//!
//! What counts as "the mirror still says what the static pod says" (R5) is
//! [`content::is_current`]; how a mirror is built (R1) is [`content::mirror_pod`].
//!
//! The plan follows kubelet (`syncPod` and `HandlePodCleanups` with its mirror client):
//! - a running static pod with no mirror gets one (R1), unless a pod that is not a
//!   mirror holds its name in the API server: that is reported, not fought;
//! - a mirror of another hash (R2), being deleted (R2) or edited through the API (R5)
//!   is deleted with grace 0 and a UID precondition, then created again;
//! - a static pod the runtime has not taken yet keeps whatever mirror it has (kubelet
//!   syncs mirrors from the pod's sync, which has not run yet);
//! - a mirror with no static pod behind it is deleted (R3), but only once every source
//!   has been seen (M9: before that, "no static pod" means "not known yet"), and not
//!   while the static pod it mirrors is still terminating (kubelet keeps the mirror of
//!   a terminating static pod so that its final status can be written).

pub mod content;

use std::collections::{BTreeMap, BTreeSet};

use crate::pod::FullName;

/// A static pod the merge wants, as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticPod {
    /// Its `kubernetes.io/config.hash` (its UID, S6).
    pub hash: String,
    /// The runtime has taken it (a worker publishes its status).
    pub running: bool,
}

/// A mirror pod as the API server has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub uid: String,
    /// Its `kubernetes.io/config.mirror`.
    pub mirror_of: String,
    /// It has a `deletionTimestamp`.
    pub deleting: bool,
    /// Its labels, annotations, owner and spec still say what the agent wrote
    /// ([`content::is_current`] against the mirror of the static pod of its name; false
    /// when there is no such static pod).
    pub current: bool,
}

/// What the planner is given.
#[derive(Debug, Clone, Default)]
pub struct World {
    /// The desired static pods by full name (pods that lost a name conflict, M11, are
    /// not here).
    pub statics: BTreeMap<FullName, StaticPod>,
    /// The hashes of static pods the runtime still runs although no source wants them
    /// any more (stopping).
    pub terminating: BTreeSet<String>,
    /// Full names a pod that is not a mirror holds in the API server.
    pub blocked: BTreeSet<FullName>,
    /// Every source has been seen (M9).
    pub synced: bool,
    /// The mirror pods in the API server, by full name.
    pub mirrors: BTreeMap<FullName, Observed>,
}

/// Why a mirror is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Its `config.mirror` is not the static pod's hash (R2).
    Outdated,
    /// It has a `deletionTimestamp` (R2).
    Deleting,
    /// It was edited through the API (R5).
    Edited,
    /// No static pod is behind it (R3).
    Orphan,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Outdated => "its config.mirror is not the static pod's hash",
            Reason::Deleting => "it is being deleted",
            Reason::Edited => "it was edited through the API server",
            Reason::Orphan => "no static pod is behind it",
        }
    }
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the mirror of the static pod `name`.
    Create { name: FullName },
    /// Delete the mirror `uid` (grace 0, UID precondition) and create it again.
    Replace { name: FullName, uid: String, reason: Reason },
    /// Delete the mirror `uid` (grace 0, UID precondition) for good.
    Delete { name: FullName, uid: String },
    /// The static pod should have a mirror but another pod holds its name.
    Blocked { name: FullName },
}

impl Action {
    pub fn name(&self) -> &FullName {
        match self {
            Action::Create { name }
            | Action::Replace { name, .. }
            | Action::Delete { name, .. }
            | Action::Blocked { name } => name,
        }
    }
}

/// The actions that bring the mirrors to one up-to-date mirror per running static pod
/// and none without a static pod, by full name.
pub fn plan(world: &World) -> Vec<Action> {
    let names: BTreeSet<&FullName> = world.statics.keys().chain(world.mirrors.keys()).collect();
    names
        .into_iter()
        .filter_map(|name| decide(world, name, world.statics.get(name), world.mirrors.get(name)))
        .collect()
}

fn decide(
    world: &World,
    name: &FullName,
    wanted: Option<&StaticPod>,
    mirror: Option<&Observed>,
) -> Option<Action> {
    let name = name.clone();
    match (wanted, mirror) {
        (Some(wanted), _) if !wanted.running => None,
        (Some(_), None) if world.blocked.contains(&name) => Some(Action::Blocked { name }),
        (Some(_), None) => Some(Action::Create { name }),
        (Some(wanted), Some(mirror)) => {
            let reason = if mirror.mirror_of != wanted.hash {
                Reason::Outdated
            } else if mirror.deleting {
                Reason::Deleting
            } else if !mirror.current {
                Reason::Edited
            } else {
                return None;
            };
            Some(Action::Replace { name, uid: mirror.uid.clone(), reason })
        }
        (None, Some(mirror)) => (world.synced && !world.terminating.contains(&mirror.mirror_of))
            .then(|| Action::Delete { name, uid: mirror.uid.clone() }),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests;
