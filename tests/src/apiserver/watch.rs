//! Watch streams: newline-delimited `{"type": …, "object": …}` events, as the real
//! server's watch cache sends them.
//!
//! - Start: no `resourceVersion` or `0` starts with a synthetic `ADDED` for every
//!   matching object; `N` streams the events after `N` (410 `Expired` as an `ERROR`
//!   event when `N` is older than the history; `N` ahead of the store is waited for up
//!   to 3 s, then a 504 `ERROR`). `sendInitialEvents=true` (needs
//!   `allowWatchBookmarks=true` and `resourceVersionMatch=NotOlderThan`) sends the
//!   synthetic `ADDED`s and then a `BOOKMARK` annotated `k8s.io/initial-events-end`.
//! - Selectors: an object that starts matching arrives as `ADDED`, one that stops
//!   matching as `DELETED` (its previous state at the new resourceVersion).
//! - `BOOKMARK`s every bookmark interval when `allowWatchBookmarks=true`, carrying the
//!   resourceVersion the watch has reached.
//! - `timeoutSeconds` ends the stream cleanly (default 1800 s).
//! - Each watch is sent the writes it may see as they commit (the store's dispatch, by
//!   resource and by `metadata.name` or `spec.nodeName` when its selector asks one); a
//!   watch more than the history's length behind is too slow, and its stream ends.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::error::Error;
use super::list::{FUTURE_RV_WAIT, ListOptions};
use super::resource::ResourceType;
use super::selector::Filter;
use super::store::{Begin, Event, EventType, Store, Trigger};

/// The server's default watch length when the request gives no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// A validated watch request.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    pub resource: &'static ResourceType,
    pub namespace: Option<String>,
    pub filter: Filter,
    /// `None`: start with the current state as `ADDED` events.
    pub after: Option<u64>,
    pub bookmarks: bool,
    pub initial_events_end: bool,
    pub timeout: Duration,
}

impl WatchRequest {
    pub fn new(
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<WatchRequest, Error> {
        if options.send_initial_events {
            let invalid = |message: &str| Error::Invalid {
                kind: "ListOptions".into(),
                group: "meta.k8s.io".into(),
                name: String::new(),
                causes: vec![super::error::Cause::forbidden("sendInitialEvents", message)],
            };
            if !options.allow_watch_bookmarks {
                return Err(invalid(
                    "sendInitialEvents requires setting allowWatchBookmarks to true",
                ));
            }
            if options.resource_version_match.as_deref() != Some("NotOlderThan") {
                return Err(invalid(
                    "sendInitialEvents requires resourceVersionMatch=NotOlderThan",
                ));
            }
        }
        let rv = options.resource_version_number()?;
        Ok(WatchRequest {
            resource,
            namespace: namespace.map(str::to_string),
            filter: options.filter.clone(),
            after: if options.send_initial_events { None } else { rv },
            bookmarks: options.allow_watch_bookmarks,
            initial_events_end: options.send_initial_events,
            timeout: options.timeout_seconds.map_or(DEFAULT_TIMEOUT, Duration::from_secs),
        })
    }
}

/// The open watches, per resource (`pods`, `leases.coordination.k8s.io`).
#[derive(Debug, Default)]
pub struct Watchers {
    counts: watch::Sender<BTreeMap<String, usize>>,
}

impl Watchers {
    /// Counts a watch as open until the returned guard is dropped.
    pub fn enter(self: &Arc<Self>, resource: String) -> WatcherGuard {
        self.counts.send_modify(|counts| *counts.entry(resource.clone()).or_default() += 1);
        WatcherGuard { watchers: self.clone(), resource }
    }

    /// Open watches on `resource`.
    pub fn count(&self, resource: &str) -> usize {
        self.counts.borrow().get(resource).copied().unwrap_or_default()
    }

    /// Open watches by resource.
    pub fn all(&self) -> BTreeMap<String, usize> {
        self.counts.borrow().clone()
    }

    /// Waits until at least `n` watches on `resource` are open.
    pub async fn wait_for(&self, resource: &str, n: usize) {
        let mut counts = self.counts.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = counts.wait_for(|c| c.get(resource).copied().unwrap_or_default() >= n).await;
    }
}

/// Keeps a watch counted in [`Watchers`] while it lives.
#[derive(Debug)]
pub struct WatcherGuard {
    watchers: Arc<Watchers>,
    resource: String,
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        self.watchers.counts.send_modify(|counts| {
            if let Some(n) = counts.get_mut(&self.resource) {
                *n = n.saturating_sub(1);
            }
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Starting,
    Streaming,
    Done,
}

/// One open watch, stepped by [`Watch::next`].
#[derive(Debug)]
struct Watch {
    store: Arc<Store>,
    request: WatchRequest,
    phase: Phase,
    /// The resourceVersion up to which events have been sent.
    cursor: u64,
    queue: VecDeque<Bytes>,
    /// The writes this watch may see, from the store's dispatch (once started).
    events: Option<mpsc::Receiver<Arc<Event>>>,
    bookmarks: Option<Interval>,
    deadline: Instant,
    _guard: WatcherGuard,
}

/// The body of a watch response: one JSON line per event.
pub fn stream(
    store: Arc<Store>,
    request: WatchRequest,
    bookmark_interval: Duration,
    guard: WatcherGuard,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let bookmarks = request.bookmarks.then(|| {
        let mut interval =
            tokio::time::interval_at(Instant::now() + bookmark_interval, bookmark_interval);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        interval
    });
    let watch = Watch {
        events: None,
        store,
        deadline: Instant::now() + request.timeout,
        request,
        phase: Phase::Starting,
        cursor: 0,
        queue: VecDeque::new(),
        bookmarks,
        _guard: guard,
    };
    futures::stream::unfold(watch, Watch::next)
}

impl Watch {
    async fn next(mut self) -> Option<(Bytes, Watch)> {
        loop {
            if let Some(line) = self.queue.pop_front() {
                return Some((line, self));
            }
            match self.phase {
                Phase::Done => return None,
                Phase::Starting => self.start().await,
                Phase::Streaming => self.wait().await,
            }
        }
    }

    async fn start(&mut self) {
        self.phase = Phase::Streaming;
        let after = self.request.after;
        if let Some(after) = after
            && after > self.store.resource_version()
        {
            let mut changes = self.store.subscribe();
            let wait = changes.wait_for(|rv| *rv >= after);
            let reached = matches!(tokio::time::timeout(FUTURE_RV_WAIT, wait).await, Ok(Ok(_)));
            if !reached {
                let current = self.store.resource_version();
                return self.fail(&Error::TooLargeResourceVersion { requested: after, current });
            }
        }
        let (resource, namespace) = (self.request.resource, self.request.namespace.as_deref());
        let trigger = Trigger::new(resource, self.request.filter.trigger());
        let (begin, events) = match self.store.watch(resource, namespace, trigger, after) {
            Ok(opened) => opened,
            Err(error) => return self.fail(&error),
        };
        self.events = Some(events);
        match begin {
            Begin::Objects((objects, rv)) => {
                for (_, object) in objects {
                    if self.request.filter.matches(resource, &object) {
                        self.push("ADDED", &object);
                    }
                }
                self.cursor = rv;
                if self.request.initial_events_end {
                    self.push_bookmark(true);
                }
            }
            Begin::Events(events, rv) => {
                for event in &events {
                    self.deliver(event);
                }
                self.cursor = rv;
            }
        }
    }

    async fn wait(&mut self) {
        enum Wake {
            Timeout,
            Changed(Arc<Event>),
            Closed,
            Bookmark,
        }
        let Some(events) = self.events.as_mut() else {
            self.phase = Phase::Done;
            return;
        };
        let bookmarks = &mut self.bookmarks;
        let tick = async move {
            match bookmarks {
                Some(interval) => interval.tick().await,
                None => std::future::pending().await,
            }
        };
        let wake = tokio::select! {
            () = tokio::time::sleep_until(self.deadline) => Wake::Timeout,
            event = events.recv() => match event {
                Some(event) => Wake::Changed(event),
                None => Wake::Closed,
            },
            _ = tick => Wake::Bookmark,
        };
        match wake {
            // Closed: the store dropped this watch for being too slow.
            Wake::Timeout | Wake::Closed => self.phase = Phase::Done,
            Wake::Changed(event) => {
                self.deliver(&event);
                self.drain();
            }
            Wake::Bookmark => {
                // Every write up to the store's version now is on the queue already
                // (dispatched as it committed): the bookmark says how far it got.
                let reached = self.store.resource_version();
                self.drain();
                self.cursor = self.cursor.max(reached);
                self.push_bookmark(false);
            }
        }
    }

    /// Queues what is on the watch's queue now.
    fn drain(&mut self) {
        while let Some(event) = self.events.as_mut().and_then(|events| events.try_recv().ok()) {
            self.deliver(&event);
        }
    }

    /// Queues `event` if this watch sees it, and moves the cursor past it.
    fn deliver(&mut self, event: &Event) {
        let namespace = self.request.namespace.as_deref();
        if event.key.within(self.request.resource, namespace)
            && let Some((kind, object)) = self.seen_as(event)
        {
            self.push(kind, &object);
        }
        self.cursor = self.cursor.max(event.rv);
    }

    /// How the event looks through this watch's selectors.
    fn seen_as(&self, event: &Event) -> Option<(&'static str, Value)> {
        let (resource, filter) = (self.request.resource, &self.request.filter);
        let now = filter.matches(resource, &event.object);
        let before = event.prev.as_ref().is_some_and(|prev| filter.matches(resource, prev));
        match (event.kind, before, now) {
            (EventType::Added, _, true) | (EventType::Modified, false, true) => {
                Some(("ADDED", Value::clone(&event.object)))
            }
            (EventType::Modified, true, true) => Some(("MODIFIED", Value::clone(&event.object))),
            (EventType::Modified, true, false) => {
                let mut last = event.prev.as_deref().cloned().unwrap_or_default();
                last["metadata"]["resourceVersion"] = json!(event.rv.to_string());
                Some(("DELETED", last))
            }
            (EventType::Deleted, true, _) => Some(("DELETED", Value::clone(&event.object))),
            _ => None,
        }
    }

    fn push(&mut self, kind: &str, object: &Value) {
        let mut line =
            serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap_or_default();
        line.push(b'\n');
        self.queue.push_back(Bytes::from(line));
    }

    fn push_bookmark(&mut self, initial_events_end: bool) {
        let resource = self.request.resource;
        let mut metadata = json!({ "resourceVersion": self.cursor.to_string() });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let object = json!({ "kind": resource.kind, "apiVersion": resource.api_version(), "metadata": metadata });
        self.push("BOOKMARK", &object);
    }

    /// Sends `error` as an `ERROR` event and ends the watch.
    fn fail(&mut self, error: &Error) {
        self.push("ERROR", &error.status());
        self.phase = Phase::Done;
    }
}
