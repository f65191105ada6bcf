//! The agent's own writes that the API source's watch has not brought back yet, laid
//! over the [`MirrorView`](crate::apiserver::MirrorView) so that a write in flight is never
//! made twice (a controller's "expectations"). Pure: times are passed in.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use outpost_core::mirror::Observed;
use outpost_core::pod::FullName;

/// How long a write may take to show in the view before the view is believed again (a
/// watch event can be lost with a broken watch; the relist then tells the truth).
pub const PATIENCE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Write {
    /// The mirror the agent deleted (its UID).
    deleted: Option<String>,
    /// The mirror the agent created (or found up to date, R4); `None` after a delete
    /// for good.
    created: Option<Observed>,
    at: Instant,
}

#[derive(Debug, Default)]
pub struct Pending(BTreeMap<FullName, Write>);

impl Pending {
    /// The agent created (or found) `mirror` at `name`, maybe after deleting `deleted`.
    pub fn created(
        &mut self,
        name: &FullName,
        deleted: Option<String>,
        mirror: Observed,
        now: Instant,
    ) {
        let deleted = deleted.or_else(|| self.0.get(name).and_then(|w| w.deleted.clone()));
        self.0.insert(name.clone(), Write { deleted, created: Some(mirror), at: now });
    }

    /// The agent deleted the mirror `uid` at `name` for good.
    pub fn deleted(&mut self, name: &FullName, uid: &str, now: Instant) {
        self.0
            .insert(name.clone(), Write { deleted: Some(uid.to_owned()), created: None, at: now });
    }

    /// A write failed: the view is the truth again for `name`.
    pub fn forget(&mut self, name: &FullName) {
        self.0.remove(name);
    }

    /// When the oldest write is given up on ([`PATIENCE`] after it).
    pub fn next_expiry(&self) -> Option<Instant> {
        self.0.values().map(|write| write.at + PATIENCE).min()
    }

    /// The view with the writes it does not show yet; writes it shows (or that a third
    /// party overtook, or that are older than [`PATIENCE`]) are dropped.
    pub fn overlay(
        &mut self,
        mut view: BTreeMap<FullName, Observed>,
        now: Instant,
    ) -> BTreeMap<FullName, Observed> {
        self.0.retain(|name, write| {
            if now.saturating_duration_since(write.at) > PATIENCE {
                return false;
            }
            let seen = view.get(name).map(|m| m.uid.as_str());
            let stale = match seen {
                None => write.created.is_some(),
                Some(uid) => write.deleted.as_deref() == Some(uid),
            };
            if stale {
                match &write.created {
                    Some(mirror) => view.insert(name.clone(), mirror.clone()),
                    None => view.remove(name),
                };
            }
            stale
        });
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> FullName {
        FullName { namespace: "default".into(), name: "web".into() }
    }

    fn mirror(uid: &str) -> Observed {
        Observed { uid: uid.into(), mirror_of: "h".into(), deleting: false, current: true }
    }

    fn view(uid: Option<&str>) -> BTreeMap<FullName, Observed> {
        uid.map(|u| (name(), mirror(u))).into_iter().collect()
    }

    #[test]
    fn the_oldest_write_expires_first_and_nothing_pending_never_expires() {
        let now = Instant::now();
        let mut p = Pending::default();
        assert_eq!(p.next_expiry(), None, "no timer while nothing is pending");
        p.created(&name(), None, mirror("new"), now + Duration::from_secs(5));
        let other = FullName { namespace: "default".into(), name: "db".into() };
        p.deleted(&other, "old", now);
        assert_eq!(p.next_expiry(), Some(now + PATIENCE));
        // Past it, the overlay drops the write; the next one is the other write's.
        p.overlay(view(None), now + PATIENCE + Duration::from_millis(1));
        assert_eq!(p.next_expiry(), Some(now + Duration::from_secs(5) + PATIENCE));
        p.forget(&name());
        assert_eq!(p.next_expiry(), None);
    }

    #[test]
    fn a_create_shows_until_the_view_has_it() {
        let now = Instant::now();
        let mut p = Pending::default();
        p.created(&name(), None, mirror("new"), now);
        assert_eq!(p.overlay(view(None), now), view(Some("new")));
        assert_eq!(p.overlay(view(Some("new")), now), view(Some("new")));
        assert_eq!(p.overlay(view(None), now), view(None), "once seen, the view is the truth");
    }

    #[test]
    fn a_replacement_hides_the_old_mirror_until_the_view_moves_on() {
        let now = Instant::now();
        let mut p = Pending::default();
        p.created(&name(), Some("old".into()), mirror("new"), now);
        assert_eq!(p.overlay(view(Some("old")), now), view(Some("new")));
        assert_eq!(p.overlay(view(Some("third")), now), view(Some("third")), "overtaken");
        assert_eq!(p.overlay(view(Some("old")), now), view(Some("old")));
    }

    #[test]
    fn a_delete_hides_the_mirror_until_the_view_drops_it() {
        let now = Instant::now();
        let mut p = Pending::default();
        p.deleted(&name(), "old", now);
        assert_eq!(p.overlay(view(Some("old")), now), view(None));
        assert_eq!(p.overlay(view(None), now), view(None));
        assert_eq!(p.overlay(view(Some("old")), now), view(Some("old")));
    }

    #[test]
    fn writes_not_seen_in_time_or_failed_are_forgotten() {
        let now = Instant::now();
        let mut p = Pending::default();
        p.created(&name(), None, mirror("new"), now);
        let later = now + PATIENCE + Duration::from_secs(1);
        assert_eq!(p.overlay(view(None), later), view(None));
        p.deleted(&name(), "old", now);
        p.forget(&name());
        assert_eq!(p.overlay(view(Some("old")), now), view(Some("old")));
    }
}
