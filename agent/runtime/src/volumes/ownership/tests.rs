use std::os::unix::fs::symlink;
use std::path::PathBuf;

use outpost_host::Recording;

use super::*;

fn at() -> Subject {
    Subject { pod: "default/p".to_owned(), container: None }
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// The paths given to a group (the recording host's `lchown`s), sorted, and that group.
fn given(host: &Recording) -> Vec<(PathBuf, Option<u32>)> {
    let mut given: Vec<_> = host.lchowns().into_iter().map(|(path, _, gid)| (path, gid)).collect();
    given.sort();
    given
}

/// A volume with a file, a subdirectory and a symlink to a file outside it.
fn volume() -> (tempfile::TempDir, std::path::PathBuf) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("vol");
    fs::create_dir_all(dir.join("sub")).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(dir.join("sub"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(dir.join("sub/data"), "x").unwrap();
    fs::set_permissions(dir.join("sub/data"), fs::Permissions::from_mode(0o600)).unwrap();
    let outside = scratch.path().join("outside");
    fs::write(&outside, "x").unwrap();
    fs::set_permissions(&outside, fs::Permissions::from_mode(0o600)).unwrap();
    symlink(&outside, dir.join("link")).unwrap();
    (scratch, dir)
}

#[test]
fn every_file_gets_the_group_and_directories_setgid() {
    let host = Recording::new();
    let (scratch, dir) = volume();
    set(&host, &at(), &dir, 4242, None, Access::ReadWrite).unwrap();
    let expected = [dir.clone(), dir.join("link"), dir.join("sub"), dir.join("sub/data")];
    // The link itself is re-grouped; its target is not.
    assert_eq!(given(&host), expected.map(|path| (path, Some(4242))));
    assert_eq!(mode(&dir), 0o2777);
    assert_eq!(mode(&dir.join("sub")), 0o2770);
    assert_eq!(mode(&dir.join("sub/data")), 0o660);
    assert_eq!(mode(&scratch.path().join("outside")), 0o600, "the link's target is untouched");
}

#[test]
fn on_root_mismatch_skips_a_volume_whose_root_matches() {
    // This process's own group: the root's group matches on disk once its bits do.
    let group = nix::unistd::getegid().as_raw();
    let host = Recording::new();
    let (_scratch, dir) = volume();
    set(&host, &at(), &dir, group, Some("OnRootMismatch"), Access::ReadWrite).unwrap();
    assert_eq!(mode(&dir.join("sub/data")), 0o660, "a mismatched root: changed");
    assert_eq!(given(&host).len(), 4);
    fs::set_permissions(dir.join("sub/data"), fs::Permissions::from_mode(0o600)).unwrap();
    set(&host, &at(), &dir, group, Some("OnRootMismatch"), Access::ReadWrite).unwrap();
    assert_eq!(mode(&dir.join("sub/data")), 0o600, "the root matches: left alone");
    assert_eq!(given(&host).len(), 4, "nothing given again");
    set(&host, &at(), &dir, group, Some("Always"), Access::ReadWrite).unwrap();
    assert_eq!(mode(&dir.join("sub/data")), 0o660);
    assert_eq!(given(&host).len(), 8);
}

#[test]
fn root_mismatch_checks_group_bits_and_setgid() {
    let (_scratch, dir) = volume();
    let gid = fs::metadata(&dir).unwrap().gid();
    assert!(root_mismatch(&dir, gid), "no setgid yet");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o2770)).unwrap();
    assert!(!root_mismatch(&dir, gid));
    assert!(root_mismatch(&dir, gid + 1), "another group");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o2750)).unwrap();
    assert!(root_mismatch(&dir, gid), "group cannot write");
    assert!(root_mismatch(&dir.join("missing"), gid));
}

#[test]
fn v1_a_read_only_volume_gets_read_bits_only() {
    let host = Recording::new();
    let (_scratch, dir) = volume();
    set(&host, &at(), &dir, 4242, None, Access::ReadOnly).unwrap();
    assert_eq!(given(&host).len(), 4);
    assert_eq!(mode(&dir.join("sub")), 0o2750);
    assert_eq!(mode(&dir.join("sub/data")), 0o640);
    assert_eq!(read_only_mode(0o400, false), 0o440);
    assert_eq!(read_only_mode(0o755, true), 0o2755);
    assert_eq!(read_only_mode(0o700, true), 0o2750);
}
