//! Checkpoints of source state under the state directory (SEMANTICS.md O1, O2).
//!
//! A checkpoint is one file, `<state-dir>/checkpoints/<name>.json`, written atomically:
//! a temporary file in the same directory is written and fsynced, renamed over the
//! old one, and the directory is fsynced, so a crash leaves either the old or the new
//! checkpoint, never a mix. The file starts with a header line that carries the body's
//! length and XXH3-128 checksum; a torn or corrupted file is detected when it is read
//! and reported as [`Error::Corrupt`], never half-applied.
//!
//! ```text
//! outpost-checkpoint v1 len=1234 xxh3=0123456789abcdef0123456789abcdef
//! {"pods":[...]}
//! ```
//!
//! A private checkpoint (one that holds Secrets) is sealed when the agent has a state key
//! ([`seal`]): its body is the nonce, the sealed JSON and the tag, and the header names
//! the cipher and the key's public id.
//!
//! ```text
//! outpost-checkpoint v1 sealed=chacha20-poly1305 key=0123456789abcdef len=1262 xxh3=...
//! ```

pub mod metrics;
pub mod seal;

use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use self::metrics::CheckpointWrites;
use self::seal::StateKey;

const MAGIC: &str = "outpost-checkpoint v1";
/// The mode of a checkpoint file, and of one that holds secrets.
const PUBLIC: u32 = 0o644;
const PRIVATE: u32 = 0o600;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot write checkpoint {path}: {source}; check that the state directory is writable and not full"
    )]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read checkpoint {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "checkpoint {path} is corrupt ({reason}); it is ignored and replaced by the next good update"
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "checkpoint {path} cannot be opened: {source}; it is ignored and replaced by the next update"
    )]
    Sealed {
        path: PathBuf,
        #[source]
        source: seal::Error,
    },
    #[error("cannot encode checkpoint {path}: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// [`verify`]: the bytes do not start with a header line ([`Error::Corrupt`]'s reason).
    #[error("no header line")]
    NoHeader,
    /// [`verify`]: the first line is not a checkpoint header.
    #[error("unknown header {0:?}")]
    UnknownHeader(String),
    /// [`verify`]: the header is not the one the body that follows it would have.
    #[error("header {header:?} does not match the {len}-byte body (torn or corrupted write)")]
    Torn { header: String, len: usize },
    /// [`verify`]: the body is what the header says but not what the reader expects.
    #[error("checksum matches but content does not decode: {0}")]
    Body(#[source] serde_json::Error),
    /// [`decode`]: the checkpoint is sealed (a key opens it: [`Checkpoints::read`]).
    #[error(transparent)]
    Seal(#[from] seal::Error),
}

/// The error as the sources' machines take it (`outpost_core::source::checkpoint`): the
/// path and what went wrong, in the same words.
impl From<Error> for outpost_core::source::checkpoint::Error {
    fn from(error: Error) -> Self {
        use outpost_core::source::checkpoint::Error as Described;
        match error {
            Error::Write { path, source } => Described::Write { path, reason: source.to_string() },
            Error::Read { path, source } => Described::Read { path, reason: source.to_string() },
            Error::Corrupt { path, reason } => Described::Corrupt { path, reason },
            Error::Sealed { path, source } => {
                Described::Corrupt { path, reason: source.to_string() }
            }
            Error::Encode { path, source } => {
                Described::Encode { path, reason: source.to_string() }
            }
            // [`verify`]'s own, which its callers turn into `Corrupt` with the path.
            decoding => Described::Corrupt { path: PathBuf::new(), reason: decoding.to_string() },
        }
    }
}

/// The checkpoint directory. Cheap to clone; every method is blocking IO, so async
/// callers use the `*_async` forms that run on the blocking pool.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    dir: PathBuf,
    metrics: CheckpointWrites,
    /// Seals the private checkpoints; without it they are plain JSON (mode 0600 only).
    key: Option<Arc<StateKey>>,
}

impl Checkpoints {
    /// Checkpoints under `<state_dir>/checkpoints` (created on first write).
    pub fn new(state_dir: &Path) -> Checkpoints {
        Checkpoints {
            dir: state_dir.join("checkpoints"),
            metrics: CheckpointWrites::default(),
            key: None,
        }
    }

    /// Seals the private checkpoints with `key` (and opens those it sealed).
    pub fn with_key(mut self, key: Option<Arc<StateKey>>) -> Checkpoints {
        self.key = key;
        self
    }

    /// Counts every write and failed write in `metrics`, by checkpoint name.
    pub fn with_metrics(mut self, metrics: CheckpointWrites) -> Checkpoints {
        self.metrics = metrics;
        self
    }

    /// The file that holds checkpoint `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// Writes checkpoint `name` atomically and durably (temp + fsync + rename + dir fsync),
    /// readable by all (mode 0644).
    pub fn write<T: Serialize>(&self, name: &'static str, value: &T) -> Result<(), Error> {
        let written = self.write_file(name, value, PUBLIC);
        self.metrics.checkpoint_written(name, written.is_ok());
        written
    }

    /// [`Checkpoints::write`] for a checkpoint that holds secrets: readable by root only
    /// (mode 0600, V3), and sealed with the state key when there is one.
    pub fn write_private<T: Serialize>(&self, name: &'static str, value: &T) -> Result<(), Error> {
        let written = self.write_file(name, value, PRIVATE);
        self.metrics.checkpoint_written(name, written.is_ok());
        written
    }

    fn write_file<T: Serialize>(&self, name: &str, value: &T, mode: u32) -> Result<(), Error> {
        let path = self.path(name);
        tracing::debug!(checkpoint = name, "writing checkpoint");
        let body = serde_json::to_vec(value)
            .map_err(|source| Error::Encode { path: path.clone(), source })?;
        let framed = match &self.key {
            Some(key) if mode == PRIVATE => key
                .seal(name, &body)
                .map(|sealed| frame_with(Some(key.id()), &sealed))
                .map_err(|source| Error::Write { path: path.clone(), source })?,
            _ => frame(&body),
        };
        write_atomically(&path, &framed, mode)
            .map_err(|source| Error::Write { path: path.clone(), source })
    }

    /// Reads checkpoint `name`, plain or sealed with this agent's key: `Ok(None)` if there
    /// is none.
    pub fn read<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, Error> {
        Ok(self.read_file(name)?.map(|(value, _)| value))
    }

    /// [`Checkpoints::read`] for a checkpoint that holds secrets: one written before the
    /// agent had a state key is sealed at once, not at its next update (which may be long
    /// in coming on a box that is offline).
    pub fn read_private<T: DeserializeOwned + Serialize>(
        &self,
        name: &'static str,
    ) -> Result<Option<T>, Error> {
        let Some((value, sealed)) = self.read_file(name)? else { return Ok(None) };
        if let (Some(key), false) = (&self.key, sealed) {
            match self.write_private(name, &value) {
                Ok(()) => tracing::info!(
                    checkpoint = name,
                    key = key.id(),
                    "sealed a checkpoint written without the state key"
                ),
                Err(e) => tracing::warn!(
                    error = %crate::error_chain::describe(&e),
                    "cannot seal a checkpoint written without the state key"
                ),
            }
        }
        Ok(Some(value))
    }

    /// The checkpoint's value and whether it was sealed.
    fn read_file<T: DeserializeOwned>(&self, name: &str) -> Result<Option<(T, bool)>, Error> {
        let path = self.path(name);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Read { path, source }),
        };
        let (sealed_with, body) = verify(&bytes)
            .map_err(|e| Error::Corrupt { path: path.clone(), reason: e.to_string() })?;
        let body = match (sealed_with, &self.key) {
            (None, _) => Cow::Borrowed(body),
            (Some(id), None) => {
                let source = seal::Error::NoKey { sealed_with: id.to_owned() };
                return Err(Error::Sealed { path, source });
            }
            (Some(id), Some(key)) => match key.open(name, id, body) {
                Ok(plain) => Cow::Owned(plain),
                Err(source) => return Err(Error::Sealed { path, source }),
            },
        };
        let value = crate::json::from_slice(&body)
            .map_err(|e| Error::Corrupt { path, reason: Error::Body(e).to_string() })?;
        Ok(Some((value, sealed_with.is_some())))
    }

    /// [`Checkpoints::write`] on the blocking pool.
    pub async fn write_async<T: Serialize + Send + 'static>(
        &self,
        name: &'static str,
        value: T,
    ) -> Result<(), Error> {
        let this = self.clone();
        let path = self.path(name);
        tokio::task::spawn_blocking(move || this.write(name, &value))
            .await
            .map_err(|e| Error::Write { path, source: io::Error::other(e) })?
    }
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new one: a
/// temporary file beside it (`.<name>.tmp`, with `mode`) is written and fsynced, renamed
/// over `path`, and the directory fsynced. The directory is made if missing.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file path"));
    };
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    // A leftover temporary file may have another mode: start afresh.
    match fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)?;
    File::open(dir)?.sync_all()
}

/// A checkpoint file's bytes for the JSON `body`: the header line, then the body.
pub fn frame(body: &[u8]) -> Vec<u8> {
    frame_with(None, body)
}

/// The header line, then `body`: sealed with key `sealed_with` when given.
fn frame_with(sealed_with: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut bytes = header(sealed_with, body).into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Reads a plain checkpoint file's bytes: checks the header against the body and decodes
/// the body. The error is why the file cannot be used: [`Error::NoHeader`],
/// [`Error::UnknownHeader`], [`Error::Torn`] or [`Error::Body`] (corrupt), or
/// [`Error::Seal`] (sealed: only a [`Checkpoints`] with the key reads it).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    match verify(bytes)? {
        (None, body) => crate::json::from_slice(body).map_err(Error::Body),
        (Some(id), _) => Err(seal::Error::NoKey { sealed_with: id.to_owned() }.into()),
    }
}

fn header(sealed_with: Option<&str>, body: &[u8]) -> String {
    let sealed = sealed_with.map(|id| format!(" sealed={} key={id}", seal::CIPHER));
    let (len, sum) = (body.len(), xxhash_rust::xxh3::xxh3_128(body));
    format!("{MAGIC}{} len={len} xxh3={sum:032x}\n", sealed.unwrap_or_default())
}

/// Checks the header line against the body that follows it and returns the key the body
/// is sealed with (if it is) and the body. The header must be exactly what [`header`]
/// writes for that body, byte for byte.
fn verify(bytes: &[u8]) -> Result<(Option<&str>, &[u8]), Error> {
    let newline = bytes.iter().position(|&b| b == b'\n').ok_or(Error::NoHeader)?;
    let (line, body) = (&bytes[..=newline], &bytes[newline + 1..]);
    let text = || String::from_utf8_lossy(line).trim_end().to_owned();
    if !line.starts_with(MAGIC.as_bytes()) {
        return Err(Error::UnknownHeader(text()));
    }
    let sealed = format!("{MAGIC} sealed={} key=", seal::CIPHER);
    let sealed_with = line
        .strip_prefix(sealed.as_bytes())
        .and_then(|rest| rest.split(|&b| b == b' ').next())
        .and_then(|id| std::str::from_utf8(id).ok());
    if line != header(sealed_with, body).as_bytes() {
        return Err(Error::Torn { header: text(), len: body.len() });
    }
    Ok((sealed_with, body))
}

#[cfg(test)]
mod tests;
