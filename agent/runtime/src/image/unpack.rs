//! Unpacking an image's layers into the snapshotter, as containerd's unpacker does: per
//! layer, the snapshot named by its chain ID is kept if it exists; else a snapshot is
//! prepared on the previous chain ID, the Diff service applies the layer onto its
//! mounts, and it is committed under the chain ID. The config then carries the GC label
//! that keeps the top of the chain.

use std::collections::{BTreeMap, HashMap};

use containerd_client::services::v1::ApplyRequest;
use containerd_client::services::v1::snapshots::{
    CommitSnapshotRequest, PrepareSnapshotRequest, RemoveSnapshotRequest, StatSnapshotRequest,
};

use super::SNAPSHOTTER;
use super::layout::{self, Config, Descriptor, Manifest};
use super::store::{Error, Result, Store, to_proto};

impl Store {
    /// Unpacks the layers of `manifest` (whose diff IDs `config` lists, as many as
    /// layers) and labels the blobs for the garbage collector.
    pub(super) async fn unpack(&self, manifest: &Manifest, config: &Config) -> Result<()> {
        let diff_ids = &config.rootfs.diff_ids;
        let chain = layout::chain_ids(diff_ids);
        let mut parent = String::new();
        for ((layer, diff_id), chain_id) in manifest.layers.iter().zip(diff_ids).zip(&chain) {
            if self.snapshot_exists(chain_id).await? {
                tracing::debug!(chain_id, "layer already unpacked");
            } else {
                self.apply_layer(layer, diff_id, chain_id, &parent).await?;
            }
            let uncompressed =
                BTreeMap::from([(layout::LABEL_UNCOMPRESSED.to_owned(), diff_id.clone())]);
            self.label_blob(&layer.digest, uncompressed).await?;
            parent.clone_from(chain_id);
        }
        if let Some(top) = chain.last() {
            let labels = BTreeMap::from([(layout::snapshot_gc_label(SNAPSHOTTER), top.clone())]);
            self.label_blob(&manifest.config.digest, labels).await?;
        }
        Ok(())
    }

    async fn snapshot_exists(&self, chain_id: &str) -> Result<bool> {
        let request =
            StatSnapshotRequest { snapshotter: SNAPSHOTTER.to_owned(), key: chain_id.to_owned() };
        // Into the lease first, as for blobs (`has_blob`).
        self.protect(&format!("snapshots/{SNAPSHOTTER}"), chain_id).await?;
        match self.containerd.snapshots().stat(request).await {
            Ok(_) => Ok(true),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
            Err(status) => Err(Error::containerd("looking up snapshot", chain_id, status)),
        }
    }

    async fn apply_layer(
        &self,
        layer: &Descriptor,
        diff_id: &str,
        chain_id: &str,
        parent: &str,
    ) -> Result<()> {
        // containerd's unpack key format: "extract-<unique> <chain ID>".
        let key = format!("extract-{}-{} {chain_id}", std::process::id(), fastrand::u32(..));
        let labels: HashMap<_, _> =
            [(layout::LABEL_SNAPSHOT_REF.to_owned(), chain_id.to_owned())].into();
        tracing::debug!(layer = layer.digest, chain_id, parent, "unpacking layer");
        let mut snapshots = self.containerd.snapshots();
        let mounts = snapshots
            .prepare(PrepareSnapshotRequest {
                snapshotter: SNAPSHOTTER.to_owned(),
                key: key.clone(),
                parent: parent.to_owned(),
                labels: labels.clone(),
            })
            .await
            .map_err(|status| {
                Error::containerd("preparing a snapshot for layer", &layer.digest, status)
            })?
            .into_inner()
            .mounts;
        let applied = self
            .containerd
            .diff()
            .apply(ApplyRequest {
                diff: Some(to_proto(layer)),
                mounts,
                payloads: HashMap::new(),
                sync_fs: false,
            })
            .await
            .map(|response| {
                response.into_inner().applied.map(|applied| applied.digest).unwrap_or_default()
            });
        let applied = match applied {
            Ok(applied) if applied == diff_id => applied,
            Ok(applied) => {
                self.remove_snapshot(&key).await;
                return Err(Error::DiffIdMismatch {
                    layer: layer.digest.clone(),
                    expected: diff_id.to_owned(),
                    applied,
                });
            }
            Err(status) => {
                self.remove_snapshot(&key).await;
                return Err(Error::containerd("applying layer", &layer.digest, status));
            }
        };
        let committed = snapshots
            .commit(CommitSnapshotRequest {
                snapshotter: SNAPSHOTTER.to_owned(),
                name: chain_id.to_owned(),
                key: key.clone(),
                labels,
            })
            .await;
        match committed {
            Ok(_) => {
                tracing::debug!(layer = layer.digest, chain_id, applied, "layer unpacked");
                Ok(())
            }
            // Another unpack of the same layer won the race; its snapshot serves.
            Err(status) if status.code() == tonic::Code::AlreadyExists => {
                self.remove_snapshot(&key).await;
                Ok(())
            }
            Err(status) => {
                self.remove_snapshot(&key).await;
                Err(Error::containerd("committing snapshot", chain_id, status))
            }
        }
    }

    /// Best effort: a leftover active snapshot is in the lease and goes with it.
    async fn remove_snapshot(&self, key: &str) {
        let request =
            RemoveSnapshotRequest { snapshotter: SNAPSHOTTER.to_owned(), key: key.to_owned() };
        if let Err(e) = self.containerd.snapshots().remove(request).await {
            tracing::debug!(key, error = %e, "cannot remove the unpack snapshot");
        }
    }
}
