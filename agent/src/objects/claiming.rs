//! A pod's claim on the objects: what it refers to, and what derives from that (K3: the
//! PersistentVolume of each bound claim). New ConfigMaps and Secrets are watched (claims
//! and volumes are read when used); keys nobody claims any more stop being watched and
//! kept.

use std::collections::BTreeSet;
use std::sync::Arc;

use outpost_core::pod::FullName;

use super::{Claim, Entry, Inner, Key, Kind, Known, State, watch};
use crate::runtime::spec::claims;
use crate::runtime::spec::projection::Object;

/// `base` and the keys derived from it: the PersistentVolume each claim of `base` names,
/// once known (K3).
pub(super) fn derive(state: &State, base: &BTreeSet<Key>) -> BTreeSet<Key> {
    let mut keys = base.clone();
    for key in base.iter().filter(|k| k.kind == Kind::PersistentVolumeClaim) {
        let known = state.objects.get(key).map(|entry| &entry.known);
        if let Some(Known::Present(Object::PersistentVolumeClaim(claim))) = known
            && let Some(volume) = claims::bound_volume(claim)
        {
            let name = volume.to_owned();
            keys.insert(Key { kind: Kind::PersistentVolume, namespace: String::new(), name });
        }
    }
    keys
}

/// The pod `uid` (`name`) refers to `base` (and what derives from it): what is new is
/// watched, what it no longer refers to is dropped. Whether anything was dropped.
pub(super) fn apply(
    inner: &Arc<Inner>,
    state: &mut State,
    uid: &str,
    name: FullName,
    base: BTreeSet<Key>,
) -> bool {
    let keys = derive(state, &base);
    let before = state.claims.get(uid).map(|c| c.keys.clone()).unwrap_or_default();
    for key in keys.difference(&before) {
        let entry = state.objects.entry(key.clone()).or_insert_with(|| Entry {
            known: Known::Unknown,
            claimants: BTreeSet::new(),
            watch: None,
        });
        entry.claimants.insert(uid.to_owned());
        if entry.watch.is_none() && key.kind.is_watched() {
            let task = tokio::spawn(watch::follow(inner.clone(), key.clone()));
            entry.watch = Some(task.abort_handle());
        }
    }
    let dropped: Vec<Key> = before.difference(&keys).cloned().collect();
    unclaim(state, uid, &dropped);
    state.claims.insert(uid.to_owned(), Claim { name, base, keys });
    !dropped.is_empty()
}

/// The pod `uid` no longer refers to `keys`: those nobody else claims stop being watched
/// and kept.
pub(super) fn unclaim(state: &mut State, uid: &str, keys: &[Key]) {
    for key in keys {
        let Some(entry) = state.objects.get_mut(key) else { continue };
        entry.claimants.remove(uid);
        if entry.claimants.is_empty() {
            if let Some(watch) = entry.watch.take() {
                watch.abort();
            }
            state.objects.remove(key);
        }
    }
}
