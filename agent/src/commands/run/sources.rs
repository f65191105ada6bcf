//! The pod sources for `outpost run` (S1-S12): the manifest directory always, the
//! manifest URL when configured, the push endpoint when callers can authenticate, and
//! the API server's pods with a kubeconfig. Each is a stream the merge reads.

use outpost_core::pod::Source;
use prometheus_client::registry::Registry;
use tokio::signal::unix::{SignalKind, signal as unix_signal};
use tracing::info;

use super::Error;
use super::task::Task;
use crate::apiserver::ApiClient;
use crate::apiserver::{Connectivity, MirrorView, Recorder};
use crate::audit::ManifestAudit;
use crate::checkpoint::Checkpoints;
use crate::config::Config;
use crate::objects::{Changes, Objects};
use crate::source::api::ApiSource;
use crate::source::file::{self, FileSource};
use crate::source::url::{self, UrlSource};
use crate::source::{self, EventStream, Refresh, push};

/// The sources, built.
pub(super) struct Sources {
    /// In the merge's order of precedence.
    pub(super) streams: Vec<(Source, EventStream)>,
    /// Refreshes the manifest URL source (SIGHUP, `POST /refresh`), if there is one.
    pub(super) refresh: Option<Refresh>,
    /// The push endpoint's handle, for the local API.
    pub(super) push: Option<push::PushHandle>,
    /// How the manifest directory is watched (`/status`).
    pub(super) watcher: String,
}

/// What the sources share with the rest of the agent.
#[derive(Debug)]
pub(super) struct Deps {
    pub(super) checkpoints: Checkpoints,
    pub(super) events: Recorder,
    pub(super) audit: ManifestAudit,
}

/// The local sources (file, URL, push), and with a URL the `sighup` task that refreshes
/// it (SIGHUP is caught from the start either way: its default action would end the
/// agent).
pub(super) fn build(
    config: &Config,
    deps: Deps,
    registry: &mut Registry,
) -> Result<(Sources, Task), Error> {
    let manifests = source::metrics::SourceMetrics::register(registry);
    let files = FileSource::new(file::Config {
        path: config.manifest_dir.clone(),
        node_name: config.node_name.clone(),
        watcher: config.watcher,
    })?
    .with_events(deps.events)
    .with_metrics(manifests.clone())
    .with_audit(deps.audit.clone());
    let watcher = files.backend().to_string();
    let mut streams = vec![(Source::File, files.into_stream())];
    let refresh = config.manifest_url.as_ref().map(|_| Refresh::default());
    if let (Some(url), Some(refresh)) = (&config.manifest_url, &refresh) {
        let source = UrlSource::new(url::Config {
            url: url.clone(),
            headers: config.manifest_url_headers.clone(),
            interval: config.manifest_url_interval,
            ca_file: config.manifest_url_ca_file.clone(),
            node_name: config.node_name.clone(),
            checkpoints: deps.checkpoints.clone(),
            refresh: refresh.clone(),
        })?
        .with_metrics(manifests.clone())
        .with_audit(deps.audit);
        streams.push((Source::Url, source.into_stream()));
    }
    // The push endpoint changes state, so it exists only when callers can authenticate.
    let push = if config.auth.token_file.is_some() || config.auth.client_ca_file.is_some() {
        let (handle, stream) = push::open(push::Config {
            node_name: config.node_name.clone(),
            checkpoints: deps.checkpoints,
            metrics: manifests,
        })?;
        streams.push((Source::Push, stream));
        Some(handle)
    } else {
        None
    };
    let mut hangup = unix_signal(SignalKind::hangup()).map_err(Error::Signal)?;
    let refreshed = refresh.clone();
    let sighup = Task::infallible("sighup", async move {
        while hangup.recv().await.is_some() {
            match &refreshed {
                Some(refresh) => {
                    info!("SIGHUP: refreshing the manifest URL");
                    refresh.request();
                }
                None => info!("SIGHUP: no manifest URL to refresh"),
            }
        }
    });
    Ok((Sources { streams, refresh, push, watcher }, sighup))
}

/// The API server's side, with a kubeconfig: its client, the API objects API pods refer
/// to, and its pods as a source.
#[derive(Debug)]
pub(super) struct Cluster {
    pub(super) client: ApiClient,
    pub(super) mirrors: MirrorView,
    /// J1, J2: the client certificate's manager, with TLS bootstrapping or rotation.
    pub(super) certificates: Option<crate::certificates::Manager>,
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
    let certificates = &config.certificates;
    let manager = if certificates.bootstrap_kubeconfig.is_some() || certificates.rotate {
        let settings = crate::certificates::manager::Settings {
            node_name: config.node_name.clone(),
            kubeconfig: kubeconfig.clone(),
            bootstrap: certificates.bootstrap_kubeconfig.clone(),
            rotate: certificates.rotate,
            state_dir: config.state_dir.clone(),
        };
        Some(crate::certificates::Manager::start(settings, Connectivity::default()).await?)
    } else {
        None
    };
    let client = match &manager {
        Some(manager) => manager.client(),
        None => ApiClient::from_kubeconfig(kubeconfig, Connectivity::default()).await?,
    };
    let mirrors = MirrorView::default();
    let source = ApiSource::new(source::api::Config {
        client: client.clone(),
        node_name: config.node_name.clone(),
        checkpoints: checkpoints.clone(),
        mirrors: mirrors.clone(),
    });
    sources.streams.push((Source::Api, source.into_stream()));
    let (objects, changes) = Objects::start(client.clone(), checkpoints.clone()).await;
    Ok((Some(Cluster { client, mirrors, certificates: manager }), objects, changes))
}
