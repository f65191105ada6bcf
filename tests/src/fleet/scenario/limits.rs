//! The kernel's per-user limits on file watches, checked before a fleet starts: each
//! hollow node watches its manifest directory with fanotify (as root) or inotify, and
//! both limit the watchers per user (`fs.fanotify.max_user_groups`,
//! `fs.inotify.max_user_instances`: 128 by default), so a fleet past about a hundred
//! nodes would have nodes fail their file source. Root raises a limit that is too low,
//! says so, and puts it back when the fleet is done ([`Raised`]); anyone else gets the
//! `sysctl` to run.
//!
//! The process's open files are a limit too: each node holds its connections to the
//! server (a watch each), the server's ends of them, its watches' descriptors and the
//! files it writes, so 1,000 nodes ran out of 20,000 (`EMFILE`: checkpoints unwritten,
//! connections refused). The soft limit is raised to what the fleet needs, and the hard
//! one with it where the process may ([`open_files`]); the process's own, it ends with
//! it. Where the hard limit cannot be raised (no `CAP_SYS_RESOURCE`), the soft one goes
//! up to it, and the scenario says so.

use std::path::Path;

/// What each hollow node may take of each limit (its manifest directory, the
/// directory's parent and a symlinked manifest's directory, and one spare).
const PER_NODE: u64 = 4;
/// Left for the rest of the user's processes (containerd, other tests).
const MARGIN: u64 = 64;
/// Open files each node takes (measured: 8.0 at 1,000 nodes, both ends of its one
/// HTTP/2 connection among them; 19.7 when a node held 8 HTTP/1.1 connections), and a
/// few spare.
const FILES_PER_NODE: u64 = 12;
/// Open files for the rest of the process.
const FILES_MARGIN: u64 = 1024;

/// (sysctl name, /proc/sys path, what it limits per node).
const LIMITS: [(&str, &str, u64); 4] = [
    ("fs.inotify.max_user_instances", "/proc/sys/fs/inotify/max_user_instances", 1),
    ("fs.inotify.max_user_watches", "/proc/sys/fs/inotify/max_user_watches", PER_NODE),
    ("fs.fanotify.max_user_groups", "/proc/sys/fs/fanotify/max_user_groups", 1),
    ("fs.fanotify.max_user_marks", "/proc/sys/fs/fanotify/max_user_marks", PER_NODE),
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{nodes} hollow nodes need {name} of at least {need} (it is {have}); run `sudo sysctl -w {name}={need}` (or run the fleet as root, which raises it)"
    )]
    TooLow { nodes: usize, name: &'static str, need: u64, have: u64 },
    #[error("cannot raise the open-files limit to {need}: {source}")]
    RaiseOpenFiles {
        need: u64,
        #[source]
        source: nix::Error,
    },
    #[error("cannot raise {name} to {need}: {source}; run `sysctl -w {name}={need}`")]
    Raise {
        name: &'static str,
        need: u64,
        #[source]
        source: std::io::Error,
    },
}

/// The limits [`check`] raised, put back to what they were when dropped (the machine is
/// left as it was found).
#[derive(Debug, Default)]
pub struct Raised {
    /// What to say: a line per limit raised.
    pub lines: Vec<String>,
    /// (/proc/sys path, the value before).
    before: Vec<(&'static str, u64)>,
}

impl Drop for Raised {
    fn drop(&mut self) {
        for (path, value) in self.before.drain(..) {
            // Best effort: a limit left raised harms nothing but the machine's tidiness.
            let _ = std::fs::write(path, value.to_string());
        }
    }
}

/// Checks (and as root raises, until the returned [`Raised`] is dropped) the limits for
/// `nodes` nodes: the open files, and the file watches when they are `hollow` nodes
/// (the kubelet model watches no files).
pub fn check(nodes: usize, hollow: bool) -> Result<Raised, Error> {
    let root = crate::is_root();
    let mut raised = Raised::default();
    let watches = if hollow { &LIMITS[..] } else { &[] };
    for &(name, path, per_node) in watches {
        // A kernel without the limit (no fanotify) has nothing to check.
        let Some(have) = read(Path::new(path)) else { continue };
        let need = nodes as u64 * per_node + MARGIN;
        if have >= need {
            continue;
        }
        if !root {
            return Err(Error::TooLow { nodes, name, need, have });
        }
        std::fs::write(path, need.to_string()).map_err(|source| Error::Raise {
            name,
            need,
            source,
        })?;
        raised.before.push((path, have));
        raised.lines.push(format!(
            "raised {name} from {have} to {need} for {nodes} hollow nodes (sysctl -w {name}={need})"
        ));
    }
    raised.lines.extend(open_files(nodes)?);
    Ok(raised)
}

/// Raises this process's open-files limit for `nodes` nodes if it is lower (the hard
/// limit too where the process may): what to say if it did.
fn open_files(nodes: usize) -> Result<Option<String>, Error> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let need = nodes as u64 * FILES_PER_NODE + FILES_MARGIN;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return Ok(None) };
    if soft >= need {
        return Ok(None);
    }
    if hard < need && setrlimit(Resource::RLIMIT_NOFILE, need, need).is_ok() {
        return Ok(Some(format!(
            "raised the open-files limit from {soft} to {need} for {nodes} nodes"
        )));
    }
    let got = need.min(hard);
    if got > soft {
        setrlimit(Resource::RLIMIT_NOFILE, got, hard)
            .map_err(|source| Error::RaiseOpenFiles { need: got, source })?;
    }
    let short = if got < need {
        format!(" (the hard limit: {need} wanted, so some may fail with EMFILE)")
    } else {
        String::new()
    };
    Ok(Some(format!("the open-files limit is {got} for {nodes} nodes (it was {soft}){short}")))
}

fn read(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}
