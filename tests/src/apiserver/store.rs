//! The object store: every object as JSON under (resource, namespace, name), one global
//! `resourceVersion` counter stamped on each write (as etcd's revision), and a bounded
//! history of write events that watches and consistent reads at an older
//! `resourceVersion` are served from.
//!
//! A read or watch from a `resourceVersion` older than the history window gets 410
//! `Expired`, as from a compacted etcd. [`Store::compact`] drops the whole history.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::error::{Error, Result};
use super::resource::ResourceType;
use super::strategy::{self, meta};

mod dispatch;

use dispatch::Dispatch;
pub use dispatch::{TRIGGER_FIELDS, Trigger};

/// Where an object lives: (group, plural, namespace, name); cluster-scoped objects have
/// an empty namespace. Ordered as etcd keys are, so lists come out sorted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    group: &'static str,
    plural: &'static str,
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(resource: &ResourceType, namespace: Option<&str>, name: &str) -> Key {
        Key {
            group: resource.group,
            plural: resource.plural,
            namespace: namespace.filter(|_| resource.namespaced).unwrap_or_default().to_string(),
            name: name.to_string(),
        }
    }

    /// The object's etcd key as the real server names it in storage errors:
    /// `/registry/pods/default/web`, `/registry/coordination.k8s.io/leases/...`.
    fn registry_path(&self) -> String {
        let mut path = String::from("/registry/");
        for part in [self.group, self.plural, self.namespace.as_str(), self.name.as_str()] {
            if !part.is_empty() {
                path.push_str(part);
                path.push('/');
            }
        }
        path.pop();
        path
    }

    /// Whether the key is of `resource`, and in `namespace` when one is given.
    pub fn within(&self, resource: &ResourceType, namespace: Option<&str>) -> bool {
        self.group == resource.group
            && self.plural == resource.plural
            && namespace.is_none_or(|ns| self.namespace == ns)
    }
}

/// Objects with their keys, sorted by key, at the resourceVersion they were read at.
pub type Snapshot = (Vec<(Key, Arc<Value>)>, u64);

/// What a write did, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One write in the history.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: EventType,
    pub key: Key,
    /// The object after the write; for a delete, its last state stamped with the
    /// delete's `resourceVersion` (as etcd reports it).
    pub object: Arc<Value>,
    /// The object before the write (`None` for a create).
    pub prev: Option<Arc<Value>>,
}

#[derive(Debug)]
struct State {
    rv: u64,
    objects: BTreeMap<Key, Arc<Value>>,
    /// The pods bound to each node (`spec.nodeName`), as the Node authorizer's graph
    /// and kube-apiserver's watch cache index them.
    pods_by_node: HashMap<String, BTreeSet<Key>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Reads and watches from a resourceVersion below this get 410.
    compacted: u64,
    /// The open watches' queues.
    dispatch: Dispatch,
}

/// The shared store. Writes are serialized by one lock, so every write sees the
/// latest object and the conflict checks need no retries.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
    /// The current resourceVersion, for watches to wait on.
    changed: watch::Sender<u64>,
}

/// Delete preconditions and grace (`DeleteOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Value),
    /// The object is being deleted (grace period or finalizers); its new state.
    Pending(Value),
}

impl Store {
    pub fn new(history_limit: usize) -> Store {
        let state = State {
            rv: 1,
            objects: BTreeMap::new(),
            pods_by_node: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 1,
            dispatch: Dispatch::default(),
        };
        Store { state: Mutex::new(state), changed: watch::Sender::new(1) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (writes are committed
        // in one step), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// The oldest resourceVersion that reads and watches can still start from.
    pub fn compacted(&self) -> u64 {
        self.lock().compacted
    }

    /// A receiver of the current resourceVersion, told of every write.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Drops the whole event history: older resourceVersions now get 410.
    pub fn compact(&self) {
        let mut state = self.lock();
        state.compacted = state.rv;
        state.history.clear();
    }

    pub fn get(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value> {
        let key = Key::new(resource, namespace, name);
        let state = self.lock();
        let object = state.objects.get(&key).ok_or_else(|| not_found(resource, name))?;
        Ok(Value::clone(object))
    }

    /// The objects of `resource` (in `namespace`, if given) as of `rv` (now when
    /// `None`), sorted by namespace and name, with the resourceVersion they are at.
    pub fn objects_at(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        rv: Option<u64>,
    ) -> Result<Snapshot> {
        snapshot(&self.lock(), resource, namespace, rv)
    }

    /// The pods bound to `node` now.
    pub fn pods_on_node(&self, node: &str) -> Vec<Arc<Value>> {
        let state = self.lock();
        let keys = state.pods_by_node.get(node).into_iter().flatten();
        keys.filter_map(|key| state.objects.get(key).cloned()).collect()
    }

    /// The events after `rv` and the resourceVersion they reach; 410 when some of them
    /// are no longer in the history.
    pub fn events_after(&self, rv: u64) -> Result<(Vec<Arc<Event>>, u64)> {
        let state = self.lock();
        Ok((state.history_after(rv)?.cloned().collect(), state.rv))
    }

    /// Opens a watch of `resource` (in `namespace`, if given) filed under `trigger`
    /// ([`Trigger`]): where it begins (the objects now, or the events of the resource
    /// after `after`, 410 when they left the history), and the queue every later write
    /// it may see is pushed on, as deep as the history (one lock: nothing falls
    /// between).
    pub fn watch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        trigger: Trigger,
        after: Option<u64>,
    ) -> Result<(Begin, mpsc::Receiver<Arc<Event>>)> {
        let mut state = self.lock();
        let begin = match after {
            None => Begin::Objects(snapshot(&state, resource, namespace, None)?),
            Some(rv) => {
                let events = state.history_after(rv)?;
                let events = events.filter(|e| e.key.within(resource, namespace)).cloned();
                Begin::Events(events.collect(), state.rv)
            }
        };
        let (queue, events) = mpsc::channel(state.history_limit);
        state.dispatch.register(trigger, queue);
        Ok((begin, events))
    }

    pub fn create(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value> {
        let object = strategy::prepare_create(resource, namespace, object)?;
        let name = meta(&object, "name").unwrap_or_default().to_string();
        let key = Key::new(resource, namespace, &name);
        let mut state = self.lock();
        if state.objects.contains_key(&key) {
            return Err(Error::AlreadyExists { resource: resource.group_resource(), name });
        }
        Ok(self.commit(&mut state, key, None, Some(object)))
    }

    /// An update (PUT) or a patch: `change` makes the new object from the stored one.
    /// A `metadata.resourceVersion` in the new object must match the stored one (409
    /// otherwise); without one the write is unconditional. A write that changes
    /// nothing is not made (no new resourceVersion, no event), as on the real server.
    pub fn update(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        status_only: bool,
        change: impl FnOnce(&Value) -> Result<Value>,
    ) -> Result<Value> {
        let prepare = |old: &Value, new| strategy::prepare_update(resource, old, new, status_only);
        self.update_with(resource, (namespace, name), prepare, change)
    }

    /// [`Store::update`] with the subresource's strategy `prepare` (old, new → what is
    /// written) in place of the main resource's or the status's (X1:
    /// `pods/ephemeralcontainers`).
    pub fn update_with(
        &self,
        resource: &ResourceType,
        (namespace, name): (Option<&str>, &str),
        prepare: impl FnOnce(&Value, Value) -> Result<Value>,
        change: impl FnOnce(&Value) -> Result<Value>,
    ) -> Result<Value> {
        let key = Key::new(resource, namespace, name);
        let mut state = self.lock();
        let Some(old) = state.objects.get(&key).cloned() else {
            return Err(not_found(resource, name));
        };
        let new = change(&old)?;
        // A `metadata.uid` in the new object is a precondition, as on the real server
        // (kubelet's status patches carry one so that they never land on a replaced pod).
        let have = meta(&old, "uid").unwrap_or_default();
        if let Some(want) = meta(&new, "uid").filter(|uid| !uid.is_empty() && *uid != have) {
            let problem = format!(
                "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, \
                 AdditionalErrorMsg: Precondition failed: UID in precondition: {want}, \
                 UID in object meta: {have}",
                key.registry_path()
            );
            return Err(conflict(resource, name, &problem));
        }
        let requested = meta(&new, "resourceVersion").filter(|rv| !rv.is_empty());
        if requested.is_some_and(|rv| Some(rv) != meta(&old, "resourceVersion")) {
            return Err(conflict(resource, name, STALE));
        }
        let new = prepare(&old, new)?;
        if new == *old {
            return Ok(Value::clone(&old));
        }
        let finalized = meta(&new, "deletionTimestamp").is_some()
            && new.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64)
                == Some(0)
            && new
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        let written = self.commit(&mut state, key.clone(), Some(old), Some(new));
        if finalized {
            // The last finalizer of an object being deleted is gone: remove it.
            let last = state.objects.get(&key).cloned();
            return Ok(self.commit(&mut state, key, last, None));
        }
        Ok(written)
    }

    /// A delete with `DeleteOptions`: preconditions, then graceful deletion (pods bound
    /// to a node), finalizers, or removal.
    pub fn delete(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted> {
        let key = Key::new(resource, namespace, name);
        let mut state = self.lock();
        let Some(current) = state.objects.get(&key).cloned() else {
            return Err(not_found(resource, name));
        };
        for (field, want) in [("UID", &options.uid), ("ResourceVersion", &options.resource_version)]
        {
            let have = meta(&current, if field == "UID" { "uid" } else { "resourceVersion" });
            if let Some(want) = want.as_deref().filter(|w| Some(*w) != have) {
                let problem = format!(
                    "Precondition failed: {field} in precondition: {want}, {field} in object meta: {}",
                    have.unwrap_or_default()
                );
                return Err(conflict(resource, name, &problem));
            }
        }
        let grace = strategy::deletion_grace(resource, &current, options.grace_period_seconds);
        let pending_grace =
            current.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
        let has_finalizers = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if grace > 0 || has_finalizers {
            if pending_grace.is_some_and(|pending| pending <= grace) {
                return Ok(Deleted::Pending(Value::clone(&current)));
            }
            let mut pending = Value::clone(&current);
            pending["metadata"]["deletionTimestamp"] = json!(strategy::seconds_from_now(grace));
            pending["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            if grace == 0 && meta(&current, "deletionTimestamp").is_some() {
                pending["metadata"]["deletionTimestamp"] =
                    current["metadata"]["deletionTimestamp"].clone();
            }
            return Ok(Deleted::Pending(self.commit(
                &mut state,
                key,
                Some(current),
                Some(pending),
            )));
        }
        Ok(Deleted::Gone(self.commit(&mut state, key, Some(current), None)))
    }

    /// Writes `new` (or removes the object when `None`) at the next resourceVersion,
    /// records the event and wakes the watches. Returns the object as written.
    fn commit(
        &self,
        state: &mut State,
        key: Key,
        old: Option<Arc<Value>>,
        new: Option<Value>,
    ) -> Value {
        state.rv += 1;
        let rv = state.rv;
        let (kind, mut object) = match (&old, new) {
            (None, Some(new)) => (EventType::Added, new),
            (Some(_), Some(new)) => (EventType::Modified, new),
            (Some(old), None) => (EventType::Deleted, Value::clone(old)),
            (None, None) => return Value::Null,
        };
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let object = Arc::new(object);
        if key.group.is_empty() && key.plural == "pods" {
            index_pod(&mut state.pods_by_node, &key, old.as_deref(), kind, &object);
        }
        match kind {
            EventType::Deleted => state.objects.remove(&key),
            _ => state.objects.insert(key.clone(), object.clone()),
        };
        let event = Arc::new(Event { rv, kind, key, object: object.clone(), prev: old });
        state.dispatch.dispatch(&event);
        state.history.push_back(event);
        while state.history.len() > state.history_limit {
            if let Some(evicted) = state.history.pop_front() {
                state.compacted = evicted.rv;
            }
        }
        self.changed.send_replace(rv);
        Value::clone(&object)
    }
}

impl State {
    /// The history's events after `rv`; 410 when some of them are no longer in it.
    fn history_after(&self, rv: u64) -> Result<impl Iterator<Item = &Arc<Event>>> {
        if rv < self.compacted {
            return Err(too_old(rv, self.compacted));
        }
        let skip = self.history.partition_point(|e| e.rv <= rv);
        Ok(self.history.iter().skip(skip))
    }
}

/// Moves the pod `key` in the node index: out of its old node's set, into its new
/// node's unless deleted.
fn index_pod(
    index: &mut HashMap<String, BTreeSet<Key>>,
    key: &Key,
    old: Option<&Value>,
    kind: EventType,
    new: &Value,
) {
    let node = |pod: &Value| {
        Some(dispatch::field_value(pod, "spec.nodeName"))
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
    };
    if let Some(node) = old.and_then(node)
        && let Some(pods) = index.get_mut(&node)
    {
        pods.remove(key);
        if pods.is_empty() {
            index.remove(&node);
        }
    }
    if kind != EventType::Deleted
        && let Some(node) = node(new)
    {
        index.entry(node).or_default().insert(key.clone());
    }
}

/// [`Store::objects_at`] under the lock.
fn snapshot(
    state: &State,
    resource: &ResourceType,
    namespace: Option<&str>,
    rv: Option<u64>,
) -> Result<Snapshot> {
    let mut objects: BTreeMap<Key, Arc<Value>> = state
        .objects
        .range(Key::new(resource, None, "")..)
        .take_while(|(k, _)| k.within(resource, None))
        .filter(|(k, _)| k.within(resource, namespace))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let Some(rv) = rv.filter(|rv| *rv < state.rv) else {
        return Ok((objects.into_iter().collect(), state.rv));
    };
    if rv < state.compacted {
        return Err(too_old(rv, state.compacted));
    }
    // Roll the newer writes back, newest first.
    for event in state.history.iter().rev().take_while(|e| e.rv > rv) {
        if !event.key.within(resource, namespace) {
            continue;
        }
        match &event.prev {
            Some(prev) => objects.insert(event.key.clone(), prev.clone()),
            None => objects.remove(&event.key),
        };
    }
    Ok((objects.into_iter().collect(), rv))
}

/// Where a watch begins ([`Store::watch`]).
#[derive(Debug)]
pub enum Begin {
    /// The objects now, and the resourceVersion they are at.
    Objects(Snapshot),
    /// The resource's events after the watch's resourceVersion, and the resourceVersion
    /// they reach.
    Events(Vec<Arc<Event>>, u64),
}

const STALE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

fn not_found(resource: &ResourceType, name: &str) -> Error {
    Error::NotFound { resource: resource.group_resource(), name: name.to_string() }
}

fn conflict(resource: &ResourceType, name: &str, problem: &str) -> Error {
    Error::Conflict {
        resource: resource.group_resource(),
        name: name.to_string(),
        problem: problem.to_string(),
    }
}

/// The 410 for a resourceVersion older than the history.
pub fn too_old(rv: u64, compacted: u64) -> Error {
    Error::Expired(format!("too old resource version: {rv} ({compacted})"))
}
