//! Random access to the files of an (uncompressed) image tarball: one pass over the tar
//! headers records where each file's bytes lie, then files are read in place, so a layer
//! is streamed from disk and never held in memory.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::content::{CHUNK, Chunks};
use super::layout::hex_digest;

/// Links followed before giving up (a link loop).
const MAX_LINKS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File {
        offset: u64,
        size: u64,
    },
    /// A symbolic or hard link, with the archive path it points at.
    Link(String),
}

/// Where a file's bytes lie in the tarball.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug)]
pub struct Archive {
    path: PathBuf,
    entries: HashMap<String, Entry>,
}

impl Archive {
    /// Reads the tar headers (seeking over file contents). Blocking.
    pub fn open(path: &Path) -> io::Result<Archive> {
        let mut tar = tar::Archive::new(BufReader::new(File::open(path)?));
        let mut entries = HashMap::new();
        for entry in tar.entries_with_seek()? {
            let entry = entry?;
            let Some(name) = normalize(&entry.path()?) else { continue };
            let kind = entry.header().entry_type();
            let recorded = if kind.is_file() {
                Entry::File { offset: entry.raw_file_position(), size: entry.size() }
            } else if kind.is_symlink() || kind.is_hard_link() {
                let Some(target) = entry.link_name()? else { continue };
                let target = if kind.is_symlink() && !target.is_absolute() {
                    Path::new(&name).parent().unwrap_or(Path::new("")).join(target)
                } else {
                    target.into_owned()
                };
                let Some(target) = normalize(&target) else { continue };
                Entry::Link(target)
            } else {
                continue;
            };
            entries.insert(name, recorded);
        }
        Ok(Archive { path: path.to_owned(), entries })
    }

    /// Where the file `name` lies, following links.
    pub fn span(&self, name: &str) -> Option<Span> {
        let mut name = normalize(Path::new(name))?;
        for _ in 0..MAX_LINKS {
            match self.entries.get(&name)? {
                Entry::File { offset, size } => return Some(Span { offset: *offset, size: *size }),
                Entry::Link(target) => name = target.clone(),
            }
        }
        None
    }

    pub fn contains(&self, name: &str) -> bool {
        self.span(name).is_some()
    }

    /// A reader of the file's bytes. Blocking.
    pub fn reader(&self, span: Span) -> io::Result<impl Read + use<>> {
        let mut file = File::open(&self.path)?;
        file.seek(SeekFrom::Start(span.offset))?;
        Ok(BufReader::new(file).take(span.size))
    }

    /// The whole file, if it is at most `limit` bytes (documents, not layers). Blocking.
    pub fn read_small(&self, span: Span, limit: u64) -> io::Result<Vec<u8>> {
        if span.size > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} bytes, more than the {limit} a JSON document may have", span.size),
            ));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(span.size).unwrap_or_default());
        self.reader(span)?.read_to_end(&mut bytes)?;
        check_length(span, bytes.len() as u64)?;
        Ok(bytes)
    }

    /// `sha256:<hex>` of the file, streamed. Blocking.
    pub fn sha256(&self, span: Span) -> io::Result<String> {
        let mut hasher = Sha256::new();
        let copied = io::copy(&mut self.reader(span)?, &mut hasher)?;
        check_length(span, copied)?;
        Ok(hex_digest(hasher.finalize().as_slice()))
    }

    /// The first bytes of the file (to sniff compression). Blocking.
    pub fn magic(&self, span: Span) -> io::Result<Vec<u8>> {
        let mut magic = Vec::with_capacity(4);
        self.reader(Span { size: span.size.min(4), ..span })?.read_to_end(&mut magic)?;
        Ok(magic)
    }
}

/// The file's bytes in chunks of at most [`CHUNK`], read off the async threads a chunk
/// at a time.
pub fn chunks(archive: Arc<Archive>, span: Span) -> Chunks {
    let (sender, receiver) = mpsc::channel(2);
    tokio::task::spawn_blocking(move || {
        let send = |item| sender.blocking_send(item).is_ok();
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

fn check_length(span: Span, read: u64) -> io::Result<()> {
    if read == span.size {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the tarball ends after {read} of the file's {} bytes", span.size),
        ))
    }
}

/// The canonical archive path (`./a/../b/c` → `b/c`); `None` for the root or a path
/// that climbs out of the archive.
pub(super) fn normalize(path: &Path) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}
