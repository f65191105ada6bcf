//! The API server's side of `outpost run`, with a kubeconfig: the client (with its
//! certificate's manager when the agent bootstraps or rotates it), the API server's pods
//! as a source, and the API objects API pods refer to.

use outpost_core::pod::Source;

use super::Error;
use crate::apiserver::{ApiClient, Connectivity, MirrorView};
use crate::certificates::Manager;
use crate::certificates::manager::Settings;
use crate::checkpoint::Checkpoints;
use crate::config::Config;
use crate::objects::{Changes, Objects};
use crate::source;
use crate::source::api::ApiSource;
use crate::source::local::Sources;

/// The API server's side, with a kubeconfig: its client, the API objects API pods refer
/// to, and its pods as a source.
#[derive(Debug)]
pub(super) struct Cluster {
    pub(super) client: ApiClient,
    pub(super) mirrors: MirrorView,
    /// J1, J2: the client certificate's manager, with TLS bootstrapping or rotation.
    pub(super) certificates: Option<Manager>,
}

/// Connects the client, adds the API source to `sources`, and starts following the API
/// objects; without a kubeconfig, no client and no objects.
pub(super) async fn cluster(
    config: &Config,
    checkpoints: &Checkpoints,
    sources: &mut Sources,
) -> Result<(Option<Cluster>, Objects, Changes), Error> {
    let Some(kubeconfig) = &config.kubeconfig else {
        return Ok((None, Objects::default(), tokio::sync::mpsc::unbounded_channel().1));
    };
    let settings = Settings::of(&config.certificates, &config.node, kubeconfig);
    let manager = match settings {
        Some(settings) => Some(Manager::start(settings, Connectivity::default()).await?),
        None => None,
    };
    let client = match &manager {
        Some(manager) => manager.client(),
        None => ApiClient::from_kubeconfig(kubeconfig, Connectivity::default()).await?,
    };
    let mirrors = MirrorView::default();
    let source = ApiSource::new(source::api::Config {
        client: client.clone(),
        node_name: config.node.name.clone(),
        checkpoints: checkpoints.clone(),
        mirrors: mirrors.clone(),
    });
    sources.streams.push((Source::Api, source.into_stream()));
    let (objects, changes) = Objects::start(client.clone(), checkpoints.clone()).await;
    Ok((Some(Cluster { client, mirrors, certificates: manager }), objects, changes))
}
