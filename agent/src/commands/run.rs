//! `outpost run`: start the sources, the merge and the local API.

use std::io::{self, Write};
use std::sync::Arc;

use arc_swap::ArcSwap;
use outpost_core::merge::PodDelta;
use outpost_core::pod::{self, CONFIG_HASH, Source};
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::info;

use crate::config::{self, Config, Flags};
use crate::podconfig::{self, Snapshot};
use crate::source::file::{self, FileSource};
use crate::{api, shutdown};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::Error),
    #[error(transparent)]
    FileSource(#[from] file::Error),
    #[error(transparent)]
    Api(#[from] api::Error),
    #[error("{0} is not available in this build yet; remove it from the flags or config file")]
    Unsupported(&'static str),
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
    if config.manifest_url.is_some() {
        return Err(Error::Unsupported("the manifest URL source (--manifest-url)"));
    }
    if config.kubeconfig.is_some() {
        return Err(Error::Unsupported("the API server source (--kubeconfig)"));
    }
    if !dry_run {
        return Err(Error::NoRuntime);
    }
    info!(node = %config.node_name, manifests = %config.manifest_dir.display(), "starting (dry run)");

    let files = FileSource::new(file::Config {
        path: config.manifest_dir.clone(),
        node_name: config.node_name.clone(),
        watcher: config.watcher,
    })?;
    let snapshot = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let server = api::bind(config.listen, snapshot.clone()).await?;
    let (tx, mut rx) = mpsc::channel::<Vec<PodDelta>>(64);
    let sources = vec![(Source::File, files.into_stream())];
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
