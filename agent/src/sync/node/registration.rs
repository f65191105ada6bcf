//! The Node's requests: registration (kubelet's `tryRegisterWithAPIServer`) and the
//! status patch.

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use kube::core::Request;
use kube::core::params::{GetParams, Patch, PatchParams, PostParams};
use outpost_core::node_status;

use super::Error;
use crate::sync::{Context, NodeRef};

const NODES: &str = "/api/v1/nodes";

/// Creates the Node; if it exists (409 AlreadyExists), keeps it and sets its well-known
/// labels right, as kubelet does. Returns the Node as the server has it.
pub async fn register(context: &Context, status: NodeStatus) -> Result<Node, Error> {
    let name = &context.node_name;
    let config = &context.node_config;
    let wanted = node_status::node(name, &config.labels, &config.taints, status);
    let body = serde_json::to_vec(&wanted)
        .map_err(|source| Error::Encode { node: name.clone(), source })?;
    let request = Request::new(NODES).create(&PostParams::default(), body);
    let existing = match context.client.call::<Node>(request).await {
        Ok(created) => return Ok(created),
        Err(e) if e.is_already_exists() => {
            let request = Request::new(NODES).get(name, &GetParams::default());
            context
                .client
                .call::<Node>(request)
                .await
                .map_err(|source| Error::Get { node: name.clone(), source })?
        }
        Err(source) => return Err(Error::Register { node: name.clone(), source }),
    };
    let wanted_labels = wanted.metadata.labels.unwrap_or_default();
    let Some(patch) =
        node_status::default_labels_patch(&wanted_labels, existing.metadata.labels.as_ref())
    else {
        return Ok(existing);
    };
    let request =
        Request::new(NODES).patch(name, &PatchParams::default(), &Patch::Strategic(patch));
    context
        .client
        .call::<Node>(request)
        .await
        .map_err(|source| Error::Labels { node: name.clone(), source })
}

/// Patches `nodes/{name}/status` (strategic merge, as kubelet) so that the server has
/// `status`; `server` is the status the server had (for the addresses to delete). On
/// the heartbeat client, as kubelet's node status: not queued behind the pods' backlog
/// in the writers' bucket, and paced by the node task's own beat and backoff.
pub async fn patch_status(
    context: &Context,
    server: Option<&NodeStatus>,
    status: &NodeStatus,
) -> Result<Node, Error> {
    let name = &context.node_name;
    let patch = Patch::Strategic(node_status::status_patch(server, status));
    let request =
        Request::new(NODES).patch_subresource("status", name, &PatchParams::default(), &patch);
    context
        .client
        .heartbeat()
        .call::<Node>(request)
        .await
        .map_err(|source| Error::Status { node: name.clone(), source })
}

/// The identity of a Node the server returned.
pub fn node_ref(node: &Node) -> NodeRef {
    NodeRef {
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
    }
}
