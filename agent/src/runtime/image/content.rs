//! Writing blobs into containerd's content store: `Info` first (a blob already there is
//! kept), else the `Write` stream (stat, chunks, commit with the expected digest and
//! size), one request and one answer at a time, read from the tarball as it goes.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use containerd_client::services::v1::{
    Info, InfoRequest, UpdateRequest, WriteAction, WriteContentRequest,
};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::archive::Archive;
use super::layout::Descriptor;
use super::{Error, Import, Result};

/// Bytes per `Write` request (containerd's own clients use 1 MiB).
const CHUNK: usize = 1 << 20;

/// Where a blob's bytes come from.
enum Source {
    Entry(String),
    Bytes(Vec<u8>),
}

impl Import {
    /// Stores the tarball file `entry` as the blob `descriptor`, with `labels`.
    pub(super) async fn store_blob(
        &mut self,
        descriptor: &Descriptor,
        entry: &str,
        labels: BTreeMap<String, String>,
    ) -> Result<()> {
        self.store(descriptor, Source::Entry(entry.to_owned()), labels).await
    }

    /// Stores bytes made by the import (a synthesized manifest) as the blob `descriptor`.
    pub(super) async fn store_bytes(
        &mut self,
        descriptor: &Descriptor,
        bytes: Vec<u8>,
        labels: BTreeMap<String, String>,
    ) -> Result<()> {
        self.store(descriptor, Source::Bytes(bytes), labels).await
    }

    async fn store(
        &mut self,
        descriptor: &Descriptor,
        source: Source,
        labels: BTreeMap<String, String>,
    ) -> Result<()> {
        let digest = &descriptor.digest;
        if !self.written.contains(digest) {
            let info = self.containerd.content().info(InfoRequest { digest: digest.clone() }).await;
            match info {
                Ok(_) => tracing::debug!(digest, "blob already in the content store"),
                Err(status) if status.code() == tonic::Code::NotFound => {
                    match self.write(descriptor, source, &labels).await {
                        Err(Error::Containerd { source, .. })
                            if source.code() == tonic::Code::AlreadyExists => {}
                        other => other?,
                    }
                }
                Err(status) => {
                    return Err(self.containerd_error("looking up blob", digest, status));
                }
            }
            self.written.insert(digest.clone());
        }
        self.label_blob(digest, labels).await
    }

    /// Sets `labels` on a stored blob (other labels stay as they are).
    pub(super) async fn label_blob(
        &self,
        digest: &str,
        labels: BTreeMap<String, String>,
    ) -> Result<()> {
        if labels.is_empty() {
            return Ok(());
        }
        let paths = labels.keys().map(|key| format!("labels.{key}")).collect();
        let info = Info {
            digest: digest.to_owned(),
            labels: labels.into_iter().collect(),
            ..Default::default()
        };
        self.containerd
            .content()
            .update(UpdateRequest {
                info: Some(info),
                update_mask: Some(prost_types::FieldMask { paths }),
            })
            .await
            .map_err(|status| self.containerd_error("labelling blob", digest, status))?;
        Ok(())
    }

    async fn write(
        &self,
        descriptor: &Descriptor,
        source: Source,
        labels: &BTreeMap<String, String>,
    ) -> Result<()> {
        let digest = &descriptor.digest;
        let entry = match &source {
            Source::Entry(entry) => entry.clone(),
            Source::Bytes(_) => format!("(generated {digest})"),
        };
        tracing::debug!(digest, size = descriptor.size, entry, "writing blob");
        let grpc = |status| self.containerd_error("writing blob", digest, status);
        let request = |action: WriteAction, offset: i64, data: Vec<u8>| WriteContentRequest {
            action: action as i32,
            r#ref: format!("outpost-import-{digest}"),
            total: descriptor.size,
            expected: digest.clone(),
            offset,
            data,
            labels: Default::default(),
        };
        let (requests, stream) = mpsc::channel(1);
        // The first request opens the writer; containerd answers each request in turn.
        let _ = requests.send(request(WriteAction::Stat, 0, Vec::new())).await;
        let mut answers = self
            .containerd
            .content()
            .write(ReceiverStream::new(stream))
            .await
            .map_err(grpc)?
            .into_inner();
        next_answer(&mut answers).await.map_err(grpc)?;

        let mut chunks = chunks(&self.archive, source);
        let mut offset = 0i64;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|source| Error::ReadEntry {
                tarball: self.tarball.clone(),
                entry: entry.clone(),
                source,
            })?;
            let len = chunk.len() as i64;
            // A failed send means containerd ended the stream; its answer says why.
            let _ = requests.send(request(WriteAction::Write, offset, chunk)).await;
            next_answer(&mut answers).await.map_err(grpc)?;
            offset += len;
        }
        let mut commit = request(WriteAction::Commit, offset, Vec::new());
        commit.labels = labels.clone().into_iter().collect();
        let _ = requests.send(commit).await;
        next_answer(&mut answers).await.map_err(grpc)?;
        Ok(())
    }
}

async fn next_answer<T>(answers: &mut tonic::Streaming<T>) -> Result<T, tonic::Status> {
    answers
        .message()
        .await?
        .ok_or_else(|| tonic::Status::aborted("containerd closed the write stream early"))
}

/// The blob's bytes in chunks of at most [`CHUNK`]; a tarball entry is read off the
/// async threads, a chunk at a time.
fn chunks(archive: &Arc<Archive>, source: Source) -> BoxStream<'static, std::io::Result<Vec<u8>>> {
    let entry = match source {
        Source::Bytes(bytes) => {
            let chunks: Vec<_> = bytes.chunks(CHUNK).map(|chunk| Ok(chunk.to_vec())).collect();
            return futures::stream::iter(chunks).boxed();
        }
        Source::Entry(entry) => entry,
    };
    let (sender, receiver) = mpsc::channel(2);
    let archive = Arc::clone(archive);
    tokio::task::spawn_blocking(move || {
        let send = |item| sender.blocking_send(item).is_ok();
        let Some(span) = archive.span(&entry) else {
            send(Err(std::io::Error::new(std::io::ErrorKind::NotFound, "not in the tarball")));
            return;
        };
        let mut reader = match archive.reader(span) {
            Ok(reader) => reader,
            Err(e) => {
                send(Err(e));
                return;
            }
        };
        let mut remaining = span.size;
        while remaining > 0 {
            let want = usize::try_from(remaining).unwrap_or(CHUNK).min(CHUNK);
            let mut chunk = vec![0u8; want];
            if let Err(e) = reader.read_exact(&mut chunk) {
                send(Err(e));
                return;
            }
            remaining -= want as u64;
            if !send(Ok(chunk)) {
                return;
            }
        }
    });
    ReceiverStream::new(receiver).boxed()
}
