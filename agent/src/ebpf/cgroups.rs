//! Which pod and container a cgroup v2 id belongs to. runc (cgroupfs driver) puts a
//! container at `<cgroup2><cgroup-root>/kubepods[/burstable|/besteffort]/pod<uid>/
//! <container id>` (kubelet's layout, [`Layout`]), and a cgroup's id is its directory's
//! inode number. The cache is filled on a miss by reading the directories of the pods
//! this agent runs, wherever their class put them (a cgroup still exists when its last
//! process exits, so an exit resolves too; other agents' pods are never read), and
//! emptied of a pod's entries when the pod is gone; it never grows past [`MAX_ENTRIES`].

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::runtime::cgroups::{Driver, Layout, PODS};

/// More entries than this and the cache starts over (it refills on the next misses).
pub const MAX_ENTRIES: usize = 16_384;

/// Whose cgroup it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub pod_uid: String,
    /// `None`: the pod's own cgroup (`…/kubepods/[burstable/]pod<uid>`).
    pub container_id: Option<String>,
}

/// The pod UID in a pod cgroup's directory name (`pod<uid>`).
pub fn pod_uid(dir_name: &str) -> Option<&str> {
    dir_name.strip_prefix("pod").filter(|uid| !uid.is_empty() && !uid.contains('/'))
}

/// What a cgroup's path below the cgroup2 root says about its owner (cgroupfs names, any
/// cgroup root): `…/kubepods/pod<uid>`, `…/kubepods/burstable/pod<uid>` or
/// `…/kubepods/besteffort/pod<uid>`, each with an optional `/<container id>`.
pub fn owner_of_path(path: &str) -> Option<Owner> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let pods = parts.iter().rposition(|p| *p == PODS)?;
    let mut rest = &parts[pods + 1..];
    if let [class, tail @ ..] = rest
        && (*class == "burstable" || *class == "besteffort")
    {
        rest = tail;
    }
    let (pod, container) = match rest {
        [pod] => (*pod, None),
        [pod, container] => (*pod, Some((*container).to_owned())),
        _ => return None,
    };
    Some(Owner { pod_uid: pod_uid(pod)?.to_owned(), container_id: container })
}

/// cgroup id → owner, for the pods of one layout in the cgroup2 hierarchy.
#[derive(Debug)]
pub struct Cgroups {
    /// The cgroup2 hierarchy's root.
    cgroup2: PathBuf,
    layout: Layout,
    cache: Mutex<HashMap<u64, Owner>>,
    /// The UIDs of the pods this agent runs: the directories a miss reads.
    pods: Mutex<HashSet<String>>,
}

impl Cgroups {
    pub fn new(cgroup2: PathBuf, layout: Layout) -> Cgroups {
        Cgroups {
            cgroup2,
            layout,
            cache: Mutex::new(HashMap::new()),
            pods: Mutex::new(HashSet::new()),
        }
    }

    /// The agent runs pod `uid`: its cgroups resolve from now on.
    pub fn track(&self, uid: &str) {
        if let Ok(mut pods) = self.pods.lock()
            && !pods.contains(uid)
        {
            pods.insert(uid.to_owned());
        }
    }

    /// The owner of cgroup `id`, reading the pod cgroups on a miss.
    pub fn resolve(&self, id: u64) -> Option<Owner> {
        if let Some(owner) = self.cache.lock().ok()?.get(&id) {
            return Some(owner.clone());
        }
        self.rescan();
        self.cache.lock().ok()?.get(&id).cloned()
    }

    /// The owners of many cgroups, reading the pod cgroups at most once.
    pub fn resolve_all(&self, ids: &[u64]) -> Vec<Option<Owner>> {
        let Ok(cache) = self.cache.lock() else { return vec![None; ids.len()] };
        let missing = ids.iter().any(|id| !cache.contains_key(id));
        drop(cache);
        if missing {
            self.rescan();
        }
        let Ok(cache) = self.cache.lock() else { return vec![None; ids.len()] };
        ids.iter().map(|id| cache.get(id).cloned()).collect()
    }

    fn rescan(&self) {
        let pods: Vec<String> =
            self.pods.lock().map(|p| p.iter().cloned().collect()).unwrap_or_default();
        let found = scan(&self.cgroup2, &self.layout, &pods);
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() + found.len() > MAX_ENTRIES {
                cache.clear();
            }
            cache.extend(found);
        }
    }

    /// Drops the entries of a pod that is gone.
    pub fn forget_pod(&self, uid: &str) {
        if let Ok(mut pods) = self.pods.lock() {
            pods.remove(uid);
        }
        if let Ok(mut cache) = self.cache.lock() {
            cache.retain(|_, owner| owner.pod_uid != uid);
        }
    }

    pub fn len(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The cgroups of `pods` (and their containers) in the cgroup2 hierarchy at `cgroup2`,
/// by id (unreadable ones are skipped: a pod being torn down meanwhile).
fn scan(cgroup2: &Path, layout: &Layout, pods: &[String]) -> Vec<(u64, Owner)> {
    let mut found = Vec::new();
    for uid in pods {
        for candidate in layout.pod_candidates(uid) {
            let relative = candidate.path(layout.driver);
            let dir = cgroup2.join(relative.trim_start_matches('/'));
            let Ok(meta) = std::fs::metadata(&dir) else { continue };
            found.push((meta.ino(), Owner { pod_uid: uid.clone(), container_id: None }));
            let Ok(containers) = std::fs::read_dir(&dir) else { continue };
            for container in containers.flatten() {
                let Ok(meta) = container.metadata() else { continue };
                let Some(name) = container.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let Some(id) = container_id(&name, layout.driver) else { continue };
                if meta.is_dir() {
                    let owner = Owner { pod_uid: uid.clone(), container_id: Some(id) };
                    found.push((meta.ino(), owner));
                }
            }
        }
    }
    found
}

/// The container id a container cgroup's directory is named after: the id itself
/// (cgroupfs), or runc's systemd scope `<prefix>-<id>.scope`.
fn container_id(dir_name: &str, driver: Driver) -> Option<String> {
    match driver {
        Driver::Cgroupfs => Some(dir_name.to_owned()),
        Driver::Systemd => {
            let unit = dir_name.strip_suffix(".scope")?;
            Some(unit.split_once('-')?.1.to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pod_and_container_paths() {
        assert_eq!(pod_uid("pod1234-ab"), Some("1234-ab"));
        assert_eq!(pod_uid("pod"), None);
        assert_eq!(pod_uid("cpu.max"), None);
        let owner = |uid: &str, container: Option<&str>| {
            Some(Owner { pod_uid: uid.into(), container_id: container.map(str::to_owned) })
        };
        assert_eq!(owner_of_path("/kubepods/podu1/c1"), owner("u1", Some("c1")));
        assert_eq!(owner_of_path("/kubepods/podu1"), owner("u1", None));
        assert_eq!(owner_of_path("/kubepods/burstable/podu1/c1"), owner("u1", Some("c1")));
        assert_eq!(owner_of_path("/kubepods/besteffort/podu2"), owner("u2", None));
        assert_eq!(owner_of_path("/edge/test/kubepods/besteffort/podu2/c"), owner("u2", Some("c")));
        assert_eq!(owner_of_path("/kubepods"), None);
        assert_eq!(owner_of_path("/kubepods/burstable"), None);
        assert_eq!(owner_of_path("/system.slice/podu1/c1"), None);
        assert_eq!(owner_of_path("/outpost/podu1/c1"), None);
        assert_eq!(owner_of_path("/kubepods/podu1/c1/deeper"), None);
        assert_eq!(owner_of_path("/kubepods/guaranteed/podu1"), None);
        assert_eq!(container_id("outpost-c1.scope", Driver::Systemd).as_deref(), Some("c1"));
        assert_eq!(container_id("c1", Driver::Cgroupfs).as_deref(), Some("c1"));
        assert_eq!(container_id("cgroup.procs", Driver::Systemd), None);
    }

    #[test]
    fn resolves_directory_inodes_lazily_and_forgets_pods() {
        let root = tempfile::tempdir().unwrap();
        let pods = root.path().join("edge/kubepods");
        let container = pods.join("podu1/c1");
        std::fs::create_dir_all(&container).unwrap();
        std::fs::create_dir_all(pods.join("not-a-pod/c2")).unwrap();
        let layout = Layout::new(Driver::Cgroupfs, "/edge");
        let cgroups = Cgroups::new(root.path().to_owned(), layout);
        cgroups.track("u1");
        cgroups.track("u2");
        assert!(cgroups.is_empty());
        let ino = std::fs::metadata(&container).unwrap().ino();
        let pod_ino = std::fs::metadata(pods.join("podu1")).unwrap().ino();
        assert_eq!(
            cgroups.resolve(ino),
            Some(Owner { pod_uid: "u1".into(), container_id: Some("c1".into()) })
        );
        assert_eq!(cgroups.resolve(pod_ino).map(|o| o.container_id), Some(None));
        assert_eq!(cgroups.len(), 2);
        // Created after the first scan, under its QoS class: found on its miss.
        std::fs::create_dir_all(pods.join("burstable/podu2/c3")).unwrap();
        let late = std::fs::metadata(pods.join("burstable/podu2/c3")).unwrap().ino();
        assert_eq!(cgroups.resolve(late).map(|o| o.pod_uid), Some("u2".into()));
        cgroups.forget_pod("u1");
        assert_eq!(cgroups.len(), 2);
        assert_eq!(cgroups.resolve(u64::MAX), None);
        assert_eq!(cgroups.resolve(ino), None, "a forgotten pod is not read again");
        // Another agent's pod (even under the same root) is never read.
        std::fs::create_dir_all(pods.join("besteffort/podother/c9")).unwrap();
        let other = std::fs::metadata(pods.join("besteffort/podother/c9")).unwrap().ino();
        assert_eq!(cgroups.resolve(other), None);
    }
}
