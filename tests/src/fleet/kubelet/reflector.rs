//! client-go's reflector (`tools/cache/reflector.go`) as kubelet's informers run it:
//! LIST, then WATCH from the list's resourceVersion with bookmarks, each watch asking
//! for a random timeout between 5 and 10 minutes (`minWatchTimeout` × (1 + rand)).
//!
//! - A watch the server ends (its timeout) or whose connection breaks (a "probable
//!   EOF") is opened again from the last resourceVersion seen, without a LIST.
//! - A watch request refused at connect or answered 429 is retried after the backoff
//!   (`isWatchErrorRetriable`), still without a LIST.
//! - Any other failure, a 410 `Expired` (`ERROR` event) or a watch shorter than a
//!   second with no event ends `ListAndWatch`; `BackoffUntil` then waits the backoff and
//!   LISTs again, at the last resourceVersion (served from the watch cache, no paging),
//!   and at once again with none (a consistent read, paged by 500) if that one is 410.
//!
//! The backoff is the reflector's ([`Backoff::reflector`]): 800 ms doubling to 30 s,
//! jitter 1.0, reset every 2 minutes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::client::{self, Client, Error};
use super::timing::Backoff;

/// client-go's `minWatchTimeout`.
const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);
/// client-go's default page size for LISTs the watch cache does not serve.
const PAGE_SIZE: &str = "500";

/// The objects a reflector holds, by `namespace/name`.
pub type Store = BTreeMap<String, Value>;

/// Called with the whole store after each change (kubelet's pods source is an
/// `UndeltaStore` that pushes its whole state the same way).
pub type OnChange = Box<dyn FnMut(&Store) + Send + Sync>;

/// One reflector: a collection path, its selector and what it holds.
pub struct Reflector {
    client: Client,
    path: String,
    field_selector: Option<String>,
    store: Store,
    resource_version: String,
    resource_version_unavailable: bool,
    backoff: Backoff,
    on_change: OnChange,
    stop: CancellationToken,
}

/// Why `ListAndWatch` returned.
enum Ended {
    Stopped,
    Relist,
}

impl Reflector {
    /// A reflector of the collection at `path` (e.g. `/api/v1/pods`), with an optional
    /// field selector.
    pub fn new(
        client: Client,
        path: &str,
        field_selector: Option<String>,
        on_change: OnChange,
        stop: CancellationToken,
    ) -> Reflector {
        Reflector {
            client,
            path: path.to_owned(),
            field_selector,
            store: Store::new(),
            resource_version: "0".to_owned(),
            resource_version_unavailable: false,
            backoff: Backoff::reflector(),
            on_change,
            stop,
        }
    }

    /// `BackoffUntil(ListAndWatch, backoff, sliding)`, until stopped.
    pub async fn run(mut self) {
        loop {
            if let Ended::Stopped = self.list_and_watch().await {
                return;
            }
            if !self.wait_backoff().await {
                return;
            }
        }
    }

    async fn wait_backoff(&mut self) -> bool {
        let wait = self.backoff.next(Instant::now(), fastrand::f64());
        tokio::select! {
            () = tokio::time::sleep(wait) => true,
            () = self.stop.cancelled() => false,
        }
    }

    async fn list_and_watch(&mut self) -> Ended {
        if let Err(error) = self.list().await {
            if matches!(error, Error::Stopped { .. }) {
                return Ended::Stopped;
            }
            warn!(path = %self.path, error = %error, "list failed");
            return Ended::Relist;
        }
        self.watch().await
    }

    /// The LIST, at the resourceVersion client-go's `relistResourceVersion` gives.
    async fn list(&mut self) -> Result<(), Error> {
        let resource_version = if self.resource_version_unavailable {
            String::new()
        } else {
            self.resource_version.clone()
        };
        let listed = match self.list_at(&resource_version).await {
            Err(error) if error.is_expired() && !resource_version.is_empty() => {
                // Retried at once, as a consistent read.
                self.resource_version_unavailable = true;
                self.list_at("").await
            }
            listed => listed,
        }?;
        let (items, resource_version) = listed;
        self.store = items;
        self.resource_version = resource_version;
        self.resource_version_unavailable = false;
        (self.on_change)(&self.store);
        Ok(())
    }

    async fn list_at(&self, resource_version: &str) -> Result<(Store, String), Error> {
        // The watch cache serves a LIST at a resourceVersion other than "0" only without
        // a limit, so client-go pages only the others.
        let paged = resource_version.is_empty() || resource_version == "0";
        let mut store = Store::new();
        let mut next: Option<String> = None;
        loop {
            let mut query: Vec<(&str, &str)> = Vec::new();
            if let Some(selector) = &self.field_selector {
                query.push(("fieldSelector", selector));
            }
            if paged {
                query.push(("limit", PAGE_SIZE));
            }
            match &next {
                Some(token) => query.push(("continue", token)),
                None if !resource_version.is_empty() => {
                    query.push(("resourceVersion", resource_version))
                }
                None => {}
            }
            let list = self.client.get(&client::with_query(&self.path, &query)).await?;
            for item in list["items"].as_array().into_iter().flatten() {
                store.insert(key(item), item.clone());
            }
            let version = list.pointer("/metadata/resourceVersion").and_then(Value::as_str);
            match list.pointer("/metadata/continue").and_then(Value::as_str) {
                Some(token) if !token.is_empty() => next = Some(token.to_owned()),
                _ => return Ok((store, version.unwrap_or_default().to_owned())),
            }
        }
    }

    /// Watches from the last resourceVersion until a re-LIST is needed.
    async fn watch(&mut self) -> Ended {
        loop {
            if self.stop.is_cancelled() {
                return Ended::Stopped;
            }
            let timeout = MIN_WATCH_TIMEOUT.mul_f64(1.0 + fastrand::f64()).as_secs().to_string();
            let mut query: Vec<(&str, &str)> = vec![
                ("watch", "true"),
                ("resourceVersion", &self.resource_version),
                ("timeoutSeconds", &timeout),
                ("allowWatchBookmarks", "true"),
            ];
            if let Some(selector) = &self.field_selector {
                query.push(("fieldSelector", selector));
            }
            let path = client::with_query(&self.path, &query);
            let started = Instant::now();
            let events = match self.client.watch(&path).await {
                Ok(events) => events,
                Err(Error::Stopped { .. }) => return Ended::Stopped,
                Err(error) if error.is_watch_retriable() => {
                    debug!(path = %self.path, error = %error, "watch refused, backing off");
                    if !self.wait_backoff().await {
                        return Ended::Stopped;
                    }
                    continue;
                }
                Err(error) => {
                    warn!(path = %self.path, error = %error, "watch failed");
                    return Ended::Relist;
                }
            };
            let mut events = std::pin::pin!(events);
            let mut count = 0_u64;
            loop {
                let event = tokio::select! {
                    event = events.next() => event,
                    () = self.stop.cancelled() => return Ended::Stopped,
                };
                let Some(event) = event else { break };
                count += 1;
                if !self.apply(&event) {
                    debug!(path = %self.path, status = %event["object"], "watch ended with an error");
                    return Ended::Relist;
                }
            }
            if count == 0 && started.elapsed() < Duration::from_secs(1) {
                return Ended::Relist;
            }
        }
    }

    /// Applies a watch event; false for an `ERROR` (410 or another), which ends the
    /// watch for a re-LIST.
    fn apply(&mut self, event: &Value) -> bool {
        let object = &event["object"];
        let version = object.pointer("/metadata/resourceVersion").and_then(Value::as_str);
        match event["type"].as_str() {
            Some("ADDED" | "MODIFIED") => {
                self.store.insert(key(object), object.clone());
                (self.on_change)(&self.store);
            }
            Some("DELETED") => {
                self.store.remove(&key(object));
                (self.on_change)(&self.store);
            }
            Some("BOOKMARK") => {}
            _ => return false,
        }
        if let Some(version) = version {
            self.resource_version = version.to_owned();
        }
        true
    }
}

/// An object's `namespace/name` (`name` when cluster-scoped).
pub fn key(object: &Value) -> String {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}
