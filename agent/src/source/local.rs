//! The local pod sources (S1-S12): the manifest directory always, the manifest URL when
//! configured, the push endpoint when callers can authenticate. Each is a stream the
//! merge reads (the API server's pods join them with a kubeconfig: [`super::api`]).

use outpost_core::pod::Source;
use prometheus_client::registry::Registry;
use tokio::signal::unix::{SignalKind, signal as unix_signal};
use tracing::info;

use crate::apiserver::Recorder;
use crate::audit::ManifestAudit;
use crate::checkpoint::Checkpoints;
use crate::source::file::{self, FileSource};
use crate::source::url::{self, UrlSource};
use crate::source::{self, EventStream, Refresh, push};
use crate::task::Task;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    FileSource(#[from] file::Error),
    #[error(transparent)]
    UrlSource(#[from] url::Error),
    #[error(transparent)]
    PushSource(#[from] push::Error),
    #[error("cannot install the SIGHUP handler: {0}")]
    Signal(#[source] std::io::Error),
}

pub use crate::config::sources::Config;

/// The sources, built.
pub struct Sources {
    /// In the merge's order of precedence.
    pub streams: Vec<(Source, EventStream)>,
    /// Refreshes the manifest URL source (SIGHUP, `POST /refresh`), if there is one.
    pub refresh: Option<Refresh>,
    /// The push endpoint's handle, for the local API.
    pub push: Option<push::PushHandle>,
    /// How the manifest directory is watched (`/status`).
    pub watcher: String,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("streams", &self.streams.len())
            .field("watcher", &self.watcher)
            .finish_non_exhaustive()
    }
}

/// What the sources share with the rest of the agent.
#[derive(Debug)]
pub struct Deps {
    pub checkpoints: Checkpoints,
    pub events: Recorder,
    pub audit: ManifestAudit,
}

/// The local sources (file, URL, push), and with a URL the `sighup` task that refreshes
/// it (SIGHUP is caught from the start either way: its default action would end the
/// agent).
impl Config {
    pub fn build(
        self,
        node_name: &str,
        deps: Deps,
        registry: &mut Registry,
    ) -> Result<(Sources, Task), Error> {
        build(self, node_name, deps, registry)
    }
}

fn build(
    config: Config,
    node_name: &str,
    deps: Deps,
    registry: &mut Registry,
) -> Result<(Sources, Task), Error> {
    let manifests = source::metrics::SourceMetrics::register(registry);
    let files = FileSource::new(file::Config {
        path: config.manifest_dir,
        node_name: node_name.to_owned(),
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
            node_name: node_name.to_owned(),
            checkpoints: deps.checkpoints.clone(),
            refresh: refresh.clone(),
        })?
        .with_metrics(manifests.clone())
        .with_audit(deps.audit);
        streams.push((Source::Url, source.into_stream()));
    }
    let push = if config.push {
        let (handle, stream) = push::open(push::Config {
            node_name: node_name.to_owned(),
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
