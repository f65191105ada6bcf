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

use hashbrown::HashTable;
use hashbrown::hash_table::Entry as TableEntry;
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
    /// When the store first saw this UID from this source; orders M11's "first seen wins".
    seq: u64,
    /// The apply that last mentioned this pod (the M6 sweep removes the others).
    generation: u64,
}

/// A source's pods by UID, in a table keyed by the hash each [`SourcePod`] carries.
#[derive(Debug, Default)]
struct SourceState {
    set_seen: bool,
    pods: HashTable<Entry>,
    /// Duplicates dropped from the source's last update (M2), kept for reporting.
    duplicates: Vec<Conflict>,
}

impl SourceState {
    fn find(&mut self, hash: u64, uid: &str) -> Option<&mut Entry> {
        self.pods.find_mut(hash, |e| &*e.pod.uid == uid)
    }

    fn contains(&self, hash: u64, uid: &str) -> bool {
        self.pods.find(hash, |e| &*e.pod.uid == uid).is_some()
    }
}

/// A pod that may run under a full name. Carries its pod so that who holds a name can be
/// answered without looking into any source's state. Lower ranks win (M11).
#[derive(Debug, Clone)]
struct Candidate {
    from_api: bool,
    seq: u64,
    source: Source,
    uid: Arc<str>,
    pod: Arc<Pod>,
    /// How this pod changed in the apply numbered `changed_in`.
    change: Change,
    changed_in: u64,
}

impl Candidate {
    fn rank(&self) -> (bool, u64) {
        (self.from_api, self.seq)
    }
}

/// How a pod changed within one apply (additions and removals show as a new holder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Updated,
    Deleted,
    Reconciled,
}

/// Everything about one full name: its candidates, best first, and what the apply in
/// progress needs to know: who held the name before it (as source and sequence number)
/// and, if that pod has left the candidates since, its pod for the REMOVE delta.
#[derive(Debug)]
struct Slot {
    name: Arc<FullName>,
    hash: u64,
    candidates: Vec<Candidate>,
    touched_in: u64,
    before: Option<(Source, u64)>,
    evicted: Option<Arc<Pod>>,
}

impl Slot {
    /// Drops a candidate, keeping its pod if it held the name before this apply.
    fn evict(&mut self, source: Source, seq: u64) {
        if let Some(at) = self.candidates.iter().position(|c| c.source == source && c.seq == seq) {
            let c = self.candidates.remove(at);
            if self.before == Some((source, seq)) {
                self.evicted = Some(c.pod);
            }
        }
    }
}

/// The merge core's state. One owner; readers get snapshots built from [`PodStore::pods`].
#[derive(Debug, Default)]
pub struct PodStore {
    configured: BTreeSet<Source>,
    states: HashMap<Source, SourceState>,
    names: HashTable<Slot>,
    next_seq: u64,
    generation: u64,
}

impl PodStore {
    /// A store expecting these sources; it is synced once each has sent a SET (M9).
    pub fn new(sources: impl IntoIterator<Item = Source>) -> PodStore {
        PodStore { configured: sources.into_iter().collect(), ..PodStore::default() }
    }

    /// Merges one update and returns what changed, in M8 order. `now` stamps
    /// `config.seen` on new pods that do not carry it yet (M3).
    pub fn apply(&mut self, update: SourceUpdate, now: Timestamp) -> Merged {
        let SourceUpdate { source, op, pods } = update;
        let mut pods = admit(source, pods);
        self.generation += 1;
        let state = self.states.entry(source).or_default();
        let mut merge = Merge {
            source,
            generation: self.generation,
            now,
            state,
            names: &mut self.names,
            next_seq: &mut self.next_seq,
            touched: Vec::new(),
        };
        let mut duplicates = Vec::new();
        if op == Op::Remove {
            for incoming in &pods {
                merge.remove(incoming.uid_hash, &incoming.uid);
            }
        } else {
            duplicates = drop_duplicates(source, &mut pods, merge.state);
            merge.state.duplicates.clone_from(&duplicates);
            for incoming in pods {
                merge.upsert(incoming);
            }
            if op == Op::Set {
                merge.sweep();
                merge.state.set_seen = true;
            }
        }
        Merged { deltas: merge.deltas(), duplicates }
    }

    /// Every configured source has delivered at least one SET (M9).
    pub fn synced(&self) -> bool {
        self.configured.iter().all(|s| self.source_seen(*s))
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
    pub fn pods(&self) -> impl Iterator<Item = (Source, &Arc<FullName>, &Arc<Pod>)> + '_ {
        self.names
            .iter()
            .filter_map(|slot| slot.candidates.first().map(|c| (c.source, &slot.name, &c.pod)))
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
        for slot in &self.names {
            let Some((winner, losers)) = slot.candidates.split_first() else {
                continue;
            };
            out.extend(losers.iter().map(|c| Conflict {
                full_name: FullName::clone(&slot.name),
                source: c.source,
                uid: c.uid.to_string(),
                winner_source: winner.source,
                winner_uid: winner.uid.to_string(),
            }));
        }
        let mut sources: Vec<_> = self.states.iter().collect();
        sources.sort_by_key(|(s, _)| **s);
        out.extend(sources.into_iter().flat_map(|(_, st)| st.duplicates.iter().cloned()));
        out
    }
}

/// One apply in progress: the applying source's state and the names, borrowed apart.
struct Merge<'a> {
    source: Source,
    generation: u64,
    now: Timestamp,
    state: &'a mut SourceState,
    names: &'a mut HashTable<Slot>,
    next_seq: &'a mut u64,
    /// Hashes of the names this apply touched, in order (their slots carry the mark).
    touched: Vec<u64>,
}

impl Merge<'_> {
    /// The slot of a name, created if needed, marked as touched by this apply (its
    /// holder before any change is recorded once).
    fn touch(&mut self, hash: u64, name: &Arc<FullName>) -> &mut Slot {
        let generation = self.generation;
        let slot = match self.names.entry(hash, |s| s.hash == hash && s.name == *name, |s| s.hash) {
            TableEntry::Occupied(o) => o.into_mut(),
            TableEntry::Vacant(v) => v
                .insert(Slot {
                    name: name.clone(),
                    hash,
                    candidates: Vec::with_capacity(1),
                    touched_in: 0,
                    before: None,
                    evicted: None,
                })
                .into_mut(),
        };
        if slot.touched_in != generation {
            slot.touched_in = generation;
            slot.before = slot.candidates.first().map(|c| (c.source, c.seq));
            self.touched.push(hash);
        }
        slot
    }

    fn upsert(&mut self, mut incoming: SourcePod) {
        let (source, generation) = (self.source, self.generation);
        let Some(entry) = self.state.find(incoming.uid_hash, &incoming.uid) else {
            // M3: a UID we have not seen is an ADD, stamped with when it was first seen.
            if incoming.seen_hash.is_none() {
                incoming.stamp(CONFIG_SEEN, self.now.to_string());
            }
            let seq = *self.next_seq;
            *self.next_seq += 1;
            let slot = self.touch(incoming.name_hash, &incoming.name);
            insert_candidate(slot, source, &incoming, seq);
            let entry = Entry { pod: incoming, seq, generation };
            self.state.pods.insert_unique(entry.pod.uid_hash, entry, |e| e.pod.uid_hash);
            return;
        };
        entry.generation = generation;
        if Arc::ptr_eq(&entry.pod.pod, &incoming.pod) {
            return; // The very pod we hold: sources re-send their Arcs in every SET.
        }
        // By hash: names are immutable in the API, and static pods change UID instead.
        let renamed = entry.pod.name_hash != incoming.name_hash;
        let (old, new) = (entry.pod.fingerprint, incoming.fingerprint);
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
        if entry.pod.seen_hash.is_some()
            && incoming.seen_hash != entry.pod.seen_hash
            && let Some(seen) = pod::annotation(&entry.pod.pod, CONFIG_SEEN)
        {
            incoming.stamp(CONFIG_SEEN, seen.to_owned());
        }
        let seq = entry.seq;
        let old = std::mem::replace(&mut entry.pod, incoming);
        let new_pod = entry.pod.clone();
        let slot = self.touch(old.name_hash, &old.name);
        if renamed {
            // A source that renames a UID anyway: the pod moves to its new name.
            slot.evict(source, seq);
            let slot = self.touch(new_pod.name_hash, &new_pod.name);
            insert_candidate(slot, source, &new_pod, seq);
        } else if let Some(c) =
            slot.candidates.iter_mut().find(|c| c.source == source && c.seq == seq)
        {
            c.pod = new_pod.pod;
            c.change = change;
            c.changed_in = generation;
        }
    }

    fn remove(&mut self, hash: u64, uid: &str) {
        // M7: removing an unknown UID is a no-op.
        let Ok(found) = self.state.pods.find_entry(hash, |e| &*e.pod.uid == uid) else {
            return;
        };
        let (entry, _) = found.remove();
        let source = self.source;
        let slot = self.touch(entry.pod.name_hash, &entry.pod.name);
        // (source, seq) names a candidate uniquely: seq is never reused.
        slot.evict(source, entry.seq);
    }

    /// M6: after a SET, every pod of the source it did not mention is removed, in the
    /// order they were first seen.
    fn sweep(&mut self) {
        let generation = self.generation;
        let mut gone: Vec<(u64, u64, Arc<str>)> = self
            .state
            .pods
            .iter()
            .filter(|e| e.generation != generation)
            .map(|e| (e.seq, e.pod.uid_hash, e.pod.uid.clone()))
            .collect();
        gone.sort_unstable_by_key(|(seq, ..)| *seq);
        for (_, hash, uid) in gone {
            self.remove(hash, &uid);
        }
    }

    /// Turns what changed into what the pod workers see (M8, M11), and drops names no
    /// pod claims any more.
    fn deltas(self) -> Vec<PodDelta> {
        let Merge { source, generation, names, touched, .. } = self;
        let mut deltas = Vec::with_capacity(touched.len());
        for hash in touched {
            // The mark tells touched slots apart even if two names share a hash.
            let Ok(mut found) =
                names.find_entry(hash, |s| s.hash == hash && s.touched_in == generation)
            else {
                continue;
            };
            // Marks stay: a generation never repeats, so this slot reads as untouched later.
            let slot = found.get_mut();
            slot.touched_in = u64::MAX;
            match (slot.before, slot.candidates.first()) {
                (Some(before), Some(a)) if before == (a.source, a.seq) => {
                    if a.source == source && a.changed_in == generation {
                        let op = match a.change {
                            Change::Updated => DeltaOp::Update,
                            Change::Deleted => DeltaOp::Delete,
                            Change::Reconciled => DeltaOp::Reconcile,
                        };
                        deltas.push(PodDelta { op, source: a.source, pod: a.pod.clone() });
                    }
                }
                (before, _) => {
                    if let Some((bs, bseq)) = before {
                        // The old holder either left (evicted) or was outranked (M11).
                        let pod = slot.evicted.take().or_else(|| {
                            slot.candidates
                                .iter()
                                .find(|c| (c.source, c.seq) == (bs, bseq))
                                .map(|c| c.pod.clone())
                        });
                        if let Some(pod) = pod {
                            deltas.push(PodDelta { op: DeltaOp::Remove, source: bs, pod });
                        }
                    }
                    if let Some(a) = slot.candidates.first() {
                        deltas.push(PodDelta {
                            op: DeltaOp::Add,
                            source: a.source,
                            pod: a.pod.clone(),
                        });
                    }
                }
            }
            slot.evicted = None;
            if slot.candidates.is_empty() {
                found.remove();
            }
        }
        // Stable: keeps the update's order within each op.
        deltas.sort_by_key(|d| d.op);
        deltas
    }
}

fn insert_candidate(slot: &mut Slot, source: Source, pod: &SourcePod, seq: u64) {
    let candidate = Candidate {
        from_api: !source.is_static(),
        seq,
        source,
        uid: pod.uid.clone(),
        pod: pod.pod.clone(),
        change: Change::Updated,
        changed_in: 0,
    };
    let at = slot.candidates.partition_point(|c| c.rank() < candidate.rank());
    slot.candidates.insert(at, candidate);
}

/// M1 and R6: stamps `config.source` (copying a pod only if the source did not stamp it
/// already) and ignores mirror pods the API server hands back.
fn admit(source: Source, mut pods: Vec<SourcePod>) -> Vec<SourcePod> {
    if source == Source::Api {
        pods.retain(|p| pod::annotation(&p.pod, CONFIG_MIRROR).is_none());
    }
    for p in &mut pods {
        if p.stamped_source != Some(source.config_source()) {
            p.stamp(CONFIG_SOURCE, source.config_source().to_owned());
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
    if pods.len() < 2 {
        return Vec::new();
    }
    // Index of the pod holding each name so far, keyed by the precomputed name hash.
    let mut winner_of: HashTable<usize> = HashTable::with_capacity(pods.len());
    let mut dropped: Vec<usize> = Vec::new();
    let mut duplicates = Vec::new();
    for i in 0..pods.len() {
        let p = &pods[i];
        let held =
            match winner_of.entry(p.name_hash, |&j| pods[j].name == p.name, |&j| pods[j].name_hash)
            {
                TableEntry::Vacant(v) => {
                    v.insert(i);
                    continue;
                }
                TableEntry::Occupied(o) => o.into_mut(),
            };
        let known = |j: usize| state.contains(pods[j].uid_hash, &pods[j].uid);
        let (winner, loser) = if !known(*held) && known(i) { (i, *held) } else { (*held, i) };
        *held = winner;
        dropped.push(loser);
        duplicates.push(Conflict {
            full_name: FullName::clone(&pods[loser].name),
            source,
            uid: pods[loser].uid.to_string(),
            winner_source: source,
            winner_uid: pods[winner].uid.to_string(),
        });
    }
    if !dropped.is_empty() {
        dropped.sort_unstable();
        let mut i = 0;
        pods.retain(|_| {
            i += 1;
            dropped.binary_search(&(i - 1)).is_err()
        });
    }
    duplicates
}

#[cfg(test)]
mod tests;
