//! The images dir: the image tarballs it holds imported into containerd before pods
//! start (they may need them), then followed.

use std::path::PathBuf;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::node::Node;
use crate::containerd::Connection;
use crate::error_chain::describe;
use crate::gc;
use crate::gc::start::IMPORTED_RECORD;
use crate::runtime::image::metrics::ImageImports;
use crate::runtime::image::watch::ImagesDir;
use crate::task::Task;

/// Whether the tarballs present in the images dir at start are imported: pods wait for
/// them, they may need them.
#[derive(Debug, Clone)]
pub struct ImagesReady(watch::Receiver<bool>);

impl ImagesReady {
    /// Returns once they are (at once without an images dir). If the images dir's task
    /// failed, the agent is ending: this waits no longer.
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|ready| *ready).await;
    }
}

/// The `images_dir` task: imports what the images dir holds, then follows it.
pub fn images_dir(
    dir: Option<PathBuf>,
    node: &Node,
    connection: Connection,
    gc: &gc::Handle,
    metrics: ImageImports,
) -> (ImagesReady, Option<Task>) {
    let Some(dir) = dir else {
        return (ImagesReady(watch::channel(true).1), None);
    };
    let (imported, ready) = watch::channel(false);
    let record = node.state_dir.join(IMPORTED_RECORD);
    let notify = gc.images_notify();
    let task = Task::new("images_dir", async move {
        let Some(containerd) = connection.connected().await else { return Ok(()) };
        let mut images = ImagesDir::open(dir.clone(), containerd, record)?
            .with_metrics(metrics)
            .with_imported(notify);
        match images.import_present().await {
            Ok(summary) => info!(
                imported = summary.imported.len(),
                unchanged = summary.unchanged.len(),
                failed = summary.failed.len(),
                dir = %dir.display(),
                "images dir imported"
            ),
            Err(e) => warn!(error = %describe(&e), "cannot import the images dir"),
        }
        imported.send_replace(true);
        if let Err(e) = images.run().await {
            warn!(error = %describe(&e), "stopped watching the images dir");
        }
        Ok::<(), crate::runtime::image::watch::Error>(())
    });
    (ImagesReady(ready), Some(task))
}
