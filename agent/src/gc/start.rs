//! The garbage collector as the agent starts it (G1), once containerd answers.

use std::path::PathBuf;

use super::metrics::GarbageCollection;
use super::{Collector, Handle, Settings};
use crate::config::gc::GcConfig;
use crate::config::node::Node;
use crate::containerd::Connection;
use crate::podconfig::SnapshotHandle;
use crate::status::StatusStore;
use crate::task::Task;

/// What the images dir's tarballs were imported as, under the state dir (written by the
/// images dir's task; their images are the node's own, never collected).
pub const IMPORTED_RECORD: &str = "images-imported.json";

/// What the garbage collector works with.
#[derive(Debug)]
pub struct Deps {
    pub handle: Handle,
    /// The desired pods: their images are in use.
    pub desired: SnapshotHandle,
    pub statuses: StatusStore,
    pub metrics: GarbageCollection,
    /// The host's kernel, as the agent reads it.
    pub host: std::sync::Arc<dyn crate::host::Host>,
}

/// The `garbage_collector` task.
pub fn build(
    policy: GcConfig,
    node: &Node,
    images_dir: Option<PathBuf>,
    connection: Connection,
    deps: Deps,
) -> Task {
    let settings = Settings {
        policy,
        pod_log_dir: node.pod_log_dir.clone(),
        images_dir: images_dir.map(|dir| (dir, node.state_dir.join(IMPORTED_RECORD))),
        image_record: Some(node.state_dir.join("image-gc.json")),
        host: deps.host,
    };
    let Deps { handle, desired, statuses, metrics, .. } = deps;
    Task::infallible("garbage_collector", async move {
        let Some(containerd) = connection.connected().await else { return };
        Collector::new(containerd, settings, desired, statuses, metrics, handle).run().await;
    })
}
