use std::os::unix::fs::symlink;

use super::*;

fn at() -> Subject {
    Subject { pod: "default/p".to_owned(), container: None }
}

fn stat(path: &Path) -> (u32, u32) {
    let metadata = fs::symlink_metadata(path).unwrap();
    (metadata.gid(), metadata.mode() & 0o7777)
}

/// chown to another group needs root (CAP_CHOWN).
fn root() -> bool {
    nix::unistd::geteuid().is_root()
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
    if !root() {
        return;
    }
    let (scratch, dir) = volume();
    set(&at(), &dir, 4242, None, Access::ReadWrite).unwrap();
    assert_eq!(stat(&dir), (4242, 0o2777));
    assert_eq!(stat(&dir.join("sub")), (4242, 0o2770));
    assert_eq!(stat(&dir.join("sub/data")), (4242, 0o660));
    assert_eq!(stat(&dir.join("link")).0, 4242, "the link itself is re-grouped");
    assert_eq!(stat(&scratch.path().join("outside")), (0, 0o600), "its target is untouched");
}

#[test]
fn on_root_mismatch_skips_a_volume_whose_root_matches() {
    if !root() {
        return;
    }
    let (_scratch, dir) = volume();
    set(&at(), &dir, 4242, Some("OnRootMismatch"), Access::ReadWrite).unwrap();
    assert_eq!(stat(&dir.join("sub/data")), (4242, 0o660), "a mismatched root: changed");
    fs::set_permissions(dir.join("sub/data"), fs::Permissions::from_mode(0o600)).unwrap();
    set(&at(), &dir, 4242, Some("OnRootMismatch"), Access::ReadWrite).unwrap();
    assert_eq!(stat(&dir.join("sub/data")), (4242, 0o600), "the root matches: left alone");
    set(&at(), &dir, 4242, Some("Always"), Access::ReadWrite).unwrap();
    assert_eq!(stat(&dir.join("sub/data")), (4242, 0o660));
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
    if !root() {
        return;
    }
    let (_scratch, dir) = volume();
    set(&at(), &dir, 4242, None, Access::ReadOnly).unwrap();
    assert_eq!(stat(&dir.join("sub")), (4242, 0o2750));
    assert_eq!(stat(&dir.join("sub/data")), (4242, 0o640));
    assert_eq!(read_only_mode(0o400, false), 0o440);
    assert_eq!(read_only_mode(0o755, true), 0o2755);
    assert_eq!(read_only_mode(0o700, true), 0o2750);
}
