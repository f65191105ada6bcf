//! The agent's heap profile (dhat) for `outpost run`, in a binary built with the
//! `dhat-heap` feature (`cargo xtask heap`; never in a distribution build). With
//! `OUTPOST_DHAT_HEAP=<file>` in the environment, every allocation from the start of
//! `outpost run`'s command is recorded, and the profile is written to `<file>` the moment
//! SIGTERM or SIGINT arrives, before the agent lets go of anything: its end (t-end) is the
//! heap of the running agent, its peak (t-gmax) the largest heap so far, each by
//! allocation site, readable with dhat's viewer (`dh_view.html`). Without the variable, or
//! without the feature, nothing is recorded.

/// The environment variable that names the profile's file.
pub const ENV: &str = "OUTPOST_DHAT_HEAP";

/// dhat's allocator, which records what the profiler asks for and otherwise only passes
/// every call on to the system's. Any binary linking the library with the feature uses it.
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[cfg(feature = "dhat-heap")]
mod recording {
    use std::sync::Mutex;

    /// How many frames of each allocation's backtrace are kept: enough to reach the
    /// agent's own code under serde's and k8s-openapi's.
    const FRAMES: usize = 32;

    /// The running profiler, until [`finish`] takes it.
    static PROFILER: Mutex<Option<dhat::Profiler>> = Mutex::new(None);

    pub fn start() {
        let Some(file) = std::env::var_os(super::ENV).filter(|f| !f.is_empty()) else {
            return;
        };
        let profiler =
            dhat::Profiler::builder().file_name(file).trim_backtraces(Some(FRAMES)).build();
        if let Ok(mut slot) = PROFILER.lock() {
            *slot = Some(profiler);
        }
    }

    pub fn finish() {
        let profiler = PROFILER.lock().ok().and_then(|mut slot| slot.take());
        // Dropping the profiler writes the file (and prints dhat's totals on stderr).
        drop(profiler);
    }
}

/// Records the heap until [`finish`] (or the guard's drop, if the agent ends otherwise).
#[derive(Debug)]
#[must_use = "the profile is written when the guard drops"]
pub struct HeapProfile(());

impl Drop for HeapProfile {
    fn drop(&mut self) {
        finish();
    }
}

/// Starts recording if `OUTPOST_DHAT_HEAP` names a file (and the binary has the
/// profiler); keep the guard until the agent has stopped.
pub fn start() -> HeapProfile {
    #[cfg(feature = "dhat-heap")]
    recording::start();
    #[cfg(not(feature = "dhat-heap"))]
    if std::env::var_os(ENV).is_some() {
        tracing::warn!(
            variable = ENV,
            "this outpost was built without the heap profiler (feature dhat-heap): no profile is written; build one with `cargo xtask heap`"
        );
    }
    HeapProfile(())
}

/// Writes the profile now, if one is recording (the stop signal's handler calls it).
pub fn finish() {
    #[cfg(feature = "dhat-heap")]
    recording::finish();
}
