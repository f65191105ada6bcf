//! Image GC: the images of the agent's containerd namespace, when each was first seen and
//! last used (in memory, as kubelet keeps it), which are in use, pinned or kept, and the
//! image filesystem's usage (statvfs of containerd's snapshotter root, found through its
//! introspection API); `outpost_core::gc::images::plan` chooses, this removes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use containerd_client::services::v1::{DeleteImageRequest, ListImagesRequest};
use k8s_openapi::jiff::Timestamp;
use outpost_core::gc::images::{Disk, Image, Policy, plan};

use self::record::{Record, Times};
use crate::error_chain::describe;
use crate::gc::metrics::GarbageCollection;
use crate::podconfig::Snapshot;
use crate::runtime::Containerd;
use crate::runtime::container;
use crate::runtime::image::layout::Descriptor;
use crate::runtime::image::{reference, resolve, watch};

mod record;

/// containerd's (CRI's) label on images that must never be garbage-collected.
pub const PINNED_LABEL: &str = "io.cri-containerd.pinned";

/// What a run looks at.
pub(super) struct Context<'a> {
    pub containerd: &'a Containerd,
    pub policy: &'a Policy,
    pub images_dir: Option<&'a (PathBuf, PathBuf)>,
    pub desired: &'a Snapshot,
    pub metrics: &'a GarbageCollection,
}

/// When each image was first seen and last used, and its size (by target digest).
#[derive(Debug)]
pub(super) struct Tracker {
    /// When tracking began (this run, or the record's first).
    started: Timestamp,
    seen: HashMap<String, Seen>,
    /// containerd's snapshotter root (the image filesystem), once found.
    root: Option<PathBuf>,
    /// Where the times are kept across restarts.
    record: Option<PathBuf>,
}

#[derive(Debug, Clone)]
struct Seen {
    first_detected: Timestamp,
    last_used: Timestamp,
    /// The last use as the record has it (`None`: not recorded yet).
    recorded_use: Option<Timestamp>,
    /// Its content size, once measured.
    size: Option<u64>,
}

/// The names of one image (target digest) and what they say about it.
struct Named<'a> {
    names: Vec<&'a str>,
    target: &'a containerd_client::types::Descriptor,
    used: bool,
    pinned: bool,
    kept: bool,
}

impl Tracker {
    /// Tracking from `started`, or from what the record at `record` says.
    pub fn new(started: Timestamp, record: Option<PathBuf>) -> Tracker {
        let loaded = record.as_deref().map(Record::load).unwrap_or_default();
        let seen = loaded
            .images
            .into_iter()
            .map(|(digest, times)| {
                let seen = Seen {
                    first_detected: times.first_detected,
                    last_used: times.last_used,
                    recorded_use: Some(times.last_used),
                    size: None,
                };
                (digest, seen)
            })
            .collect();
        let started = loaded.since.map_or(started, |since| since.min(started));
        Tracker { started, seen, root: None, record }
    }

    /// Writes the record if an image came or went, or a use is newer than recorded by
    /// more than [`record::USE_PRECISION`].
    fn save(&mut self, changed: bool) {
        let Some(path) = &self.record else { return };
        let stale = |s: &Seen| {
            s.recorded_use.is_none_or(|at| {
                s.last_used.duration_since(at).unsigned_abs() > record::USE_PRECISION
            })
        };
        if !changed && !self.seen.values().any(stale) {
            return;
        }
        let images = self
            .seen
            .iter()
            .map(|(digest, s)| {
                let times = Times { first_detected: s.first_detected, last_used: s.last_used };
                (digest.clone(), times)
            })
            .collect();
        let content = Record { since: Some(self.started), images };
        match content.save(path) {
            Ok(()) => self.seen.values_mut().for_each(|s| s.recorded_use = Some(s.last_used)),
            Err(e) => {
                tracing::warn!(record = %path.display(), error = %e, "cannot write the image GC record");
            }
        }
    }

    /// One pass: records what is used now, then removes what the policy chooses.
    pub async fn collect(&mut self, cx: Context<'_>) {
        // Clock: the local wall clock: the last-use times are this node's records, as kubelet's.
        let now = Timestamp::now();
        let Some(disk) = self.disk(cx.containerd).await else { return };
        let records = match cx.containerd.images().list(ListImagesRequest { filters: vec![] }).await
        {
            Ok(response) => response.into_inner().images,
            Err(e) => {
                tracing::warn!(error = %e, "image GC: cannot list images");
                return;
            }
        };
        let in_use = match in_use(cx.containerd, cx.desired).await {
            Some(in_use) => in_use,
            None => return,
        };
        let kept = match cx.images_dir {
            Some((dir, record)) => watch::images_of_present_tarballs(dir, record),
            None => BTreeSet::new(),
        };
        // An image is its content (the target digest), under one name or several: it
        // is in use, pinned or kept if any of its names is, and goes with all of them.
        let mut by_digest: BTreeMap<&str, Named<'_>> = BTreeMap::new();
        for record in &records {
            let Some(target) = &record.target else { continue };
            let named = by_digest.entry(target.digest.as_str()).or_insert_with(|| Named {
                names: Vec::new(),
                target,
                used: false,
                pinned: false,
                kept: false,
            });
            named.names.push(record.name.as_str());
            named.used |= in_use.contains(&record.name);
            named.pinned |= record.labels.get(PINNED_LABEL).is_some_and(|v| v == "pinned");
            named.kept |= kept.contains(&record.name);
        }
        let before = self.seen.len();
        self.seen.retain(|digest, _| by_digest.contains_key(digest.as_str()));
        let mut changed = self.seen.len() != before;
        let mut images = Vec::new();
        for (digest, named) in &by_digest {
            let seen = self.seen.entry((*digest).to_owned()).or_insert_with(|| {
                changed = true;
                Seen { first_detected: now, last_used: now, recorded_use: None, size: None }
            });
            if named.used {
                seen.last_used = now;
            }
            let size = match seen.size {
                Some(size) => size,
                None if !(named.used || named.pinned || named.kept) => {
                    let size = content_size(cx.containerd, named.names[0], named.target).await;
                    seen.size = Some(size);
                    size
                }
                None => 0,
            };
            images.push(Image {
                id: (*digest).to_owned(),
                size,
                first_detected: seen.first_detected,
                last_used: seen.last_used,
                in_use: named.used,
                pinned: named.pinned,
                kept: named.kept,
            });
        }
        let plan = plan(&images, disk, cx.policy, self.started, now);
        if plan.to_free > 0 {
            tracing::info!(
                usage = disk.usage_percent(),
                high = cx.policy.high_threshold_percent,
                low = cx.policy.low_threshold_percent,
                to_free = plan.to_free,
                "image filesystem over the high threshold; removing unused images"
            );
        }
        let mut freed = 0u64;
        for (digest, reason) in &plan.remove {
            let Some(named) = by_digest.get(digest.as_str()) else { continue };
            if !remove(cx.containerd, &named.names).await {
                continue;
            }
            let size = images.iter().find(|i| &i.id == digest).map_or(0, |i| i.size);
            cx.metrics.image_removed(*reason, size);
            freed = freed.saturating_add(size);
            self.seen.remove(digest);
            changed = true;
            tracing::info!(images = ?named.names, digest, size, ?reason, "image GC: removed an unused image");
        }
        self.save(changed);
        if plan.to_free > 0 && plan.freeing < plan.to_free {
            tracing::warn!(
                to_free = plan.to_free,
                freed,
                "image GC: not enough unused images to get below the low threshold"
            );
        }
    }

    /// The image filesystem's size and free space.
    async fn disk(&mut self, containerd: &Containerd) -> Option<Disk> {
        if self.root.is_none() {
            self.root = match containerd.snapshotter_root().await {
                Ok(root) => root,
                Err(e) => {
                    tracing::warn!(error = %e, "image GC: cannot ask containerd for its snapshotter's root");
                    None
                }
            };
            if self.root.is_none() {
                tracing::warn!(
                    "image GC: containerd does not say where its snapshotter keeps its data"
                );
            }
        }
        let root = self.root.clone()?;
        let stats = tokio::task::spawn_blocking(move || filesystem(&root)).await.ok()?;
        if stats.is_none() {
            tracing::warn!(root = ?self.root, "image GC: cannot read the image filesystem's usage");
        }
        stats
    }
}

/// Deletes every name of an image (the last deletion waits for containerd's collection,
/// so the space is free when it returns); whether all went.
async fn remove(containerd: &Containerd, names: &[&str]) -> bool {
    let mut all = true;
    for (i, name) in names.iter().enumerate() {
        let sync = i + 1 == names.len();
        let request = DeleteImageRequest { name: (*name).to_owned(), sync, target: None };
        if let Err(e) = containerd.images().delete(request).await {
            tracing::warn!(image = name, error = %e, "image GC: cannot remove an image");
            all = false;
        }
    }
    all
}

/// The images containers of the namespace (running or dead) were made from, and those
/// the desired pods name in their containers and image volumes (normalized); `None` if
/// the containers cannot be listed.
async fn in_use(containerd: &Containerd, desired: &Snapshot) -> Option<BTreeSet<String>> {
    let listed = match container::list(containerd).await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(error = %describe(&e), "image GC: cannot list containers");
            return None;
        }
    };
    let mut in_use: BTreeSet<String> = listed.into_iter().map(|c| c.image).collect();
    for (_, pod) in &desired.pods {
        let Some(spec) = &pod.spec else { continue };
        let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        let containers = containers.filter_map(|c| c.image.as_deref());
        // V4: an image volume's image is in use while its pod is desired.
        let volumes = spec.volumes.iter().flatten();
        let volumes = volumes.filter_map(|v| v.image.as_ref()?.reference.as_deref());
        for image in containers.chain(volumes) {
            if let Ok(name) = reference::normalize(image) {
                in_use.insert(name);
            }
        }
    }
    Some(in_use)
}

/// An image's content size; 0 (with a warning) if it cannot be read.
async fn content_size(
    containerd: &Containerd,
    name: &str,
    target: &containerd_client::types::Descriptor,
) -> u64 {
    let descriptor = Descriptor {
        media_type: target.media_type.clone(),
        digest: target.digest.clone(),
        size: target.size,
        annotations: Default::default(),
        platform: None,
    };
    match resolve::content_size(containerd, name, &descriptor).await {
        Ok(size) => size,
        Err(e) => {
            tracing::warn!(image = name, error = %describe(&e), "image GC: cannot size an image");
            0
        }
    }
}

fn filesystem(path: &Path) -> Option<Disk> {
    let fs = crate::host::capacity::filesystem(path)?;
    Some(Disk { capacity: fs.capacity, available: fs.available })
}

#[cfg(test)]
mod tests;
