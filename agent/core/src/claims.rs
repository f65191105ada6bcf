//! Who claims what: the pods (by UID) that refer to each watched key (an API object, a
//! scope of Services). Claiming and releasing return what must start or stop being
//! watched, so that one executor owns every watch and nothing is watched that no pod
//! claims (V1, K1): a key is started when its first claimant comes and stopped when its
//! last one goes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What the executor must do about one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<K> {
    /// Its first claimant came: watch it.
    Start(K),
    /// Its last claimant went: stop watching it, forget it.
    Stop(K),
}

/// The claims of every pod.
#[derive(Debug, Clone)]
pub struct Claims<K> {
    /// By key, the pods that claim it (never empty).
    claimants: BTreeMap<K, BTreeSet<String>>,
    /// By pod UID, what it claims (never empty).
    claims: HashMap<String, BTreeSet<K>>,
}

impl<K> Default for Claims<K> {
    fn default() -> Self {
        Claims { claimants: BTreeMap::new(), claims: HashMap::new() }
    }
}

impl<K: Ord + Clone> Claims<K> {
    /// The pod `uid` claims `keys`, and no others: the keys it is the first to claim
    /// start, those it was the last to claim stop. Nothing when its claim is unchanged.
    pub fn claim(&mut self, uid: &str, keys: BTreeSet<K>) -> Vec<Action<K>> {
        let before = self.claims.remove(uid).unwrap_or_default();
        let mut actions = Vec::new();
        for key in keys.difference(&before) {
            let claimants = self.claimants.entry(key.clone()).or_default();
            if claimants.is_empty() {
                actions.push(Action::Start(key.clone()));
            }
            claimants.insert(uid.to_owned());
        }
        for key in before.difference(&keys) {
            actions.extend(self.unclaim(uid, key));
        }
        if !keys.is_empty() {
            self.claims.insert(uid.to_owned(), keys);
        }
        actions
    }

    /// The pod `uid` is gone: what only it claimed stops.
    pub fn release(&mut self, uid: &str) -> Vec<Action<K>> {
        let keys = self.claims.remove(uid).unwrap_or_default();
        keys.iter().filter_map(|key| self.unclaim(uid, key)).collect()
    }

    /// The pods that claim `key`.
    pub fn claimants(&self, key: &K) -> impl Iterator<Item = &str> {
        self.claimants.get(key).into_iter().flatten().map(String::as_str)
    }

    /// What the pod `uid` claims.
    pub fn keys(&self, uid: &str) -> Option<&BTreeSet<K>> {
        self.claims.get(uid)
    }

    /// Whether anyone claims `key`.
    pub fn is_claimed(&self, key: &K) -> bool {
        self.claimants.contains_key(key)
    }

    /// Whether the pod `uid` claims anything.
    pub fn has_claim(&self, uid: &str) -> bool {
        self.claims.contains_key(uid)
    }

    /// Every claimed key, in order.
    pub fn claimed(&self) -> impl Iterator<Item = &K> {
        self.claimants.keys()
    }

    fn unclaim(&mut self, uid: &str, key: &K) -> Option<Action<K>> {
        let claimants = self.claimants.get_mut(key)?;
        claimants.remove(uid);
        if !claimants.is_empty() {
            return None;
        }
        self.claimants.remove(key);
        Some(Action::Stop(key.clone()))
    }
}

#[cfg(test)]
mod tests;
