//! `outpost run`: start the sources, the merge and the local API.

use std::io::{self, Write};
use std::sync::Arc;

use arc_swap::ArcSwap;
use outpost_core::merge::PodDelta;
use outpost_core::pod::{self, CONFIG_HASH, Source};
use serde::Serialize;
use tokio::signal::unix::{SignalKind, signal as unix_signal};
use tokio::sync::mpsc;
use tracing::info;

use crate::checkpoint::Checkpoints;
use crate::config::{self, Config, Flags};
use crate::podconfig::{self, Snapshot};
use crate::source::api::ApiSource;
use crate::source::file::{self, FileSource};
use crate::source::url::{self, UrlSource};
use crate::source::{self, Refresh, push};
use crate::{api, shutdown};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::Error),
    #[error(transparent)]
    FileSource(#[from] file::Error),
    #[error(transparent)]
    Api(#[from] api::Error),
    #[error(transparent)]
    UrlSource(#[from] url::Error),
    #[error(transparent)]
    PushSource(#[from] push::Error),
    #[error(transparent)]
    ApiSource(#[from] source::api::Error),
    #[error("cannot install the SIGHUP handler: {0}")]
    Signal(#[source] io::Error),
    #[error(
        "this build cannot run containers yet (the containerd runtime is not built); \
         use --dry-run to run the sources and merge only"
    )]
    NoRuntime,
    #[error("cannot write deltas to stdout: {0}")]
    Stdout(#[source] io::Error),
}

/// One delta as `--dry-run` prints it, one JSON object per line.
#[derive(Debug, Serialize)]
pub struct DeltaLine<'a> {
    pub op: outpost_core::merge::DeltaOp,
    pub source: Source,
    pub uid: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub hash: Option<&'a str>,
}

impl<'a> DeltaLine<'a> {
    pub fn of(delta: &'a PodDelta) -> DeltaLine<'a> {
        let meta = &delta.pod.metadata;
        DeltaLine {
            op: delta.op,
            source: delta.source,
            uid: pod::uid(&delta.pod),
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref().unwrap_or_default(),
            hash: pod::annotation(&delta.pod, CONFIG_HASH),
        }
    }
}

/// Runs until SIGINT/SIGTERM.
pub async fn run(flags: Flags, dry_run: bool) -> Result<(), Error> {
    let config = Config::resolve(flags)?;
    if !dry_run {
        return Err(Error::NoRuntime);
    }
    info!(node = %config.node_name, manifests = %config.manifest_dir.display(), "starting (dry run)");

    // Before anything is announced: SIGHUP's default action would end the agent.
    let mut hangup = unix_signal(SignalKind::hangup()).map_err(Error::Signal)?;
    let checkpoints = Checkpoints::new(&config.state_dir);
    let files = FileSource::new(file::Config {
        path: config.manifest_dir.clone(),
        node_name: config.node_name.clone(),
        watcher: config.watcher,
    })?;
    let mut sources = vec![(Source::File, files.into_stream())];
    let refresh = Refresh::default();
    if let Some(url) = &config.manifest_url {
        let source = UrlSource::new(url::Config {
            url: url.clone(),
            headers: config.manifest_url_headers.clone(),
            interval: config.manifest_url_interval,
            ca_file: config.manifest_url_ca_file.clone(),
            node_name: config.node_name.clone(),
            checkpoints: checkpoints.clone(),
            refresh: refresh.clone(),
        })?;
        sources.push((Source::Url, source.into_stream()));
    }
    // The push endpoint changes state, so it exists only when callers can authenticate.
    let push = if config.auth.token_file.is_some() || config.auth.client_ca_file.is_some() {
        let (handle, stream) = push::open(push::Config {
            node_name: config.node_name.clone(),
            checkpoints: checkpoints.clone(),
        })?;
        sources.push((Source::Push, stream));
        Some(handle)
    } else {
        None
    };
    if let Some(kubeconfig) = &config.kubeconfig {
        let source = ApiSource::new(source::api::Config {
            kubeconfig: kubeconfig.clone(),
            node_name: config.node_name.clone(),
            checkpoints: checkpoints.clone(),
        })
        .await?;
        sources.push((Source::Api, source.into_stream()));
    }

    let snapshot = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let server = api::bind(api::Options {
        listen: config.listen,
        auth: config.auth.clone(),
        snapshot: snapshot.clone(),
        push,
        refresh: config.manifest_url.is_some().then(|| refresh.clone()),
    })
    .await?;
    let (tx, mut rx) = mpsc::channel::<Vec<PodDelta>>(64);
    let merge = tokio::spawn(podconfig::run(sources, tx, snapshot));
    let server = tokio::spawn(server);

    let result = loop {
        tokio::select! {
            batch = rx.recv() => {
                let Some(batch) = batch else { break Ok(()) };
                if let Err(e) = print_deltas(&batch) {
                    break if e.kind() == io::ErrorKind::BrokenPipe { Ok(()) } else { Err(Error::Stdout(e)) };
                }
            }
            _ = hangup.recv() => {
                info!("SIGHUP: refreshing the manifest URL");
                refresh.request();
            }
            signal = shutdown::signal() => {
                info!(signal, "shutting down");
                break Ok(());
            }
        }
    };
    merge.abort();
    server.abort();
    result
}

fn print_deltas(batch: &[PodDelta]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    for delta in batch {
        serde_json::to_writer(&mut out, &DeltaLine::of(delta))?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
