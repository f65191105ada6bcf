//! The watch backends against the real kernel, in real temporary directories. Every
//! scenario runs for both backends; fanotify needs root (see [`fanotify_allowed`]).

use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use tempfile::TempDir;

use super::*;

/// How long a scenario may wait for the events it expects before failing (a hang
/// guard, not a timing assertion).
const PATIENCE: Duration = Duration::from_secs(10);

/// Whether the fanotify variants run: they need root. Without root they are skipped with
/// a note, unless `CI=true`, where they fail.
fn fanotify_allowed() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|uids| uids.split_whitespace().nth(1))
        == Some("0");
    if root {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the fanotify watch tests need root (CAP_SYS_ADMIN); CI=true forbids skipping them"
    );
    println!("note: skipping a fanotify watch test: it needs root (CAP_SYS_ADMIN)");
    false
}

fn watcher(preference: Preference) -> Watcher {
    let watcher = Watcher::new(preference).expect("start watcher");
    let expected = match preference {
        Preference::Fanotify => Backend::Fanotify,
        _ => Backend::Inotify,
    };
    assert_eq!(watcher.backend(), expected);
    watcher
}

/// Collects batches until `done` holds for everything collected so far.
async fn collect(watcher: &mut Watcher, done: impl Fn(&[Event]) -> bool) -> Vec<Event> {
    let mut events = Vec::new();
    let result = tokio::time::timeout(PATIENCE, async {
        while !done(&events) {
            let batch = watcher.next_batch().await.expect("next_batch");
            assert!(!batch.is_empty(), "next_batch returned an empty batch");
            events.extend(batch);
        }
    })
    .await;
    assert!(result.is_ok(), "expected events did not arrive; got {events:#?}");
    if events.len() <= 40 {
        println!("{}: {events:?}", watcher.backend());
    }
    events
}

/// All entries about `name` in `dir`, in order.
fn entries<'a>(events: &'a [Event], dir: WatchId, name: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|event| {
            matches!(event, Event::Entry { dir: d, name: Some(n), .. } if *d == dir && n == OsStr::new(name))
        })
        .collect()
}

/// The union of the masks of all entries about `name` in `dir`.
fn union(events: &[Event], dir: WatchId, name: &str) -> Mask {
    entries(events, dir, name).into_iter().fold(Mask::default(), |acc, event| match event {
        Event::Entry { mask, .. } => or(acc, *mask),
        _ => acc,
    })
}

/// The union of the masks of the entries about `dir` itself (no name).
fn union_self(events: &[Event], dir: WatchId) -> Mask {
    events.iter().fold(Mask::default(), |acc, event| match event {
        Event::Entry { dir: d, name: None, mask, .. } if *d == dir => or(acc, *mask),
        _ => acc,
    })
}

fn or(a: Mask, b: Mask) -> Mask {
    Mask {
        create: a.create || b.create,
        modify: a.modify || b.modify,
        close_write: a.close_write || b.close_write,
        attrib: a.attrib || b.attrib,
        delete: a.delete || b.delete,
        moved_from: a.moved_from || b.moved_from,
        moved_to: a.moved_to || b.moved_to,
        self_deleted: a.self_deleted || b.self_deleted,
        self_moved: a.self_moved || b.self_moved,
        is_dir: a.is_dir || b.is_dir,
    }
}

fn write_file(path: &Path, contents: &[u8]) {
    let mut file = fs::File::create(path).expect("create file");
    file.write_all(contents).expect("write file");
}

/// Waits for (and drops) the events of the test's own setup.
async fn settle(watcher: &mut Watcher, dir: WatchId, name: &str) {
    collect(watcher, |events| union(events, dir, name).close_write).await;
}

/// An entries-only watch (what the file source puts on the manifest directory's parent)
/// reports names coming and going, not writes to them.
async fn entries_scope_ignores_writes(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    write_file(&tmp.path().join("sibling.log"), b"one");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Entries).expect("add_dir");
    write_file(&tmp.path().join("sibling.log"), b"two");
    fs::create_dir(tmp.path().join("manifests")).expect("mkdir");
    let events = collect(&mut watcher, |events| union(events, id, "manifests").create).await;
    assert!(entries(&events, id, "sibling.log").is_empty(), "{events:#?}");
}

/// A directory watched with both scopes reports writes until the contents watch goes.
async fn narrowing_to_entries(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir contents");
    let same = watcher.add_dir(tmp.path(), Scope::Entries).expect("add_dir entries");
    assert_eq!(id, same, "one directory, one id");
    write_file(&tmp.path().join("a.yaml"), b"one");
    settle(&mut watcher, id, "a.yaml").await;
    watcher.remove(id, Scope::Contents).expect("drop the contents watch");
    write_file(&tmp.path().join("a.yaml"), b"two");
    fs::create_dir(tmp.path().join("marker")).expect("mkdir");
    let events = collect(&mut watcher, |events| union(events, id, "marker").create).await;
    assert!(
        entries(&events, id, "a.yaml").is_empty(),
        "writes are not reported any more: {events:#?}"
    );
    watcher.remove(id, Scope::Entries).expect("drop the entries watch");
}

async fn create_write_close(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    write_file(&tmp.path().join("pod.yaml"), b"kind: Pod\n");

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").close_write).await;
    let mask = union(&events, id, "pod.yaml");
    assert!(mask.create && mask.close_write && !mask.is_dir, "{events:#?}");
    for event in entries(&events, id, "pod.yaml") {
        let Event::Entry { pid, .. } = event else {
            continue;
        };
        match preference {
            Preference::Fanotify => assert_eq!(*pid, Some(std::process::id() as i32)),
            _ => assert_eq!(*pid, None),
        }
    }
    if preference == Preference::Fanotify {
        let me = process_name(std::process::id() as i32).expect("own process name");
        assert!(!me.is_empty() && !me.ends_with('\n'));
    }
}

async fn write_in_place(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let path = tmp.path().join("pod.yaml");
    write_file(&path, b"old\n");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    let mut file = fs::OpenOptions::new().write(true).open(&path).expect("open");
    file.write_all(b"new\n").expect("write");
    drop(file);

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").close_write).await;
    let mask = union(&events, id, "pod.yaml");
    assert!(mask.modify && mask.close_write && !mask.create, "{events:#?}");
}

async fn rename_over(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let target = tmp.path().join("pod.yaml");
    let temp = tmp.path().join(".pod.yaml.tmp");
    write_file(&target, b"old\n");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    write_file(&temp, b"new\n");
    fs::rename(&temp, &target).expect("rename");

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").moved_to).await;
    let from = union(&events, id, ".pod.yaml.tmp");
    let to = union(&events, id, "pod.yaml");
    assert!(from.create && from.close_write && from.moved_from, "{events:#?}");
    assert!(to.moved_to && !to.moved_from && !to.delete, "{events:#?}");
    // The moved_from comes first here. (Under fanotify only because the target had no
    // unread event: a moved_to is merged into a queued event for the same name, which
    // can sit before the moved_from.)
    let position = |name: &str, moved_to: bool| {
        events.iter().position(|event| match event {
            Event::Entry { name: Some(n), mask, .. } => {
                n == OsStr::new(name) && if moved_to { mask.moved_to } else { mask.moved_from }
            }
            _ => false,
        })
    };
    assert!(position(".pod.yaml.tmp", false) < position("pod.yaml", true), "{events:#?}");
}

async fn delete(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let path = tmp.path().join("pod.yaml");
    write_file(&path, b"x\n");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    fs::remove_file(&path).expect("remove");

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").delete).await;
    assert!(!union(&events, id, "pod.yaml").is_dir, "{events:#?}");
}

async fn chmod(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let path = tmp.path().join("pod.yaml");
    write_file(&path, b"x\n");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").attrib).await;
    let mask = union(&events, id, "pod.yaml");
    assert!(!mask.modify && !mask.close_write, "{events:#?}");
}

async fn subdirectory(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    fs::create_dir(tmp.path().join("sub")).expect("mkdir");
    fs::remove_dir(tmp.path().join("sub")).expect("rmdir");

    let events = collect(&mut watcher, |events| union(events, id, "sub").delete).await;
    let created = entries(&events, id, "sub");
    assert!(
        created.iter().all(|event| matches!(event, Event::Entry { mask, .. } if mask.is_dir)),
        "{events:#?}"
    );
    assert!(union(&events, id, "sub").create, "{events:#?}");
}

async fn delete_then_recreate(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let path = tmp.path().join("pod.yaml");
    write_file(&path, b"old\n");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    fs::remove_file(&path).expect("remove");
    write_file(&path, b"new\n");

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").close_write).await;
    let mask = union(&events, id, "pod.yaml");
    assert!(mask.delete && mask.create, "{events:#?}");
    if preference == Preference::Fanotify {
        // The kernel merged both into one event: the order is lost.
        assert_eq!(entries(&events, id, "pod.yaml").len(), 1, "{events:#?}");
    }
}

async fn touch_by_another_process(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let path = tmp.path().join("pod.yaml");
    write_file(&path, b"x\n");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    let child = std::process::Command::new("touch").arg(&path).spawn().expect("spawn touch");
    let child_pid = child.id() as i32;
    let status = child.wait_with_output().expect("wait for touch").status;
    assert!(status.success());

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").attrib).await;
    for event in entries(&events, id, "pod.yaml") {
        let Event::Entry { pid, .. } = event else {
            continue;
        };
        match preference {
            Preference::Fanotify => assert_eq!(*pid, Some(child_pid), "{events:#?}"),
            _ => assert_eq!(*pid, None),
        }
    }
    // The writer has exited.
    assert_eq!(process_name(child_pid), None);
}

async fn subdirectory_attrib(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let sub = tmp.path().join("sub");
    fs::create_dir(&sub).expect("mkdir");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    fs::set_permissions(&sub, fs::Permissions::from_mode(0o700)).expect("chmod subdir");
    write_file(&sub.join("nested.yaml"), b"x\n");
    write_file(&tmp.path().join("marker"), b"x\n");

    let events = collect(&mut watcher, |events| union(events, id, "marker").close_write).await;
    // Nothing inside a subdirectory is reported.
    assert!(entries(&events, id, "nested.yaml").is_empty(), "{events:#?}");
    let sub = union(&events, id, "sub");
    match preference {
        // fanotify reports an event on a directory against that directory's own handle,
        // not its parent's: for an unwatched subdirectory, it is dropped.
        Preference::Fanotify => assert!(sub.is_empty(), "{events:#?}"),
        _ => assert!(sub.attrib && sub.is_dir, "{events:#?}"),
    }
}

/// Unmounts (lazily) on drop, so that a failing test leaves no mount behind.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.0).status();
    }
}

async fn unmounted(preference: Preference) {
    if !fanotify_allowed() {
        return; // mounting needs root too
    }
    let tmp = TempDir::new().expect("tempdir");
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).expect("mkdir");
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "outpost-watch-test"])
        .arg(&mnt)
        .status()
        .expect("run mount");
    assert!(status.success(), "mount tmpfs failed");
    let mounted = Mounted(&mnt);
    let dir = mnt.join("manifests");
    fs::create_dir(&dir).expect("mkdir");
    let mut watcher = watcher(preference);
    let parent = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir parent");
    let id = watcher.add_dir(&dir, Scope::Contents).expect("add_dir");
    write_file(&dir.join("pod.yaml"), b"x\n");
    settle(&mut watcher, id, "pod.yaml").await;

    let status = std::process::Command::new("umount").arg(&mnt).status().expect("run umount");
    assert!(status.success(), "umount failed");
    drop(mounted);
    write_file(&tmp.path().join("marker"), b"x\n");

    let events = match preference {
        Preference::Fanotify => {
            collect(&mut watcher, |events| union(events, parent, "marker").close_write).await
        }
        _ => {
            collect(&mut watcher, |events| {
                events.contains(&Event::WatchGone(id))
                    && union(events, parent, "marker").close_write
            })
            .await
        }
    };
    // Neither backend reports anything about the mount point in the parent.
    assert!(entries(&events, parent, "mnt").is_empty(), "{events:#?}");
    if preference == Preference::Fanotify {
        // fanotify has no unmount event: the mark silently disappears.
        assert!(!events.contains(&Event::WatchGone(id)), "{events:#?}");
    }
    watcher.remove(id, Scope::Contents).expect("remove a watch on an unmounted filesystem");
}

async fn watched_dir_deleted(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let dir = tmp.path().join("manifests");
    fs::create_dir(&dir).expect("mkdir");
    let mut watcher = watcher(preference);
    let parent = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir parent");
    let id = watcher.add_dir(&dir, Scope::Contents).expect("add_dir");

    fs::remove_dir(&dir).expect("rmdir");

    let events = collect(&mut watcher, |events| {
        events.contains(&Event::WatchGone(id)) && union(events, parent, "manifests").delete
    })
    .await;
    let me = union_self(&events, id);
    assert!(me.self_deleted && me.is_dir, "{events:#?}");
    let deleted = events.iter().position(
        |e| matches!(e, Event::Entry { dir, mask, .. } if *dir == id && mask.self_deleted),
    );
    let gone = events.iter().position(|e| *e == Event::WatchGone(id));
    assert!(deleted < gone, "{events:#?}");
    assert!(union(&events, parent, "manifests").is_dir, "{events:#?}");
    // The id is dead: removing it is fine, and so is removing it twice.
    watcher.remove(id, Scope::Contents).expect("remove a dead watch");
    watcher.remove(id, Scope::Contents).expect("remove a dead watch again");

    // Recreated: a new watch works and gets a new id.
    fs::create_dir(&dir).expect("mkdir again");
    let again = watcher.add_dir(&dir, Scope::Contents).expect("add_dir again");
    assert_ne!(again, id);
    write_file(&dir.join("pod.yaml"), b"x\n");
    let events = collect(&mut watcher, |events| union(events, again, "pod.yaml").close_write).await;
    assert!(events.iter().all(|event| !matches!(event, Event::Entry { dir, .. } if *dir == id)));
}

async fn watched_dir_renamed(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let dir = tmp.path().join("manifests");
    let moved = tmp.path().join("manifests.old");
    fs::create_dir(&dir).expect("mkdir");
    let mut watcher = watcher(preference);
    let parent = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir parent");
    let id = watcher.add_dir(&dir, Scope::Contents).expect("add_dir");

    fs::rename(&dir, &moved).expect("rename");
    write_file(&moved.join("pod.yaml"), b"x\n");

    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").close_write).await;
    let me = union_self(&events, id);
    assert!(me.self_moved && me.is_dir, "{events:#?}");
    assert!(union(&events, parent, "manifests").moved_from, "{events:#?}");
    assert!(union(&events, parent, "manifests.old").moved_to, "{events:#?}");
    // The watch followed the directory: removing it finds it at its new place.
    watcher.remove(id, Scope::Contents).expect("remove moved watch");
    write_file(&moved.join("other.yaml"), b"x\n");
    write_file(&tmp.path().join("marker"), b"x\n");
    let events = collect(&mut watcher, |events| union(events, parent, "marker").close_write).await;
    assert!(entries(&events, id, "other.yaml").is_empty(), "{events:#?}");
}

async fn dir_replaced_by_rename(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let dir = tmp.path().join("manifests");
    let staged = tmp.path().join("manifests.new");
    fs::create_dir(&dir).expect("mkdir");
    fs::create_dir(&staged).expect("mkdir staged");
    let mut watcher = watcher(preference);
    let parent = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir parent");
    let id = watcher.add_dir(&dir, Scope::Contents).expect("add_dir");

    fs::rename(&staged, &dir).expect("rename over");

    let events = collect(&mut watcher, |events| {
        events.contains(&Event::WatchGone(id)) && union(events, parent, "manifests").moved_to
    })
    .await;
    assert!(union_self(&events, id).self_deleted, "{events:#?}");
    let to = union(&events, parent, "manifests");
    assert!(to.moved_to && to.is_dir, "{events:#?}");
    assert!(union(&events, parent, "manifests.new").moved_from, "{events:#?}");
}

async fn symlink_swapped_in_parent(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    fs::create_dir(&a).expect("mkdir a");
    fs::create_dir(&b).expect("mkdir b");
    let link = tmp.path().join("manifests");
    std::os::unix::fs::symlink(&a, &link).expect("symlink");
    let mut watcher = watcher(preference);
    let parent = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir parent");
    let id = watcher.add_dir(&link, Scope::Contents).expect("add_dir link");

    let staged = tmp.path().join(".manifests.tmp");
    std::os::unix::fs::symlink(&b, &staged).expect("symlink staged");
    fs::rename(&staged, &link).expect("swap symlink");

    let events = collect(&mut watcher, |events| union(events, parent, "manifests").moved_to).await;
    let to = union(&events, parent, "manifests");
    assert!(!to.is_dir, "a symlink is not a directory: {events:#?}");
    assert!(union(&events, parent, ".manifests.tmp").create, "{events:#?}");
    // The old watch stays on the old target.
    assert!(events.iter().all(|event| !matches!(event, Event::Entry { dir, .. } if *dir == id)));
}

async fn two_directories(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    fs::create_dir(&a).expect("mkdir a");
    fs::create_dir(&b).expect("mkdir b");
    let mut watcher = watcher(preference);
    let id_a = watcher.add_dir(&a, Scope::Contents).expect("add_dir a");
    let id_b = watcher.add_dir(&b, Scope::Contents).expect("add_dir b");
    assert_ne!(id_a, id_b);

    write_file(&b.join("in-b.yaml"), b"x\n");
    write_file(&a.join("in-a.yaml"), b"x\n");

    let events = collect(&mut watcher, |events| {
        union(events, id_a, "in-a.yaml").close_write && union(events, id_b, "in-b.yaml").close_write
    })
    .await;
    assert!(entries(&events, id_a, "in-b.yaml").is_empty(), "{events:#?}");
    assert!(entries(&events, id_b, "in-a.yaml").is_empty(), "{events:#?}");
}

async fn symlink_to_directory(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let real = tmp.path().join("real");
    let link = tmp.path().join("link");
    fs::create_dir(&real).expect("mkdir");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(&link, Scope::Contents).expect("add_dir through symlink");

    write_file(&real.join("pod.yaml"), b"x\n");
    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").close_write).await;
    assert!(union(&events, id, "pod.yaml").create, "{events:#?}");

    // The same directory under its real path is the same watch, counted twice.
    let again = watcher.add_dir(&real, Scope::Contents).expect("add_dir real");
    assert_eq!(again, id);
    watcher.remove(id, Scope::Contents).expect("remove one reference");
    write_file(&real.join("second.yaml"), b"x\n");
    settle(&mut watcher, id, "second.yaml").await;
    watcher.remove(id, Scope::Contents).expect("remove the last reference");
    write_file(&real.join("third.yaml"), b"x\n");
    // Nothing arrives for a removed watch: a fresh watch on the parent sees the marker.
    let parent = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir parent");
    write_file(&tmp.path().join("marker"), b"x\n");
    let events = collect(&mut watcher, |events| union(events, parent, "marker").close_write).await;
    assert!(entries(&events, id, "third.yaml").is_empty(), "{events:#?}");
}

async fn not_a_directory(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let file = tmp.path().join("pod.yaml");
    write_file(&file, b"x\n");
    let mut watcher = watcher(preference);
    let error = watcher.add_dir(&file, Scope::Contents).expect_err("a file is not a directory");
    let message = error.to_string();
    assert!(message.contains("pod.yaml") && message.contains("not a directory"), "{message}");
    let error = watcher
        .add_dir(&tmp.path().join("missing"), Scope::Contents)
        .expect_err("missing directory");
    assert!(error.to_string().contains("does not exist"), "{error}");
}

fn max_queued_events(preference: Preference) -> usize {
    let file = match preference {
        Preference::Fanotify => "/proc/sys/fs/fanotify/max_queued_events",
        _ => "/proc/sys/fs/inotify/max_queued_events",
    };
    fs::read_to_string(file).ok().and_then(|limit| limit.trim().parse().ok()).unwrap_or(16384)
}

async fn overflow(preference: Preference) {
    let limit = max_queued_events(preference);
    if limit > 200_000 {
        println!("note: skipping the overflow test: the queue limit is {limit} events");
        return;
    }
    let tmp = TempDir::new().expect("tempdir");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    // Each file is at least one event that the kernel cannot merge with another.
    for n in 0..limit + 100 {
        fs::File::create(tmp.path().join(format!("f{n}"))).expect("create file");
    }

    let events = collect(&mut watcher, |events| events.contains(&Event::Overflow)).await;
    let entries = events.iter().filter(|event| matches!(event, Event::Entry { .. })).count();
    println!("{preference:?}: {entries} entries before the overflow");
    assert!(events.iter().all(|event| !matches!(event, Event::WatchGone(_))));
    // The watch still works after an overflow.
    write_file(&tmp.path().join("after.yaml"), b"x\n");
    collect(&mut watcher, |events| union(events, id, "after.yaml").close_write).await;
}

async fn cancel_safety(preference: Preference) {
    let tmp = TempDir::new().expect("tempdir");
    let mut watcher = watcher(preference);
    let id = watcher.add_dir(tmp.path(), Scope::Contents).expect("add_dir");

    let quiet = tokio::time::timeout(Duration::from_millis(50), watcher.next_batch()).await;
    assert!(quiet.is_err(), "no event expected: {quiet:?}");
    tokio::select! {
        batch = watcher.next_batch() => panic!("no event expected: {batch:?}"),
        () = tokio::time::sleep(Duration::from_millis(20)) => {}
    }

    write_file(&tmp.path().join("pod.yaml"), b"x\n");
    let events = collect(&mut watcher, |events| union(events, id, "pod.yaml").close_write).await;
    assert!(union(&events, id, "pod.yaml").create, "{events:#?}");
}

macro_rules! both_backends {
    ($($scenario:ident),* $(,)?) => {
        mod fanotify {
            $(
                #[tokio::test]
                async fn $scenario() {
                    if super::fanotify_allowed() {
                        super::$scenario(super::Preference::Fanotify).await;
                    }
                }
            )*
        }
        mod inotify {
            $(
                #[tokio::test]
                async fn $scenario() {
                    super::$scenario(super::Preference::Inotify).await;
                }
            )*
        }
    };
}

both_backends!(
    entries_scope_ignores_writes,
    narrowing_to_entries,
    create_write_close,
    write_in_place,
    rename_over,
    delete,
    delete_then_recreate,
    chmod,
    touch_by_another_process,
    subdirectory_attrib,
    unmounted,
    subdirectory,
    watched_dir_deleted,
    watched_dir_renamed,
    dir_replaced_by_rename,
    symlink_swapped_in_parent,
    two_directories,
    symlink_to_directory,
    not_a_directory,
    overflow,
    cancel_safety,
);

#[tokio::test]
async fn auto_prefers_fanotify_as_root() {
    let watcher = Watcher::new(Preference::Auto).expect("start watcher");
    if fanotify_allowed() {
        assert_eq!(watcher.backend(), Backend::Fanotify);
    }
    assert_eq!(Backend::Fanotify.to_string(), "fanotify");
    assert_eq!(Backend::Inotify.to_string(), "inotify");
}

#[test]
fn process_name_of_a_gone_process() {
    assert_eq!(process_name(0), None);
    assert_eq!(process_name(-1), None);
    assert_eq!(process_name(i32::MAX), None);
}

#[test]
fn errors_name_the_path_the_syscall_and_what_to_do() {
    let error = Error::Watch {
        path: "/etc/outpost/manifests".into(),
        syscall: "inotify_add_watch",
        source: io::Error::from_raw_os_error(libc::ENOSPC),
    };
    let message = error.to_string();
    assert!(message.contains("/etc/outpost/manifests"), "{message}");
    assert!(message.contains("inotify_add_watch"), "{message}");
    assert!(message.contains("max_user_watches"), "{message}");
    assert!(!error.is_unsupported_filesystem());
    for errno in [libc::EXDEV, libc::ENODEV, libc::EOPNOTSUPP] {
        let error = Error::Watch {
            path: "/x".into(),
            syscall: "fanotify_mark",
            source: io::Error::from_raw_os_error(errno),
        };
        assert!(error.is_unsupported_filesystem(), "{error}");
        assert!(error.to_string().contains("inotify backend"), "{error}");
    }
}

/// The kernel watch covers the widest scope still referenced, narrows when the last
/// contents reference goes, and is removed with the last reference of any scope.
#[test]
fn refs_release_narrows_then_removes() {
    use Scope::{Contents, Entries};
    let mut refs = Refs::one(Entries);
    refs.add(Contents);
    refs.add(Contents);
    assert_eq!(refs.widest(), Some(Contents));
    assert_eq!(refs.release(Contents), Release::Unchanged);
    assert_eq!(refs.release(Contents), Release::Narrowed);
    assert_eq!(refs.widest(), Some(Entries));
    assert_eq!(refs.release(Contents), Release::Unchanged, "no contents reference left to drop");
    assert_eq!(refs.release(Entries), Release::Gone);
    let mut refs = Refs::one(Contents);
    assert_eq!(refs.release(Contents), Release::Gone);
    let mut refs = Refs::one(Contents);
    refs.add(Entries);
    assert_eq!(refs.release(Entries), Release::Unchanged, "contents still wanted");
}
