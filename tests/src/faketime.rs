//! Debian's libfaketime (package `faketime`): moves one process's wall clock and only
//! its (and its children's), never the machine's. The agent runs with it preloaded,
//! reading its clock from a file the test rewrites mid-run (`FAKETIME_TIMESTAMP_FILE`,
//! read again at most every second: a step lands within one); the monotonic clock is
//! left alone, as a real clock step leaves it (`FAKETIME_DONT_FAKE_MONOTONIC`).

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian puts the multi-threaded build of the library, per architecture.
const LIBRARIES: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
];

/// The library, if installed.
pub fn library() -> Option<PathBuf> {
    LIBRARIES.iter().map(PathBuf::from).find(|path| path.is_file())
}

/// A wall clock for a process: what `file` says (`+0`, `+90d`, `-1d`, or an absolute
/// `@2026-11-29 13:00:00` from which the clock then runs).
#[derive(Debug)]
pub struct FakeClock {
    file: PathBuf,
}

impl FakeClock {
    /// A clock in `dir` that reads `spec` until [`FakeClock::set`].
    pub fn new(dir: &Path, spec: &str) -> FakeClock {
        let clock = FakeClock { file: dir.join("faketime") };
        clock.set(spec);
        clock
    }

    /// Steps the clock: the process sees `spec` within a second.
    pub fn set(&self, spec: &str) {
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, format!("{spec}\n")).expect("write the fake clock");
        std::fs::rename(&tmp, &self.file).expect("replace the fake clock");
    }

    /// `program` with this clock preloaded.
    pub fn command(&self, program: &Path) -> Command {
        let library = library().expect("libfaketime (the faketime package: cargo xtask deps)");
        let mut command = Command::new(program);
        command
            .env("LD_PRELOAD", library)
            .env("FAKETIME_TIMESTAMP_FILE", &self.file)
            .env("FAKETIME_CACHE_DURATION", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        command
    }
}
