use std::collections::BTreeMap;

use outpost_host::{Kernel, Recording};

use super::*;
use crate::spec::projection::File;

fn payload(files: &[(&str, &str, u32)]) -> Payload {
    let files = files.iter().map(|(path, text, mode)| {
        ((*path).to_owned(), File { data: text.as_bytes().to_vec(), mode: *mode })
    });
    files.collect::<BTreeMap<_, _>>()
}

fn volume() -> (tempfile::TempDir, PathBuf) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("vol");
    fs::create_dir(&dir).unwrap();
    (scratch, dir)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().mode() & 0o7777
}

fn data_dir(dir: &Path) -> PathBuf {
    fs::read_link(dir.join(DATA)).unwrap()
}

#[test]
fn v1_kubelets_layout() {
    let (_scratch, dir) = volume();
    let files =
        payload(&[("app.conf", "a=1", 0o644), ("tls/key", "k", 0o400), ("tls/crt", "c", 0o644)]);
    assert!(write(&Kernel, &dir, &files, None).unwrap());

    let data = data_dir(&dir);
    let name = data.to_str().unwrap();
    // ..2026_11_23_07_40_01.123456789
    assert_eq!(name.len(), 2 + 19 + 1 + 9, "{name}");
    assert!(name.starts_with("..") && name.as_bytes()[21] == b'.', "{name}");
    assert_eq!(names(&dir), [name, "..data", "app.conf", "tls"]);
    assert_eq!(fs::read_link(dir.join("app.conf")).unwrap(), Path::new("..data/app.conf"));
    assert_eq!(fs::read_link(dir.join("tls")).unwrap(), Path::new("..data/tls"));
    assert_eq!(fs::read_to_string(dir.join("tls/key")).unwrap(), "k");
    assert_eq!(mode(&dir.join("tls/key")), 0o400);
    assert_eq!(mode(&dir.join("app.conf")), 0o644);
    assert_eq!(mode(&dir.join(&data)), 0o755);
    assert_eq!(mode(&dir.join("tls")), 0o755);
}

#[test]
fn v1_an_equal_payload_writes_nothing() {
    let (_scratch, dir) = volume();
    let files = payload(&[("a", "1", 0o644), ("d/b", "2", 0o600)]);
    assert!(write(&Kernel, &dir, &files, None).unwrap());
    let before = data_dir(&dir);
    assert!(!write(&Kernel, &dir, &files, None).unwrap());
    assert_eq!(data_dir(&dir), before);

    // A lost symlink is put back without a rewrite.
    fs::remove_file(dir.join("a")).unwrap();
    assert!(!write(&Kernel, &dir, &files, None).unwrap());
    assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "1");

    // A mode, a content or a path change rewrites.
    for changed in [
        payload(&[("a", "1", 0o640), ("d/b", "2", 0o600)]),
        payload(&[("a", "1", 0o640), ("d/b", "3", 0o600)]),
        payload(&[("a", "1", 0o640), ("d/b", "3", 0o600), ("c", "", 0o644)]),
    ] {
        assert!(write(&Kernel, &dir, &changed, None).unwrap());
    }
}

#[test]
fn v1_an_update_swaps_data_and_removes_what_went() {
    let (_scratch, dir) = volume();
    assert!(
        write(&Kernel, &dir, &payload(&[("a", "1", 0o644), ("old", "x", 0o644)]), None).unwrap()
    );
    let first = data_dir(&dir);
    // Not the writer's: kept.
    fs::write(dir.join("mine"), "kept").unwrap();
    symlink("/etc/hostname", dir.join("elsewhere")).unwrap();

    assert!(
        write(&Kernel, &dir, &payload(&[("a", "2", 0o644), ("new", "y", 0o644)]), None).unwrap()
    );
    let second = data_dir(&dir);
    assert_ne!(first, second);
    assert!(!dir.join(&first).exists(), "the old directory goes");
    assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "2");
    assert_eq!(fs::read_to_string(dir.join("new")).unwrap(), "y");
    let second = second.to_str().unwrap();
    assert_eq!(names(&dir), [second, "..data", "a", "elsewhere", "mine", "new"]);

    // An empty payload (an optional object now absent) empties the volume.
    assert!(write(&Kernel, &dir, &Payload::new(), None).unwrap());
    let third = data_dir(&dir);
    assert_eq!(names(&dir), [third.to_str().unwrap(), "..data", "elsewhere", "mine"]);
    assert!(names(&dir.join(&third)).is_empty());
}

#[test]
fn v1_leftovers_of_a_crash_are_cleaned() {
    let (_scratch, dir) = volume();
    fs::create_dir(dir.join("..2020_01_01_00_00_00.000000001")).unwrap();
    symlink("..2020_01_01_00_00_00.000000001", dir.join(DATA_TMP)).unwrap();
    assert!(write(&Kernel, &dir, &payload(&[("a", "1", 0o644)]), None).unwrap());
    let data = data_dir(&dir);
    assert_eq!(names(&dir), [data.to_str().unwrap(), "..data", "a"]);
}

#[test]
fn v1_a_file_that_changed_behind_the_writer_is_rewritten() {
    let (_scratch, dir) = volume();
    let files = payload(&[("a", "1", 0o644)]);
    write(&Kernel, &dir, &files, None).unwrap();
    let data = dir.join(data_dir(&dir));
    fs::write(data.join("a"), "tampered").unwrap();
    assert!(write(&Kernel, &dir, &files, None).unwrap());
    assert_eq!(fs::read_to_string(dir.join("a")).unwrap(), "1");
    fs::write(dir.join(data_dir(&dir)).join("extra"), "x").unwrap();
    assert!(write(&Kernel, &dir, &files, None).unwrap(), "a file not in the payload");
}

#[test]
fn v1_fs_group_gets_read_access() {
    // The lchowns go to the recording host (no root needed). The group is this process's
    // own, which its files have already: the writer's check of the group holds on disk.
    let host = Recording::new();
    let group = nix::unistd::getegid().as_raw();
    let (_scratch, dir) = volume();
    let files = payload(&[("token", "t", 0o600), ("d/ca.crt", "c", 0o644)]);
    assert!(write(&host, &dir, &files, Some(group)).unwrap());
    let data = dir.join(data_dir(&dir));
    assert_eq!(mode(&data.join("token")), 0o640);
    assert_eq!(mode(&data.join("d/ca.crt")), 0o644);
    assert_eq!(mode(&data.join("d")), 0o2755);
    assert_eq!(mode(&data), 0o2755);
    let given: Vec<PathBuf> = host.lchowns().into_iter().map(|(path, _, _)| path).collect();
    let expected = [
        data.clone(),
        data.join("d"),
        data.join("d/ca.crt"),
        data.join("token"),
        dir.join(DATA_TMP),
        // The symlinks too.
        dir.join("d"),
        dir.join("token"),
    ];
    assert_eq!(given, expected);
    assert!(host.lchowns().iter().all(|(_, uid, gid)| (*uid, *gid) == (None, Some(group))));
    assert!(!write(&host, &dir, &files, Some(group)).unwrap(), "stable with the group's bits");
    assert_eq!(host.lchowns().len(), expected.len(), "nothing given again");
}
