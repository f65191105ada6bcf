//! Container logs: containerd's shim runs `outpost-container-log container-log` (or, where
//! that is not installed, `outpost container-log`) from the `binary://` log URI and it
//! writes CRI files that `outpost logs` reads; `outpost logs` on hand-written files for its
//! options and errors.

use outpost_tests::needs;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use outpost::runtime::logs::{container_log_path, logger_uri};
use outpost_tests::containerd::{
    BUSYBOX_IMAGE, BUSYBOX_OCI, CtrCgroupParent, test_containerd, test_image,
};
use outpost_tests::{container_log_bin, outpost_bin};

/// A namespace of its own: the image tests replace and delete images in theirs.
const NAMESPACE: &str = "outpost-test-logs";
/// Only to detect a hang.
const PATIENCE: Duration = Duration::from_secs(60);

fn ctr(socket: &Path, args: &[&str]) -> Output {
    Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["-n", NAMESPACE])
        .args(args)
        .output()
        .expect("cannot run ctr")
}

fn ctr_ok(socket: &Path, args: &[&str]) -> String {
    let out = ctr(socket, args);
    assert!(out.status.success(), "ctr {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The test containerd with the busybox image imported (once per test process).
fn containerd() -> PathBuf {
    let socket = test_containerd();
    let tarball = test_image(BUSYBOX_OCI);
    static IMPORTED: OnceLock<()> = OnceLock::new();
    IMPORTED.get_or_init(|| {
        ctr_ok(&socket, &["images", "import", tarball.to_str().unwrap()]);
    });
    socket
}

fn container_id(test: &str) -> String {
    format!("logs-{test}-{}", std::process::id())
}

/// `root/default_<pod>_uid-1/main/0.log`.
fn log_path(root: &Path, pod: &str) -> PathBuf {
    container_log_path(root, "default", pod, "uid-1", "main", 0)
}

/// Runs `script` in a container logging through `logger` to `log`, to its end
/// (`ctr run --rm`: the task is deleted before ctr returns).
fn run_logged(socket: &Path, id: &str, logger: &Path, log: &Path, script: &str) {
    let _cgroups = CtrCgroupParent(NAMESPACE);
    let uri = logger_uri(logger, log).unwrap();
    let args = ["run", "--rm", "--log-uri", &uri, BUSYBOX_IMAGE, id, "sh", "-c", script];
    ctr_ok(socket, &args);
}

/// The records of a CRI file as (stream, tag, content), each timestamp checked.
fn records(path: &Path) -> Vec<(String, String, String)> {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    text.lines()
        .map(|line| {
            let mut fields = line.splitn(4, ' ');
            let time = fields.next().unwrap();
            time.parse::<jiff::Timestamp>().unwrap_or_else(|e| panic!("{line}: {e}"));
            let mut next = || fields.next().unwrap_or_else(|| panic!("{line}")).to_owned();
            (next(), next(), next())
        })
        .collect()
}

fn record(stream: &str, tag: &str, content: &str) -> (String, String, String) {
    (stream.into(), tag.into(), content.into())
}

fn outpost_logs(root: &Path, args: &[&str]) -> Output {
    Command::new(outpost_bin())
        .arg("logs")
        .args(args)
        .arg("--pod-log-dir")
        .arg(root)
        .output()
        .unwrap()
}

fn logs_ok(root: &Path, args: &[&str]) -> String {
    let out = outpost_logs(root, args);
    assert!(
        out.status.success(),
        "outpost logs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[needs(containerd)]
#[test]
fn stdout_and_stderr_land_as_cri_records_and_read_back() {
    // The small logger, and the agent's own subcommand where that is not installed.
    for (logger, pod) in [(container_log_bin(), "streams"), (outpost_bin(), "streams-agent")] {
        stdout_and_stderr_land_as_cri_records_and_read_back_with(&logger, pod);
    }
}

fn stdout_and_stderr_land_as_cri_records_and_read_back_with(logger: &Path, pod: &str) {
    let socket = containerd();
    let root = tempfile::tempdir().unwrap();
    let log = log_path(root.path(), pod);
    let script = "echo out one; echo err one >&2; echo out two; printf 'last words'";
    run_logged(&socket, &container_id(pod), logger, &log, script);

    let all = records(&log);
    let stdout: Vec<_> = all.iter().filter(|r| r.0 == "stdout").cloned().collect();
    let stderr: Vec<_> = all.iter().filter(|r| r.0 == "stderr").cloned().collect();
    assert_eq!(
        stdout,
        [
            record("stdout", "F", "out one"),
            record("stdout", "F", "out two"),
            record("stdout", "P", "last words")
        ]
    );
    assert_eq!(stderr, [record("stderr", "F", "err one")]);

    let printed = logs_ok(root.path(), &[&format!("default/{pod}")]);
    assert!(
        printed.ends_with("last words"),
        "the last line is kept, without a newline: {printed:?}"
    );
    let mut lines: Vec<&str> = printed.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["err one", "last words", "out one", "out two"]);
}

#[needs(containerd)]
#[test]
fn a_long_line_is_split_into_partial_records_and_joined_back() {
    let socket = containerd();
    let root = tempfile::tempdir().unwrap();
    let log = log_path(root.path(), "long");
    let script = "head -c 40960 /dev/zero | tr '\\0' x; echo; echo short";
    run_logged(&socket, &container_id("long"), &container_log_bin(), &log, script);

    let all = records(&log);
    let shape: Vec<(&str, usize)> = all.iter().map(|r| (r.1.as_str(), r.2.len())).collect();
    assert_eq!(shape, [("P", 16384), ("P", 16384), ("F", 8192), ("F", 5)]);
    let printed = logs_ok(root.path(), &["default/long"]);
    assert_eq!(printed, format!("{}\nshort\n", "x".repeat(40960)));
}

/// Whether a logger process runs for `log`.
fn logger_running(log: &Path) -> bool {
    outpost_leaks::processes().iter().any(|p| p.args.iter().any(|a| Path::new(a) == log))
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

#[needs(containerd)]
#[test]
fn the_logger_outlives_the_process_that_started_the_container() {
    let socket = containerd();
    let root = tempfile::tempdir().unwrap();
    let log = log_path(root.path(), "detached");
    let id = container_id("detached");
    let go = root.path().join("go");
    let uri = logger_uri(&container_log_bin(), &log).unwrap();
    // The container waits for `go` (mounted in), so all it prints comes after ctr is gone.
    let mount = format!("type=bind,src={},dst=/signal,options=rbind:rw", root.path().display());
    let script = "echo started; while [ ! -e /signal/go ]; do sleep 0.05; done; \
                  i=0; while [ $i -lt 100 ]; do echo line $i; i=$((i+1)); done; printf end";
    let args =
        ["run", "-d", "--mount", &mount, "--log-uri", &uri, BUSYBOX_IMAGE, &id, "sh", "-c", script];
    let _cgroups = CtrCgroupParent(NAMESPACE);
    ctr_ok(&socket, &args);
    wait_for("the first line", || fs::read_to_string(&log).is_ok_and(|t| t.contains("started")));
    fs::write(&go, "").unwrap();
    wait_for("the container to exit", || {
        ctr_ok(&socket, &["task", "ls"])
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("STOPPED"))
    });
    assert!(logger_running(&log), "the logger ended before the task was deleted");
    ctr_ok(&socket, &["task", "rm", &id]);
    ctr_ok(&socket, &["container", "rm", &id]);
    wait_for("the logger to exit", || !logger_running(&log));

    let printed = logs_ok(root.path(), &["default/detached"]);
    let expected: String = (0..100).map(|i| format!("line {i}\n")).collect();
    assert_eq!(printed, format!("started\n{expected}end"));
}

#[needs(containerd)]
#[test]
fn the_log_rotates_at_its_size_limit() {
    let socket = containerd();
    let root = tempfile::tempdir().unwrap();
    let log = log_path(root.path(), "rotating");
    // The shim passes `container-log PATH`; a wrapper adds limits small enough to test.
    let wrapper = root.path().join("logger.sh");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} \"$1\" --max-size 20000 --max-files 3 \"$2\"\n",
            container_log_bin().display()
        ),
    )
    .unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    let script = "i=0; while [ $i -lt 2000 ]; do echo \"line $i with some padding to fill the file\"; i=$((i+1)); done";
    run_logged(&socket, &container_id("rotating"), &wrapper, &log, script);

    let dir = log.parent().unwrap();
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[0], "0.log");
    assert!(names[1..].iter().all(|n| n.starts_with("0.log.2")), "{names:?}");
    // Oldest rotated file first, the live one last: consecutive lines up to the last one.
    let mut contents = Vec::new();
    for name in names[1..].iter().chain([&names[0]]) {
        let path = dir.join(name);
        assert!(fs::metadata(&path).unwrap().len() <= 20000, "{name} is too big");
        contents.extend(records(&path).into_iter().map(|r| r.2));
    }
    let first: usize = contents[0].split(' ').nth(1).unwrap().parse().unwrap();
    let expected: Vec<String> =
        (first..2000).map(|i| format!("line {i} with some padding to fill the file")).collect();
    assert_eq!(contents, expected);
    assert!(first > 0, "nothing was rotated away");
}

/// Writes a CRI file of `records` (stream, tag, content) at `path`, timestamps in order.
fn write_records(path: &Path, records: &[(&str, &str, &str)]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut file = fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
    for (stream, tag, content) in records {
        let time = jiff::Timestamp::now();
        writeln!(file, "{time} {stream} {tag} {content}").unwrap();
    }
}

fn pod_dir(root: &Path, pod: &str, uid: &str) -> PathBuf {
    root.join(format!("default_{pod}_{uid}"))
}

#[test]
fn logs_options_select_the_container_run_and_lines() {
    let root = tempfile::tempdir().unwrap();
    let pod = pod_dir(root.path(), "web", "u1");
    write_records(&pod.join("app/0.log"), &[("stdout", "F", "first run")]);
    write_records(
        &pod.join("app/1.log"),
        &[
            ("stdout", "F", "a"),
            ("stderr", "P", "b1 "),
            ("stdout", "F", "c"),
            ("stderr", "F", "b2"),
        ],
    );
    write_records(&pod.join("sidecar/0.log"), &[("stdout", "F", "side")]);

    assert_eq!(logs_ok(root.path(), &["default/web", "-c", "app"]), "a\nc\nb1 b2\n");
    assert_eq!(logs_ok(root.path(), &["web", "-c", "sidecar"]), "side\n");
    assert_eq!(logs_ok(root.path(), &["default/web", "-c", "app", "--tail", "2"]), "c\nb1 b2\n");
    assert_eq!(logs_ok(root.path(), &["default/web", "-c", "app", "--tail", "0"]), "");
    assert_eq!(logs_ok(root.path(), &["default/web", "-c", "app", "--previous"]), "first run\n");

    let stamped =
        logs_ok(root.path(), &["default/web", "-c", "app", "--timestamps", "--tail", "1"]);
    let (time, rest) = stamped.split_once(' ').unwrap();
    time.parse::<jiff::Timestamp>().unwrap();
    assert_eq!(rest, "b1 b2\n");
}

#[test]
fn logs_errors_name_what_exists() {
    let root = tempfile::tempdir().unwrap();
    let pod = pod_dir(root.path(), "web", "u1");
    write_records(&pod.join("app/0.log"), &[("stdout", "F", "x")]);
    write_records(&pod.join("sidecar/0.log"), &[("stdout", "F", "y")]);
    write_records(&pod_dir(root.path(), "db", "u2").join("pg/0.log"), &[("stdout", "F", "z")]);

    let stderr = |args: &[&str]| {
        let out = outpost_logs(root.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let err = stderr(&["default/cache"]);
    assert!(err.contains("no logs for pod default/cache"), "{err}");
    assert!(err.contains("pods with logs in namespace default: db, web"), "{err}");
    let err = stderr(&["default/web"]);
    assert!(err.contains("several containers; choose one with -c: app, sidecar"), "{err}");
    let err = stderr(&["default/web", "-c", "nginx"]);
    assert!(
        err.contains(
            "container \"nginx\" not found in pod default/web; its containers: app, sidecar"
        ),
        "{err}"
    );
    let err = stderr(&["default/db", "--previous"]);
    assert!(err.contains("previous terminated container pg of pod default/db not found"), "{err}");
}

/// `outpost logs -f` with its stdout lines arriving on a channel.
fn follow(root: &Path, args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = Command::new(outpost_bin())
        .args(["logs", "-f"])
        .args(args)
        .arg("--pod-log-dir")
        .arg(root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

fn next_line(rx: &Receiver<String>) -> String {
    rx.recv_timeout(PATIENCE).expect("no line from outpost logs -f")
}

#[test]
fn follow_picks_up_appends_rotations_and_restarts() {
    let root = tempfile::tempdir().unwrap();
    let dir = pod_dir(root.path(), "web", "u1").join("app");
    write_records(&dir.join("0.log"), &[("stdout", "F", "old"), ("stdout", "F", "before")]);
    let (mut child, rx) = follow(root.path(), &["default/web", "--tail", "1"]);
    assert_eq!(next_line(&rx), "before");

    write_records(&dir.join("0.log"), &[("stdout", "P", "appe"), ("stdout", "F", "nded")]);
    assert_eq!(next_line(&rx), "appended");

    // Rotation as the logger does it: rename, then a new live file.
    fs::rename(dir.join("0.log"), dir.join("0.log.20260101-000000")).unwrap();
    write_records(&dir.join("0.log"), &[("stderr", "F", "after rotation")]);
    assert_eq!(next_line(&rx), "after rotation");

    write_records(&dir.join("1.log"), &[("stdout", "F", "restarted")]);
    assert_eq!(next_line(&rx), "restarted");
    write_records(&dir.join("1.log"), &[("stdout", "F", "and going")]);
    assert_eq!(next_line(&rx), "and going");

    child.kill().unwrap();
    child.wait().unwrap();
}
