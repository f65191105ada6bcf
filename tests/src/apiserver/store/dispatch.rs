//! Which open watches a write is sent to, as kube-apiserver's watch cache dispatches
//! it: by resource, and, for a watch whose field selector asks one value of an indexed
//! field (`metadata.name`, a pod's `spec.nodeName`: the cacher's triggers), only when
//! the object's old or new value is that one. Each watch has a queue of its own that a
//! write's event is pushed on as it commits, so a write wakes the watches that may see
//! it, not every watch of the server (B13: 2,000 watches woken by each of a fleet's
//! writes held the test server at a thousand requests a second).
//!
//! A watch whose queue is full is too slow: it is dropped from here, and its stream
//! ends (kube-apiserver closes such a watch, and the client watches again from the
//! last resourceVersion it saw).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use super::{Event, Key};
use crate::apiserver::resource::ResourceType;

/// The fields a watch's selector may be indexed by.
pub const TRIGGER_FIELDS: [&str; 2] = ["metadata.name", "spec.nodeName"];

/// Where a watch is filed: its resource, and the indexed field and value its selector
/// asks for, if any.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Trigger {
    group: &'static str,
    plural: &'static str,
    field: Option<(&'static str, String)>,
}

impl Trigger {
    /// Every write of `resource`; or, with `field`, those whose object had or has that
    /// value in that field (one of [`TRIGGER_FIELDS`]).
    pub fn new(resource: &ResourceType, field: Option<(&'static str, String)>) -> Trigger {
        Trigger { group: resource.group, plural: resource.plural, field }
    }

    fn of(key: &Key, field: Option<(&'static str, String)>) -> Trigger {
        Trigger { group: key.group, plural: key.plural, field }
    }
}

/// The value of an indexed field in `object` (empty when absent, as a field selector
/// reads it).
pub(super) fn field_value<'a>(object: &'a Value, field: &str) -> &'a str {
    let pointer = match field {
        "metadata.name" => "/metadata/name",
        _ => "/spec/nodeName",
    };
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The open watches' queues, by [`Trigger`].
#[derive(Debug, Default)]
pub struct Dispatch {
    queues: HashMap<Trigger, Vec<mpsc::Sender<Arc<Event>>>>,
}

impl Dispatch {
    pub fn register(&mut self, trigger: Trigger, queue: mpsc::Sender<Arc<Event>>) {
        let queues = self.queues.entry(trigger).or_default();
        queues.retain(|q| !q.is_closed());
        queues.push(queue);
    }

    /// Pushes `event` on the queue of every watch that may see it.
    pub fn dispatch(&mut self, event: &Arc<Event>) {
        let mut triggers = vec![Trigger::of(&event.key, None)];
        for field in TRIGGER_FIELDS {
            for object in std::iter::once(&event.object).chain(event.prev.as_ref()) {
                let trigger =
                    Trigger::of(&event.key, Some((field, field_value(object, field).into())));
                if !triggers.contains(&trigger) {
                    triggers.push(trigger);
                }
            }
        }
        for trigger in triggers {
            let Some(queues) = self.queues.get_mut(&trigger) else { continue };
            // Closed: the watch ended. Full: it is too slow, and ends.
            queues.retain(|queue| queue.try_send(event.clone()).is_ok());
            if queues.is_empty() {
                self.queues.remove(&trigger);
            }
        }
    }

    /// Open watches filed here (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.queues.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{Begin, Store};
    use super::*;
    use crate::apiserver::resource::{NODES, PODS};

    fn pod(name: &str, node: &str) -> Value {
        json!({
            "metadata": { "name": name, "namespace": "default" },
            "spec": { "nodeName": node, "containers": [{ "name": "c", "image": "i" }] },
        })
    }

    fn on_node(node: &str) -> Trigger {
        Trigger::new(&PODS, Some(("spec.nodeName", node.to_owned())))
    }

    /// The names of the pods queued, in order.
    fn queued(events: &mut mpsc::Receiver<Arc<Event>>) -> Vec<String> {
        std::iter::from_fn(|| events.try_recv().ok()).map(|e| e.key.name.clone()).collect()
    }

    #[test]
    fn a_write_reaches_the_watches_of_its_resource_and_trigger_only() {
        let store = Store::new(100);
        let watch = |trigger| match store.watch(&PODS, None, trigger, None) {
            Ok((Begin::Objects(_), events)) => events,
            other => panic!("{other:?}"),
        };
        let (mut a, mut b, mut all) =
            (watch(on_node("a")), watch(on_node("b")), watch(Trigger::new(&PODS, None)));
        let named = Trigger::new(&PODS, Some(("metadata.name", "web-b".to_owned())));
        let mut by_name = watch(named);
        let (_, mut nodes) = store.watch(&NODES, None, Trigger::new(&NODES, None), None).unwrap();
        store.create(&PODS, Some("default"), pod("web-a", "a")).unwrap();
        store.create(&PODS, Some("default"), pod("web-b", "b")).unwrap();
        assert_eq!(queued(&mut a), ["web-a"]);
        assert_eq!(queued(&mut b), ["web-b"]);
        assert_eq!(queued(&mut all), ["web-a", "web-b"]);
        assert_eq!(queued(&mut by_name), ["web-b"]);
        assert!(queued(&mut nodes).is_empty(), "another resource");
    }

    /// A pod bound to a node is still sent to the watches of unscheduled pods (their
    /// `spec.nodeName=` selector reads it as DELETED), and to its node's.
    #[test]
    fn a_write_reaches_the_watches_of_the_old_value_too() {
        let mut dispatch = Dispatch::default();
        let (unscheduled, mut unscheduled_events) = mpsc::channel(10);
        let (on_a, mut a_events) = mpsc::channel(10);
        let (on_b, mut b_events) = mpsc::channel(10);
        dispatch.register(on_node(""), unscheduled);
        dispatch.register(on_node("a"), on_a);
        dispatch.register(on_node("b"), on_b);
        let bound = Event {
            rv: 3,
            kind: super::super::EventType::Modified,
            key: Key::new(&PODS, Some("default"), "web"),
            object: Arc::new(pod("web", "a")),
            prev: Some(Arc::new(pod("web", ""))),
        };
        dispatch.dispatch(&Arc::new(bound));
        assert_eq!(queued(&mut unscheduled_events), ["web"]);
        assert_eq!(queued(&mut a_events), ["web"]);
        assert!(queued(&mut b_events).is_empty());
    }

    /// A watch as far behind as the history is long is too slow: it is dropped, and
    /// its queue ends after what it holds.
    #[test]
    fn a_watch_too_far_behind_is_dropped() {
        let store = Store::new(2);
        let (_, mut events) = store.watch(&PODS, None, Trigger::new(&PODS, None), None).unwrap();
        for name in ["p1", "p2", "p3"] {
            store.create(&PODS, Some("default"), pod(name, "a")).unwrap();
        }
        assert_eq!(queued(&mut events), ["p1", "p2"]);
        assert!(events.is_closed(), "dropped by the dispatch");
        assert_eq!(store.lock().dispatch.len(), 0);
    }
}
