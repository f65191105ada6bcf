//! `outpost run --dry-run`: the merge's deltas printed as they come, one JSON object per
//! line, and nothing run.

use std::io::{self, Write};

use outpost_core::merge::PodDelta;
use outpost_core::pod::{self, CONFIG_HASH, Source};
use serde::Serialize;
use tokio::sync::mpsc;

use super::Batch;
use crate::task::Task;

#[derive(Debug, thiserror::Error)]
#[error("cannot write deltas to stdout: {0}")]
pub struct Error(#[source] io::Error);

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

/// The `print_deltas` task: a dry run's pod side. A closed stdout ends it.
pub fn printer(batches: mpsc::Receiver<Batch>) -> Task {
    Task::new("print_deltas", print(batches)).main()
}

/// `--dry-run`: one JSON line per delta on stdout, nothing run.
async fn print(mut batches: mpsc::Receiver<Batch>) -> Result<(), Error> {
    while let Some(batch) = batches.recv().await {
        let written = (|| {
            let mut out = io::stdout().lock();
            for delta in &batch.deltas {
                serde_json::to_writer(&mut out, &DeltaLine::of(delta))?;
                out.write_all(b"\n")?;
            }
            out.flush()
        })();
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(Error(e)),
        }
    }
    Ok(())
}
