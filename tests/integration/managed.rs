//! `--containerd managed`: the agent's own containerd, started, supervised, restarted
//! after a crash, stopped, and a stale one from a killed agent replaced. Each test runs
//! a real containerd in its own short temporary directory (unix socket paths are short).

use outpost_tests::needs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use outpost::runtime::Containerd;
use outpost::runtime::managed::{self, Error, ManagedContainerd, Options};
use tempfile::TempDir;

/// The containerd binary; fails the test without root or containerd (the tests carry
/// `outpost_has_containerd_binary`).
fn containerd_binary() -> PathBuf {
    let binary = managed::find_binary();
    outpost_tests::prerequisite(
        outpost_tests::is_root() && binary.is_some(),
        "root and a containerd binary on PATH (Debian package containerd)",
    );
    binary.unwrap()
}

fn temp_options(binary: PathBuf) -> (TempDir, Options) {
    let tmp = tempfile::Builder::new().prefix("om").tempdir_in("/tmp").unwrap();
    let mut options = Options::new(binary, &tmp.path().join("s"));
    options.run_dir = tmp.path().join("r");
    (tmp, options)
}

async fn answers(socket: &Path) -> bool {
    Containerd::connect(socket).await.is_ok()
}

/// Waits (generously, to detect a hang only) until `ready` holds.
async fn eventually<F: Future<Output = bool>>(what: &str, mut ready: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !ready().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn proc_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn kill(signal: &str, pid: u32) {
    let status = Command::new("kill").arg(signal).arg(pid.to_string()).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

#[needs(containerd_binary)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_containerd_answers_is_restarted_after_a_crash_and_stops() {
    let binary = containerd_binary();
    let (_tmp, options) = temp_options(binary);
    let log = options.log.clone();
    let m = ManagedContainerd::start(options).await.unwrap();
    let socket = m.socket().to_owned();
    let version = Containerd::connect(&socket).await.unwrap().version().await.unwrap();
    assert!(!version.version.is_empty(), "{version:?}");

    let first = m.pid().unwrap();
    kill("-KILL", first);
    eventually("a restarted containerd", || {
        let pid = m.pid();
        let socket = socket.clone();
        async move { pid.is_some_and(|p| p != first) && answers(&socket).await }
    })
    .await;
    let second = m.pid().unwrap();
    assert!(!proc_exists(first), "the killed containerd was reaped");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("----- outpost: starting containerd -----").count(), 2, "{text}");

    m.stop().await.unwrap();
    assert!(!proc_exists(second), "containerd {second} still runs after stop");
    assert!(!socket.exists(), "{} is left after stop", socket.display());
}

#[needs(containerd_binary)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_containerd_left_by_a_killed_agent_is_replaced() {
    let binary = containerd_binary();
    let (_tmp, options) = temp_options(binary.clone());
    // A first run writes the config and directories.
    ManagedContainerd::start(options.clone()).await.unwrap().stop().await.unwrap();

    // What a SIGKILLed agent leaves: its containerd running on our config, its pid file.
    let mut stale = Command::new(&binary)
        .arg("--config")
        .arg(options.config())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::fs::write(options.pid_file(), format!("{}\n", stale.id())).unwrap();
    let socket = options.socket();
    eventually("the stale containerd to answer", || answers(&socket)).await;

    let m = ManagedContainerd::start(options).await.unwrap();
    let status = stale.try_wait().unwrap();
    assert!(status.is_some(), "the stale containerd {} still runs", stale.id());
    assert_ne!(m.pid(), Some(stale.id()));
    assert!(answers(m.socket()).await);
    m.stop().await.unwrap();
}

#[needs(containerd_binary)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_binary_is_a_clear_error() {
    let _ = containerd_binary();
    let (tmp, options) = temp_options("/nonexistent/containerd".into());
    let err = ManagedContainerd::start(options).await.unwrap_err();
    assert!(matches!(err, Error::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/containerd"), "{err}");

    // A binary that exits at once: the error quotes what it logged.
    let script = tmp.path().join("fails");
    std::fs::write(&script, "#!/bin/sh\necho 'failed to load config: boom' >&2\nexit 3\n").unwrap();
    Command::new("chmod").arg("+x").arg(&script).status().unwrap();
    let (_tmp2, options) = temp_options(script);
    let err = ManagedContainerd::start(options).await.unwrap_err().to_string();
    assert!(err.contains("exited during start") && err.contains("boom"), "{err}");
}
