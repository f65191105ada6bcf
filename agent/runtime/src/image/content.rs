//! Writing blobs into containerd's content store: `Info` first (a blob already there is
//! kept), else the `Write` stream (stat, chunks, commit with the expected digest and
//! size), one request and one answer at a time, the bytes pulled from their source as
//! it goes. containerd checks the digest and size at commit.

use std::collections::BTreeMap;
use std::io;

use containerd_client::services::v1::{
    Info, InfoRequest, ReadContentRequest, UpdateRequest, WriteAction, WriteContentRequest,
};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::layout::Descriptor;
use super::store::{Error, Result, Store};

/// Bytes per `Write` request (containerd's own clients use 1 MiB).
pub(super) const CHUNK: usize = 1 << 20;

/// A blob's bytes, in pieces of any size, from wherever they come from.
pub(super) type Chunks = BoxStream<'static, io::Result<Vec<u8>>>;

/// Bytes already in memory (a document) as [`Chunks`].
pub(super) fn in_memory(bytes: Vec<u8>) -> Chunks {
    futures::stream::once(async { Ok(bytes) }).boxed()
}

impl Store {
    /// Whether the blob is in the content store (or this session stored it).
    pub(super) async fn has_blob(&mut self, digest: &str) -> Result<bool> {
        if self.stored.contains(digest) {
            return Ok(true);
        }
        // Into the lease before the lookup: protected after it, a blob found could be
        // collected in between (its last image record removed meanwhile).
        self.protect("content", digest).await?;
        let info = self.containerd.content().info(InfoRequest { digest: digest.to_owned() }).await;
        match info {
            Ok(_) => {
                tracing::debug!(digest, "blob already in the content store");
                self.stored.insert(digest.to_owned());
                Ok(true)
            }
            Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
            Err(status) => Err(Error::containerd("looking up blob", digest, status)),
        }
    }

    /// A stored blob's bytes (a document: the caller knows it is small).
    pub(super) async fn read_blob(&self, digest: &str) -> Result<Vec<u8>> {
        let grpc = |status| Error::containerd("reading blob", digest, status);
        let request = ReadContentRequest { digest: digest.to_owned(), offset: 0, size: 0 };
        let mut answers = self.containerd.content().read(request).await.map_err(grpc)?.into_inner();
        let mut bytes = Vec::new();
        while let Some(answer) = answers.message().await.map_err(grpc)? {
            bytes.extend_from_slice(&answer.data);
        }
        Ok(bytes)
    }

    /// Writes the blob `descriptor` from `chunks`, committing it with `labels`; a blob
    /// another writer committed meanwhile is fine.
    pub(super) async fn write_blob(
        &mut self,
        descriptor: &Descriptor,
        chunks: Chunks,
        labels: &BTreeMap<String, String>,
    ) -> Result<()> {
        match self.write(descriptor, chunks, labels).await {
            Err(Error::Containerd { source, .. })
                if source.code() == tonic::Code::AlreadyExists => {}
            other => other?,
        }
        self.stored.insert(descriptor.digest.clone());
        Ok(())
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
            .map_err(|status| Error::containerd("labelling blob", digest, status))?;
        Ok(())
    }

    async fn write(
        &self,
        descriptor: &Descriptor,
        mut chunks: Chunks,
        labels: &BTreeMap<String, String>,
    ) -> Result<()> {
        let digest = &descriptor.digest;
        tracing::debug!(digest, size = descriptor.size, "writing blob");
        let grpc = |status| Error::containerd("writing blob", digest, status);
        let request = |action: WriteAction, offset: i64, data: Vec<u8>| WriteContentRequest {
            action: action as i32,
            r#ref: format!("outpost-{digest}"),
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

        let mut offset = 0i64;
        let mut buffer: Vec<u8> = Vec::with_capacity(CHUNK);
        let mut ended = false;
        while !ended || !buffer.is_empty() {
            // Gather up to CHUNK bytes (sources yield pieces of any size), then send them.
            while !ended && buffer.len() < CHUNK {
                match chunks.next().await {
                    Some(piece) => buffer.extend_from_slice(
                        &piece.map_err(|source| Error::Read { digest: digest.clone(), source })?,
                    ),
                    None => ended = true,
                }
            }
            let rest = buffer.split_off(buffer.len().min(CHUNK));
            let data = std::mem::replace(&mut buffer, rest);
            if data.is_empty() {
                break;
            }
            let len = data.len() as i64;
            // A failed send means containerd ended the stream; its answer says why.
            let _ = requests.send(request(WriteAction::Write, offset, data)).await;
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
