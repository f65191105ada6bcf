//! The node's stats and metrics as kubelet serves them (N2): the Summary API
//! (`/stats/summary`), the resource metrics (`/metrics/resource`) and cAdvisor's
//! (`/metrics/cadvisor`), all from one reading of what Outpost already reads: the pods'
//! and containers' cgroups, the node's `/proc` files, the filesystems of the state dir
//! and of containerd's snapshotter, containerd's snapshot usage, the pods' log files and
//! volumes. Nothing is sampled on a timer: each scrape reads, and CPU rates come from
//! the previous scrape's reading ([`rates`]).
//!
//! - `outpost_core::stats`: what is made of a reading, with no IO: the Summary API's
//!   shapes, the CPU rates, the `/proc` files parsed, `/metrics/resource`,
//!   `/metrics/cadvisor` and `/runningpods`, and the text format kubelet writes.
//! - `gather`: the reading (IO), through the [`Sources`]' host. Its reading of a pod's
//!   cgroups ([`Stats::usage`]) is also the one `/metrics`' usage collector takes.

mod gather;

pub use self::gather::{PodUsage, Target};

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use outpost_core::stats::{Reading, rates};

use crate::host::Host;
use crate::podconfig::SnapshotHandle;
use crate::runtime::Containerd;
use crate::runtime::cgroups::PodCgroups;
use crate::status::StatusStore;

/// What the stats are read from.
#[derive(Debug, Clone)]
pub struct Sources {
    pub node_name: String,
    pub snapshot: SnapshotHandle,
    pub statuses: StatusStore,
    /// The pods' cgroups (`None` in a dry run: no pods, the node's figures only).
    pub cgroups: Option<Arc<PodCgroups>>,
    /// The state dir: nodefs, and the pods' volumes under `pods/<uid>`.
    pub state_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    /// What `/proc` and the cgroups are read through.
    pub host: Arc<dyn Host>,
}

impl Default for Sources {
    /// No pods: the node's own files, read from this machine's kernel.
    fn default() -> Sources {
        Sources {
            node_name: String::new(),
            snapshot: SnapshotHandle::default(),
            statuses: StatusStore::default(),
            cgroups: None,
            state_dir: PathBuf::new(),
            pod_log_dir: PathBuf::new(),
            host: Arc::new(crate::host::Kernel),
        }
    }
}

/// What a reading covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything the Summary API and cAdvisor's series have.
    All,
    /// CPU and memory alone (and what costs nothing besides: start times, processes).
    CpuAndMemory,
}

/// The stats, read on demand; clones share the CPU-rate cache.
#[derive(Debug, Clone)]
pub struct Stats(Arc<Inner>);

impl Default for Stats {
    /// Nothing to read but the node's own files (tests, the fuzz harness).
    fn default() -> Stats {
        Stats::new(Sources::default())
    }
}

#[derive(Debug)]
struct Inner {
    sources: Sources,
    rates: Mutex<rates::CpuRates>,
    /// The monotonic origin of the rates' times.
    epoch: Instant,
    /// containerd's snapshotter root (imagefs), once containerd has said.
    imagefs: tokio::sync::OnceCell<Option<PathBuf>>,
}

impl Stats {
    pub fn new(sources: Sources) -> Stats {
        Stats(Arc::new(Inner {
            sources,
            rates: Mutex::default(),
            epoch: Instant::now(),
            imagefs: tokio::sync::OnceCell::new(),
        }))
    }

    pub fn sources(&self) -> &Sources {
        &self.0.sources
    }

    /// What each desired pod the workers report running, and its running containers, use
    /// now, as their cgroups tell it (blocking: a few small files each): the reading of
    /// the pods' cgroups [`Stats::read`] makes, for `/metrics`' usage collector. Empty
    /// without cgroups (a dry run).
    pub fn usage(&self) -> Vec<(Target, PodUsage)> {
        let sources = &self.0.sources;
        let Some(cgroups) = &sources.cgroups else { return Vec::new() };
        let host = sources.host.as_ref();
        let targets = gather::targets(sources);
        targets
            .into_iter()
            .map(|target| {
                let usage = gather::usage(host, cgroups, &target);
                (target, usage)
            })
            .collect()
    }

    /// Reads the node and its pods now; `containerd` (once connected) gives the
    /// containers' writable layers and the image filesystem. `scope` says whether the
    /// disk and network figures are wanted: `/metrics/resource` and
    /// `only_cpu_and_memory=true`, which metrics-server asks for every 15 s, are spared
    /// the walks of logs and volumes and the calls to containerd.
    pub async fn read(&self, containerd: Option<&Containerd>, scope: Scope) -> Reading {
        let containerd = containerd.filter(|_| scope == Scope::All);
        let imagefs = match containerd {
            Some(containerd) => self
                .0
                .imagefs
                .get_or_init(|| async { containerd.snapshotter_root().await.ok().flatten() })
                .await
                .clone(),
            None => None,
        };
        let targets = gather::targets(&self.0.sources);
        let layers = match containerd {
            Some(containerd) => gather::layers(containerd, &targets).await,
            None => Default::default(),
        };
        let this = self.clone();
        let read = tokio::task::spawn_blocking(move || {
            let now = this.0.epoch.elapsed();
            let mut rates = this.0.rates.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            rates.prune(now);
            let mut context = gather::Context {
                sources: &this.0.sources,
                rates: &mut rates,
                now,
                imagefs: imagefs.as_deref(),
                layers: &layers,
                scope,
            };
            gather::read(&mut context, &targets)
        });
        match read.await {
            Ok(reading) => reading,
            Err(e) => {
                tracing::warn!(error = %e, "reading the node's stats failed");
                Reading::failed(&self.0.sources.node_name, Timestamp::now())
            }
        }
    }
}
