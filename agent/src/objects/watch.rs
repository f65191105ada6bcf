//! One object's list+watch, as kubelet's watch-based ConfigMap and Secret managers do:
//! list with `fieldSelector=metadata.name=<name>` (one object or none), then watch from
//! the list's resourceVersion with bookmarks; a broken watch resumes from the last
//! version seen, `410 Gone` lists again, failures back off with jitter (so that many
//! watches coming back after an outage do not arrive together), cut short by a network
//! change or the server found back.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use outpost_core::backoff::Backoff;
use serde::de::DeserializeOwned;

use super::{Inner, Key, Kind, Known};
use crate::apiserver::Wakeups;
use crate::runtime::spec::projection::Object;

/// Server-side watch timeout; kube-rs's client reads for 295 s, so stay under it.
const WATCH_TIMEOUT_SECS: u32 = 290;

/// A kind of object watched, and how it becomes an [`Object`].
trait Watched:
    kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + DeserializeOwned
    + Clone
    + std::fmt::Debug
    + Send
    + 'static
{
    fn object(self) -> Object;
}

impl Watched for ConfigMap {
    fn object(self) -> Object {
        Object::ConfigMap(Arc::new(self))
    }
}

impl Watched for Secret {
    fn object(self) -> Object {
        Object::Secret(Arc::new(self))
    }
}

/// Follows `key` until the task is aborted (when no pod refers to it any more).
pub(super) async fn follow(inner: Arc<Inner>, key: Key) {
    match key.kind {
        Kind::ConfigMap => follow_kind::<ConfigMap>(inner, key).await,
        Kind::Secret => follow_kind::<Secret>(inner, key).await,
    }
}

async fn follow_kind<K: Watched>(inner: Arc<Inner>, key: Key) {
    let api: Api<K> = Api::namespaced(inner.client.kube().clone(), &key.namespace);
    let selector = format!("metadata.name={}", key.name);
    let mut backoff = Backoff::WATCH;
    let mut wakeups = inner.client.connectivity().wakeups();
    loop {
        let version = match list(&inner, &api, &key, &selector).await {
            Ok(version) => version,
            Err(error) => {
                pause(&mut backoff, &mut wakeups, &key, &error).await;
                continue;
            }
        };
        backoff.reset();
        if let Err(error) = watch(&inner, &api, &key, &selector, version).await {
            pause(&mut backoff, &mut wakeups, &key, &error).await;
        }
    }
}

/// Lists the object (or its absence); returns the list's resourceVersion.
async fn list<K: Watched>(
    inner: &Arc<Inner>,
    api: &Api<K>,
    key: &Key,
    selector: &str,
) -> Result<String, kube::Error> {
    let list = api.list(&ListParams::default().fields(selector)).await?;
    inner.client.connectivity().reachable();
    let known = match list.items.into_iter().find(|o| o.meta().name.as_deref() == Some(&key.name)) {
        Some(object) => Known::Present(object.object()),
        None => Known::Absent,
    };
    tracing::debug!(object = %key, present = matches!(known, Known::Present(_)), "listed");
    inner.answer(key, known).await;
    Ok(list.metadata.resource_version.unwrap_or_default())
}

/// Watches from `version`, resuming after a server-side timeout, until the version is
/// too old (`Ok`: list again) or the watch fails.
async fn watch<K: Watched>(
    inner: &Arc<Inner>,
    api: &Api<K>,
    key: &Key,
    selector: &str,
    mut version: String,
) -> Result<(), kube::Error> {
    let params = WatchParams::default().fields(selector).timeout(WATCH_TIMEOUT_SECS);
    loop {
        let stream = match api.watch(&params, &version).await {
            Err(kube::Error::Api(status)) if status.code == 410 => return Ok(()),
            other => other?,
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let (object, known) = match event? {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    (object.clone(), Known::Present(object.object()))
                }
                WatchEvent::Deleted(object) => (object, Known::Absent),
                WatchEvent::Bookmark(mark) => {
                    version = mark.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(status) if status.code == 410 => return Ok(()),
                WatchEvent::Error(status) => return Err(kube::Error::Api(status)),
            };
            if let Some(v) = &object.meta().resource_version {
                version.clone_from(v);
            }
            tracing::debug!(object = %key, present = matches!(known, Known::Present(_)), "changed");
            inner.answer(key, known).await;
        }
    }
}

/// Waits out the backoff, or less: a network change, the server found back.
async fn pause(backoff: &mut Backoff, wakeups: &mut Wakeups, key: &Key, error: &kube::Error) {
    let delay = backoff.next_delay(fastrand::f64());
    tracing::debug!(object = %key, error = %error, retry_in = ?delay, "cannot watch the object");
    wakeups.pause(delay).await;
}
