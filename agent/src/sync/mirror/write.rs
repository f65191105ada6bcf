//! The mirror pod requests, as kubelet's mirror client makes them: create (an existing
//! mirror of the same hash counts as created, R4) and delete with grace 0 and a UID
//! precondition (R2, R3).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, GetParams, PostParams, Preconditions};
use kube::core::Request;
use outpost_core::mirror::Observed;
use outpost_core::mirror::content::is_current;
use outpost_core::pod::{self, CONFIG_MIRROR, FullName};

use crate::apiserver::{ApiClient, CallError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create the mirror pod {pod}: {source}; retrying with backoff")]
    Create {
        pod: FullName,
        #[source]
        source: CallError,
    },
    #[error("cannot delete the mirror pod {pod} (uid {uid}): {source}; retrying with backoff")]
    Delete {
        pod: FullName,
        uid: String,
        #[source]
        source: CallError,
    },
    #[error(
        "cannot read the pod {pod} that holds the mirror pod's name: {source}; retrying with backoff"
    )]
    Get {
        pod: FullName,
        #[source]
        source: CallError,
    },
    #[error("cannot encode the mirror pod {pod}: {source}")]
    Encode {
        pod: FullName,
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// The failed call, if the error is one.
    pub fn call(&self) -> Option<&CallError> {
        match self {
            Error::Create { source, .. }
            | Error::Delete { source, .. }
            | Error::Get { source, .. } => Some(source),
            Error::Encode { .. } => None,
        }
    }
}

/// What a create came to.
#[derive(Debug)]
pub enum Created {
    /// The mirror is there (made now, or found with the same hash: R4).
    Mirror(Observed),
    /// A pod that is not a mirror holds the name.
    Blocked,
    /// The name was freed between the conflict and the look: plan again.
    Gone,
}

fn pods(name: &FullName) -> Request {
    Request::new(format!("/api/v1/namespaces/{}/pods", name.namespace))
}

/// Creates `mirror` (R1). On AlreadyExists: the same hash counts as success (R4); a
/// mirror of another hash is deleted and created again, once.
pub async fn create(client: &ApiClient, name: &FullName, mirror: &Pod) -> Result<Created, Error> {
    let hash = pod::annotation(mirror, CONFIG_MIRROR).unwrap_or_default();
    let body =
        serde_json::to_vec(mirror).map_err(|source| Error::Encode { pod: name.clone(), source })?;
    let post = || client.call::<Pod>(pods(name).create(&PostParams::default(), body.clone()));
    let error = match post().await {
        Ok(made) => return Ok(Created::Mirror(observed(mirror, &made))),
        Err(e) if e.is_already_exists() => e,
        Err(source) => return Err(Error::Create { pod: name.clone(), source }),
    };
    tracing::debug!(%error, "the mirror pod's name is taken; looking at the pod that has it");
    let existing = match client.call::<Pod>(pods(name).get(&name.name, &GetParams::default())).await
    {
        Ok(existing) => existing,
        Err(e) if e.is_not_found() => return Ok(Created::Gone),
        // K5: the Node authorizer lets a node get only the pods bound to it; the name is
        // held by a pod of another node (or by one already gone), never by its mirror.
        Err(e) if e.code() == Some(403) => {
            tracing::debug!(error = %e, "the pod that holds the mirror pod's name is not this node's");
            return Ok(Created::Blocked);
        }
        Err(source) => return Err(Error::Get { pod: name.clone(), source }),
    };
    match pod::annotation(&existing, CONFIG_MIRROR) {
        None => Ok(Created::Blocked),
        Some(of) if of == hash => Ok(Created::Mirror(observed(mirror, &existing))),
        Some(_) => {
            if !delete(client, name, pod::uid(&existing)).await? {
                return Ok(Created::Gone);
            }
            match post().await {
                Ok(made) => Ok(Created::Mirror(observed(mirror, &made))),
                Err(e) if e.is_already_exists() => Ok(Created::Gone),
                Err(source) => Err(Error::Create { pod: name.clone(), source }),
            }
        }
    }
}

/// Deletes the mirror `uid` at once. Returns false if it was already gone or replaced
/// (404, or 409 for the UID precondition).
pub async fn delete(client: &ApiClient, name: &FullName, uid: &str) -> Result<bool, Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions { uid: Some(uid.to_owned()), resource_version: None }),
        ..DeleteParams::default()
    };
    match client.send(pods(name).delete(&name.name, &params)).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() || e.is_conflict() => Ok(false),
        Err(source) => Err(Error::Delete { pod: name.clone(), uid: uid.to_owned(), source }),
    }
}

fn observed(desired: &Pod, stored: &Pod) -> Observed {
    Observed {
        uid: pod::uid(stored).to_owned(),
        mirror_of: pod::annotation(stored, CONFIG_MIRROR).unwrap_or_default().to_owned(),
        deleting: stored.metadata.deletion_timestamp.is_some(),
        current: is_current(desired, stored),
    }
}
