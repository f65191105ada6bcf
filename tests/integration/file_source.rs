//! The manifest directory source against the real kernel (fanotify and inotify), driven
//! the way editors, config tools and Kubernetes volume mounts change files.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

use outpost::source::file::watch::Preference;
use outpost::source::file::{Config, FileSource};
use outpost::source::{Op, SourceUpdate};
use outpost_core::pod::Source;
use outpost_tests::{is_root, pod_yaml, prerequisite};

/// Pod name → UID, as one SET from the source says.
type Set = BTreeMap<String, String>;

const NODE: &str = "node-a";

/// Long enough that only a hang hits it: it guards against deadlocks, it does not time anything.
const HANG: Duration = Duration::from_secs(30);

struct Harness {
    root: tempfile::TempDir,
    source: FileSource,
    last: Option<Set>,
}

impl Harness {
    /// A source over `<tmp>/manifests` (created unless `create` is false).
    fn new(watcher: Preference, create: bool) -> Harness {
        let root = tempfile::tempdir().unwrap();
        if create {
            fs::create_dir(root.path().join("manifests")).unwrap();
        }
        Harness::at(watcher, root, "manifests")
    }

    fn at(watcher: Preference, root: tempfile::TempDir, rel: &str) -> Harness {
        if watcher == Preference::Fanotify {
            prerequisite(is_root(), "root (fanotify needs CAP_SYS_ADMIN)");
        }
        let config = Config { path: root.path().join(rel), node_name: NODE.into(), watcher };
        let source = FileSource::new(config).unwrap();
        Harness { root, source, last: None }
    }

    fn dir(&self) -> PathBuf {
        self.root.path().join("manifests")
    }

    fn write(&self, name: &str, content: &str) {
        fs::write(self.dir().join(name), content).unwrap();
    }

    /// The next SET; it must differ from the previous one (no spurious updates).
    async fn next(&mut self) -> Set {
        let update: SourceUpdate = tokio::time::timeout(HANG, self.source.next())
            .await
            .expect("the file source produced no update")
            .unwrap();
        assert_eq!((update.source, update.op), (Source::File, Op::Set));
        let set: Set = update
            .pods
            .iter()
            .map(|p| (p.pod.metadata.name.clone().unwrap_or_default(), p.uid().to_owned()))
            .collect();
        assert_eq!(set.len(), update.pods.len(), "pod names in one SET are unique here");
        if let Some(last) = &self.last {
            assert_ne!(&set, last, "spurious SET: nothing changed");
        }
        self.last = Some(set.clone());
        set
    }

    /// SETs until `done` holds; every SET on the way must satisfy `always`.
    async fn until(&mut self, done: impl Fn(&Set) -> bool, always: impl Fn(&Set) -> bool) -> Set {
        loop {
            let set = self.next().await;
            assert!(always(&set), "invariant broken by SET {set:?}");
            if done(&set) {
                return set;
            }
        }
    }
}

fn pod_name(name: &str) -> String {
    format!("{name}-{NODE}")
}

fn names(set: &Set) -> Vec<&str> {
    set.keys().map(String::as_str).collect()
}

/// Runs a test body once per kernel backend.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod fanotify {
            $(
                #[outpost_tests::needs(root)]
                #[tokio::test]
                async fn $name() { super::$name(super::Preference::Fanotify).await }
            )*
        }
        mod inotify {
            $(#[tokio::test] async fn $name() { super::$name(super::Preference::Inotify).await })*
        }
    };
}

both_backends!(
    s10_initial_scan_reads_manifests_and_skips_the_rest,
    s11_missing_directory_is_empty_until_created,
    create_write_and_close,
    write_in_place_edits_the_pod,
    m10_rename_over_replaces_the_pod,
    dotfile_swap_files_and_chmod_change_nothing,
    truncate_then_write_keeps_the_last_good_pod,
    delete_and_rename_away_remove_pods,
    symlinked_manifest_follows_its_target,
    configmap_style_data_symlink_swap,
    symlinked_directory_swap,
    single_manifest_file,
    single_manifest_file_created_later,
    directory_removed_and_recreated,
    queue_overflow_triggers_a_full_rescan,
    bad_files_beside_good_ones_break_nothing,
    thousand_files_present_at_start,
);

async fn s10_initial_scan_reads_manifests_and_skips_the_rest(w: Preference) {
    let mut h = Harness::new(w, true);
    for (file, pod) in [("a.yaml", "a"), ("b.yml", "b"), ("c.json", "c"), ("d", "d")] {
        let content = if file.ends_with(".json") {
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{pod}"}},"spec":{{"containers":[{{"name":"m","image":"i"}}]}}}}"#
            )
        } else {
            pod_yaml(pod, "i")
        };
        h.write(file, &content);
    }
    h.write(".hidden.yaml", &pod_yaml("hidden", "i"));
    h.write("notes.txt", &pod_yaml("txt", "i"));
    fs::create_dir(h.dir().join("sub")).unwrap();
    fs::write(h.dir().join("sub/nested.yaml"), pod_yaml("nested", "i")).unwrap();
    let set = h.next().await;
    assert_eq!(names(&set), ["a-node-a", "b-node-a", "c-node-a", "d-node-a"]);
}

async fn s11_missing_directory_is_empty_until_created(w: Preference) {
    let mut h = Harness::new(w, false);
    assert!(h.next().await.is_empty(), "S11: a missing directory is an empty SET");
    fs::create_dir(h.dir()).unwrap();
    h.write("web.yaml", &pod_yaml("web", "i"));
    let set = h.until(|s| !s.is_empty(), |_| true).await;
    assert_eq!(names(&set), [pod_name("web")]);
}

async fn create_write_and_close(w: Preference) {
    let mut h = Harness::new(w, true);
    assert!(h.next().await.is_empty());
    let mut f = fs::File::create(h.dir().join("web.yaml")).unwrap();
    f.write_all(pod_yaml("web", "i").as_bytes()).unwrap();
    drop(f);
    let set = h.until(|s| s.len() == 1, |_| true).await;
    assert_eq!(names(&set), [pod_name("web")]);
}

async fn write_in_place_edits_the_pod(w: Preference) {
    let mut h = Harness::new(w, true);
    h.write("web.yaml", &pod_yaml("web", "img:1"));
    let before = h.next().await;
    let mut f =
        fs::OpenOptions::new().write(true).truncate(true).open(h.dir().join("web.yaml")).unwrap();
    f.write_all(pod_yaml("web", "img:2").as_bytes()).unwrap();
    drop(f);
    let after = h.until(|s| s != &before, |s| s.len() == 1).await;
    assert_ne!(after[&pod_name("web")], before[&pod_name("web")], "M10: an edit gives a new UID");
}

async fn m10_rename_over_replaces_the_pod(w: Preference) {
    let mut h = Harness::new(w, true);
    h.write("web.yaml", &pod_yaml("web", "img:1"));
    let before = h.next().await;
    // What config tools do: write a temp file beside it, then rename it over.
    h.write(".web.yaml.tmp-1234", &pod_yaml("web", "img:2"));
    fs::rename(h.dir().join(".web.yaml.tmp-1234"), h.dir().join("web.yaml")).unwrap();
    let after = h.next().await;
    assert_eq!(names(&after), [pod_name("web")]);
    assert_ne!(after, before);
}

async fn dotfile_swap_files_and_chmod_change_nothing(w: Preference) {
    let mut h = Harness::new(w, true);
    h.write("web.yaml", &pod_yaml("web", "i"));
    let before = h.next().await;
    // vim's swap file, garbage, and a chmod: none of them may produce a SET.
    h.write(".web.yaml.swp", "\u{0}\u{1}not yaml: [");
    fs::set_permissions(h.dir().join("web.yaml"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(h.dir().join(".web.yaml.swp")).unwrap();
    // A real change; the SET after it must be the first one since `before` (checked by next()).
    h.write("api.yaml", &pod_yaml("api", "i"));
    let after = h.next().await;
    assert_eq!(after.len(), 2);
    assert_eq!(after[&pod_name("web")], before[&pod_name("web")]);
}

async fn truncate_then_write_keeps_the_last_good_pod(w: Preference) {
    let mut h = Harness::new(w, true);
    h.write("web.yaml", &pod_yaml("web", "img:1"));
    let before = h.next().await;
    let new = pod_yaml("web", "img:2");
    let (first, rest) = new.split_at(new.len() / 2);
    let mut f =
        fs::OpenOptions::new().write(true).truncate(true).open(h.dir().join("web.yaml")).unwrap();
    f.write_all(first.as_bytes()).unwrap();
    f.flush().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await; // let the source see the half file
    f.write_all(rest.as_bytes()).unwrap();
    drop(f);
    let after = h.until(|s| s != &before, |s| s.contains_key(&pod_name("web"))).await;
    assert_eq!(after.len(), 1, "the pod never disappeared and is replaced once: {after:?}");
}

async fn delete_and_rename_away_remove_pods(w: Preference) {
    let mut h = Harness::new(w, true);
    h.write("a.yaml", &pod_yaml("a", "i"));
    h.write("b.yaml", &pod_yaml("b", "i"));
    assert_eq!(h.next().await.len(), 2);
    fs::remove_file(h.dir().join("a.yaml")).unwrap();
    assert_eq!(names(&h.next().await), [pod_name("b")]);
    fs::rename(h.dir().join("b.yaml"), h.dir().join("b.yaml.disabled")).unwrap();
    assert!(h.next().await.is_empty());
}

async fn symlinked_manifest_follows_its_target(w: Preference) {
    let mut h = Harness::new(w, true);
    let real = h.root.path().join("real");
    fs::create_dir(&real).unwrap();
    fs::write(real.join("web.yaml"), pod_yaml("web", "img:1")).unwrap();
    symlink(real.join("web.yaml"), h.dir().join("web.yaml")).unwrap();
    let before = h.next().await;
    assert_eq!(names(&before), [pod_name("web")]);
    fs::write(real.join("web.yaml"), pod_yaml("web", "img:2")).unwrap();
    let after = h.until(|s| s != &before, |s| s.len() == 1).await;
    assert_ne!(after, before);
    // A symlink added later is followed too.
    fs::write(real.join("api.yaml"), pod_yaml("api", "i")).unwrap();
    symlink(real.join("api.yaml"), h.dir().join("api.yaml")).unwrap();
    assert_eq!(h.until(|s| s.len() == 2, |_| true).await.len(), 2);
    fs::write(real.join("api.yaml"), pod_yaml("api", "img:2")).unwrap();
    h.until(|s| s.get(&pod_name("api")) != after.get(&pod_name("api")) && s.len() == 2, |_| true)
        .await;
}

async fn configmap_style_data_symlink_swap(w: Preference) {
    let mut h = Harness::new(w, true);
    let d = h.dir();
    // The layout kubelet gives a ConfigMap volume: files → ..data/<file>, ..data → ..<timestamp>.
    fs::create_dir(d.join("..2026_11_21_00_00_00.1")).unwrap();
    fs::write(d.join("..2026_11_21_00_00_00.1/web.yaml"), pod_yaml("web", "img:1")).unwrap();
    symlink("..2026_11_21_00_00_00.1", d.join("..data")).unwrap();
    symlink("..data/web.yaml", d.join("web.yaml")).unwrap();
    let before = h.next().await;
    assert_eq!(names(&before), [pod_name("web")]);
    // The atomic update: new dir, new ..data_tmp symlink renamed over ..data, old dir removed.
    fs::create_dir(d.join("..2026_11_21_00_05_00.2")).unwrap();
    fs::write(d.join("..2026_11_21_00_05_00.2/web.yaml"), pod_yaml("web", "img:2")).unwrap();
    symlink("..2026_11_21_00_05_00.2", d.join("..data_tmp")).unwrap();
    fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
    fs::remove_dir_all(d.join("..2026_11_21_00_00_00.1")).unwrap();
    let after = h.until(|s| s != &before, |s| s.len() == 1).await;
    assert_ne!(after[&pod_name("web")], before[&pod_name("web")]);
    // A second swap that leaves the previous directory in place: only the ..data
    // symlink changes, and the pod must follow it.
    fs::create_dir(d.join("..2026_11_21_00_10_00.3")).unwrap();
    fs::write(d.join("..2026_11_21_00_10_00.3/web.yaml"), pod_yaml("web", "img:3")).unwrap();
    symlink("..2026_11_21_00_10_00.3", d.join("..data_tmp")).unwrap();
    fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
    let third = h.until(|s| s != &after, |s| s.len() == 1).await;
    assert_ne!(third[&pod_name("web")], after[&pod_name("web")]);
    // Any name works, not only ..data: `.current` swapped the same way.
    fs::create_dir(d.join("v4")).unwrap();
    fs::write(d.join("v4/api.yaml"), pod_yaml("api", "img:4")).unwrap();
    fs::create_dir(d.join("v5")).unwrap();
    fs::write(d.join("v5/api.yaml"), pod_yaml("api", "img:5")).unwrap();
    symlink("v4", d.join(".current")).unwrap();
    symlink(".current/api.yaml", d.join("api.yaml")).unwrap();
    let with_api = h.until(|s| s.len() == 2, |_| true).await;
    symlink("v5", d.join(".current.tmp")).unwrap();
    fs::rename(d.join(".current.tmp"), d.join(".current")).unwrap();
    let swapped = h.until(|s| s != &with_api, |s| s.len() == 2).await;
    assert_ne!(swapped[&pod_name("api")], with_api[&pod_name("api")]);
}

async fn symlinked_directory_swap(w: Preference) {
    let root = tempfile::tempdir().unwrap();
    for (dir, pod) in [("v1", "one"), ("v2", "two")] {
        fs::create_dir(root.path().join(dir)).unwrap();
        fs::write(root.path().join(dir).join("pod.yaml"), pod_yaml(pod, "i")).unwrap();
    }
    symlink("v1", root.path().join("manifests")).unwrap();
    let mut h = Harness::at(w, root, "manifests");
    assert_eq!(names(&h.next().await), [pod_name("one")]);
    let r = h.root.path().to_path_buf();
    symlink("v2", r.join("manifests.new")).unwrap();
    fs::rename(r.join("manifests.new"), r.join("manifests")).unwrap();
    let set = h.until(|s| s.contains_key(&pod_name("two")), |_| true).await;
    assert_eq!(names(&set), [pod_name("two")]);
    // Changes in the new target are seen.
    fs::write(r.join("v2/more.yaml"), pod_yaml("more", "i")).unwrap();
    assert_eq!(h.until(|s| s.len() == 2, |_| true).await.len(), 2);
}

async fn single_manifest_file(w: Preference) {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir(root.path().join("etc")).unwrap();
    fs::write(root.path().join("etc/web.manifest"), pod_yaml("web", "img:1")).unwrap();
    fs::write(root.path().join("etc/other.yaml"), pod_yaml("other", "i")).unwrap();
    let mut h = Harness::at(w, root, "etc/web.manifest");
    let before = h.next().await;
    assert_eq!(names(&before), [pod_name("web")], "only the named file is read");
    let etc = h.root.path().join("etc");
    fs::write(etc.join("another.yaml"), pod_yaml("another", "i")).unwrap();
    fs::write(etc.join("web.manifest"), pod_yaml("web", "img:2")).unwrap();
    let after = h.until(|s| s != &before, |s| s.len() == 1).await;
    assert_eq!(names(&after), [pod_name("web")]);
    fs::remove_file(etc.join("web.manifest")).unwrap();
    assert!(h.next().await.is_empty());
}

async fn single_manifest_file_created_later(w: Preference) {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir(root.path().join("etc")).unwrap();
    let mut h = Harness::at(w, root, "etc/web.manifest");
    assert!(h.next().await.is_empty(), "S11: nothing there yet");
    let file = h.root.path().join("etc/web.manifest");
    fs::write(&file, pod_yaml("web", "img:1")).unwrap();
    let set = h.until(|s| !s.is_empty(), |_| true).await;
    assert_eq!(names(&set), [pod_name("web")]);
    fs::write(h.root.path().join("etc/other.yaml"), pod_yaml("other", "i")).unwrap();
    fs::write(&file, pod_yaml("web", "img:2")).unwrap();
    let after = h.until(|s| s != &set, |s| s.len() == 1).await;
    assert_eq!(names(&after), [pod_name("web")], "only the named file is read");
}

async fn directory_removed_and_recreated(w: Preference) {
    let mut h = Harness::new(w, true);
    h.write("web.yaml", &pod_yaml("web", "i"));
    assert_eq!(h.next().await.len(), 1);
    fs::remove_dir_all(h.dir()).unwrap();
    assert!(h.until(|s| s.is_empty(), |_| true).await.is_empty());
    fs::create_dir(h.dir()).unwrap();
    h.write("api.yaml", &pod_yaml("api", "i"));
    assert_eq!(names(&h.until(|s| !s.is_empty(), |_| true).await), [pod_name("api")]);
    // The new directory is watched: later changes arrive.
    h.write("web.yaml", &pod_yaml("web", "i"));
    assert_eq!(h.until(|s| s.len() == 2, |_| true).await.len(), 2);
    // Replaced by a rename over it.
    let staged = h.root.path().join("staged");
    fs::create_dir(&staged).unwrap();
    fs::write(staged.join("db.yaml"), pod_yaml("db", "i")).unwrap();
    fs::remove_dir_all(h.dir()).unwrap();
    fs::rename(&staged, h.dir()).unwrap();
    let set = h.until(|s| s.contains_key(&pod_name("db")), |_| true).await;
    assert_eq!(names(&set), [pod_name("db")]);
}

async fn queue_overflow_triggers_a_full_rescan(w: Preference) {
    let mut h = Harness::new(w, true);
    assert!(h.next().await.is_empty());
    // Nobody reads the queue now: fill it with events for ignored dotfiles, then create
    // the real manifests, whose events the kernel can no longer queue.
    let limit: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384)
        .max(16384);
    for i in 0..limit + 1000 {
        let junk = h.dir().join(format!(".junk-{i}"));
        fs::write(&junk, "").unwrap();
        fs::remove_file(&junk).unwrap();
    }
    for i in 0..200 {
        h.write(&format!("pod-{i}.yaml"), &pod_yaml(&format!("pod-{i}"), "i"));
    }
    let set = h.until(|s| s.len() == 200, |_| true).await;
    assert_eq!(set.len(), 200, "every manifest is found after the overflow");
}

async fn bad_files_beside_good_ones_break_nothing(w: Preference) {
    let mut h = Harness::new(w, true);
    h.write("good.yaml", &pod_yaml("good", "i"));
    h.write("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [\n");
    h.write("noname.yaml", "apiVersion: v1\nkind: Pod\nspec:\n  containers: []\n");
    fs::write(h.dir().join("latin1.yaml"), b"metadata:\n  name: caf\xe9\n").unwrap();
    fs::create_dir(h.dir().join("dir.yaml")).unwrap();
    let fifo = h.dir().join("fifo.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    symlink(h.dir().join("missing-target.yaml"), h.dir().join("dangling.yaml")).unwrap();
    let set = h.next().await;
    assert_eq!(names(&set), [pod_name("good")]);
    let expected = if made { 6 } else { 5 };
    assert!(h.source.errors_total() >= expected, "errors counted: {}", h.source.errors_total());
    // Fixing a broken file brings its pod without disturbing the good one.
    h.write("broken.yaml", &pod_yaml("fixed", "i"));
    let set = h.next().await;
    assert_eq!(names(&set), [pod_name("fixed"), pod_name("good")]);
}

async fn thousand_files_present_at_start(w: Preference) {
    let root = tempfile::tempdir().unwrap();
    let dir: &Path = &root.path().join("manifests");
    fs::create_dir(dir).unwrap();
    for i in 0..1000 {
        fs::write(dir.join(format!("pod-{i:04}.yaml")), pod_yaml(&format!("pod-{i:04}"), "i"))
            .unwrap();
    }
    let mut h = Harness::at(w, root, "manifests");
    let set = h.next().await;
    assert_eq!(set.len(), 1000);
}
