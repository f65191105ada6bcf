//! Outpost's fuzz harnesses: one function per fuzz target.
//!
//! Each function takes the fuzz input's bytes, runs them through the library code the
//! agent runs on such bytes, and panics when an invariant breaks; libFuzzer reports the
//! panic as a crash. `fuzz/fuzz_targets/<target>.rs` calls one function and nothing else;
//! `tests/corpus.rs` replays the committed corpus (`fuzz/corpus/<target>/`) and the crash
//! regressions (`fuzz/regressions/<target>/`) through the same functions with the stable
//! toolchain, as part of `cargo test --workspace`.

pub mod bpf_record;
pub mod checkpoint;
pub mod cri_log;
pub mod local_api;
pub mod manifest;
pub mod merge;
pub mod spdy_frame;
pub mod spdy_session;

/// A temporary directory for a harness's files, in memory (`/dev/shm`) where there is
/// one: the checkpoints a harness writes are fsynced, which costs nothing there.
pub fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new().prefix("outpost-fuzz-").tempdir_in(shm)
    {
        return Ok(dir);
    }
    tempfile::Builder::new().prefix("outpost-fuzz-").tempdir()
}

/// A harness: the fuzz input in, a panic when an invariant breaks.
pub type Harness = fn(&[u8]);

/// Every target, by the name of its directory under `fuzz/corpus/`, `fuzz/regressions/`
/// and its file under `fuzz/fuzz_targets/`.
pub const TARGETS: &[(&str, Harness)] = &[
    ("manifest", manifest::manifest),
    ("merge", merge::merge),
    ("checkpoint", checkpoint::checkpoint),
    ("cri_log", cri_log::cri_log),
    ("bpf_record", bpf_record::bpf_record),
    ("local_api", local_api::local_api),
    ("spdy_frame", spdy_frame::spdy_frame),
    ("spdy_session", spdy_session::spdy_session),
];
