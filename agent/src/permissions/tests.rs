use std::os::unix::fs::PermissionsExt;

use super::*;

const ME: u32 = 1000;

fn entry(path: &str, uid: u32, mode: u32) -> Entry {
    Entry { path: path.into(), uid, mode: 0o040_000 | mode }
}

fn usual(target_uid: u32, target_mode: u32) -> Vec<Entry> {
    vec![
        entry("/", 0, 0o755),
        entry("/etc", 0, 0o755),
        entry("/etc/outpost", 0, 0o755),
        entry("/etc/outpost/manifests", target_uid, target_mode),
    ]
}

#[test]
fn root_owned_and_not_writable_by_others_is_trusted() {
    for mode in [0o755, 0o700, 0o750, 0o555, 0o1755] {
        assert_eq!(judge(&usual(0, mode), ME), Ok(()), "mode {mode:o}");
    }
}

#[test]
fn the_agents_own_user_is_trusted_too() {
    assert_eq!(judge(&usual(ME, 0o755), ME), Ok(()));
}

#[test]
fn a_target_writable_by_group_or_others_is_refused_with_chmod() {
    for (mode, who) in [
        (0o775, "its group"),
        (0o757, "all users"),
        (0o777, "its group and all users"),
        // Sticky does not protect the target itself: anyone may add a file to it.
        (0o1777, "its group and all users"),
    ] {
        let finding = judge(&usual(0, mode), ME).unwrap_err();
        assert_eq!(finding.path, Path::new("/etc/outpost/manifests"));
        assert!(finding.problem.contains(who), "{mode:o}: {}", finding.problem);
        assert_eq!(finding.fix, "chmod go-w /etc/outpost/manifests");
    }
}

#[test]
fn a_target_owned_by_another_user_is_refused_with_chown() {
    let finding = judge(&usual(1001, 0o755), ME).unwrap_err();
    assert_eq!(finding.problem, "/etc/outpost/manifests belongs to uid 1001");
    assert_eq!(finding.fix, "chown root /etc/outpost/manifests");
}

#[test]
fn a_writable_ancestor_is_refused_unless_sticky_above_a_trusted_entry() {
    let mut chain = usual(0, 0o755);
    chain[1].mode = 0o040_777;
    let finding = judge(&chain, ME).unwrap_err();
    assert_eq!(finding.path, Path::new("/etc"));

    // /tmp-like: sticky, and the entry below belongs to root.
    chain[1].mode = 0o041_777;
    assert_eq!(judge(&chain, ME), Ok(()));

    // Sticky, but the entry below belongs to someone else: they may swap it.
    chain[2].uid = 1001;
    let finding = judge(&chain, ME).unwrap_err();
    assert_eq!(finding.path, Path::new("/etc/outpost"), "{finding:?}");
}

#[test]
fn an_ancestor_owned_by_another_user_is_refused() {
    let mut chain = usual(0, 0o755);
    chain[2].uid = 1001;
    let finding = judge(&chain, ME).unwrap_err();
    assert_eq!(finding.path, Path::new("/etc/outpost"));
    assert_eq!(finding.problem, "/etc/outpost belongs to uid 1001");
    assert_eq!(finding.fix, "chown root /etc/outpost");
}

#[test]
fn the_first_fault_from_the_root_down_is_reported() {
    let mut chain = usual(1001, 0o777);
    chain[1].mode = 0o040_777;
    assert_eq!(judge(&chain, ME).unwrap_err().path, Path::new("/etc"));
}

// The checks below read the real file system, which the test makes as whoever runs it:
// root, or the agent's own user (both trusted).

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn real_directories_are_judged_through_their_chain_and_symlinks() {
    let scratch = tempfile::tempdir().unwrap();
    let base = scratch.path();
    chmod(base, 0o755);
    let manifests = base.join("manifests");
    fs::create_dir(&manifests).unwrap();
    check_trusted_dir("the manifest directory", &manifests).unwrap();

    chmod(&manifests, 0o777);
    let error = check_trusted_dir("the manifest directory", &manifests).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("is writable by its group and all users"), "{text}");
    assert!(text.contains(&format!("chmod go-w {}", manifests.display())), "{text}");
    assert!(text.contains("--allow-writable-manifest-dir"), "{text}");
    chmod(&manifests, 0o755);

    // A missing directory is judged by where it would be created.
    let missing = base.join("later/manifests");
    check_trusted_dir("the manifest directory", &missing).unwrap();
    chmod(base, 0o1777);
    assert!(check_trusted_dir("the manifest directory", &missing).is_err());
    // ... while an existing entry of a trusted owner (root's, or the agent's own user's)
    // in a sticky directory is fine.
    check_trusted_dir("the manifest directory", &manifests).unwrap();
    chmod(base, 0o755);

    // A symlink (trusted where it is) to a directory others may write is judged where it
    // leads. (Whom an entry must belong to is `judge`'s rule, tested above.)
    let elsewhere = base.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    chmod(&elsewhere, 0o777);
    let link = base.join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let text = check_trusted_dir("the images directory", &link).unwrap_err().to_string();
    assert!(text.starts_with("the images directory"), "{text}");
    let resolved = elsewhere.canonicalize().unwrap();
    assert!(text.contains(&format!("{} is writable by", resolved.display())), "{text}");
}

#[test]
fn the_state_directory_is_created_private_and_tightened() {
    let scratch = tempfile::tempdir().unwrap();
    let state = scratch.path().join("var/lib/outpost");
    secure_state_dir(&state).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&state), 0o700);

    chmod(&state, 0o755);
    secure_state_dir(&state).unwrap();
    assert_eq!(mode(&state), 0o700);

    // Already private: left as it is.
    chmod(&state, 0o500);
    secure_state_dir(&state).unwrap();
    assert_eq!(mode(&state), 0o500);
    chmod(&state, 0o700);
}
