//! The process specs of containers' inits, and how runc runs their commands directly
//! (issue 53), read once per container (B8, issue 38). An
//! exec runs with its container's process (user, env, capabilities, rlimits, labels), and
//! reading the container record for it each time was one of the five containerd round
//! trips of every exec probe.
//!
//! A kept process is never stale: Outpost gives every container it creates a new random
//! ID and afterwards only adds labels to its record, never a new spec. Entries go when the
//! worker removes their container ([`super::Execs::forget`]); containers removed by other
//! means (the garbage collector, another client) leave theirs, so past [`KEPT`] entries the
//! map starts over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use oci_spec::runtime::Process;

use super::runc::Runc;

/// How many containers' processes are kept at most (a node runs at most a few hundred
/// containers; one process is a few hundred bytes).
pub(super) const KEPT: usize = 1024;

/// What is kept of a container: its init's process, and how runc runs its commands
/// directly (`None`: through containerd; module `runc`).
#[derive(Debug)]
pub(super) struct Kept {
    pub process: Process,
    pub runc: Option<Runc>,
}

/// Container ID → what is kept of it, shared by the clones of one [`super::Execs`].
#[derive(Debug, Clone, Default)]
pub(super) struct Specs(Arc<Mutex<HashMap<String, Arc<Kept>>>>);

impl Specs {
    pub(super) fn get(&self, id: &str) -> Option<Arc<Kept>> {
        self.lock().get(id).cloned()
    }

    pub(super) fn keep(&self, id: &str, kept: Kept) -> Arc<Kept> {
        let kept = Arc::new(kept);
        let mut specs = self.lock();
        if specs.len() >= KEPT && !specs.contains_key(id) {
            specs.clear();
        }
        specs.insert(id.to_owned(), kept.clone());
        kept
    }

    pub(super) fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// A panic while the map was held cannot leave it half-changed (each use is one map
    /// call), so a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Kept>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(arg: &str) -> Kept {
        let mut process = Process::default();
        process.set_args(Some(vec![arg.to_owned()]));
        Kept { process, runc: None }
    }

    fn args(kept: Option<Arc<Kept>>) -> Option<Vec<String>> {
        kept.and_then(|k| k.process.args().clone())
    }

    #[test]
    fn b8_a_kept_process_is_shared_by_clones_until_its_container_is_forgotten() {
        let specs = Specs::default();
        let clone = specs.clone();
        specs.keep("a", process("nginx"));
        assert_eq!(args(clone.get("a")), Some(vec!["nginx".to_owned()]));
        assert!(clone.get("b").is_none());
        clone.forget("a");
        assert!(specs.get("a").is_none());
    }

    #[test]
    fn b8_past_the_bound_the_map_starts_over_and_keeps_the_newest() {
        let specs = Specs::default();
        for n in 0..KEPT {
            specs.keep(&n.to_string(), process("sh"));
        }
        assert_eq!(specs.len(), KEPT);
        // Keeping one already there does not count as a new one.
        specs.keep("0", process("sh"));
        assert_eq!(specs.len(), KEPT);
        specs.keep("new", process("top"));
        assert_eq!(specs.len(), 1);
        assert_eq!(args(specs.get("new")), Some(vec!["top".to_owned()]));
    }
}
