use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Error;
use super::{Stop, Task, Tasks};

/// The order in which tasks said they stopped, as `(name, how)`.
type Log = Arc<Mutex<Vec<(&'static str, &'static str)>>>;

/// Logs `(name, "dropped")` when dropped (aborted, or ended).
struct OnDrop(&'static str, Log);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Ok(mut log) = self.1.lock() {
            log.push((self.0, "dropped"));
        }
    }
}

fn forever(name: &'static str, log: &Log) -> Task {
    let guard = OnDrop(name, log.clone());
    Task::infallible(name, async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    })
}

fn failure() -> std::io::Error {
    std::io::Error::other("scripted")
}

#[tokio::test(start_paused = true)]
async fn tasks_stop_in_the_lists_order() {
    let log = Log::default();
    let token = CancellationToken::new();
    let cancelled = {
        let (log, told) = (log.clone(), token.clone());
        Task::infallible("cancelled", async move {
            told.cancelled().await;
            log.lock().unwrap().push(("cancelled", "told"));
        })
        .stop(Stop::Cancel(token.clone(), Duration::from_secs(5)))
    };
    let tasks = vec![
        forever("first", &log),
        forever("drained", &log).stop(Stop::Drain(Duration::from_secs(3))),
        cancelled,
        forever("last", &log),
    ];
    let mut tasks = Tasks::spawn(tasks);
    tasks.spawn_first(forever("before_all", &log));
    tokio::task::yield_now().await;
    let started = tokio::time::Instant::now();
    tasks.stop().await;
    // Let the aborted ones be dropped.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log.iter().map(|(name, how)| format!("{name}:{how}")).collect::<Vec<_>>(),
        [
            "before_all:dropped",
            "first:dropped",
            "drained:dropped",
            "cancelled:told",
            "last:dropped"
        ]
    );
    // The drained task was given its 3 s, the cancelled one needed none of its 5.
    assert_eq!(started.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn a_main_tasks_end_is_the_agents() {
    let log = Log::default();
    let tasks = vec![
        forever("helper", &log),
        Task::new("main", async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok::<(), std::io::Error>(())
        })
        .main(),
    ];
    let mut tasks = Tasks::spawn(tasks);
    assert_eq!(tasks.main_tasks().iter().map(|(name, _)| *name).collect::<Vec<_>>(), ["main"]);
    assert!(tasks.main_ended().await.is_ok());
    tasks.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_helper_that_ends_well_is_forgotten_and_one_that_fails_ends_the_agent() {
    let tasks = vec![
        Task::new("done", async { Ok::<(), std::io::Error>(()) }),
        Task::new("fails", async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Err(failure())
        }),
        Task::new("main", std::future::pending::<Result<(), std::io::Error>>()).main(),
    ];
    let mut tasks = Tasks::spawn(tasks);
    let ended = tasks.main_ended().await;
    assert!(matches!(&ended, Err(Error::Failed(e)) if e.to_string() == "scripted"), "{ended:?}");
    tasks.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_panic_names_its_task() {
    let tasks = vec![Task::infallible("panics", async { panic!("scripted") })];
    let mut tasks = Tasks::spawn(tasks);
    match tasks.main_ended().await {
        Err(Error::Panicked { task, source }) => {
            assert_eq!(task, "panics");
            assert!(source.is_panic());
        }
        other => panic!("expected the task's panic, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn join_waits_for_the_named_task_and_stop_skips_it() {
    let log = Log::default();
    let tasks = vec![
        Task::new("pod_workers", async {
            tokio::time::sleep(Duration::from_secs(7)).await;
            Ok::<(), std::io::Error>(())
        })
        .main()
        .stop(Stop::Drain(Duration::from_secs(10))),
        forever("after", &log),
    ];
    let mut tasks = Tasks::spawn(tasks);
    let started = tokio::time::Instant::now();
    assert!(tasks.join("pod_workers").await.is_ok());
    assert_eq!(started.elapsed(), Duration::from_secs(7));
    assert!(tasks.join("unknown").await.is_ok());
    tasks.stop().await;
    assert_eq!(started.elapsed(), Duration::from_secs(7), "a joined task is not waited for again");
}

#[tokio::test(start_paused = true)]
async fn a_drained_task_past_its_limit_is_aborted() {
    let log = Log::default();
    let tasks =
        Tasks::spawn(vec![forever("stuck", &log).stop(Stop::Drain(Duration::from_secs(10)))]);
    let started = tokio::time::Instant::now();
    tasks.stop().await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(started.elapsed(), Duration::from_secs(10));
    assert_eq!(log.lock().unwrap().as_slice(), [("stuck", "dropped")]);
}
