use std::os::unix::fs::MetadataExt;

use k8s_openapi::api::core::v1::Container;

use super::*;

fn container(policy: Option<&str>) -> Container {
    Container {
        name: "app".to_owned(),
        termination_message_policy: policy.map(str::to_owned),
        ..Container::default()
    }
}

/// A log directory whose latest run (`0.log`) has `lines` on stdout, in CRI format.
fn log_dir(root: &Path, lines: &[String]) -> PathBuf {
    let dir = root.join("logs/app");
    fs::create_dir_all(&dir).unwrap();
    let text: String = lines
        .iter()
        .map(|line| format!("2024-05-01T10:00:00.000000000Z stdout F {line}\n"))
        .collect();
    fs::write(dir.join("0.log"), text).unwrap();
    dir
}

fn message_of(
    container: &Container,
    exit_code: i32,
    file: &Path,
    log_dir: &Path,
) -> Option<String> {
    message(&Exited { container, exit_code, file, log_dir, pod: "default/web" })
}

#[test]
fn create_makes_an_empty_file_anyone_can_write() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("containers/app/c1");
    create(&file).unwrap();
    let metadata = fs::metadata(&file).unwrap();
    assert_eq!(metadata.len(), 0);
    assert_eq!(metadata.mode() & 0o777, 0o666);
    fs::write(&file, "left over").unwrap();
    create(&file).unwrap();
    assert_eq!(fs::metadata(&file).unwrap().len(), 0, "a new instance starts empty");
}

#[test]
fn the_file_gives_its_last_4096_bytes() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("c1");
    let logs = log_dir(root.path(), &["from the log".to_owned()]);
    fs::write(&file, "done: 42 rows").unwrap();
    let policy_file = container(None);
    assert_eq!(message_of(&policy_file, 0, &file, &logs).as_deref(), Some("done: 42 rows"));

    let long = format!("{}{}", "a".repeat(100), "b".repeat(4096));
    fs::write(&file, &long).unwrap();
    assert_eq!(message_of(&policy_file, 1, &file, &logs).unwrap(), "b".repeat(4096));

    // The file wins over the logs even after a failure.
    let fallback = container(Some("FallbackToLogsOnError"));
    fs::write(&file, "bad config").unwrap();
    assert_eq!(message_of(&fallback, 1, &file, &logs).as_deref(), Some("bad config"));
}

#[test]
fn nothing_without_a_message() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("c1");
    fs::write(&file, "").unwrap();
    let logs = log_dir(root.path(), &["from the log".to_owned()]);
    assert_eq!(message_of(&container(None), 1, &file, &logs), None, "File: no fallback");
    assert_eq!(message_of(&container(Some("File")), 1, &root.path().join("gone"), &logs), None);
    let fallback = container(Some("FallbackToLogsOnError"));
    assert_eq!(message_of(&fallback, 0, &file, &logs), None, "exit 0: no fallback");
}

#[test]
fn fallback_to_logs_on_error_reads_the_last_80_lines_up_to_2048_bytes() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("c1");
    fs::write(&file, "").unwrap();
    let fallback = container(Some("FallbackToLogsOnError"));

    let lines: Vec<String> = (1..=100).map(|n| format!("line {n}")).collect();
    let logs = log_dir(root.path(), &lines);
    let expected: String = (21..=100).map(|n| format!("line {n}\n")).collect();
    assert_eq!(message_of(&fallback, 2, &file, &logs).unwrap(), expected);

    let long: Vec<String> = (0..3).map(|n| format!("{n}{}", "x".repeat(999))).collect();
    let logs = log_dir(root.path(), &long);
    let message = message_of(&fallback, 2, &file, &logs).unwrap();
    assert_eq!(message.len(), 2048);
    assert!(message.ends_with(&format!("2{}\n", "x".repeat(999))));

    // A missing file falls back too; a missing log is kubelet's error text.
    let missing = root.path().join("gone");
    assert!(message_of(&fallback, 2, &missing, &logs).is_some());
    let message = message_of(&fallback, 2, &missing, &root.path().join("no-logs")).unwrap();
    assert!(message.starts_with("Error on reading termination message from logs: "), "{message}");
}

/// The kernel reports a container's exit before its logger has drained the pipes: the
/// fallback waits for the logger (the live file's lock) and so reads the last lines too.
#[test]
fn fallback_waits_for_the_logger_to_write_the_last_lines() {
    use std::io::Write as _;
    let root = tempfile::tempdir().unwrap();
    let fallback = container(Some("FallbackToLogsOnError"));
    let file = root.path().join("message");
    create(&file).unwrap();
    let logs = log_dir(root.path(), &["starting".to_owned()]);
    // The logger: holds the live file's lock and writes its last record a moment later.
    let mut live = OpenOptions::new().append(true).open(logs.join("0.log")).unwrap();
    live.lock().unwrap();
    let logger = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        live.write_all(b"2024-05-01T10:00:00.000000000Z stderr F config invalid: port\n").unwrap();
    });
    let message = message_of(&fallback, 3, &file, &logs).unwrap();
    assert_eq!(message, "starting\nconfig invalid: port\n");
    logger.join().unwrap();
}
