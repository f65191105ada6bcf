//! The merge core: kubelet's PodConfig/podStorage contract (SEMANTICS.md M1–M11).
//!
//! [`PodStore`] keeps, per source, the pods that source last said exist, keyed by UID,
//! and turns each [`SourceUpdate`] into ordered [`PodDelta`]s. It is a pure function of
//! (state, update, now): no IO, no clock, no async. A delta hands on the very `Arc<Pod>`
//! the source produced; pods are compared by their precomputed [`Fingerprint`]s, so an
//! unchanged pod costs a hash lookup and two integer compares.
//!
//! Beyond kubelet (M11): when several pods claim one full name (namespace/name), exactly
//! one of them is *active* — static sources before `api`, then first seen — and only the
//! active pod reaches the pod workers. The others are kept and reported as conflicts, and
//! the next in line becomes active (ADD) when the winner goes away.
//!
//! [`Fingerprint`]: crate::pod::Fingerprint

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::pod::{self, CONFIG_MIRROR, CONFIG_SEEN, CONFIG_SOURCE, FullName, Source, SourcePod};

/// What a source says with one update (kubelet's `PodUpdate.Op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Op {
    /// The complete list of the source's pods; anything not in it is removed (M6).
    Set,
    /// Upsert (kubelet treats ADD, UPDATE and DELETE alike: the diff decides the delta).
    Add,
    /// Upsert.
    Update,
    /// Upsert of pods being deleted gracefully (their `deletionTimestamp` is set).
    Delete,
    /// Forget these pods, by UID (M7: unknown UIDs are ignored).
    Remove,
}

/// One message from a source to the merge.
#[derive(Debug, Clone)]
pub struct SourceUpdate {
    pub source: Source,
    pub op: Op,
    pub pods: Vec<SourcePod>,
}

/// What changed for the pod workers. Declared in the order of M8, which `Ord` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DeltaOp {
    Remove,
    Add,
    Update,
    Delete,
    Reconcile,
}

/// A change to a desired pod, carrying the source's own `Arc<Pod>`.
#[derive(Debug, Clone)]
pub struct PodDelta {
    pub op: DeltaOp,
    pub source: Source,
    pub pod: Arc<Pod>,
}

/// A pod that is not run because another pod holds its full name (M2, M11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    pub full_name: FullName,
    pub source: Source,
    pub uid: String,
    pub winner_source: Source,
    pub winner_uid: String,
}

/// The outcome of one [`PodStore::apply`].
#[derive(Debug, Default)]
pub struct Merged {
    /// In M8 order: REMOVE, ADD, UPDATE, DELETE, RECONCILE; within an op, in the order
    /// the update listed the pods (removals by SET in the order the pods were first seen).
    pub deltas: Vec<PodDelta>,
    /// Pods dropped from this update because an earlier one in it had the same full name (M2).
    pub duplicates: Vec<Conflict>,
}

#[derive(Debug)]
struct Entry {
    pod: SourcePod,
    name: FullName,
    /// When the store first saw this UID from this source; orders M11's "first seen wins".
    seq: u64,
    /// The SET generation that last mentioned this pod (M6 sweep).
    generation: u64,
}

#[derive(Debug, Default)]
struct SourceState {
    set_seen: bool,
    pods: HashMap<String, Entry>,
    /// Duplicates dropped from the source's last update (M2), kept for reporting.
    duplicates: Vec<Conflict>,
}

/// Who may run under a full name; lower ranks win (M11).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    from_api: bool,
    seq: u64,
    source: Source,
    uid: String,
}

/// How a pod's entry changed within one apply, before M11 decides what the workers see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Added,
    Updated,
    Deleted,
    Reconciled,
    Removed,
}

/// The merge core's state. One owner; readers get snapshots built from [`PodStore::pods`].
#[derive(Debug, Default)]
pub struct PodStore {
    configured: BTreeSet<Source>,
    states: HashMap<Source, SourceState>,
    /// Candidates for each full name, best first.
    names: HashMap<FullName, Vec<Candidate>>,
    next_seq: u64,
    generation: u64,
}

/// Bookkeeping for one apply: which names were touched, who held them before, what changed.
#[derive(Debug, Default)]
struct Touched {
    order: Vec<FullName>,
    before: HashMap<FullName, Option<(Source, String, Arc<Pod>)>>,
    changes: HashMap<(Source, String), Change>,
}

impl PodStore {
    /// A store expecting these sources; it is synced once each has sent a SET (M9).
    pub fn new(sources: impl IntoIterator<Item = Source>) -> PodStore {
        PodStore {
            configured: sources.into_iter().collect(),
            ..PodStore::default()
        }
    }

    /// Merges one update and returns what changed, in M8 order. `now` stamps
    /// `config.seen` on new pods that do not carry it yet (M3).
    pub fn apply(&mut self, update: SourceUpdate, now: Timestamp) -> Merged {
        let SourceUpdate { source, op, pods } = update;
        let mut pods = admit(source, pods);
        let mut touched = Touched::default();
        let mut merged = Merged::default();
        self.generation += 1;
        let generation = self.generation;

        if op == Op::Remove {
            for incoming in &pods {
                self.remove(source, incoming.uid(), &mut touched);
            }
        } else {
            let state = self.states.entry(source).or_default();
            merged.duplicates = drop_duplicates(source, &mut pods, state);
            state.duplicates.clone_from(&merged.duplicates);
            for incoming in pods {
                self.upsert(source, incoming, generation, now, &mut touched);
            }
            if op == Op::Set {
                self.sweep(source, generation, &mut touched);
                self.states.entry(source).or_default().set_seen = true;
            }
        }
        merged.deltas = self.deltas(touched);
        merged
    }

    /// Every configured source has delivered at least one SET (M9).
    pub fn synced(&self) -> bool {
        self.configured
            .iter()
            .all(|s| self.states.get(s).is_some_and(|st| st.set_seen))
    }

    /// Whether this source has delivered a SET yet.
    pub fn source_seen(&self, source: Source) -> bool {
        self.states.get(&source).is_some_and(|st| st.set_seen)
    }

    /// The sources this store was configured with.
    pub fn sources(&self) -> impl Iterator<Item = Source> + '_ {
        self.configured.iter().copied()
    }

    /// The desired pods: the active pod of every full name, with its source.
    pub fn pods(&self) -> impl Iterator<Item = (Source, &Arc<Pod>)> + '_ {
        self.names.values().filter_map(|candidates| {
            let best = candidates.first()?;
            let entry = self.states.get(&best.source)?.pods.get(&best.uid)?;
            Some((best.source, &entry.pod.pod))
        })
    }

    /// Number of desired (active) pods.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Pods not run because another holds their name: across sources and files (M11),
    /// and duplicates dropped from each source's last update (M2).
    pub fn conflicts(&self) -> Vec<Conflict> {
        let mut out: Vec<Conflict> = Vec::new();
        for (full_name, candidates) in &self.names {
            let Some((winner, losers)) = candidates.split_first() else {
                continue;
            };
            out.extend(losers.iter().map(|c| Conflict {
                full_name: full_name.clone(),
                source: c.source,
                uid: c.uid.clone(),
                winner_source: winner.source,
                winner_uid: winner.uid.clone(),
            }));
        }
        let mut sources: Vec<_> = self.states.iter().collect();
        sources.sort_by_key(|(s, _)| **s);
        out.extend(
            sources
                .into_iter()
                .flat_map(|(_, st)| st.duplicates.iter().cloned()),
        );
        out
    }

    fn upsert(
        &mut self,
        source: Source,
        mut incoming: SourcePod,
        generation: u64,
        now: Timestamp,
        touched: &mut Touched,
    ) {
        let state = self.states.entry(source).or_default();
        let Some(entry) = state.pods.get_mut(incoming.uid()) else {
            // M3: a UID we have not seen is an ADD, stamped with when it was first seen.
            if pod::annotation(&incoming.pod, CONFIG_SEEN).is_none() {
                pod::set_annotation(
                    Arc::make_mut(&mut incoming.pod),
                    CONFIG_SEEN,
                    now.to_string(),
                );
            }
            let uid = incoming.uid().to_owned();
            let name = FullName::of(&incoming.pod);
            let seq = self.next_seq;
            self.next_seq += 1;
            touch(touched, &self.names, &self.states, &name);
            touched.changes.insert((source, uid.clone()), Change::Added);
            insert_candidate(&mut self.names, &name, source, &uid, seq);
            let entry = Entry {
                pod: incoming,
                name,
                seq,
                generation,
            };
            self.states
                .entry(source)
                .or_default()
                .pods
                .insert(uid, entry);
            return;
        };
        entry.generation = generation;
        let old = entry.pod.fingerprint;
        let new = incoming.fingerprint;
        let renamed = !same_name(&entry.name, &incoming.pod);
        let change = if old.semantic != new.semantic || renamed {
            // M4: a graceful deletion is a DELETE, anything else an UPDATE.
            if incoming.pod.metadata.deletion_timestamp.is_some() {
                Change::Deleted
            } else {
                Change::Updated
            }
        } else if old.status != new.status {
            Change::Reconciled // M5
        } else {
            return; // M5: nothing changed, nothing is emitted; keep the pod we have.
        };
        // M4: config.seen is kept from the first sighting.
        let seen = pod::annotation(&entry.pod.pod, CONFIG_SEEN).map(str::to_owned);
        if let Some(seen) = seen
            && pod::annotation(&incoming.pod, CONFIG_SEEN) != Some(seen.as_str())
        {
            pod::set_annotation(Arc::make_mut(&mut incoming.pod), CONFIG_SEEN, seen);
        }
        let uid = incoming.uid().to_owned();
        let seq = entry.seq;
        let old_name = entry.name.clone();
        touch(touched, &self.names, &self.states, &old_name);
        let state = self.states.entry(source).or_default();
        let Some(entry) = state.pods.get_mut(&uid) else {
            return;
        };
        entry.pod = incoming;
        if renamed {
            // Names of API pods are immutable; a source that renames a UID anyway moves it.
            let new_name = FullName::of(&entry.pod.pod);
            entry.name = new_name.clone();
            remove_candidate(&mut self.names, &old_name, source, &uid);
            touch(touched, &self.names, &self.states, &new_name);
            insert_candidate(&mut self.names, &new_name, source, &uid, seq);
        }
        touched.changes.insert((source, uid), change);
    }

    fn remove(&mut self, source: Source, uid: &str, touched: &mut Touched) {
        // M7: removing an unknown UID is a no-op.
        let Some(name) = self
            .states
            .get(&source)
            .and_then(|st| st.pods.get(uid))
            .map(|e| e.name.clone())
        else {
            return;
        };
        touch(touched, &self.names, &self.states, &name);
        remove_candidate(&mut self.names, &name, source, uid);
        if let Some(state) = self.states.get_mut(&source) {
            state.pods.remove(uid);
        }
        touched
            .changes
            .insert((source, uid.to_owned()), Change::Removed);
    }

    /// M6: after a SET, every pod of the source it did not mention is removed.
    fn sweep(&mut self, source: Source, generation: u64, touched: &mut Touched) {
        let Some(state) = self.states.get(&source) else {
            return;
        };
        let mut gone: Vec<(u64, String)> = state
            .pods
            .iter()
            .filter(|(_, e)| e.generation != generation)
            .map(|(uid, e)| (e.seq, uid.clone()))
            .collect();
        gone.sort_unstable();
        for (_, uid) in gone {
            self.remove(source, &uid, touched);
        }
    }

    /// Turns the entry changes of one apply into what the pod workers see (M8, M11).
    fn deltas(&self, touched: Touched) -> Vec<PodDelta> {
        let mut deltas = Vec::new();
        for name in &touched.order {
            let before = touched.before.get(name).and_then(Option::as_ref);
            let after = active(&self.names, &self.states, name);
            match (before, after) {
                (Some((bs, bu, _)), Some((as_, au, pod))) if *bs == as_ && bu == au => {
                    let op = match touched.changes.get(&(as_, au.to_owned())) {
                        Some(Change::Updated) => DeltaOp::Update,
                        Some(Change::Deleted) => DeltaOp::Delete,
                        Some(Change::Reconciled) => DeltaOp::Reconcile,
                        Some(Change::Added | Change::Removed) | None => continue,
                    };
                    deltas.push(PodDelta {
                        op,
                        source: as_,
                        pod: pod.clone(),
                    });
                }
                (before, after) => {
                    if let Some((bs, _, pod)) = before {
                        deltas.push(PodDelta {
                            op: DeltaOp::Remove,
                            source: *bs,
                            pod: pod.clone(),
                        });
                    }
                    if let Some((as_, _, pod)) = after {
                        deltas.push(PodDelta {
                            op: DeltaOp::Add,
                            source: as_,
                            pod: pod.clone(),
                        });
                    }
                }
            }
        }
        // Stable: keeps the update's order within each op.
        deltas.sort_by_key(|d| d.op);
        deltas
    }
}

fn active<'a>(
    names: &'a HashMap<FullName, Vec<Candidate>>,
    states: &'a HashMap<Source, SourceState>,
    name: &FullName,
) -> Option<(Source, &'a str, &'a Arc<Pod>)> {
    let best = names.get(name)?.first()?;
    let entry = states.get(&best.source)?.pods.get(&best.uid)?;
    Some((best.source, best.uid.as_str(), &entry.pod.pod))
}

/// Records, once per apply, who held `name` before anything changed.
fn touch(
    touched: &mut Touched,
    names: &HashMap<FullName, Vec<Candidate>>,
    states: &HashMap<Source, SourceState>,
    name: &FullName,
) {
    if touched.before.contains_key(name) {
        return;
    }
    let holder = active(names, states, name).map(|(s, u, p)| (s, u.to_owned(), p.clone()));
    touched.before.insert(name.clone(), holder);
    touched.order.push(name.clone());
}

fn insert_candidate(
    names: &mut HashMap<FullName, Vec<Candidate>>,
    name: &FullName,
    source: Source,
    uid: &str,
    seq: u64,
) {
    let candidate = Candidate {
        from_api: !source.is_static(),
        seq,
        source,
        uid: uid.to_owned(),
    };
    let list = names.entry(name.clone()).or_default();
    let at = list.partition_point(|c| *c < candidate);
    list.insert(at, candidate);
}

fn remove_candidate(
    names: &mut HashMap<FullName, Vec<Candidate>>,
    name: &FullName,
    source: Source,
    uid: &str,
) {
    if let Some(list) = names.get_mut(name) {
        list.retain(|c| !(c.source == source && c.uid == uid));
        if list.is_empty() {
            names.remove(name);
        }
    }
}

fn same_name(name: &FullName, pod: &Pod) -> bool {
    pod.metadata.name.as_deref().unwrap_or_default() == name.name
        && pod.metadata.namespace.as_deref().unwrap_or_default() == name.namespace
}

/// M1 and R6: stamps `config.source` (copying a pod only if the source did not stamp it
/// already) and ignores mirror pods the API server hands back.
fn admit(source: Source, mut pods: Vec<SourcePod>) -> Vec<SourcePod> {
    if source == Source::Api {
        pods.retain(|p| pod::annotation(&p.pod, CONFIG_MIRROR).is_none());
    }
    for p in &mut pods {
        if pod::annotation(&p.pod, CONFIG_SOURCE) != Some(source.config_source()) {
            pod::set_annotation(
                Arc::make_mut(&mut p.pod),
                CONFIG_SOURCE,
                source.config_source(),
            );
        }
    }
    pods
}

/// M2: within one update, a second pod with the same full name is dropped. "First" means
/// first seen: a pod the store already holds beats a newcomer listed before it, so adding
/// a file never unseats a running pod (M11); among newcomers, list order decides.
fn drop_duplicates(
    source: Source,
    pods: &mut Vec<SourcePod>,
    state: &SourceState,
) -> Vec<Conflict> {
    let mut winner_of: HashMap<(&str, &str), usize> = HashMap::with_capacity(pods.len());
    let mut dropped = vec![false; pods.len()];
    let mut duplicates = Vec::new();
    for (i, p) in pods.iter().enumerate() {
        let key = (
            p.pod.metadata.namespace.as_deref().unwrap_or_default(),
            p.pod.metadata.name.as_deref().unwrap_or_default(),
        );
        let Some(&held) = winner_of.get(&key) else {
            winner_of.insert(key, i);
            continue;
        };
        let known = |j: usize| state.pods.contains_key(pods[j].uid());
        let (winner, loser) = if !known(held) && known(i) {
            (i, held)
        } else {
            (held, i)
        };
        winner_of.insert(key, winner);
        dropped[loser] = true;
        duplicates.push(Conflict {
            full_name: FullName::of(&pods[loser].pod),
            source,
            uid: pods[loser].uid().to_owned(),
            winner_source: source,
            winner_uid: pods[winner].uid().to_owned(),
        });
    }
    if !duplicates.is_empty() {
        let mut i = 0;
        pods.retain(|_| {
            i += 1;
            !dropped[i - 1]
        });
    }
    duplicates
}

#[cfg(test)]
mod tests;
