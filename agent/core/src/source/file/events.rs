//! What kernel events (and timers) mean for the file source: which names to look at
//! again, and whether the directory must be scanned, watched or found again.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};

use tracing::{debug, info, warn};

use super::watch::{Event, Mask, Scope, WatchId};
use super::{Action, Cause, MODIFY_QUIET, Machine, Now, Rest, State};

/// What a batch of events (or a timer) calls for, gathered before acting on it.
#[derive(Debug, Default)]
struct Work {
    /// Where the configured path points must be found again: the directory went or was
    /// replaced.
    relocate: bool,
    /// The directory's watches to drop (it went or was replaced).
    unwatch: Vec<WatchId>,
    /// Everything must be listed and read again.
    rescan: bool,
    /// The directory (and its parent) must be watched again.
    rearm: bool,
    /// Manifests to read, in the order the events named them, each once.
    reads: Vec<(OsString, Cause)>,
    named: HashSet<OsString>,
    /// Other entries to look at: is it a symlink or a directory?
    looks: Vec<OsString>,
}

impl Work {
    /// Reads `name` once, for the last writer named: what is read is what the last one
    /// wrote, so a batch with two writers' events is the later one's change (an event
    /// that names no writer does not replace one that does).
    fn read(&mut self, name: OsString, cause: Cause) {
        if self.named.insert(name.clone()) {
            self.reads.push((name, cause));
        } else if let Some((_, named)) = self.reads.iter_mut().find(|(n, _)| *n == name)
            && !matches!(cause, Cause::Event { pid: None })
        {
            *named = cause;
        }
    }
}

impl Machine {
    /// A batch of kernel events.
    pub(super) fn events(
        &mut self,
        events: Vec<Event>,
        rest: Rest,
        now: Now,
        out: &mut Vec<Action>,
    ) -> State {
        let mut work = Work::default();
        for event in events {
            self.event(event, now, &mut work);
        }
        self.work(work, rest, out)
    }

    /// A wake-up: files quiet long enough are read, a due retry watches again.
    pub(super) fn tick(&mut self, rest: Rest, now: Now, out: &mut Vec<Action>) -> State {
        let mut work = Work::default();
        let due: Vec<OsString> = self
            .quiet
            .iter()
            .filter(|(_, (at, _))| *at + MODIFY_QUIET <= now.at)
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            if let Some((_, cause)) = self.quiet.remove(&name) {
                work.read(name, cause);
            }
        }
        work.rearm = matches!(rest, Rest::Unwatched { at, .. } if at <= now.at);
        self.work(work, rest, out)
    }

    /// Notes what one kernel event calls for.
    fn event(&mut self, event: Event, now: Now, work: &mut Work) {
        match event {
            Event::Overflow => {
                warn!("kernel event queue overflowed; rescanning the manifest directory");
                work.rescan = true;
            }
            Event::WatchGone(id) => {
                self.link_watches.remove(&id);
                if Some(id) == self.parent_watch {
                    self.parent_watch = None;
                }
                if Some(id) == self.dir_watch {
                    self.dir_watch = None;
                    self.replaced("its watch was removed by the kernel", work);
                } else if self.dir_watch.is_none() {
                    work.rearm = true;
                }
            }
            Event::Entry { dir, name, mask, pid } => {
                self.entry(dir, name, mask, Cause::Event { pid }, now, work);
            }
        }
    }

    fn entry(
        &mut self,
        dir: WatchId,
        name: Option<OsString>,
        mask: Mask,
        cause: Cause,
        now: Now,
        work: &mut Work,
    ) {
        // One directory can be several of these at once (watch ids are per directory).
        if Some(dir) == self.parent_watch {
            let ours = self.target.dir().file_name();
            if name.is_some() && name.as_deref() == ours && touches_entry(mask) {
                self.replaced("the directory entry changed in its parent", work);
            }
        }
        if Some(dir) == self.dir_watch {
            match &name {
                Some(name) => self.dir_entry(name, mask, cause, now, work),
                None if mask.self_deleted || mask.self_moved => {
                    self.replaced("the directory was deleted or moved", work);
                }
                None => {}
            }
        }
        if let (Some(links), Some(name)) = (self.link_watches.get(&dir), &name) {
            // A symlinked manifest's target changed: read the manifests pointing at it.
            for link in links.iter().filter(|link| &link.target == name) {
                work.read(link.manifest.clone(), cause);
            }
        }
    }

    /// An event about one entry of the manifest directory. The kernel's flags say that
    /// something happened, not what the entry is now: fanotify merges queued events
    /// (`rm a; write a` can arrive as one create|delete event) and may reorder them. So
    /// the entry is looked at, not the flags trusted.
    fn dir_entry(&mut self, name: &OsStr, mask: Mask, cause: Cause, now: Now, work: &mut Work) {
        if !self.target.wants(name) {
            // A directory or symlink beside symlinked manifests changing (`..data`
            // swapped, as ConfigMap volumes do) can change what they point at.
            if !self.link_watches.is_empty() && touches_entry(mask) {
                if mask.is_dir {
                    debug!(entry = ?name, "symlinked content swapped; rescanning");
                    work.rescan = true;
                } else if !work.looks.iter().any(|n| n == name) {
                    work.looks.push(name.to_owned());
                }
            }
            return;
        }
        let only_modified =
            mask.modify && !(mask.close_write || touches_entry(mask) || mask.attrib);
        if only_modified {
            // Still being written: read once it is closed, or quiet for a while.
            self.quiet.insert(name.to_owned(), (now.at, cause));
            return;
        }
        self.quiet.remove(name);
        work.read(name.to_owned(), cause);
    }

    /// The directory went away or was replaced: its watch goes, and where the configured
    /// path points is found again (it may have turned from a directory into a file, or
    /// back), then watched and scanned.
    fn replaced(&mut self, why: &str, work: &mut Work) {
        info!(dir = %self.target.dir().display(), why, "manifest directory replaced; rescanning");
        work.unwatch.extend(self.dir_watch.take());
        work.relocate = true;
    }

    /// Starts what `work` calls for; at most one action whose result is awaited.
    fn work(&mut self, work: Work, rest: Rest, out: &mut Vec<Action>) -> State {
        let dir = self.target.dir().to_path_buf();
        let looks = !work.reads.is_empty() || !work.looks.is_empty();
        out.extend(work.unwatch.iter().map(|id| Action::Unwatch(*id, Scope::Contents)));
        if work.relocate {
            out.push(Action::Locate(self.path.clone()));
            State::Locating { owed: false }
        } else if work.rearm {
            let backoff = match rest {
                Rest::Unwatched { delay, .. } => Some(delay),
                Rest::Watched => None,
            };
            // A scan after the watches covers whatever the events asked to look at.
            self.arm(work.rescan || looks, false, backoff, out)
        } else if work.rescan {
            out.push(Action::List(dir));
            State::Listing { owed: false, then: rest }
        } else if !work.looks.is_empty() {
            out.push(Action::Look { dir, names: work.looks });
            State::Looking { reads: work.reads, then: rest }
        } else if !work.reads.is_empty() {
            self.reads(work.reads, false, false, rest, out)
        } else {
            State::Idle(rest)
        }
    }
}

fn touches_entry(mask: Mask) -> bool {
    mask.create || mask.delete || mask.moved_from || mask.moved_to
}
