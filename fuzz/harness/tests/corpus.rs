//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) and the crash regressions
//! (`fuzz/regressions/<target>/`) through each target's harness on the stable toolchain:
//! what the fuzzer once found (or a crash it found, once fixed) stays checked by a plain
//! `cargo test`.

use std::path::{Path, PathBuf};

use outpost_fuzz::{Harness, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The files of `dir`, sorted; none when it does not exist.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    files.retain(|path| path.is_file());
    files.sort();
    files
}

/// Runs every input of `kind` (`corpus` or `regressions`) for `target`; returns how many.
fn replay(kind: &str, target: &str, harness: Harness) -> usize {
    let files = inputs(&fuzz_dir().join(kind).join(target));
    for file in &files {
        let data =
            std::fs::read(file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let run = std::panic::catch_unwind(|| harness(&data));
        assert!(
            run.is_ok(),
            "{target}: {} fails its harness (reproduce: cd fuzz && cargo +nightly fuzz run {target} {})",
            file.display(),
            file.display()
        );
    }
    files.len()
}

fn target(name: &str) -> Harness {
    TARGETS
        .iter()
        .find(|(target, _)| *target == name)
        .map(|(_, harness)| *harness)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
}

/// Each target's corpus is committed and not empty, and every file of it passes.
fn corpus(name: &str) {
    let count = replay("corpus", name, target(name));
    assert!(count > 0, "fuzz/corpus/{name}/ is empty: run `cargo xtask fuzz --target {name}`");
    replay("regressions", name, target(name));
}

#[test]
fn manifest_corpus() {
    corpus("manifest");
}

#[test]
fn merge_corpus() {
    corpus("merge");
}

#[test]
fn checkpoint_corpus() {
    corpus("checkpoint");
}

#[test]
fn cri_log_corpus() {
    corpus("cri_log");
}

#[test]
fn bpf_record_corpus() {
    corpus("bpf_record");
}

#[test]
fn local_api_corpus() {
    corpus("local_api");
}

#[test]
fn spdy_frame_corpus() {
    corpus("spdy_frame");
}

#[test]
fn spdy_session_corpus() {
    corpus("spdy_session");
}

/// Every target the harness crate has is replayed above, has a fuzz target file, and is a
/// program of this crate too (CI's short run builds it here, not with cargo-fuzz).
#[test]
fn every_target_is_replayed_and_fuzzed() {
    let tests = include_str!("corpus.rs");
    let manifest = include_str!("../Cargo.toml");
    for (name, _) in TARGETS {
        assert!(tests.contains(&format!("fn {name}_corpus()")), "no replay test for {name}");
        let file = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(file.is_file(), "no fuzz target {}", file.display());
        let program = format!("name = \"fuzz-{name}\"\npath = \"../fuzz_targets/{name}.rs\"");
        assert!(manifest.contains(&program), "harness Cargo.toml has no program fuzz-{name}");
    }
}
