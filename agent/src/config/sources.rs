//! The local pod sources' config (built by `source::local`).

use std::path::PathBuf;
use std::time::Duration;

use super::values::Preference;

/// The manifest directory, the manifest URL and the push endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `--manifest-dir`: a directory, or a single manifest file.
    pub manifest_dir: PathBuf,
    /// How the manifest directory is watched (fanotify, inotify, or either).
    pub watcher: Preference,
    pub manifest_url: Option<String>,
    /// `Name: value` pairs sent with every request (`--manifest-url-header`).
    pub manifest_url_headers: Vec<(String, String)>,
    /// How often the manifest URL is fetched (jittered), kubelet's `httpCheckFrequency`.
    pub manifest_url_interval: Duration,
    /// PEM bundle of CAs trusted for an `https` manifest URL (in addition to none: when
    /// set, only these are trusted).
    pub manifest_url_ca_file: Option<PathBuf>,
    /// The push endpoint: it changes state, so it exists only when callers of the local
    /// API can authenticate.
    pub push: bool,
}
