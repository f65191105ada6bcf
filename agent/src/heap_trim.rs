//! Gives malloc's free memory back to the kernel once the pods settle. Starting pods
//! leaves free space between the blocks that stay (their requests, decoded replies,
//! buffers), which glibc keeps resident: at 100 pods, 9.2 MiB of heap stayed resident
//! for 5.6 MB live (H5, `design/benchmarks.md`). A burst of pod work shows as a run of
//! status changes; once no pod's status has changed for [`QUIET`], the free pages are
//! returned once (`malloc_trim`). An idle agent changes no status, so this never wakes
//! it.

use std::time::Duration;

use crate::status::StatusStore;

/// How long without a status change ends a burst.
pub const QUIET: Duration = Duration::from_secs(10);

/// Calls `release` once after each burst of status changes, when no status has changed
/// for `quiet`; ends with the store.
pub async fn after_bursts(statuses: StatusStore, quiet: Duration, release: impl Fn()) {
    let mut changes = statuses.subscribe();
    drop(statuses);
    // A burst starts with a change...
    while changes.changed().await.is_ok() {
        // ...and ends once nothing changed for `quiet`.
        loop {
            match tokio::time::timeout(quiet, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => break,
            }
        }
        release();
        tracing::debug!("pod statuses settled: malloc's free memory released");
    }
}

/// [`after_bursts`] with glibc's `malloc_trim`.
pub async fn run(statuses: StatusStore) {
    after_bursts(statuses, QUIET, crate::host::allocator::release_free_memory).await;
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

    /// B5: the heap is trimmed once per burst of status changes, after the quiet time,
    /// and never while the agent idles.
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

        step(QUIET * 3).await;
        assert_eq!(releases(), 0, "an idle agent is not woken");
        // A burst: changes closer together than the quiet time.
        for (i, phase) in ["Pending", "Running", "Succeeded"].into_iter().enumerate() {
            statuses.set(&format!("uid-{i}"), status(phase));
            step(QUIET / 2).await;
            assert_eq!(releases(), 0, "released within the burst");
        }
        step(QUIET).await;
        assert_eq!(releases(), 1, "released once the burst is over");
        step(QUIET * 3).await;
        assert_eq!(releases(), 1, "released once per burst");
        // The same status again is no change, and no burst.
        statuses.set("uid-1", status("Running"));
        step(QUIET * 2).await;
        assert_eq!(releases(), 1, "an unchanged status is no burst");
        statuses.remove("uid-0");
        step(QUIET * 2).await;
        assert_eq!(releases(), 2, "the next burst releases again");
        drop(statuses);
        tokio::time::timeout(QUIET, task).await.expect("ends with the store").expect("no panic");
    }
}
