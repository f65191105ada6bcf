//! Mirror pods (SEMANTICS.md R1–R5): keeps one up-to-date mirror pod in the API server
//! per running static pod, and none else. The decisions are `outpost_core::mirror`'s;
//! this task observes (merge snapshot, runtime statuses, the API source's
//! [`MirrorView`](crate::apiserver::MirrorView)), plans and writes, only while the API
//! server is reachable (O3), backing off on errors.
//!
//! It wakes on every change of the mirror view, of the merge snapshot (its change feed),
//! of the runtime's statuses and of connectivity, and when something it remembers for a
//! while expires (a write the view has not shown yet, a name held by another pod); never
//! on a period, so an idle node costs it nothing (kubelet polls on its 2 s housekeeping).

mod pending;
mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use outpost_core::backoff::Backoff;
use outpost_core::mirror::content::{Owner, is_current, mirror_pod};
use outpost_core::mirror::{Action, Observed, StaticPod, World, plan};
use outpost_core::pod::{self, CONFIG_HASH, FullName, Source};
use tracing::{Instrument, debug, info, info_span, warn};

use self::pending::Pending;
use self::write::Created;
use super::{Context, NodeRef};
use crate::error_chain::describe;

/// How long a pod that is not a mirror is believed to hold a name after a create met it
/// (it may be on another node, out of the API source's sight).
const BLOCKED_FOR: Duration = Duration::from_secs(60);

pub async fn run(context: Arc<Context>) {
    let node = context.registered_node().await;
    info!(node.uid = node.uid, "keeping the mirror pods of static pods");
    Mirrors::new(context, node).run().await;
}

struct Mirrors {
    context: Arc<Context>,
    node: NodeRef,
    pending: Pending,
    /// Names found held by a pod that is not a mirror, and when.
    held: BTreeMap<FullName, Instant>,
    /// Names reported blocked (a warning once, until the name is free).
    warned: BTreeSet<FullName>,
    backoff: Backoff,
    /// How many running static pods had their up-to-date mirror when that was last
    /// logged.
    in_sync: Option<usize>,
}

/// One pass's inputs: the plan's world and each static pod's desired mirror.
struct Observation {
    world: World,
    desired: BTreeMap<FullName, Pod>,
}

impl Mirrors {
    fn new(context: Arc<Context>, node: NodeRef) -> Mirrors {
        Mirrors {
            context,
            node,
            pending: Pending::default(),
            held: BTreeMap::new(),
            warned: BTreeSet::new(),
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(60)),
            in_sync: None,
        }
    }

    async fn run(mut self) {
        let mut view = self.context.mirrors.subscribe();
        let mut snapshot = self.context.snapshot.subscribe();
        let mut statuses = self.context.statuses.subscribe();
        let connectivity = self.context.client.connectivity().clone();
        let mut reachable = connectivity.subscribe();
        loop {
            view.borrow_and_update();
            snapshot.borrow_and_update();
            statuses.borrow_and_update();
            reachable.borrow_and_update();
            if connectivity.is_reachable()
                && let Some(delay) = self.sync().await
            {
                tokio::time::sleep(delay).await;
                continue;
            }
            let expiry = self.next_expiry();
            tokio::select! {
                _ = view.changed() => {}
                _ = snapshot.changed() => {}
                _ = statuses.changed() => {}
                _ = reachable.changed() => {}
                () = sleep_until(expiry), if expiry.is_some() => {}
            }
        }
    }

    /// When the first thing remembered for a while expires: a pending write (the view is
    /// believed again) or a held name (it may be free again).
    fn next_expiry(&self) -> Option<Instant> {
        let held = self.held.values().map(|at| *at + BLOCKED_FOR);
        // Just past the expiry: an entry is dropped once older than its limit.
        held.chain(self.pending.next_expiry()).min().map(|at| at + Duration::from_millis(1))
    }

    /// One pass: plan and write. Returns the delay before the next pass after an error.
    async fn sync(&mut self) -> Option<Duration> {
        let observation = self.observe()?;
        let actions = plan(&observation.world);
        self.report_blocked(&actions);
        self.report_in_sync(&observation.world, &actions);
        for action in actions {
            if !self.context.client.connectivity().is_reachable() {
                return None;
            }
            let name = action.name().clone();
            let desired = observation.desired.get(&name);
            let span = info_span!(
                "mirror_pod",
                pod.namespace = name.namespace,
                pod.name = name.name,
                pod.uid = desired.and_then(|p| pod::annotation(p, CONFIG_HASH)).unwrap_or_default(),
            );
            if let Err(error) = self.act(&action, desired).instrument(span.clone()).await {
                self.pending.forget(&name);
                let call = error.call();
                if call.is_some_and(crate::apiserver::CallError::is_unreachable) {
                    return None;
                }
                let delay = match call {
                    Some(call) => call.retry_delay(&mut self.backoff),
                    None => self.backoff.next_delay(fastrand::f64()),
                };
                span.in_scope(|| warn!(error = %describe(&error), ?delay, "mirror pod not synced"));
                return Some(delay);
            }
        }
        self.backoff.reset();
        None
    }

    async fn act(&mut self, action: &Action, desired: Option<&Pod>) -> Result<(), write::Error> {
        let client = &self.context.client;
        match (action, desired) {
            (Action::Delete { name, uid }, _) => {
                info!(mirror.uid = uid, "deleting the mirror pod: no static pod is behind it");
                if write::delete(client, name, uid).await? {
                    self.pending.deleted(name, uid, Instant::now());
                }
            }
            (Action::Replace { name, uid, reason }, Some(desired)) => {
                info!(mirror.uid = uid, reason = reason.as_str(), "replacing the mirror pod");
                let deleted = write::delete(client, name, uid).await?;
                if deleted {
                    self.pending.deleted(name, uid, Instant::now());
                }
                self.create(name, desired, deleted.then(|| uid.clone())).await?;
            }
            (Action::Create { name }, Some(desired)) => {
                info!("creating the mirror pod");
                self.create(name, desired, None).await?;
            }
            (Action::Blocked { .. } | Action::Replace { .. } | Action::Create { .. }, _) => {}
        }
        Ok(())
    }

    async fn create(
        &mut self,
        name: &FullName,
        desired: &Pod,
        deleted: Option<String>,
    ) -> Result<(), write::Error> {
        match write::create(&self.context.client, name, desired).await? {
            Created::Mirror(mirror) => {
                debug!(mirror.uid = mirror.uid, "mirror pod in place");
                self.pending.created(name, deleted, mirror, Instant::now());
            }
            Created::Blocked => {
                warn!(
                    pod.namespace = name.namespace,
                    pod.name = name.name,
                    "another pod holds the static pod's name in the API server (not this node's \
                     mirror pod); no mirror pod is created until it is gone (rename the static pod \
                     or delete that pod)"
                );
                self.held.insert(name.clone(), Instant::now());
            }
            Created::Gone => self.pending.forget(name),
        }
        Ok(())
    }

    /// Warns once per name held by a pod that is not a mirror.
    fn report_blocked(&mut self, actions: &[Action]) {
        let blocked: BTreeSet<&FullName> = actions
            .iter()
            .filter(|a| matches!(a, Action::Blocked { .. }))
            .map(Action::name)
            .collect();
        for name in &blocked {
            if !self.warned.contains(*name) {
                warn!(
                    pod.namespace = name.namespace,
                    pod.name = name.name,
                    "a pod that is not a mirror pod holds the static pod's name in the API server; \
                     no mirror pod is created until it is gone (rename the static pod or delete that pod)"
                );
            }
        }
        self.warned = blocked.into_iter().cloned().collect();
    }

    /// Logs each time a pass finds nothing to do for a different number of mirrored
    /// running static pods.
    fn report_in_sync(&mut self, world: &World, actions: &[Action]) {
        if actions.iter().any(|a| !matches!(a, Action::Blocked { .. })) {
            self.in_sync = None;
            return;
        }
        let mirrored = world
            .statics
            .iter()
            .filter(|(name, s)| s.running && world.mirrors.contains_key(*name))
            .count();
        if self.in_sync != Some(mirrored) {
            info!(mirrored, "mirror pods in sync");
            self.in_sync = Some(mirrored);
        }
    }

    /// What the plan needs, or `None` before the API source's first list.
    fn observe(&mut self) -> Option<Observation> {
        let view = self.context.mirrors.current()?;
        let snapshot = self.context.snapshot.load();
        let statuses = self.context.statuses.all();
        let now = Instant::now();
        let owner = Owner { name: &self.node.name, uid: &self.node.uid };
        let mut world = World { synced: snapshot.synced(), ..World::default() };
        let mut desired = BTreeMap::new();
        for (source, pod) in &snapshot.pods {
            let name = FullName::of(pod);
            if !source.is_static() {
                world.blocked.insert(name);
                continue;
            }
            let hash = pod::annotation(pod, CONFIG_HASH).unwrap_or(pod::uid(pod)).to_owned();
            let running = statuses.contains_key(pod::uid(pod));
            world.statics.insert(name.clone(), StaticPod { hash, running });
            desired.insert(name, mirror_pod(pod, &owner));
        }
        let wanted: BTreeSet<&str> = snapshot.pods.iter().map(|(_, p)| pod::uid(p)).collect();
        world.terminating =
            statuses.keys().filter(|uid| !wanted.contains(uid.as_str())).cloned().collect();
        let api_conflicts = snapshot.conflicts.iter().filter(|c| c.source == Source::Api);
        world.blocked.extend(api_conflicts.map(|c| c.full_name.clone()));
        self.held.retain(|_, at| now.saturating_duration_since(*at) < BLOCKED_FOR);
        world.blocked.extend(self.held.keys().cloned());
        let seen = view
            .iter()
            .map(|(name, m)| {
                let current = desired.get(name).is_some_and(|d| is_current(d, &m.pod));
                let observed = Observed {
                    uid: m.uid.clone(),
                    mirror_of: m.mirror_of.clone(),
                    deleting: m.deleting,
                    current,
                };
                (name.clone(), observed)
            })
            .collect();
        world.mirrors = self.pending.overlay(seen, now);
        Some(Observation { world, desired })
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}
