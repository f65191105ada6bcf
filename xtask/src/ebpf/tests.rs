use std::path::Path;

use super::*;

/// A copy of the repository's `agent-ebpf` (sources and committed object) in `to`.
fn copy_agent_ebpf(to: &Path) {
    let from = crate::project_root().join("agent-ebpf");
    std::fs::create_dir_all(to.join("src")).expect("mkdir src");
    for name in ["outpost.bpf.c", "outpost.h", "kernel.h"] {
        std::fs::copy(from.join("src").join(name), to.join("src").join(name)).expect("copy source");
    }
    std::fs::copy(from.join(OBJECT), to.join(OBJECT)).expect("copy object");
}

/// Whether the BPF toolchain is here; in CI it must be.
fn toolchain() -> bool {
    if [CLANG, LLVM_STRIP].iter().all(|t| which(t).is_some()) {
        return true;
    }
    assert!(!crate::in_ci(), "CI=true but clang-19 or llvm-strip-19 is missing");
    eprintln!("skipped: no BPF toolchain (clang-19, llvm-19)");
    false
}

#[test]
fn the_committed_object_matches_its_sources_and_a_changed_source_makes_it_stale() {
    if !toolchain() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("agent-ebpf");
    copy_agent_ebpf(&dir);
    // Built somewhere else than the repository: paths must not leak into the object.
    check(&dir, &tmp.path().join("work")).expect("the committed object is up to date");

    let source = dir.join(SOURCE);
    let text = std::fs::read_to_string(&source).expect("read source");
    let changed = text.replace("256 * 1024", "128 * 1024");
    assert_ne!(changed, text, "the test's edit must change the program");
    std::fs::write(&source, changed).expect("write source");
    let error = check(&dir, &tmp.path().join("work")).expect_err("a changed source is stale");
    assert!(format!("{error:#}").contains("is stale"), "{error:#}");
}

#[test]
fn a_missing_object_says_how_to_make_it() {
    if !toolchain() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("agent-ebpf");
    copy_agent_ebpf(&dir);
    std::fs::remove_file(dir.join(OBJECT)).expect("rm object");
    let error = check(&dir, &tmp.path().join("work")).expect_err("no object");
    assert!(format!("{error:#}").contains("cargo xtask ebpf"), "{error:#}");
}

#[test]
fn options() {
    assert!(!Options::parse(&[]).expect("no flags").check);
    assert!(Options::parse(&["--check".to_owned()]).expect("--check").check);
    assert!(Options::parse(&["--fix".to_owned()]).is_err());
}
