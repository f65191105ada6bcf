//! Reading manifests: a full scan's listing, files read one at a time (each may be
//! 10 MiB, so no more than one is held), their content offered to [`Manifests`], and the
//! changes that makes recorded.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::{OsStr, OsString};

use tracing::{debug, warn};

use super::manifests::{Manifests, Outcome};
use super::watch::WatchId;
use super::{
    Action, Cause, Change, ChangeKind, Content, Found, Link, Listing, Machine, Now, Reads, Rest,
    State,
};
use crate::source::short_sha256;

impl Machine {
    /// A full scan's listing: files no longer there are forgotten, every manifest is read.
    pub(super) fn listed(
        &mut self,
        listing: Listing,
        owed: bool,
        then: Rest,
        out: &mut Vec<Action>,
    ) -> State {
        let dir = self.target.dir().to_path_buf();
        let names = match listing {
            Listing::Names(names) => names,
            Listing::Missing => {
                debug!(dir = %dir.display(), "manifest directory does not exist (yet)");
                Vec::new()
            }
            Listing::Failed(error) => {
                warn!(dir = %dir.display(), error, "cannot list the manifest directory");
                Vec::new()
            }
        };
        let present: BTreeSet<OsString> =
            names.into_iter().filter(|name| self.target.wants(name)).collect();
        self.quiet.clear();
        let mut owed = owed;
        for name in self.manifests.names() {
            if !present.contains(&name) {
                owed |= self.forget(&name, Cause::Rescan, out);
            }
        }
        owed |= self.manifests.retain(&present);
        let files = present.into_iter().map(|name| (name, Cause::Rescan));
        self.reads(files, true, owed, then, out)
    }

    /// What the entries looked at are: a symlink or directory beside symlinked manifests
    /// that changed (`..data` swapped, as ConfigMap volumes do) can change what they point
    /// at, which a full scan finds out.
    pub(super) fn looked(
        &mut self,
        looked: &[(OsString, bool)],
        reads: Vec<(OsString, Cause)>,
        then: Rest,
        out: &mut Vec<Action>,
    ) -> State {
        match looked.iter().find(|(_, link_or_dir)| *link_or_dir) {
            Some((entry, _)) => {
                debug!(entry = ?entry, "symlinked content swapped; rescanning");
                out.push(Action::List(self.target.dir().to_path_buf()));
                State::Listing { owed: false, then }
            }
            None => self.reads(reads, false, false, then, out),
        }
    }

    /// Reads `files` in order; `scan`: they are the whole listing.
    pub(super) fn reads(
        &mut self,
        files: impl IntoIterator<Item = (OsString, Cause)>,
        scan: bool,
        owed: bool,
        then: Rest,
        out: &mut Vec<Action>,
    ) -> State {
        let queue: VecDeque<_> = files.into_iter().collect();
        let reads = Reads { scan, owed, then, queue, links: BTreeMap::new(), count: 0 };
        self.next_read(reads, out)
    }

    /// One file read. A symlinked manifest not known yet calls for a full scan instead:
    /// the directory it points into needs a watch too.
    pub(super) fn read(
        &mut self,
        found: Found,
        mut reads: Reads,
        now: Now,
        out: &mut Vec<Action>,
    ) -> State {
        reads.count += 1;
        if !reads.scan && found.link.is_some() && !self.manifests.contains(&found.name) {
            debug!(file = ?found.name, "new symlinked manifest; rescanning");
            out.push(Action::List(self.target.dir().to_path_buf()));
            return State::Listing { owed: reads.owed, then: reads.then };
        }
        if reads.scan
            && let Some(target) = &found.link
            && let (Some(dir), Some(file)) = (target.parent(), target.file_name())
        {
            let link = Link { target: file.to_owned(), manifest: found.name.clone() };
            reads.links.entry(dir.to_path_buf()).or_default().push(link);
        }
        reads.owed |= self.offer(found, now, out);
        self.next_read(reads, out)
    }

    /// Asks for the next file; with none left, the reads are done.
    fn next_read(&mut self, mut reads: Reads, out: &mut Vec<Action>) -> State {
        if let Some((name, cause)) = reads.queue.pop_front() {
            out.push(Action::Read { path: self.manifests.path_of(&name), name, cause });
            return State::Reading(reads);
        }
        if reads.scan {
            let drop: Vec<WatchId> = std::mem::take(&mut self.link_watches).into_keys().collect();
            if !drop.is_empty() || !reads.links.is_empty() {
                out.push(Action::WatchLinks { drop, add: reads.links.into_iter().collect() });
            }
            debug!(files = reads.count, "manifest directory scanned");
        }
        self.settle(reads.owed, reads.then, out)
    }

    /// Offers one file's content; true if the SET changed. New content that decodes
    /// with warnings has them reported (once: the same bytes are not decoded again).
    fn offer(&mut self, found: Found, now: Now, out: &mut Vec<Action>) -> bool {
        let Found { name, cause, content, .. } = found;
        let had_pods = !self.manifests.pods_of(&name).is_empty();
        let (outcome, sha256) = match content {
            Content::Missing => return self.forget(&name, cause, out),
            Content::Bytes(bytes) => {
                let outcome = self.manifests.offer(&name, &bytes, now.wall);
                // Hashed only for what is recorded: unchanged rewrites cost nothing more.
                let recorded = matches!(outcome, Outcome::Changed | Outcome::Rejected(_));
                (outcome, recorded.then(|| short_sha256(&bytes)))
            }
            Content::Unreadable(error) => {
                let path = self.manifests.path_of(&name);
                (self.manifests.unreadable(&name, format!("{}: {error}", path.display())), None)
            }
        };
        let decoded = matches!(outcome, Outcome::Changed | Outcome::SamePods);
        let (kind, error) = match outcome {
            Outcome::Changed if had_pods => (ChangeKind::Changed, None),
            Outcome::Changed => (ChangeKind::Added, None),
            Outcome::Unchanged => return false,
            Outcome::SamePods => {
                self.warn(&name, out);
                return false;
            }
            Outcome::Empty => {
                debug!(file = ?name, "manifest is empty (being rewritten?); keeping its last good pods");
                return false;
            }
            Outcome::Rejected(report) => (ChangeKind::Rejected, Some(report)),
        };
        out.push(Action::Record(change(&self.manifests, &name, kind, cause, sha256, error)));
        if decoded {
            self.warn(&name, out);
        }
        kind != ChangeKind::Rejected
    }

    /// Reports the warnings about the content of `name` just decoded, if any.
    fn warn(&self, name: &OsStr, out: &mut Vec<Action>) {
        let warnings = self.manifests.warnings_of(name);
        if !warnings.is_empty() {
            let path = self.manifests.path_of(name);
            out.push(Action::Warn { path, warnings: warnings.to_vec() });
        }
    }

    /// The file is gone; true if it had pods.
    pub(super) fn forget(&mut self, name: &OsStr, cause: Cause, out: &mut Vec<Action>) -> bool {
        let removed = change(&self.manifests, name, ChangeKind::Removed, cause, None, None);
        let changed = self.manifests.forget(name);
        if changed {
            out.push(Action::Record(removed));
        }
        changed
    }
}

/// A change to `name`, with its pods as `manifests` has them now.
fn change(
    manifests: &Manifests,
    name: &OsStr,
    kind: ChangeKind,
    cause: Cause,
    sha256: Option<String>,
    error: Option<String>,
) -> Change {
    Change {
        name: name.to_owned(),
        path: manifests.path_of(name),
        kind,
        cause,
        pods: manifests.pods_of(name).to_vec(),
        sha256,
        error,
    }
}
