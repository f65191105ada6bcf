//! Pulling an image from a registry into containerd, as `ctr images pull` does: the
//! manifest (or index, then the manifest for this host's platform) is resolved over the
//! registry HTTP API (OCI distribution, docker v2 schema 2), every blob the store lacks
//! is streamed into containerd's content store (which checks its digest), the image
//! record is created and the layers unpacked: the same steps, lease and GC labels as a
//! tarball import, with the registry as the source of the bytes.
//!
//! Credentials come from a [`Keyring`]: each matching one is tried in turn, then
//! anonymous access, until the registry accepts one. Registries are spoken to over
//! https, except loopback ones (`localhost`, `127.0.0.1`, `::1`) and those listed in
//! [`PullOptions::insecure_registries`], which are plain http (as containerd and nerdctl do).

mod registry;

#[cfg(test)]
mod tests;

use self::registry::{Repository, Target as Name};
use super::credentials::{Credential, Keyring};
use super::reference::{self, InvalidReference};
use super::store::{self, Store};
use super::{Imported, tree};
use crate::containerd::Containerd;

pub use self::registry::endpoint;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to reach registries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullOptions {
    /// Registries spoken to over plain http: `host:port`, or `host` for any port.
    pub insecure_registries: Vec<String>,
}

/// What a failed pull means to the pod, for the reason kubelet would report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullErrorKind {
    /// Not an image reference (kubelet: `InvalidImageName`).
    InvalidReference,
    /// The registry has no such manifest (or blob).
    NotFound,
    /// No credential (nor anonymous access) was accepted.
    Unauthorized,
    /// The registry could not be reached, or failed (5xx, 429) (kubelet: `RegistryUnavailable`).
    Unreachable,
    /// What the registry sent is wrong: digest or size mismatch, not a manifest, no
    /// manifest for this platform.
    BadContent,
    /// containerd failed to store or unpack it.
    Runtime,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("pulling {reference:?}")]
    Reference {
        reference: String,
        #[source]
        source: InvalidReference,
    },
    #[error("pulling {image}: {registry} has no {what}; check the image name and tag")]
    NotFound { image: String, registry: String, what: String },
    #[error(
        "pulling {image}: {registry} refused access ({detail}); check the pod's \
         imagePullSecrets or the node's registry credentials"
    )]
    Unauthorized { image: String, registry: String, detail: String },
    #[error(
        "pulling {image}: cannot reach {registry} ({url}); check that it is up, and list it \
         as an insecure registry if it speaks plain http"
    )]
    Unreachable {
        image: String,
        registry: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("pulling {image}: {registry} answered {status} to the request for {what}")]
    Status { image: String, registry: String, what: String, status: u16 },
    #[error("pulling {image}: {registry} sent {what} with digest {actual}, not {expected}")]
    Digest { image: String, registry: String, what: String, expected: String, actual: String },
    #[error("pulling {image}: {registry} sent {what}, which is not {expected}")]
    Unexpected { image: String, registry: String, what: String, expected: &'static str },
    #[error("pulling {image} from {registry}: bad image content")]
    Content {
        image: String,
        registry: String,
        #[source]
        source: tree::Error,
    },
    #[error("pulling {image} from {registry}: storing the image in containerd")]
    Store {
        image: String,
        registry: String,
        #[source]
        source: store::Error,
    },
    #[error("pulling {image}: cannot set up TLS to verify registries")]
    Tls {
        image: String,
        #[source]
        source: rustls::Error,
    },
    #[error("pulling {image}: cannot build the HTTP client")]
    Client {
        image: String,
        #[source]
        source: reqwest::Error,
    },
}

impl Error {
    pub fn kind(&self) -> PullErrorKind {
        match self {
            Error::Reference { .. } => PullErrorKind::InvalidReference,
            Error::NotFound { .. } => PullErrorKind::NotFound,
            Error::Unauthorized { .. } => PullErrorKind::Unauthorized,
            Error::Unreachable { .. } | Error::Status { .. } => PullErrorKind::Unreachable,
            Error::Digest { .. } | Error::Unexpected { .. } => PullErrorKind::BadContent,
            Error::Content { source, .. } if source.is_bad_content() => PullErrorKind::BadContent,
            Error::Store { source, .. } if source.is_bad_content() => PullErrorKind::BadContent,
            // The blob's bytes stopped coming.
            Error::Store { source: store::Error::Read { .. }, .. } => PullErrorKind::Unreachable,
            Error::Content { .. }
            | Error::Store { .. }
            | Error::Tls { .. }
            | Error::Client { .. } => PullErrorKind::Runtime,
        }
    }
}

/// What to do about an image, by the container's `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullDecision {
    Pull,
    /// Use the image containerd has.
    UsePresent,
    /// `Never`, and the image is absent (kubelet: `ErrImageNeverPull`).
    NeverPullAbsent,
}

/// kubelet's choice: `Always` pulls; `IfNotPresent` pulls an absent image; `Never` never
/// pulls. An unknown policy (validation rejects those) is taken as `IfNotPresent`.
pub fn should_pull(policy: &str, present: bool) -> PullDecision {
    match (policy, present) {
        ("Always", _) => PullDecision::Pull,
        ("Never", false) => PullDecision::NeverPullAbsent,
        (_, true) => PullDecision::UsePresent,
        (_, false) => PullDecision::Pull,
    }
}

/// Pulls `reference` into containerd, unpacked, trying the keyring's credentials for it
/// in order, then anonymous access. Returns the image record (named by the normalized
/// reference).
pub async fn pull(
    containerd: &Containerd,
    reference: &str,
    keyring: &Keyring,
    options: &PullOptions,
) -> Result<Imported> {
    let parsed = reference::parse(reference)
        .map_err(|source| Error::Reference { reference: reference.to_owned(), source })?;
    let name = Name::from(&parsed);
    let normalized = name.image.clone();
    let http = registry::client(&normalized)?;
    let base = endpoint(&name.domain, &options.insecure_registries);
    let credentials = keyring.lookup(&normalized);
    let attempts = credentials.into_iter().map(Some).chain([None]);
    let mut refused: Vec<String> = Vec::new();
    for credential in attempts {
        let who = credential.as_ref().map(describe).unwrap_or_else(|| "anonymous".to_owned());
        let mut repository = Repository::new(http.clone(), &base, &name, credential);
        match repository.resolve().await {
            Ok(descriptor) => {
                tracing::info!(
                    image = normalized,
                    digest = descriptor.digest,
                    as_user = who,
                    "pulling image"
                );
                return store(containerd, &repository, &descriptor).await;
            }
            Err(Error::Unauthorized { detail, .. }) => refused.push(format!("{who}: {detail}")),
            Err(e) => return Err(e),
        }
    }
    Err(Error::Unauthorized {
        image: normalized,
        registry: name.domain.clone(),
        detail: refused.join("; "),
    })
}

/// A credential as messages name it (never the secret).
fn describe(credential: &Credential) -> String {
    if credential.username.is_empty() {
        "an identity token".to_owned()
    } else {
        format!("user {:?}", credential.username)
    }
}

async fn store(
    containerd: &Containerd,
    repository: &Repository,
    descriptor: &super::layout::Descriptor,
) -> Result<Imported> {
    let mut store =
        Store::begin(containerd, "pull").await.map_err(|e| repository.store_error(e))?;
    let result = async {
        let target = tree::store_tree(&mut store, repository, descriptor).await?;
        let image = &repository.name().image;
        let imported = store
            .create_image(image, &target.descriptor)
            .await
            .map_err(|e| repository.store_error(e))?;
        store
            .unpack(&target.manifest, &target.config)
            .await
            .map_err(|e| repository.store_error(e))?;
        Ok(imported)
    }
    .await;
    store.end().await;
    result
}
