//! J2: credentials that change under a running client. The [`ApiClient`]'s kube client
//! sends each request through the client of the credentials current at that moment, a
//! kube client built from the kubeconfig as any other and swapped whole
//! ([`Credentials::load`]) when the certificate manager has a new client certificate.
//! Requests and watches already under way finish on the connections they have (the
//! server authenticated them when they started); every request after the swap opens
//! connections with the new certificate, and the old client's idle connections go
//! with it. Before the first certificate ([`Credentials::none`]) a request fails at
//! once, saying what the agent waits for.

use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwapOption;
use futures::future::BoxFuture;
use kube::client::Body;

use super::client::{ApiClient, ConfigError};
use super::connectivity::Connectivity;

/// Why a request had no credentials to go with.
#[derive(Debug, thiserror::Error)]
#[error("no client certificate yet: {0}")]
pub struct NoCredentials(String);

/// The handle that swaps an [`ApiClient`]'s credentials; cloneable.
#[derive(Clone)]
pub struct Credentials {
    current: Arc<ArcSwapOption<kube::Client>>,
    /// Why there are none, while there are none.
    waiting: Arc<arc_swap::ArcSwap<String>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("loaded", &self.current.load().is_some()).finish()
    }
}

impl Credentials {
    /// An [`ApiClient`] for `server` whose credentials this handle sets, none yet:
    /// until [`Credentials::load`], requests fail with `waiting` as the reason.
    pub fn none(
        server: String,
        connectivity: Connectivity,
        waiting: &str,
    ) -> (ApiClient, Credentials) {
        let credentials = Credentials {
            current: Arc::new(ArcSwapOption::empty()),
            waiting: Arc::new(arc_swap::ArcSwap::from_pointee(waiting.to_owned())),
        };
        let service = Current(credentials.clone());
        let client = kube::Client::new(service, "default");
        (ApiClient::new(client, server, connectivity), credentials)
    }

    /// Builds a client from the kubeconfig at `path` (its client certificate and key
    /// read now) and makes it the one every following request goes through.
    pub async fn load(&self, path: &Path) -> Result<(), ConfigError> {
        let (client, _) = ApiClient::kube_client(path).await?;
        self.current.store(Some(Arc::new(client)));
        Ok(())
    }

    /// Drops the current credentials (they expired and nothing replaces them): requests
    /// fail at once with `reason` instead of a 401 each.
    pub fn clear(&self, reason: &str) {
        self.waiting.store(Arc::new(reason.to_owned()));
        self.current.store(None);
    }

    /// Whether there are credentials.
    pub fn is_loaded(&self) -> bool {
        self.current.load().is_some()
    }
}

/// The tower service under the outer kube client: each request goes to the current
/// client.
#[derive(Clone)]
struct Current(Credentials);

impl tower_service::Service<http::Request<Body>> for Current {
    type Response = http::Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<http::Response<Body>, kube::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let current = self.0.current.load_full();
        let waiting = self.0.waiting.load_full();
        Box::pin(async move {
            match current {
                Some(client) => client.send(request).await,
                None => Err(kube::Error::Service(Box::new(NoCredentials(waiting.to_string())))),
            }
        })
    }
}
