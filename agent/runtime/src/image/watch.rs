//! `--images-dir`: image tarballs dropped in a directory are imported into containerd,
//! as k3s's air-gap images directory does. Each version of a file is imported once (the
//! record in the state directory survives restarts); a replaced file is imported again.
//!
//! A file is imported when the writer closes it (IN_CLOSE_WRITE) or when it is moved in
//! (IN_MOVED_TO), never while it is being written. A file that fails to import is logged
//! once and tried again when it changes; one that failed because containerd was
//! unreachable is retried with backoff.
//!
//! ```text
//! let mut images = ImagesDir::open(dir, containerd, record)?;
//! images.import_present().await?;   // pods using these images wait for this
//! images.run().await                // then follow the directory
//! ```

mod record;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use inotify::{EventMask, EventStream, Inotify, WatchDescriptor, WatchMask};
use outpost_core::backoff::Backoff;
use outpost_core::error_chain::describe;
use tokio::time::Instant;

use self::record::{Record, Stamp, tarball_name};
use super::import;
use crate::Containerd;
use crate::image::metrics::ImageImports;

/// inotify's read buffer: room for many events with long names.
const EVENT_BUFFER: usize = 64 << 10;
/// Imports that failed because containerd was unreachable are retried 1 s to 1 min apart.
const RETRY_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create the images directory {}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot start inotify for the images directory; if the per-user limit is reached, \
         raise fs.inotify.max_user_instances"
    )]
    Inotify {
        #[source]
        source: io::Error,
    },
    #[error("cannot watch the images directory {}", dir.display())]
    Watch {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot list the images directory {}", dir.display())]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading inotify events of the images directory {}", dir.display())]
    Events {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the inotify event stream of the images directory {} ended", dir.display())]
    EventsEnded { dir: PathBuf },
}

/// What [`ImagesDir::import_present`] did, by file name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub imported: Vec<String>,
    /// Recorded as imported in this version already.
    pub unchanged: Vec<String>,
    /// Failed (and logged).
    pub failed: Vec<String>,
}

/// The images directory, watched.
#[derive(Debug)]
pub struct ImagesDir {
    dir: PathBuf,
    containerd: Containerd,
    record_path: PathBuf,
    record: Record,
    /// Files whose import failed, with the version that failed: not tried again until
    /// they change.
    failed: BTreeMap<String, Stamp>,
    /// Files whose import failed because containerd was unreachable, retried at
    /// `retry_at`.
    retry: BTreeSet<String>,
    retry_at: Option<Instant>,
    backoff: Backoff,
    events: EventStream<Vec<u8>>,
    /// The watch on the directory (a new one if the directory is created again).
    watch: Option<WatchDescriptor>,
    /// Times the imports.
    metrics: ImageImports,
    /// Told after each import (the image garbage collector runs then).
    imported: Option<std::sync::Arc<tokio::sync::Notify>>,
}

enum Wake {
    Event(Option<io::Result<inotify::Event<OsString>>>),
    Retry,
}

impl ImagesDir {
    /// Creates the directory if it is missing, starts watching it (before anything is
    /// imported, so no file is missed) and reads the record (`<state-dir>/images-imported.json`).
    pub fn open(dir: PathBuf, containerd: Containerd, record: PathBuf) -> Result<ImagesDir> {
        std::fs::create_dir_all(&dir)
            .map_err(|source| Error::CreateDir { dir: dir.clone(), source })?;
        let inotify = Inotify::init().map_err(|source| Error::Inotify { source })?;
        let events = inotify
            .into_event_stream(vec![0; EVENT_BUFFER])
            .map_err(|source| Error::Inotify { source })?;
        let mut images = ImagesDir {
            record: read_record(&record),
            dir,
            containerd,
            record_path: record,
            failed: BTreeMap::new(),
            retry: BTreeSet::new(),
            retry_at: None,
            backoff: RETRY_BACKOFF,
            events,
            watch: None,
            metrics: ImageImports::default(),
            imported: None,
        };
        images.add_watch()?;
        Ok(images)
    }

    /// Times each successful import in `metrics`.
    pub fn with_metrics(mut self, metrics: ImageImports) -> ImagesDir {
        self.metrics = metrics;
        self
    }

    /// Notifies `imported` after each import.
    pub fn with_imported(mut self, imported: std::sync::Arc<tokio::sync::Notify>) -> ImagesDir {
        self.imported = Some(imported);
        self
    }

    fn add_watch(&mut self) -> Result<()> {
        let mask = WatchMask::CLOSE_WRITE
            | WatchMask::MOVED_TO
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
            | WatchMask::ONLYDIR;
        let mut watches = self.events.watches();
        if let Some(old) = self.watch.take() {
            // Gone already if the directory was deleted; still there if it was moved.
            let _ = watches.remove(old);
        }
        let watch = watches
            .add(&self.dir, mask)
            .map_err(|source| Error::Watch { dir: self.dir.clone(), source })?;
        self.watch = Some(watch);
        Ok(())
    }

    /// Imports every tarball in the directory that is not recorded as imported (and
    /// forgets recorded files that are gone).
    pub async fn import_present(&mut self) -> Result<Summary> {
        let names = self.list()?;
        if self.record.retain_present(&names) {
            self.write_record();
        }
        let mut summary = Summary::default();
        for name in names {
            match self.import_file(&name).await {
                Outcome::Imported => summary.imported.push(name),
                Outcome::Unchanged => summary.unchanged.push(name),
                Outcome::Failed => summary.failed.push(name),
            }
        }
        tracing::info!(
            dir = %self.dir.display(),
            imported = summary.imported.len(),
            unchanged = summary.unchanged.len(),
            failed = summary.failed.len(),
            "imported the image tarballs present at start"
        );
        Ok(summary)
    }

    /// Follows the directory: imports each tarball written or moved into it. Returns
    /// only if watching fails.
    pub async fn run(mut self) -> Result<()> {
        loop {
            let wake = match self.retry_at {
                Some(at) => tokio::select! {
                    event = self.events.next() => Wake::Event(event),
                    () = tokio::time::sleep_until(at) => Wake::Retry,
                },
                None => Wake::Event(self.events.next().await),
            };
            match wake {
                Wake::Retry => self.retry().await,
                Wake::Event(None) => return Err(Error::EventsEnded { dir: self.dir.clone() }),
                Wake::Event(Some(Err(source))) => {
                    return Err(Error::Events { dir: self.dir.clone(), source });
                }
                Wake::Event(Some(Ok(event))) => {
                    // A queue overflow names no watch; any other event is of ours, unless
                    // it is late news from a directory that was replaced.
                    if event.mask.contains(EventMask::Q_OVERFLOW)
                        || self.watch.as_ref() == Some(&event.wd)
                    {
                        self.handle(event.mask, event.name).await?;
                    }
                }
            }
        }
    }

    async fn handle(&mut self, mask: EventMask, name: Option<OsString>) -> Result<()> {
        if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF) {
            tracing::warn!(dir = %self.dir.display(), "the images directory was removed or moved; creating it again");
            std::fs::create_dir_all(&self.dir)
                .map_err(|source| Error::CreateDir { dir: self.dir.clone(), source })?;
            self.add_watch()?;
            return self.import_all().await;
        }
        if mask.contains(EventMask::Q_OVERFLOW) {
            tracing::warn!(dir = %self.dir.display(), "inotify queue overflowed; rescanning the images directory");
            return self.import_all().await;
        }
        if mask.intersects(EventMask::CLOSE_WRITE | EventMask::MOVED_TO)
            && let Some(name) = name.as_deref().and_then(tarball_name)
        {
            self.import_file(name).await;
        }
        Ok(())
    }

    async fn import_all(&mut self) -> Result<()> {
        for name in self.list()? {
            self.import_file(&name).await;
        }
        Ok(())
    }

    async fn retry(&mut self) {
        self.retry_at = None;
        for name in std::mem::take(&mut self.retry) {
            self.import_file(&name).await;
        }
        if self.retry.is_empty() {
            self.backoff.reset();
        }
    }

    /// The tarballs in the directory, sorted.
    fn list(&self) -> Result<Vec<String>> {
        let error = |source| Error::ReadDir { dir: self.dir.clone(), source };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(error)? {
            let entry = entry.map_err(error)?;
            if let Some(name) = tarball_name(&entry.file_name()) {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Imports the file unless this version of it was imported, or failed, already.
    async fn import_file(&mut self, name: &str) -> Outcome {
        let path = self.dir.join(name);
        // Follows symlinks: a link to a tarball elsewhere is imported too.
        let stamp = match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Stamp::of(&m),
            // Gone again, or not a file: nothing to import.
            _ => return Outcome::Unchanged,
        };
        if self.record.is_imported(name, &stamp) || self.failed.get(name) == Some(&stamp) {
            return Outcome::Unchanged;
        }
        self.retry.remove(name);
        let began = std::time::Instant::now();
        match import(&self.containerd, &path).await {
            Ok(images) => {
                self.metrics.image_imported(began.elapsed());
                let images: Vec<String> = images.into_iter().map(|i| i.name).collect();
                tracing::info!(tarball = %path.display(), ?images, "imported image tarball");
                self.failed.remove(name);
                self.record.insert(name, stamp, images);
                self.write_record();
                if let Some(imported) = &self.imported {
                    imported.notify_one();
                }
                Outcome::Imported
            }
            Err(e) if super::Error::is_unavailable(&e) => {
                let delay = self.backoff.next_delay(fastrand::f64());
                tracing::warn!(tarball = %path.display(), error = %describe(&e), retry_in = ?delay, "cannot import image tarball: containerd is unreachable; retrying");
                self.retry.insert(name.to_owned());
                self.retry_at.get_or_insert(Instant::now() + delay);
                Outcome::Failed
            }
            Err(e) => {
                tracing::warn!(tarball = %path.display(), error = %describe(&e), "cannot import image tarball; it is tried again when the file changes");
                self.failed.insert(name.to_owned(), stamp);
                Outcome::Failed
            }
        }
    }

    /// Writes the record atomically (a temporary file renamed over it). A failure is
    /// logged: the imports happened, and at worst the next start repeats them.
    fn write_record(&self) {
        if let Err(e) = write_atomically(&self.record_path, &self.record) {
            tracing::warn!(record = %self.record_path.display(), error = %e, "cannot write the record of imported image tarballs; they will be imported again at the next start");
        }
    }
}

enum Outcome {
    Imported,
    Unchanged,
    Failed,
}

/// The images imported from tarballs still in `dir`, by the record at `record`: the
/// garbage collector keeps them (G1).
pub fn images_of_present_tarballs(dir: &Path, record: &Path) -> BTreeSet<String> {
    let record = match std::fs::read(record) {
        Ok(bytes) => Record::parse(&bytes).unwrap_or_default(),
        Err(_) => Record::default(),
    };
    record
        .files
        .into_iter()
        .filter(|(name, _)| dir.join(name).exists())
        .flat_map(|(_, entry)| entry.images)
        .collect()
}

/// The record, or an empty one (and a warning) if it is missing or unreadable.
fn read_record(path: &Path) -> Record {
    match std::fs::read(path) {
        Ok(bytes) => Record::parse(&bytes).unwrap_or_else(|e| {
            tracing::warn!(record = %path.display(), error = %e, "the record of imported image tarballs is corrupt; importing them all again");
            Record::default()
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Record::default(),
        Err(e) => {
            tracing::warn!(record = %path.display(), error = %e, "cannot read the record of imported image tarballs; importing them all again");
            Record::default()
        }
    }
}

fn write_atomically(path: &Path, record: &Record) -> io::Result<()> {
    use std::io::Write;
    let json = record.to_json().map_err(io::Error::other)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&json)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
