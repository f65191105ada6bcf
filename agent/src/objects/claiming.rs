//! A pod's claim on the objects: what it refers to, and what derives from that (K3: the
//! PersistentVolume of each bound claim), handed to [`Claims`](outpost_core::claims),
//! whose starts and stops the executor ([`super::watches`]) carries out.

use std::collections::BTreeSet;
use std::sync::Arc;

use outpost_core::pod::FullName;

use super::{Claimant, Inner, Key, Kind, Known, State};
use crate::runtime::spec::claims;
use crate::runtime::spec::projection::Object;

/// `base` and the keys derived from it: the PersistentVolume each claim of `base` names,
/// once known (K3).
pub(super) fn derive(state: &State, base: &BTreeSet<Key>) -> BTreeSet<Key> {
    let mut keys = base.clone();
    for key in base.iter().filter(|k| k.kind == Kind::PersistentVolumeClaim) {
        if let Some(Known::Present(Object::PersistentVolumeClaim(claim))) = state.objects.get(key)
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
    let actions = state.claims.claim(uid, keys);
    state.pods.insert(uid.to_owned(), Claimant { name, base });
    state.apply_objects(inner, actions)
}
