//! A scripted [`ListWatch`] for unit tests: it answers list and watch calls in the order
//! they were scripted, then never (the call hangs, as a server that does not answer),
//! and records every call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::stream::StreamExt;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::{ListMeta, ObjectList, Status, TypeMeta};

use super::{ListWatch, WatchStream};
use crate::apiserver::lock;

/// A call made to the fake, with what the watcher asked for. A watch's timeout spread
/// below [`MIN_WATCH_TIMEOUT_SECS`](super::MIN_WATCH_TIMEOUT_SECS) (`spread_timeout`, tested on
/// its own) is recorded as that maximum, so that scripts compare whole calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    List { fields: Option<String>, limit: Option<u32>, continue_token: Option<String> },
    Watch { fields: Option<String>, timeout: Option<u32>, version: String },
}

/// Cheap to clone: the clones share the script and the record.
pub(crate) struct FakeListWatch<K: Clone>(Arc<Mutex<Script<K>>>);

struct Script<K: Clone> {
    lists: VecDeque<Result<ObjectList<K>, kube::Error>>,
    watches: VecDeque<Result<WatchStream<K>, kube::Error>>,
    calls: Vec<Call>,
}

impl<K: Clone> Clone for FakeListWatch<K> {
    fn clone(&self) -> Self {
        FakeListWatch(self.0.clone())
    }
}

impl<K: Clone> Default for FakeListWatch<K> {
    fn default() -> Self {
        let script = Script { lists: VecDeque::new(), watches: VecDeque::new(), calls: Vec::new() };
        FakeListWatch(Arc::new(Mutex::new(script)))
    }
}

impl<K: Clone + Send + 'static> FakeListWatch<K> {
    /// The next list call returns the last page, `items` at `version`.
    pub(crate) fn answer_list(&self, items: Vec<K>, version: &str) {
        self.push_list(Ok(list(items, None, version)));
    }

    /// The next list call returns a page that `continue_token` continues.
    pub(crate) fn answer_page(&self, items: Vec<K>, continue_token: &str) {
        self.push_list(Ok(list(items, Some(continue_token), "")));
    }

    pub(crate) fn fail_list(&self, error: kube::Error) {
        self.push_list(Err(error));
    }

    /// The next watch call returns `events`, then the stream ends (the server's timeout).
    pub(crate) fn answer_watch(&self, events: Vec<Result<WatchEvent<K>, kube::Error>>) {
        self.push_watch(Ok(futures::stream::iter(events).boxed()));
    }

    /// The next watch call returns a stream that stays open: it yields what is sent on
    /// the returned sender, and ends when the sender is dropped.
    pub(crate) fn open_watch(&self) -> mpsc::UnboundedSender<Result<WatchEvent<K>, kube::Error>> {
        let (tx, rx) = mpsc::unbounded();
        self.push_watch(Ok(rx.boxed()));
        tx
    }

    pub(crate) fn fail_watch(&self, error: kube::Error) {
        self.push_watch(Err(error));
    }

    /// Every call so far, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        lock(&self.0).calls.clone()
    }

    fn push_list(&self, answer: Result<ObjectList<K>, kube::Error>) {
        lock(&self.0).lists.push_back(answer);
    }

    fn push_watch(&self, answer: Result<WatchStream<K>, kube::Error>) {
        lock(&self.0).watches.push_back(answer);
    }
}

impl<K: Clone + Send + 'static> ListWatch<K> for FakeListWatch<K> {
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<K>, kube::Error>> {
        let answer = {
            let mut script = lock(&self.0);
            script.calls.push(Call::List {
                fields: params.field_selector.clone(),
                limit: params.limit,
                continue_token: params.continue_token.clone(),
            });
            script.lists.pop_front()
        };
        Box::pin(async move {
            match answer {
                Some(answer) => answer,
                None => std::future::pending().await,
            }
        })
    }

    fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<K>, kube::Error>> {
        let answer = {
            let mut script = lock(&self.0);
            script.calls.push(Call::Watch {
                fields: params.field_selector.clone(),
                timeout: params.timeout.map(unspread),
                version: version.to_owned(),
            });
            script.watches.pop_front()
        };
        Box::pin(async move {
            match answer {
                Some(answer) => answer,
                None => std::future::pending().await,
            }
        })
    }
}

fn list<K: Clone>(items: Vec<K>, continue_token: Option<&str>, version: &str) -> ObjectList<K> {
    let metadata = ListMeta {
        continue_: continue_token.map(str::to_owned),
        resource_version: Some(version.to_owned()),
        ..ListMeta::default()
    };
    let types = TypeMeta { api_version: "v1".to_owned(), kind: "List".to_owned() };
    ObjectList { types, metadata, items }
}

/// An API status error (`kube::Error::Api`), e.g. 410 Gone, 500.
pub(crate) fn status(code: u16) -> kube::Error {
    kube::Error::Api(Status::failure("scripted", "Scripted").with_code(code).boxed())
}

/// `410 Gone`: the version is too old.
pub(crate) fn gone() -> kube::Error {
    status(410)
}

/// A watch ERROR event with `code`.
pub(crate) fn error_event<K>(code: u16) -> Result<WatchEvent<K>, kube::Error> {
    Ok(WatchEvent::Error(Status::failure("scripted", "Scripted").with_code(code).boxed()))
}

/// A transport failure: the connection was refused, or a stream broke.
pub(crate) fn refused() -> kube::Error {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    kube::Error::Service(Box::new(io))
}

/// A BOOKMARK at `version`.
pub(crate) fn bookmark<K>(version: &str) -> Result<WatchEvent<K>, kube::Error> {
    Ok(WatchEvent::Bookmark(kube::core::watch::Bookmark {
        types: TypeMeta::default(),
        metadata: kube::core::watch::BookmarkMeta {
            resource_version: version.to_owned(),
            annotations: Default::default(),
        },
    }))
}

/// The minimum a watch timeout was spread from, if it lies in the spread's band.
fn unspread(timeout: u32) -> u32 {
    let min = super::MIN_WATCH_TIMEOUT_SECS;
    if (min..=super::spread_timeout(min, 1.0)).contains(&timeout) { min } else { timeout }
}
