//! Size-based rotation of a container's live log file, as kubelet does it: when the file
//! would grow past `max_size`, it is renamed `<n>.log.<YYYYMMDD-HHMMSS>` (UTC) and a new
//! live file is started; the oldest rotated files are deleted so that at most `max_files`
//! files (the live one included) remain. Unlike kubelet, rotated files stay uncompressed.
//!
//! [`must_rotate`], [`rotated_name`] and [`to_delete`] decide; [`LogFile`] does the IO.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::time::Time;

/// kubelet's `containerLogMaxSize` default: 10 MiB per file before rotation.
pub const DEFAULT_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// kubelet's `containerLogMaxFiles` default: the live file and up to 4 rotated ones.
pub const DEFAULT_MAX_FILES: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes a file may reach (a single record larger than this still gets a file).
    pub max_size: u64,
    /// Files kept, the live one included; at least 1 (1: rotation truncates).
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_size: DEFAULT_MAX_SIZE, max_files: DEFAULT_MAX_FILES }
    }
}

/// Whether a record of `next` bytes must go to a new file, the live one holding `size`.
pub fn must_rotate(size: u64, next: u64, limits: Limits) -> bool {
    size > 0 && size.saturating_add(next) > limits.max_size
}

/// The name the live file `live` (e.g. `0.log`) gets when rotated at `now`, given the
/// `names` in its directory: `<live>.<YYYYMMDD-HHMMSS>`, or with `.<k>` appended when
/// files rotated within the same second exist (k above theirs, so names keep their order).
pub fn rotated_name(live: &str, now: Time, names: &[String]) -> String {
    let time = now.rotation_stamp();
    let last = names
        .iter()
        .filter_map(|n| rotation_key(live, n))
        .filter(|(t, _)| *t == time)
        .map(|(_, seq)| seq)
        .max();
    match last {
        None => format!("{live}.{time}"),
        Some(seq) => format!("{live}.{time}.{}", seq.saturating_add(1)),
    }
}

/// Of the names in the live file's directory, the rotated files of `live` to delete so
/// that, with the live file, at most `max_files` remain: the oldest, by the time and
/// sequence in their names. Other names are never chosen.
pub fn to_delete<'a>(live: &str, names: &'a [String], max_files: usize) -> Vec<&'a str> {
    let mut rotated: Vec<(RotationKey<'a>, &'a str)> =
        names.iter().filter_map(|n| rotation_key(live, n).map(|k| (k, n.as_str()))).collect();
    let keep = max_files.saturating_sub(1);
    if rotated.len() <= keep {
        return Vec::new();
    }
    rotated.sort();
    rotated.truncate(rotated.len() - keep);
    rotated.into_iter().map(|(_, name)| name).collect()
}

/// (timestamp, sequence) of a rotated file of `live`, e.g. `0.log.20260101-120000.2`;
/// kubelet's compressed `.gz` files count too (sequence 0).
type RotationKey<'a> = (&'a str, u32);

fn rotation_key<'a>(live: &str, name: &'a str) -> Option<RotationKey<'a>> {
    let suffix = name.strip_prefix(live)?.strip_prefix('.')?;
    let (time, rest) = suffix.split_at_checked(15)?;
    let (date, clock) = time.split_once('-')?;
    if date.len() != 8 || !(date.bytes().chain(clock.bytes()).all(|b| b.is_ascii_digit())) {
        return None;
    }
    let seq = match rest.strip_prefix('.') {
        None if rest.is_empty() => 0,
        Some("gz") => 0,
        Some(seq) => seq.parse().ok()?,
        None => return None,
    };
    Some((time, seq))
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create the log directory {}", .path.display())]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("cannot open the log file {}", .path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot write to the log file {} (is the disk full?)", .path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot rotate the log file {} to {}", .path.display(), .to.display())]
    Rename { path: PathBuf, to: PathBuf, source: io::Error },
    #[error("cannot list {} to delete old rotated logs", .path.display())]
    List { path: PathBuf, source: io::Error },
    #[error("cannot delete the old rotated log {}", .path.display())]
    Delete { path: PathBuf, source: io::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A live log file, appended to record by record and rotated by [`Limits`].
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: File,
    size: u64,
    limits: Limits,
}

impl LogFile {
    /// Opens `path` for appending (creating it and its parent directories).
    pub fn open(path: &Path, limits: Limits) -> Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)
                .map_err(|source| Error::CreateDir { path: dir.to_path_buf(), source })?;
        }
        let file = open_append(path)?;
        let size = file
            .metadata()
            .map_err(|source| Error::Open { path: path.to_path_buf(), source })?
            .len();
        Ok(Self { path: path.to_path_buf(), file, size, limits })
    }

    /// Appends one whole record (one `write`), rotating first if it would not fit.
    pub fn write_record(&mut self, record: &[u8], now: Time) -> Result<()> {
        if must_rotate(self.size, record.len() as u64, self.limits) {
            self.rotate(now)?;
        }
        self.file
            .write_all(record)
            .map_err(|source| Error::Write { path: self.path.clone(), source })?;
        self.size += record.len() as u64;
        Ok(())
    }

    fn rotate(&mut self, now: Time) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let live =
            self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if self.limits.max_files <= 1 {
            self.file
                .set_len(0)
                .map_err(|source| Error::Write { path: self.path.clone(), source })?;
            self.size = 0;
            return Ok(());
        }
        let mut names: Vec<String> = fs::read_dir(dir)
            .map_err(|source| Error::List { path: dir.to_path_buf(), source })?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        let rotated = rotated_name(&live, now, &names);
        let to = dir.join(&rotated);
        fs::rename(&self.path, &to).map_err(|source| Error::Rename {
            path: self.path.clone(),
            to: to.clone(),
            source,
        })?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        names.push(rotated);
        for name in to_delete(&live, &names, self.limits.max_files) {
            let path = dir.join(name);
            fs::remove_file(&path).map_err(|source| Error::Delete { path, source })?;
        }
        Ok(())
    }
}

/// Opens the live file for appending and takes its exclusive lock (`flock`), held until
/// the logger rotates the file away or exits: a reader that needs every line the container
/// wrote (the agent's termination message, [`wait_for_writer`]) waits for it. A file
/// system without locks still gets the log.
fn open_append(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|source| Error::Open { path: path.to_path_buf(), source })?;
    // Only the agent's shared lock, held for an instant, can make this wait.
    let _ = file.lock();
    Ok(file)
}

/// Waits, at most `patience`, until no logger writes the live file at `path` any more
/// (its lock is free: the container's output has ended and the logger has written it
/// all, or it has rotated the file away). Whether the writer was seen to finish; a file
/// that is missing or cannot be opened has no writer.
pub fn wait_for_writer(path: &Path, patience: Duration) -> bool {
    let Ok(file) = File::open(path) else { return true };
    let deadline = Instant::now() + patience;
    loop {
        match file.try_lock_shared() {
            Ok(()) => return true,
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::WouldBlock) => return false,
            // Locks not supported: nothing to wait for.
            Err(TryLockError::Error(_)) => return true,
        }
    }
}

#[cfg(test)]
mod tests;
