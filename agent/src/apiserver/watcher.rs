//! The list and watch of one kind of object, which every watch of the agent is built on:
//! the API source's pods, the objects API pods refer to, and the kinds to come.
//!
//! The shape is kube-rs's `watcher`: a private [`State`] stepped by one function and
//! wrapped with `stream::unfold`, and an [`Event`] in which a (re-)list is part of the
//! protocol (`Init`, `InitApply`…, `InitDone`), so that a consumer swaps its set in at
//! `InitDone` (SEMANTICS.md M6). It is written here rather than taken from kube-runtime
//! because the agent must know what kube's hides: when a watch is established again
//! after a failure ([`Event::Recovered`]) and when a bookmark arrives
//! ([`Event::Bookmark`]), which is how a source knows it is live again; whether the
//! server answered at all ([`Connectivity`]); and it backs off by itself, with jitter,
//! cut short by [`Wakeups`](super::Wakeups) when the server may answer now.
//!
//! The contract is client-go's reflector's: list (paged), then watch from the list's
//! resourceVersion with bookmarks; resume from the last resourceVersion seen (an
//! object's or a bookmark's) when a watch ends or breaks; list again on `410 Gone`;
//! back off between failures; after a long outage found by another request, resume at
//! a random point of the node's spread window ([`spread_window`]). [`ListWatch`] is the
//! IO (kube's [`Api`]; a scripted fake in tests), so all of it runs on tokio's paused
//! clock in the unit tests.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::ObjectList;
use outpost_core::backoff::Backoff;
use outpost_core::pace::spread_window;
use serde::de::DeserializeOwned;
use tracing::debug;

use super::client::Pacer;
use super::{Connectivity, Wakeups, Woken};

/// The shortest server-side watch timeout: each watch asks a random timeout between
/// this and twice this ([`spread_timeout`]). client-go's reflector asks 5 to 10 minutes,
/// so that a client learns of a dead connection; here bookmarks do that
/// ([`BOOKMARK_SILENCE`]), and a watch renewed every 15 to 30 minutes costs a node's four
/// watches 0.18 requests a minute instead of 0.53 (B13's idle rate; kube-apiserver's own
/// default for a watch that names no timeout is 30 to 60 minutes).
pub const MIN_WATCH_TIMEOUT_SECS: u32 = 900;

/// kube-apiserver's watch cache sends a watch that asked for bookmarks one every minute
/// (`defaultBookmarkFrequency`), besides one before its timeout. A watch that has had a
/// bookmark and then hears nothing for this long (two and a half of those minutes) is
/// taken for a dead connection and resumed, however long its timeout.
pub const BOOKMARK_SILENCE: Duration = Duration::from_secs(150);

/// How long past its own timeout a watch may stay silent before the watcher takes the
/// connection for dead and resumes: a server ends a watch at its `timeoutSeconds`, so
/// a watch that gets no event and no bookmark is not cut before that (kube's client has
/// no read timeout of its own).
pub const WATCH_GRACE: Duration = Duration::from_secs(30);

/// How often a watcher probes on its own while the server is unreachable and the node's
/// Lease probes for it (jittered down to half). The Lease probes every 10 s at most,
/// and the server found back (by any request) or a network change wakes every watcher
/// at once; so a node finds its
/// server with its Lease's probe, not with five racing probes (B13: with watchers
/// retrying up to every 30 s, a third of a fleet found the server in the first second
/// after an outage, each node sending its return's requests in it).
pub const UNREACHABLE_RETRY: Backoff =
    Backoff::new(Duration::from_secs(60), Duration::from_secs(60));

/// The `timeoutSeconds` of one watch call: between `min` and twice `min`, drawn with
/// `unit` (in `[0, 1)`), as client-go draws each watch's between 5 and 10 minutes.
/// Watches started together (a fleet that came up, or came back, in the same second)
/// would otherwise all end and be opened again in the same second every `min` (B13:
/// 100 nodes' 400 watches renewed in one second, 16.8 × the idle mean).
pub fn spread_timeout(min: u32, unit: f64) -> u32 {
    let spread = (f64::from(min) * unit.clamp(0.0, 1.0)).floor() as u32;
    min + spread.min(min.saturating_sub(1))
}

/// The events of one watch call, as kube's client reads them.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// The list and watch calls of one kind (what kube's [`Api`] does); a fake in tests.
/// (`K: Clone` because kube's [`ObjectList`] asks it.)
pub trait ListWatch<K: Clone>: Send + Sync + 'static {
    /// One page of a list.
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<K>, kube::Error>>;
    /// A watch from `version` (ends at the server's timeout, or breaks).
    fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<K>, kube::Error>>;
}

impl<K> ListWatch<K> for Api<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<K>, kube::Error>> {
        let params = params.clone();
        Box::pin(async move { Api::list(self, &params).await })
    }

    fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<K>, kube::Error>> {
        let (params, version) = (params.clone(), version.to_owned());
        Box::pin(async move { Ok(Api::watch(self, &params, &version).await?.boxed()) })
    }
}

/// What to list and watch.
#[derive(Debug, Clone)]
pub struct Config {
    /// `spec.nodeName=<node>`, `metadata.name=<name>`.
    pub field_selector: Option<String>,
    /// Objects per list page (`None`: one page).
    pub page_size: Option<u32>,
    /// The shortest server-side timeout a watch asks ([`MIN_WATCH_TIMEOUT_SECS`]).
    pub watch_timeout_secs: u32,
    /// Between failures ([`Backoff::WATCH`]).
    pub backoff: Backoff,
    /// The node's client's bucket ([`ApiClient::pacer`](super::ApiClient::pacer)): each
    /// list and watch call takes a token, and a refusal for load slows the node's
    /// writes too (`None`: unpaced, for a watch made before the node has a client).
    pub pacer: Option<Pacer>,
}

/// What a watcher yields, kube-rs's shape: a (re-)list is part of the protocol.
#[derive(Debug)]
pub enum Event<K> {
    /// A list begins: what follows until `InitDone` is the whole set.
    Init,
    /// One object of that list (pages flattened).
    InitApply(K),
    /// The list is complete: the set since `Init` replaces the previous one.
    InitDone,
    /// ADDED or MODIFIED while watching.
    Apply(K),
    /// DELETED while watching.
    Delete(K),
    /// The server is there; nothing changed.
    Bookmark,
    /// A watch is established again after a `Failed`, with no list since (a list's
    /// `InitDone` says as much).
    Recovered,
    /// A list or watch failed: the watcher backs off, then lists again (after a list's
    /// failure) or resumes the watch from its version (after a watch's).
    Failed(Error),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing {what}: {source}")]
    List {
        /// The kind and selector, e.g. `pods (spec.nodeName=edge-1)`.
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("watching {what}: {source}")]
    Watch {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("the watch of {what} failed: {message} (code {code})")]
    WatchStatus { what: String, code: u16, message: String },
}

impl Error {
    /// The cause, if the call or stream broke at the transport level (not an API
    /// status): the server, or the way to it, is gone.
    fn transport(&self) -> Option<&kube::Error> {
        match self {
            Error::List { source, .. } | Error::Watch { source, .. } => {
                (!matches!(source, kube::Error::Api(_))).then_some(source)
            }
            Error::WatchStatus { .. } => None,
        }
    }
}

/// Lists then watches `lw` forever: resumes from the last resourceVersion seen (objects'
/// and bookmarks'), lists again on 410 Gone (as an HTTP error or a watch ERROR event),
/// backs off with jitter after a failure (the delay cut short by `connectivity`'s
/// wakeups: a network change, the server found back), and marks `connectivity`
/// reachable on a list, a bookmark or an established watch, unreachable when a call or
/// stream breaks at the transport level (not on an API status error).
///
/// The events of a list need no IO between them once its last page came; a consumer
/// may take what is ready without waiting (`now_or_never`) to batch its work.
pub fn watcher<K, L>(
    lw: L,
    config: Config,
    connectivity: Connectivity,
) -> impl Stream<Item = Event<K>> + Send
where
    K: Clone + Debug + Send + 'static + kube::Resource,
    K::DynamicType: Default,
    L: ListWatch<K>,
{
    let context = Context::new::<K>(lw, config, connectivity);
    futures::stream::unfold((State::Empty, context), |(mut state, mut context)| async move {
        loop {
            let (event, next) = step(state, &mut context).await;
            state = next;
            if let Some(event) = event {
                return Some((event, (state, context)));
            }
        }
    })
}

/// Where a watcher stands.
enum State<K> {
    /// A list is to begin.
    Empty,
    /// A list is under way: the objects of its last page still to yield, the token of
    /// the next page, and, once the last page came, the list's resourceVersion.
    Listing { objects: VecDeque<K>, continue_token: Option<String>, version: Option<String> },
    /// A watch from `version` is to start: after a list, a watch's end, a backoff.
    Resume { version: String },
    /// A watch is open; `version` is the last seen (an object's or a bookmark's). Past
    /// `silence` with nothing read, the connection is taken for dead: its timeout and
    /// [`WATCH_GRACE`], or [`BOOKMARK_SILENCE`] after what was last read once the server
    /// has sent a bookmark on it.
    Watching { version: String, stream: WatchStream<K>, silence: Silence },
    /// After a failure: waits `delay` (or less, when woken), then goes on to `then`.
    Backoff { delay: Duration, then: Box<State<K>> },
}

/// When an open watch's silence means its connection is dead.
#[derive(Debug, Clone, Copy)]
struct Silence {
    /// The watch's timeout and [`WATCH_GRACE`].
    deadline: tokio::time::Instant,
    /// [`BOOKMARK_SILENCE`] after what was last read, once a bookmark came.
    heartbeat: Option<tokio::time::Instant>,
}

impl Silence {
    fn new(deadline: tokio::time::Instant) -> Silence {
        Silence { deadline, heartbeat: None }
    }

    fn until(&self) -> tokio::time::Instant {
        self.heartbeat.map_or(self.deadline, |heartbeat| heartbeat.min(self.deadline))
    }

    /// Something was read now (`bookmark`: a bookmark): the server sends them, so
    /// silence is judged by them from now on.
    fn heard(&mut self, bookmark: bool) {
        if bookmark || self.heartbeat.is_some() {
            self.heartbeat = Some(tokio::time::Instant::now() + BOOKMARK_SILENCE);
        }
    }
}

/// What a watcher keeps across states.
struct Context<L> {
    lw: L,
    /// The kind and selector, for errors and logs.
    what: String,
    list: ListParams,
    watch: WatchParams,
    /// The shortest `timeoutSeconds` a watch asks ([`Config::watch_timeout_secs`]).
    watch_timeout_secs: u32,
    backoff: Backoff,
    pacer: Option<Pacer>,
    connectivity: Connectivity,
    wakeups: Wakeups,
    /// A failure was yielded and nothing has confirmed the connection since.
    failing: bool,
}

impl<L> Context<L> {
    /// The parameters of the next watch call, its timeout spread ([`spread_timeout`]),
    /// and the timeout.
    fn watch_params(&self) -> (WatchParams, Duration) {
        let timeout = spread_timeout(self.watch_timeout_secs, fastrand::f64());
        (self.watch.clone().timeout(timeout), Duration::from_secs(u64::from(timeout)))
    }

    fn new<K>(lw: L, config: Config, connectivity: Connectivity) -> Context<L>
    where
        K: kube::Resource,
        K::DynamicType: Default,
    {
        let kind = K::plural(&K::DynamicType::default()).into_owned();
        let mut list = ListParams::default();
        let mut watch = WatchParams::default().timeout(config.watch_timeout_secs);
        let what = match &config.field_selector {
            Some(selector) => {
                list = list.fields(selector);
                watch = watch.fields(selector);
                format!("{kind} ({selector})")
            }
            None => kind,
        };
        if let Some(size) = config.page_size {
            list = list.limit(size);
        }
        let wakeups = connectivity.wakeups();
        Context {
            lw,
            what,
            list,
            watch,
            watch_timeout_secs: config.watch_timeout_secs,
            backoff: config.backoff,
            pacer: config.pacer,
            connectivity,
            wakeups,
            failing: false,
        }
    }

    /// Waits for the pacer's token before a call.
    async fn paced(&self) {
        if let Some(pacer) = &self.pacer {
            pacer.ready().await;
        }
    }

    /// Tells the pacer how the server answered a call (a 429 slows the node's bucket;
    /// a transport failure is no answer).
    fn answered<T>(&self, result: &Result<T, kube::Error>) {
        let Some(pacer) = &self.pacer else { return };
        match result {
            Err(kube::Error::Api(status)) => {
                let code = http::StatusCode::from_u16(status.code)
                    .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
                pacer.answered(code, None);
            }
            Ok(_) => pacer.answered(http::StatusCode::OK, None),
            Err(_) => {}
        }
    }

    /// A list came to its end: the server is there, the failure (if any) is over.
    fn listed(&mut self) {
        self.backoff.reset();
        self.failing = false;
        self.connectivity.reachable();
    }

    /// A watch is established; true if it ends a failure.
    fn connected(&mut self) -> bool {
        self.backoff.reset();
        self.connectivity.reachable();
        std::mem::take(&mut self.failing)
    }

    /// `error` is yielded, then `then` follows a backoff.
    fn failed<K>(&mut self, error: Error, then: State<K>) -> (Option<Event<K>>, State<K>) {
        if let Some(cause) = error.transport() {
            self.connectivity.unreachable(&cause.to_string());
        }
        self.failing = true;
        let mut delay = self.backoff.next_delay(fastrand::f64());
        if error.transport().is_some() && self.connectivity.is_probed() {
            // The server is gone: the node's Lease probes for it (every 10 s at most),
            // and its return or a network change wakes this watcher at once.
            let mut probe = UNREACHABLE_RETRY;
            delay = delay.max(probe.next_delay(fastrand::f64()));
        }
        debug!(what = %self.what, error = %error, retry_in = ?delay, "list or watch failed");
        (Some(Event::Failed(error)), State::Backoff { delay, then: Box::new(then) })
    }
}

/// One step of the watcher: the next state, and what to yield (`None`: step again).
async fn step<K, L>(state: State<K>, cx: &mut Context<L>) -> (Option<Event<K>>, State<K>)
where
    K: Clone + Debug + Send + 'static + kube::Resource,
    L: ListWatch<K>,
{
    match state {
        State::Empty => {
            let listing =
                State::Listing { objects: VecDeque::new(), continue_token: None, version: None };
            (Some(Event::Init), listing)
        }
        State::Listing { mut objects, continue_token, version } => {
            if let Some(object) = objects.pop_front() {
                let listing = State::Listing { objects, continue_token, version };
                return (Some(Event::InitApply(object)), listing);
            }
            if let Some(version) = version {
                return (Some(Event::InitDone), State::Resume { version });
            }
            let mut params = cx.list.clone();
            params.continue_token = continue_token;
            cx.paced().await;
            let result = cx.lw.list(&params).await;
            cx.answered(&result);
            match result {
                Ok(page) => {
                    let continue_token = page.metadata.continue_.filter(|c| !c.is_empty());
                    let version = match continue_token {
                        Some(_) => None,
                        None => {
                            cx.listed();
                            Some(page.metadata.resource_version.unwrap_or_default())
                        }
                    };
                    debug!(what = %cx.what, objects = page.items.len(), ?version, "listed a page");
                    (None, State::Listing { objects: page.items.into(), continue_token, version })
                }
                Err(source) => {
                    cx.failed(Error::List { what: cx.what.clone(), source }, State::Empty)
                }
            }
        }
        State::Resume { version } => {
            let (params, timeout) = cx.watch_params();
            cx.paced().await;
            let result = cx.lw.watch(&params, &version).await;
            cx.answered(&result);
            match result {
                Ok(stream) => {
                    let recovered = cx.connected();
                    let silence = Silence::new(tokio::time::Instant::now() + timeout + WATCH_GRACE);
                    let watching = State::Watching { version, stream, silence };
                    (recovered.then_some(Event::Recovered), watching)
                }
                Err(kube::Error::Api(status)) if status.code == 410 => {
                    debug!(what = %cx.what, message = %status.message, "the version is too old; listing again");
                    (None, State::Empty)
                }
                Err(source) => {
                    let error = Error::Watch { what: cx.what.clone(), source };
                    cx.failed(error, State::Resume { version })
                }
            }
        }
        State::Watching { mut version, mut stream, mut silence } => {
            let Ok(next) = tokio::time::timeout_at(silence.until(), stream.next()).await else {
                debug!(what = %cx.what, "the watch stayed silent past its timeout or its bookmarks; resuming");
                return (None, State::Resume { version });
            };
            silence.heard(matches!(next, Some(Ok(WatchEvent::Bookmark(_)))));
            let event = match next {
                None => return (None, State::Resume { version }),
                Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                    remember(&mut version, &object);
                    Event::Apply(object)
                }
                Some(Ok(WatchEvent::Deleted(object))) => {
                    remember(&mut version, &object);
                    Event::Delete(object)
                }
                Some(Ok(WatchEvent::Bookmark(mark))) => {
                    cx.connectivity.reachable();
                    version = mark.metadata.resource_version;
                    Event::Bookmark
                }
                Some(Ok(WatchEvent::Error(status)) | Err(kube::Error::Api(status)))
                    if status.code == 410 =>
                {
                    debug!(what = %cx.what, message = %status.message, "the watch expired; listing again");
                    return (None, State::Empty);
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    let error = Error::WatchStatus {
                        what: cx.what.clone(),
                        code: status.code,
                        message: status.message,
                    };
                    return cx.failed(error, State::Resume { version });
                }
                Some(Err(source)) => {
                    let error = Error::Watch { what: cx.what.clone(), source };
                    return cx.failed(error, State::Resume { version });
                }
            };
            (Some(event), State::Watching { version, stream, silence })
        }
        State::Backoff { delay, then } => {
            let woken = cx.wakeups.pause(delay).await;
            if woken != Woken::Backoff {
                debug!(what = %cx.what, ?woken, "retrying before the backoff's end");
            }
            if woken == Woken::Reconnected {
                // Another request found the server back after a long outage: this one
                // goes at its own point of the node's spread window (B13), not with the
                // whole fleet's in the same second.
                let away = cx.connectivity.last_reconnect().away;
                let window = spread_window(away, 0);
                tokio::time::sleep(window.mul_f64(fastrand::f64())).await;
            }
            (None, *then)
        }
    }
}

/// An object's resourceVersion is where the next watch resumes.
fn remember<K: kube::Resource>(version: &mut String, object: &K) {
    if let Some(v) = &object.meta().resource_version {
        version.clone_from(v);
    }
}

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;
