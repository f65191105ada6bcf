//! K4: this node's own Node, watched by name as kubelet's node informer does
//! (`fieldSelector=metadata.name=<node>`: a list of one, then its watch, resumed and
//! backed off by the agent's [`watcher`]), so that admission sees the labels and taints
//! an administrator gives the Node as soon as the server has them, not at the next
//! status report.

use futures::Stream;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use outpost_core::backoff::Backoff;

use super::Context;
use crate::apiserver::watcher::{self, Event, MIN_WATCH_TIMEOUT_SECS, watcher};

/// The events of the Node named `node_name`.
pub(super) fn own_node(context: &Context) -> impl Stream<Item = Event<Node>> + use<> {
    let api = Api::<Node>::all(context.client.kube().clone());
    let config = watcher::Config {
        field_selector: Some(format!("metadata.name={}", context.node_name)),
        page_size: None,
        watch_timeout_secs: MIN_WATCH_TIMEOUT_SECS,
        backoff: Backoff::WATCH,
        pacer: Some(context.client.pacer()),
    };
    watcher(api, config, context.client.connectivity().clone())
}

/// The Node an event brings, if any (a deleted Node is registered again by the node
/// task's next pass, which then sees it).
pub(super) fn node_of(event: Event<Node>) -> Option<Node> {
    match event {
        Event::InitApply(node) | Event::Apply(node) => Some(node),
        Event::Init
        | Event::InitDone
        | Event::Delete(_)
        | Event::Bookmark
        | Event::Recovered
        | Event::Failed(_) => None,
    }
}
