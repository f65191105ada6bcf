//! One import's or pull's session with containerd: a lease that keeps what it writes
//! from the garbage collector until the image record and the GC labels hold it, the
//! blobs it stored (`content.rs`), the layers it unpacked (`unpack.rs`) and the image
//! records it created. Where the bytes come from is the caller's business.

use std::collections::HashSet;
use std::io;
use std::time::Duration;

use containerd_client::services::v1::{
    AddResourceRequest, CreateRequest as CreateLease, DeleteRequest as DeleteLease, Resource,
};
use containerd_client::services::v1::{CreateImageRequest, Image, UpdateImageRequest};
use outpost_host::{Host, Pid};

use super::Imported;
use super::layout::Descriptor;
use crate::containerd::{self, Containerd};

/// How long a session's lease protects its content if the session dies without deleting
/// it (containerd's GC deletes expired leases).
const LEASE_EXPIRY: Duration = Duration::from_secs(3600);
/// The label naming the process that holds a lease (`<pid>@<boot id>`): a lease another
/// live process holds (the CLI's `images import`, another agent on the same containerd)
/// is not an earlier run's leftover.
pub const HOLDER_LABEL: &str = "outpost.io/holder";

/// This process, as [`HOLDER_LABEL`] names it.
pub fn holder() -> String {
    format!("{}@{}", std::process::id(), boot_id(&outpost_host::Kernel))
}

/// Whether the process `holder` names ([`HOLDER_LABEL`]) still runs on `host`: it is of
/// this boot and its pid is there.
pub fn holder_runs(host: &dyn Host, holder: &str) -> bool {
    let Some((pid, boot)) = holder.split_once('@') else { return false };
    let Ok(pid) = pid.parse::<u32>() else { return false };
    boot == boot_id(host) && host.proc_pid(Pid::Id(pid), "stat").is_ok()
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`); empty if it cannot be read.
fn boot_id(host: &dyn Host) -> String {
    host.proc("sys/kernel/random/boot_id").map(|id| id.trim().to_owned()).unwrap_or_default()
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{step} {object}")]
    Containerd {
        step: &'static str,
        object: String,
        #[source]
        source: tonic::Status,
    },
    #[error("starting a containerd lease")]
    Lease(#[source] containerd::Error),
    #[error("reading blob {digest}")]
    Read {
        digest: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "layer {layer} unpacked to {applied}, but the image config says its diff ID is {expected}"
    )]
    DiffIdMismatch { layer: String, expected: String, applied: String },
}

impl Error {
    pub(super) fn containerd(step: &'static str, object: &str, source: tonic::Status) -> Error {
        Error::Containerd { step, object: object.to_owned(), source }
    }

    /// Whether the bytes were wrong (containerd refused a blob's digest or size, or a
    /// layer did not unpack to its diff ID), rather than containerd failing.
    pub fn is_bad_content(&self) -> bool {
        match self {
            Error::DiffIdMismatch { .. } => true,
            Error::Containerd { step, source, .. } => {
                *step == "writing blob"
                    && matches!(
                        source.code(),
                        tonic::Code::FailedPrecondition | tonic::Code::InvalidArgument
                    )
            }
            Error::Lease(_) | Error::Read { .. } => false,
        }
    }
}

/// A session: the leased connection, and the blobs already known to be stored.
#[derive(Debug)]
pub(super) struct Store {
    unleased: Containerd,
    pub(super) containerd: Containerd,
    lease: String,
    pub(super) stored: HashSet<String>,
}

impl Store {
    /// Starts a session in a new lease named `outpost-<purpose>-<random>`.
    pub(super) async fn begin(containerd: &Containerd, purpose: &str) -> Result<Store> {
        let lease = format!("outpost-{purpose}-{}", fastrand::u64(..));
        // Clock: the local wall clock, which containerd (on the same box) compares the label with.
        let expires = jiff::Timestamp::now()
            + jiff::SignedDuration::try_from(LEASE_EXPIRY)
                .unwrap_or(jiff::SignedDuration::from_hours(1));
        let labels = [
            (
                "containerd.io/gc.expire".to_owned(),
                expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            ),
            (HOLDER_LABEL.to_owned(), holder()),
        ];
        containerd
            .leases()
            .create(CreateLease { id: lease.clone(), labels: labels.into_iter().collect() })
            .await
            .map_err(|source| Error::containerd("creating lease", &lease, source))?;
        let leased = containerd.with_lease(&lease).map_err(Error::Lease)?;
        Ok(Store {
            unleased: containerd.clone(),
            containerd: leased,
            lease,
            stored: HashSet::new(),
        })
    }

    /// Ends the session: without the lease, what the image records and labels reference
    /// stays; the rest is garbage. Failing to delete it only delays that until it expires.
    pub(super) async fn end(self) {
        let request = DeleteLease { id: self.lease.clone(), sync: false };
        if let Err(e) = self.unleased.leases().delete(request).await {
            tracing::warn!(lease = self.lease, error = %e, "cannot delete a lease; it expires in an hour");
        }
    }

    /// Adds something that may already exist (`content`, or `snapshots/<snapshotter>`) to
    /// the lease, so that the garbage collector cannot take it (another image record
    /// removed meanwhile) before this session's image record and labels hold it. Call it
    /// before looking the thing up: containerd keeps a reference to what is missing too.
    pub(super) async fn protect(&self, kind: &str, id: &str) -> Result<()> {
        let request = AddResourceRequest {
            id: self.lease.clone(),
            resource: Some(Resource { id: id.to_owned(), r#type: kind.to_owned() }),
        };
        self.unleased
            .leases()
            .add_resource(request)
            .await
            .map_err(|source| Error::containerd("adding to the lease", id, source))?;
        Ok(())
    }

    /// Creates the image record `name` → `target`, or updates it if the name exists.
    pub(super) async fn create_image(&self, name: &str, target: &Descriptor) -> Result<Imported> {
        let image = Image {
            name: name.to_owned(),
            labels: Default::default(),
            target: Some(to_proto(target)),
            created_at: None,
            updated_at: None,
        };
        let mut images = self.containerd.images();
        let created = images
            .create(CreateImageRequest { image: Some(image.clone()), source_date_epoch: None })
            .await;
        match created {
            Ok(_) => {}
            Err(status) if status.code() == tonic::Code::AlreadyExists => {
                images
                    .update(UpdateImageRequest {
                        image: Some(image),
                        update_mask: None,
                        source_date_epoch: None,
                    })
                    .await
                    .map_err(|source| Error::containerd("updating image", name, source))?;
            }
            Err(source) => return Err(Error::containerd("creating image", name, source)),
        }
        Ok(Imported { name: name.to_owned(), digest: target.digest.clone() })
    }
}

pub(super) fn to_proto(descriptor: &Descriptor) -> containerd_client::types::Descriptor {
    containerd_client::types::Descriptor {
        media_type: descriptor.media_type.clone(),
        digest: descriptor.digest.clone(),
        size: descriptor.size,
        annotations: descriptor.annotations.clone().into_iter().collect(),
    }
}

#[cfg(test)]
mod tests;
