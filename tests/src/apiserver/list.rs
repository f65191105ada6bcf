//! List requests: the `ListOptions` query parameters (shared with watch), consistent
//! reads at a resourceVersion, selectors and `limit`/`continue` pagination.
//!
//! Semantics as on the real server: no `resourceVersion` is a consistent read of the
//! latest state; `0` is "any" (the latest here); `N` with `resourceVersionMatch=Exact`
//! is the state at `N` (410 `Expired` when `N` is older than the history), otherwise
//! "not older than `N`"; an `N` the store has not reached yet is waited for up to 3 s,
//! then 504. Continue tokens carry the first page's resourceVersion, so every page is
//! read at that same resourceVersion, and a token older than the history is 410.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::error::{Error, Result};
use super::resource::ResourceType;
use super::selector::Filter;
use super::store::{Key, Store};

/// How long a read or watch waits for a resourceVersion the store has not reached.
pub const FUTURE_RV_WAIT: Duration = Duration::from_secs(3);

/// The `ListOptions` of a list or watch request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOptions {
    pub filter: Filter,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout_seconds: Option<u64>,
}

impl ListOptions {
    /// From the query string of a request on `resource`.
    pub fn from_query(resource: &ResourceType, query: &[(String, String)]) -> Result<ListOptions> {
        let get = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let flag = |name: &str| get(name).is_some_and(|v| matches!(v, "true" | "1"));
        let number = |name: &str| -> Result<Option<u64>> {
            get(name)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| Error::BadRequest(format!("invalid {name}: {v:?}")))
                })
                .transpose()
        };
        let options = ListOptions {
            filter: Filter::parse(resource, get("fieldSelector"), get("labelSelector"))?,
            resource_version: get("resourceVersion").filter(|v| !v.is_empty()).map(str::to_string),
            resource_version_match: get("resourceVersionMatch")
                .filter(|v| !v.is_empty())
                .map(str::to_string),
            limit: number("limit")?
                .filter(|l| *l > 0)
                .map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
            continue_token: get("continue").filter(|v| !v.is_empty()).map(str::to_string),
            watch: flag("watch"),
            allow_watch_bookmarks: flag("allowWatchBookmarks"),
            send_initial_events: flag("sendInitialEvents"),
            timeout_seconds: number("timeoutSeconds")?,
        };
        if options.resource_version_match.is_some() && options.resource_version.is_none() {
            return Err(Error::BadRequest(
                "resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
            ));
        }
        Ok(options)
    }

    /// The `resourceVersion` as a number; `None` for absent and for `0` ("any").
    pub fn resource_version_number(&self) -> Result<Option<u64>> {
        match self.resource_version.as_deref() {
            None | Some("0") => Ok(None),
            Some(rv) => rv
                .parse::<u64>()
                .map(Some)
                .map_err(|_| Error::BadRequest(format!("invalid resource version: {rv:?}"))),
        }
    }
}

/// Waits until the store reaches `rv`, up to [`FUTURE_RV_WAIT`]; 504 after that.
pub async fn wait_for_rv(store: &Store, rv: u64) -> Result<()> {
    let mut changes = store.subscribe();
    let reached =
        tokio::time::timeout(FUTURE_RV_WAIT, changes.wait_for(|current| *current >= rv)).await;
    match reached {
        Ok(Ok(_)) => Ok(()),
        _ => {
            Err(Error::TooLargeResourceVersion { requested: rv, current: store.resource_version() })
        }
    }
}

/// Serves a list request: the `…List` object.
pub async fn list(
    store: &Store,
    resource: &ResourceType,
    namespace: Option<&str>,
    options: &ListOptions,
) -> Result<Value> {
    let (read_at, after) = match &options.continue_token {
        Some(token) => {
            if options.resource_version_number()?.is_some() {
                return Err(Error::BadRequest(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            let (rv, after) = decode_continue(token)?;
            if rv < store.compacted() {
                return Err(Error::Expired(EXPIRED_CONTINUE.into()));
            }
            (Some(rv), Some(after))
        }
        None => match options.resource_version_number()? {
            None => (None, None),
            Some(rv) => {
                if rv > store.resource_version() {
                    wait_for_rv(store, rv).await?;
                }
                let exact = options.resource_version_match.as_deref() == Some("Exact");
                (exact.then_some(rv), None)
            }
        },
    };
    let (objects, rv) = store.objects_at(resource, namespace, read_at)?;
    let mut matching = objects
        .into_iter()
        .filter(|(key, _)| {
            after.as_ref().is_none_or(|after| (&key.namespace, &key.name) > (&after.0, &after.1))
        })
        .filter(|(_, object)| options.filter.matches(resource, object));
    let limit = options.limit.unwrap_or(usize::MAX);
    let page: Vec<(Key, _)> = matching.by_ref().take(limit).collect();
    let remaining = matching.count();
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if remaining > 0
        && let Some((last, _)) = page.last()
    {
        metadata["continue"] = json!(encode_continue(rv, &last.namespace, &last.name));
        if options.filter == Filter::default() {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    let items: Vec<Value> = page
        .into_iter()
        .map(|(_, object)| {
            // Items of a list carry no kind or apiVersion, as on the real server.
            let mut item = Value::clone(&object);
            if let Some(map) = item.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
            }
            item
        })
        .collect();
    Ok(json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": metadata,
        "items": items,
    }))
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list \
     result. You can start a new list without the continue parameter.";

fn encode_continue(rv: u64, namespace: &str, name: &str) -> String {
    let token = json!({ "v": "meta.k8s.io/v1", "rv": rv, "start": format!("{namespace}/{name}") });
    BASE64.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, (String, String))> {
    let invalid = || Error::BadRequest(format!("continue key is not valid: {token}"));
    let bytes = BASE64.decode(token).map_err(|_| invalid())?;
    let token: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let rv = token.get("rv").and_then(Value::as_u64).ok_or_else(invalid)?;
    let start = token.get("start").and_then(Value::as_str).ok_or_else(invalid)?;
    let (namespace, name) = start.split_once('/').ok_or_else(invalid)?;
    Ok((rv, (namespace.to_string(), name.to_string())))
}
