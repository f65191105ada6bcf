//! The images dir's figure: `outpost_image_import_duration_seconds`.

use std::time::Duration;

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Bounds of the import duration histogram, in seconds: 5 ms doubling up to about 2.7
/// minutes (a small tarball imports in milliseconds, a large one in minutes).
fn duration_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

/// The images dir's: `outpost_image_import_duration_seconds`.
#[derive(Debug, Clone)]
pub struct ImageImports {
    duration: Histogram,
}

impl Default for ImageImports {
    fn default() -> ImageImports {
        ImageImports { duration: duration_buckets() }
    }
}

impl ImageImports {
    pub fn register(outpost: &mut Registry) -> ImageImports {
        let metrics = ImageImports::default();
        outpost.sub_registry_with_prefix("image").register(
            "import_duration_seconds",
            "Image tarball imports into containerd (the images dir)",
            metrics.duration.clone(),
        );
        metrics
    }

    /// An image tarball was imported into containerd.
    pub fn image_imported(&self, took: Duration) {
        self.duration.observe(took.as_secs_f64());
    }
}
