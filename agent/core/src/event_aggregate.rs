//! Kubernetes Events as the agent records them, decided without IO: client-go's
//! `EventCorrelator` (similar events combined, a rate limit per involved object, then
//! identical events folded into one Event with a `count`) and the bounded backlog of
//! Events waiting to be written while the API server is unreachable.
//!
//! - [`SimilarEvents`]: past [`SIMILAR_MAX`] different messages of one object's type
//!   and reason within [`SIMILAR_INTERVAL`], new ones become one Event "(combined from
//!   similar events): ..." per group.
//! - An event is identified by its [`EventKey`]: involved object (kind, namespace,
//!   name, uid), field path, type, reason and message. Identical events are one
//!   [`Series`]: one Event object whose `count` and `lastTimestamp` grow.
//! - [`SpamFilter`]: per involved object, a token bucket of [`SPAM_BURST`] refilled by one
//!   token every [`SPAM_REFILL`] (client-go's defaults); what it refuses is dropped and
//!   counted.
//! - The backlog holds the series with changes not yet written, oldest change first. It
//!   keeps the newest [`Limits::backlog`] of them; a series changing again while queued
//!   moves to the back and still counts as one. What falls off the front is counted.
//! - Series are remembered (to PATCH instead of POST) for the [`Limits::series`] most
//!   recently changed, as client-go's LRU cache does; a series forgotten and seen again
//!   starts a new Event object.
//! - After a reconnect ([`Correlator::reconnected`]), what happened while away is at
//!   most one Event per object, type and reason: of the series queued for one, the
//!   newest is written and the older ones are not ([`Stats::collapsed`]).
//! - What the server refuses for load is dropped, not retried ([`Correlator::refused`]):
//!   Events are the first thing a node gives up when its API server is overloaded. The
//!   first refusal after a reconnect also sheds the `Normal` Events of what happened
//!   while away still queued ([`Stats::shed`]): the pod's status says the same
//!   (`restartCount`, `lastState`), and a fleet that came back to a throttled server
//!   spends the server's capacity on statuses instead. `Warning`s stay queued.

mod lru;
mod similar;
mod spam;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

pub use self::similar::{COMBINED_PREFIX, SIMILAR_INTERVAL, SIMILAR_MAX, SimilarEvents};
pub use self::spam::{SPAM_BURST, SPAM_REFILL, SpamFilter};

/// The longest message kept (the API server's limit for an Event's note), in bytes.
pub const MAX_MESSAGE: usize = 1024;

/// `Normal` or `Warning`, as `Event.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// kubelet's event reasons (`pkg/kubelet/events`) that Outpost records.
pub mod reason {
    pub const PULLING: &str = "Pulling";
    pub const PULLED: &str = "Pulled";
    pub const CREATED: &str = "Created";
    pub const STARTED: &str = "Started";
    pub const FAILED: &str = "Failed";
    pub const KILLING: &str = "Killing";
    pub const UNHEALTHY: &str = "Unhealthy";
    pub const PROBE_WARNING: &str = "ProbeWarning";
    pub const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
    pub const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
    pub const BACK_OFF: &str = "BackOff";
    pub const OOM_KILLED: &str = "OOMKilled";
    pub const INSPECT_FAILED: &str = "InspectFailed";
    pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
    pub const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
    pub const FAILED_CREATE_POD_CONTAINER: &str = "FailedCreatePodContainer";
    pub const FAILED_MOUNT: &str = "FailedMount";
    pub const FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET: &str = "FailedToRetrieveImagePullSecret";
    pub const INVALID_ENVIRONMENT_VARIABLE_NAMES: &str = "InvalidEnvironmentVariableNames";
    pub const FAILED_VALIDATION: &str = "FailedValidation";
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    pub const EVICTED: &str = "Evicted";
    /// K4: a pod preempted for a critical pod.
    pub const PREEMPTING: &str = "Preempting";
    pub const MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";
    pub const DNS_CONFIG_FORMING: &str = "DNSConfigForming";
}

/// The object an event is about (its involvedObject, without the field path).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ObjectKey {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What makes two events the same Event object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventKey {
    pub object: ObjectKey,
    /// `spec.containers{name}` for a container's events, empty for the object's own.
    pub field_path: String,
    pub kind: EventType,
    pub reason: String,
    pub message: String,
}

impl EventKey {
    /// A key whose message is cut to [`MAX_MESSAGE`] bytes (on a character boundary).
    pub fn new(
        object: ObjectKey,
        field_path: String,
        kind: EventType,
        reason: &str,
        mut message: String,
    ) -> EventKey {
        if message.len() > MAX_MESSAGE {
            let mut end = MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        EventKey { object, field_path, kind, reason: reason.to_owned(), message }
    }
}

/// One Event object: identical events seen `count` times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The Event's `metadata.name`, fixed when the series starts.
    pub name: String,
    pub first: Timestamp,
    pub last: Timestamp,
    pub count: u32,
    /// The count the API server has (`None`: the Event is not created there yet).
    pub sent: Option<u32>,
}

/// What became of one observed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// Refused by the spam filter: dropped.
    RateLimited,
    /// The first of its series.
    New,
    /// Another occurrence of a known series (its count grew).
    Repeat,
}

/// How much is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Series with unwritten changes kept while the API server is unreachable.
    pub backlog: usize,
    /// Series remembered for aggregation (at least `backlog`).
    pub series: usize,
    /// Involved objects the spam filter remembers.
    pub objects: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { backlog: 1000, series: 4096, objects: 4096 }
    }
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Every event observed.
    pub emitted: u64,
    /// Dropped by the spam filter.
    pub rate_limited: u64,
    /// Folded into a series that was already waiting in the backlog.
    pub aggregated: u64,
    /// Series changes that fell off the backlog (or whose series was forgotten) unwritten.
    pub dropped: u64,
    /// Recorded as their group's "combined from similar events" Event.
    pub combined: u64,
    /// Series left unwritten after a reconnect: a newer one of the same object, type and
    /// reason was written instead.
    pub collapsed: u64,
    /// Refused by the server for load (429): dropped.
    pub refused: u64,
    /// `Normal` series of what happened while away, left unwritten when the server
    /// refused an Event for load after the reconnect.
    pub shed: u64,
}

impl Stats {
    /// Every change lost unwritten, whatever the reason.
    pub fn lost(&self) -> u64 {
        self.dropped + self.collapsed + self.refused + self.shed
    }
}

#[derive(Debug)]
struct Entry {
    series: Series,
    /// Position in the recency order.
    touched: u64,
    /// Position in the backlog, while queued.
    queued: Option<i64>,
}

/// Rate limiting, aggregation and the backlog, as one value.
#[derive(Debug)]
pub struct Correlator {
    limits: Limits,
    similar: SimilarEvents,
    spam: SpamFilter,
    /// Each key is kept once, shared by the series, the recency order and the backlog
    /// (B5: a pod's Events are several keys of its names and messages).
    entries: HashMap<Arc<EventKey>, Entry>,
    recency: BTreeMap<u64, Arc<EventKey>>,
    backlog: BTreeMap<i64, Arc<EventKey>>,
    clock: u64,
    front: i64,
    back: i64,
    /// After a reconnect and until the first refusal for load: the backlog position of
    /// the last change that happened while away.
    away: Option<i64>,
    stats: Stats,
}

impl Correlator {
    pub fn new(limits: Limits) -> Correlator {
        let limits = Limits {
            backlog: limits.backlog.max(1),
            series: limits.series.max(limits.backlog).max(1),
            objects: limits.objects.max(1),
        };
        Correlator {
            limits,
            similar: SimilarEvents::new(limits.objects),
            spam: SpamFilter::new(limits.objects),
            entries: HashMap::new(),
            recency: BTreeMap::new(),
            backlog: BTreeMap::new(),
            clock: 0,
            front: 0,
            back: 0,
            away: None,
            stats: Stats::default(),
        }
    }

    /// Observes one event at `now` (a monotonic clock reading) and `at` (wall time);
    /// `name` names the Event if this starts a series.
    pub fn observe(
        &mut self,
        key: EventKey,
        now: Duration,
        at: Timestamp,
        name: impl FnOnce() -> String,
    ) -> Observed {
        self.stats.emitted += 1;
        let aggregated = self.similar.aggregate(key.clone(), now);
        if aggregated != key {
            self.stats.combined += 1;
        }
        if !self.spam.allow(&aggregated.object, now) {
            self.stats.rate_limited += 1;
            return Observed::RateLimited;
        }
        let key = match self.entries.get_key_value(&aggregated) {
            Some((kept, _)) => kept.clone(),
            None => Arc::new(aggregated),
        };
        self.clock += 1;
        let touched = self.clock;
        let observed = match self.entries.get_mut(&*key) {
            Some(entry) => {
                entry.series.count = entry.series.count.saturating_add(1);
                entry.series.last = at;
                self.recency.remove(&entry.touched);
                entry.touched = touched;
                Observed::Repeat
            }
            None => {
                let series = Series { name: name(), first: at, last: at, count: 1, sent: None };
                self.entries.insert(key.clone(), Entry { series, touched, queued: None });
                Observed::New
            }
        };
        self.recency.insert(touched, key.clone());
        self.enqueue_back(key);
        self.forget_beyond_limit();
        observed
    }

    /// Takes the series whose change is oldest, to write it.
    pub fn take_next(&mut self) -> Option<(EventKey, Series)> {
        let (_, key) = self.backlog.pop_first()?;
        let entry = self.entries.get_mut(&*key)?;
        entry.queued = None;
        Some((EventKey::clone(&key), entry.series.clone()))
    }

    /// The API server now has the series with `count`.
    pub fn sent(&mut self, key: &EventKey, count: u32) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.series.sent = Some(entry.series.sent.map_or(count, |c| c.max(count)));
        }
    }

    /// Writing failed: the series goes back to the front of the backlog (unless a newer
    /// change queued it meanwhile). A full backlog keeps the newest, so it may drop it.
    pub fn retry(&mut self, key: &EventKey) {
        let Some((kept, _)) = self.entries.get_key_value(key) else { return };
        let kept = kept.clone();
        let Some(entry) = self.entries.get_mut(key) else { return };
        if entry.queued.is_some() {
            return;
        }
        self.front -= 1;
        entry.queued = Some(self.front);
        self.backlog.insert(self.front, kept);
        self.trim_backlog();
    }

    /// The API server no longer has the Event (expired): it is created anew.
    pub fn expired(&mut self, key: &EventKey) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.series.sent = None;
        }
        self.retry(key);
    }

    /// The server is reachable again after an outage: of the series queued for one
    /// object, type and reason, only the newest stays queued (what happened while away
    /// is one Event per pod per reason). Returns how many were left unwritten.
    pub fn reconnected(&mut self) -> u64 {
        let mut newest = std::collections::HashSet::new();
        let older: Vec<i64> = (self.backlog.iter().rev())
            .filter(|(_, key)| !newest.insert((&key.object, key.kind, key.reason.as_str())))
            .map(|(at, _)| *at)
            .collect();
        self.unqueue(&older);
        let collapsed = older.len() as u64;
        self.stats.collapsed += collapsed;
        self.away = Some(self.back);
        collapsed
    }

    /// The server refused writing the series for load (429): the change is dropped. The
    /// series keeps its count, so a later repeat writes it whole. The first refusal
    /// after a reconnect also drops the `Normal` series of what happened while away
    /// still queued. Returns how many of those it dropped.
    pub fn refused(&mut self, key: &EventKey) -> u64 {
        if self.entries.contains_key(key) {
            self.stats.refused += 1;
        }
        let Some(away) = self.away.take() else { return 0 };
        let shed: Vec<i64> = (self.backlog.range(..=away))
            .filter(|(_, key)| key.kind == EventType::Normal)
            .map(|(at, _)| *at)
            .collect();
        self.unqueue(&shed);
        self.stats.shed += shed.len() as u64;
        shed.len() as u64
    }

    /// Series waiting to be written.
    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Up to `limit` series, most recently changed first.
    pub fn recent(&self, limit: usize) -> Vec<(EventKey, Series)> {
        self.recency
            .values()
            .rev()
            .take(limit)
            .filter_map(|k| Some((EventKey::clone(k), self.entries.get(k)?.series.clone())))
            .collect()
    }

    /// Takes the series at backlog positions `at` out of the backlog, unwritten.
    fn unqueue(&mut self, at: &[i64]) {
        for at in at {
            if let Some(key) = self.backlog.remove(at)
                && let Some(entry) = self.entries.get_mut(&key)
            {
                entry.queued = None;
            }
        }
    }

    fn enqueue_back(&mut self, key: Arc<EventKey>) {
        let Some(entry) = self.entries.get_mut(&*key) else { return };
        if let Some(at) = entry.queued.take() {
            self.backlog.remove(&at);
            self.stats.aggregated += 1;
        }
        self.back += 1;
        entry.queued = Some(self.back);
        self.backlog.insert(self.back, key);
        self.trim_backlog();
    }

    fn trim_backlog(&mut self) {
        while self.backlog.len() > self.limits.backlog {
            let Some((_, key)) = self.backlog.pop_first() else { return };
            if let Some(entry) = self.entries.get_mut(&key) {
                entry.queued = None;
            }
            self.stats.dropped += 1;
        }
    }

    fn forget_beyond_limit(&mut self) {
        while self.entries.len() > self.limits.series {
            let Some((_, key)) = self.recency.pop_first() else { return };
            if let Some(entry) = self.entries.remove(&key)
                && let Some(at) = entry.queued
            {
                self.backlog.remove(&at);
                self.stats.dropped += 1;
            }
        }
    }
}
