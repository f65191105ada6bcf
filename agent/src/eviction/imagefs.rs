//! Where containerd keeps images and writable layers (imagefs), for the disk signals.

use std::path::PathBuf;

use tracing::{info, warn};

use crate::error_chain::describe;
use crate::runtime::Containerd;

/// containerd's snapshotter root (`None`: containerd did not say; imagefs signals are
/// then not observed).
pub async fn root(containerd: &Containerd) -> Option<PathBuf> {
    match containerd.snapshotter_root().await {
        Ok(Some(root)) => {
            info!(root = ?root, "imagefs: containerd's snapshotter root");
            Some(root)
        }
        Ok(None) => {
            warn!("containerd's snapshotters export no root; imagefs is not watched");
            None
        }
        Err(e) => {
            warn!(error = %describe(&e), "containerd did not list its snapshotters; imagefs is not watched");
            None
        }
    }
}
