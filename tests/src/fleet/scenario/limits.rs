//! The kernel's per-user limits on file watches, checked before a fleet starts: each
//! hollow node watches its manifest directory with fanotify (as root) or inotify, and
//! both limit the watchers per user (`fs.fanotify.max_user_groups`,
//! `fs.inotify.max_user_instances`: 128 by default), so a fleet past about a hundred
//! nodes would have nodes fail their file source. Root raises a limit that is too low,
//! says so, and puts it back when the fleet is done ([`Raised`]); anyone else gets the
//! `sysctl` to run.

use std::path::Path;

/// What each hollow node may take of each limit (its manifest directory, the
/// directory's parent and a symlinked manifest's directory, and one spare).
const PER_NODE: u64 = 4;
/// Left for the rest of the user's processes (containerd, other tests).
const MARGIN: u64 = 64;

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
/// `nodes` hollow nodes.
pub fn check(nodes: usize) -> Result<Raised, Error> {
    let root = crate::is_root();
    let mut raised = Raised::default();
    for (name, path, per_node) in LIMITS {
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
    Ok(raised)
}

fn read(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}
