//! Where containerd keeps images and writable layers (imagefs): its snapshotter's root,
//! as containerd's introspection service reports it (the same for a managed or an
//! external containerd).

use std::path::PathBuf;

use containerd_client::services::v1::PluginsRequest;
use tracing::{info, warn};

use crate::error_chain::describe;
use crate::runtime::Containerd;

/// The snapshotter the agent's containers use.
const SNAPSHOTTER: &str = "overlayfs";

/// The overlayfs snapshotter's root (`None`: containerd did not say; imagefs signals are
/// then not observed).
pub async fn root(containerd: &Containerd) -> Option<PathBuf> {
    let request = PluginsRequest { filters: vec!["type==io.containerd.snapshotter.v1".to_owned()] };
    let plugins = match containerd.introspection().plugins(request).await {
        Ok(response) => response.into_inner().plugins,
        Err(e) => {
            warn!(error = %describe(&e), "containerd did not list its snapshotters; imagefs is not watched");
            return None;
        }
    };
    let root = plugins
        .iter()
        .filter(|p| p.id == SNAPSHOTTER)
        .chain(plugins.iter().filter(|p| p.id != SNAPSHOTTER))
        .find_map(|p| p.exports.get("root"))
        .map(PathBuf::from);
    if root.is_none() {
        warn!("containerd's snapshotters export no root; imagefs is not watched");
    } else {
        info!(root = ?root, "imagefs: containerd's snapshotter root");
    }
    root
}
