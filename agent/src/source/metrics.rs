//! The pod sources' figures: `outpost_manifest_errors_total{source}` (manifests, URL
//! documents and push bodies rejected) and `outpost_manifest_watcher_info{backend}` (the
//! file source's kernel interface, once it has started).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use outpost_core::pod::Source;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::config::Backend;

/// One label, `source`.
type SourceLabel = [(&'static str, &'static str); 1];

fn label(source: Source) -> SourceLabel {
    [("source", source.as_str())]
}

/// The pod sources': `outpost_manifest_errors_total{source}` and, once the file source
/// has said which kernel interface it watches with, `outpost_manifest_watcher_info{backend}`.
#[derive(Debug, Clone, Default)]
pub struct SourceMetrics {
    errors: Family<SourceLabel, Counter>,
    /// The manifest watcher's backend: 0 before the file source reported one.
    watcher: Arc<AtomicU8>,
}

const FANOTIFY: u8 = 1;
const INOTIFY: u8 = 2;

impl SourceMetrics {
    pub fn register(outpost: &mut Registry) -> SourceMetrics {
        let manifests = SourceMetrics::default();
        let registry = outpost.sub_registry_with_prefix("manifest");
        registry.register(
            "errors",
            "Manifests (file), documents (URL) and bodies (push) rejected as invalid",
            manifests.errors.clone(),
        );
        registry.register_collector(Box::new(Watcher(manifests.watcher.clone())));
        manifests
    }

    /// A source rejected a manifest (file), a document (URL) or a body (push).
    pub fn manifest_rejected(&self, source: Source) {
        self.errors.get_or_create(&label(source)).inc();
    }

    /// The file source watches with `backend`.
    pub fn manifest_watcher(&self, backend: Backend) {
        let value = match backend {
            Backend::Fanotify => FANOTIFY,
            Backend::Inotify => INOTIFY,
        };
        self.watcher.store(value, Ordering::Relaxed);
    }
}

/// `…_watcher_info{backend}`, once the file source has said which.
#[derive(Debug)]
struct Watcher(Arc<AtomicU8>);

impl Collector for Watcher {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let backend = match self.0.load(Ordering::Relaxed) {
            FANOTIFY => "fanotify",
            INOTIFY => "inotify",
            _ => return Ok(()),
        };
        Info::new([("backend", backend)]).encode(encoder.encode_descriptor(
            "watcher",
            "The kernel interface the manifest directory is watched with",
            None,
            MetricType::Info,
        )?)
    }
}
