//! Gives back what a burst of work left resident, once the node settles:
//!
//! - malloc's free memory (`malloc_trim`). Starting pods leaves free space between the
//!   blocks that stay (their requests, decoded replies, buffers), which glibc keeps
//!   resident: at 100 pods, 9.2 MiB of heap stayed resident for 5.6 MB live (H5,
//!   `design/benchmarks.md`).
//! - the executable's code and read-only data that the burst mapped
//!   ([`outpost_host::code_pages`]): the agent's start alone left 12.0 MiB of code mapped
//!   in an agent that then runs on 5.1 MiB (B5).
//!
//! The agent's start is a burst, and so is a run of pod status changes. Once no pod's
//! status has changed for [`QUIET`], both are released, once. An idle agent changes no
//! status, so this never wakes it.

use std::time::Duration;

use tokio::sync::watch;

use crate::status::StatusStore;

/// How long without a status change ends a burst.
pub const QUIET: Duration = Duration::from_secs(10);

/// Calls `release` once at the end of the agent's start (`quiet` after it, or after the
/// last status change within it), then once after each burst of status changes, when no
/// status has changed for `quiet`; ends with the store.
pub async fn after_bursts(statuses: StatusStore, quiet: Duration, release: impl Fn()) {
    let mut changes = statuses.subscribe();
    drop(statuses);
    // The start is a burst; any other starts with a change.
    let mut burst = Ok(());
    while burst.is_ok() {
        if !settled(&mut changes, quiet).await {
            return;
        }
        release();
        burst = changes.changed().await;
    }
}

/// Waits until no status has changed for `quiet`; false if the store went first.
async fn settled(changes: &mut watch::Receiver<u64>, quiet: Duration) -> bool {
    loop {
        match tokio::time::timeout(quiet, changes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return false,
            Err(_) => return true,
        }
    }
}

/// [`after_bursts`] with glibc's `malloc_trim` and the executable's pages.
pub async fn run(statuses: StatusStore) {
    after_bursts(statuses, QUIET, release).await;
}

fn release() {
    crate::host::allocator::release_free_memory();
    match crate::host::code_pages::release() {
        Ok(bytes) => tracing::debug!(
            code_and_data_bytes = bytes,
            "the node settled: malloc's free memory and the executable's pages released"
        ),
        Err(e) => tracing::debug!(error = %e, "cannot release the executable's pages"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::core::v1::PodStatus;

    use super::*;

    fn status(phase: &str) -> PodStatus {
        PodStatus { phase: Some(phase.to_owned()), ..PodStatus::default() }
    }

    /// B5: memory is released once the start settles, once per burst of status changes
    /// after the quiet time, and never while the agent idles.
    #[tokio::test(start_paused = true)]
    async fn b5_memory_is_released_once_per_burst_after_the_quiet_time() {
        let statuses = StatusStore::default();
        let released = Arc::new(AtomicUsize::new(0));
        let count = released.clone();
        let task = tokio::spawn(after_bursts(statuses.clone(), QUIET, move || {
            count.fetch_add(1, Ordering::SeqCst);
        }));
        let releases = || released.load(Ordering::SeqCst);
        let step = |by: Duration| tokio::time::sleep(by);

        // The start: a change within it moves the release on.
        step(QUIET / 2).await;
        statuses.set("uid-0", status("Pending"));
        step(QUIET / 2 + QUIET / 4).await;
        assert_eq!(releases(), 0, "released within the start");
        step(QUIET / 2).await;
        assert_eq!(releases(), 1, "released once the start settled");
        step(QUIET * 3).await;
        assert_eq!(releases(), 1, "an idle agent is not woken");
        // A burst: changes closer together than the quiet time.
        for (i, phase) in ["Pending", "Running", "Succeeded"].into_iter().enumerate() {
            statuses.set(&format!("uid-{i}"), status(phase));
            step(QUIET / 2).await;
            assert_eq!(releases(), 1, "released within the burst");
        }
        step(QUIET).await;
        assert_eq!(releases(), 2, "released once the burst is over");
        step(QUIET * 3).await;
        assert_eq!(releases(), 2, "released once per burst");
        // The same status again is no change, and no burst.
        statuses.set("uid-1", status("Running"));
        step(QUIET * 2).await;
        assert_eq!(releases(), 2, "an unchanged status is no burst");
        statuses.remove("uid-0");
        step(QUIET * 2).await;
        assert_eq!(releases(), 3, "the next burst releases again");
        drop(statuses);
        tokio::time::timeout(QUIET, task).await.expect("ends with the store").expect("no panic");
    }
}
