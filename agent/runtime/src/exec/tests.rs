use std::io::{Read, Write};
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::fifo::{self, Collected, Output};
use super::*;

const SPEC: &str = r#"{
  "ociVersion": "1.1.0",
  "process": {
    "terminal": false,
    "user": {"uid": 1000, "gid": 1001, "additionalGids": [2000]},
    "args": ["nginx", "-g", "daemon off;"],
    "env": ["PATH=/usr/bin:/bin", "HOSTNAME=web"],
    "cwd": "/srv",
    "capabilities": {"bounding": ["CAP_NET_BIND_SERVICE"], "effective": ["CAP_NET_BIND_SERVICE"], "permitted": ["CAP_NET_BIND_SERVICE"]},
    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
    "noNewPrivileges": true,
    "apparmorProfile": "cri-containerd.apparmor.d",
    "selinuxLabel": "system_u:system_r:container_t:s0",
    "oomScoreAdj": 999
  },
  "root": {"path": "rootfs"},
  "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}
}"#;

/// The exec process made from a whole spec, as an exec without a kept process makes it.
fn exec_from_spec(
    spec: &[u8],
    command: &[String],
    tty: bool,
) -> Result<Vec<u8>, serde_json::Error> {
    exec_process(init_process(spec)?, command, tty)
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

#[test]
fn the_exec_process_is_the_containers_with_other_arguments() {
    let value = exec_from_spec(SPEC.as_bytes(), &args(&["cat", "/etc/hostname"]), false).unwrap();
    let process: serde_json::Value = serde_json::from_slice(&value).unwrap();
    let mut expected: serde_json::Value = serde_json::from_str(SPEC).unwrap();
    let expected = expected["process"].take();
    for key in [
        "user",
        "env",
        "cwd",
        "capabilities",
        "rlimits",
        "noNewPrivileges",
        "apparmorProfile",
        "selinuxLabel",
        "oomScoreAdj",
    ] {
        assert_eq!(process[key], expected[key], "{key}");
    }
    assert_eq!(process["args"], serde_json::json!(["cat", "/etc/hostname"]));
    assert_eq!(process["terminal"], false);
}

#[test]
fn a_tty_exec_gets_a_terminal_and_term() {
    let value = exec_from_spec(SPEC.as_bytes(), &args(&["sh"]), true).unwrap();
    let process: serde_json::Value = serde_json::from_slice(&value).unwrap();
    assert_eq!(process["terminal"], true);
    assert_eq!(
        process["env"],
        serde_json::json!(["PATH=/usr/bin:/bin", "HOSTNAME=web", "TERM=xterm"])
    );

    // The container's own TERM stays.
    let own = SPEC.replace("\"HOSTNAME=web\"", "\"TERM=vt100\"");
    let value = exec_from_spec(own.as_bytes(), &args(&["sh"]), true).unwrap();
    let process: serde_json::Value = serde_json::from_slice(&value).unwrap();
    assert_eq!(process["env"], serde_json::json!(["PATH=/usr/bin:/bin", "TERM=vt100"]));
}

#[test]
fn a_spec_without_a_process_is_an_error() {
    let error = exec_from_spec(br#"{"ociVersion": "1.1.0"}"#, &args(&["true"]), false).unwrap_err();
    assert!(error.to_string().contains("no process"), "{error}");
    assert!(exec_from_spec(b"", &args(&["true"]), false).is_err());
}

#[test]
fn errors_name_the_container_and_what_to_do() {
    let error = Error::NotRunning { id: "web-1".into(), state: "its task has exited" };
    assert_eq!(
        error.to_string(),
        "container web-1: its task has exited: a command can only run in a running container \
         (wait for it to run again)"
    );
    let error = Error::Fifo {
        id: "web-1".into(),
        path: "/run/outpost/exec/exec-1/output".into(),
        source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    };
    let text = outpost_core::error_chain::describe(&error);
    assert!(
        text.starts_with(
            "container web-1: cannot make or open the exec FIFO /run/outpost/exec/exec-1/output"
        ),
        "{text}"
    );
}

/// The shim's blocking open of `path` (write-only or read-only): it must return at once,
/// the agent's ends being open (a thread, so that a hang fails the test).
fn shim_opens(path: &std::path::Path, write: bool) -> std::fs::File {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::OpenOptions::new().read(!write).write(write).open(path));
    });
    rx.recv_timeout(Duration::from_secs(5)).expect("the shim's blocking open blocked").unwrap()
}

/// The shim copying `data` to an output FIFO and closing its end.
fn shim_writes(path: &std::path::Path, data: Vec<u8>) -> std::thread::JoinHandle<()> {
    let mut file = shim_opens(path, true);
    std::thread::spawn(move || file.write_all(&data).unwrap())
}

async fn read_all(receiver: &mut Receiver) -> Collected {
    let mut collected = Collected::default();
    tokio::time::timeout(Duration::from_secs(5), collected.read_to_end(receiver, MAX_OUTPUT))
        .await
        .expect("the output's end did not come")
        .unwrap();
    collected
}

#[tokio::test]
async fn output_ends_when_the_shims_writer_closes() {
    let dir = tempfile::tempdir().unwrap();
    let output = Output::make(dir.path().join("output")).unwrap();
    let mut shim = shim_opens(output.path(), true);
    // Connected (`Tasks.Start` returned) while the command still runs.
    let mut receiver = output.connected().unwrap();
    shim.write_all(b"hello\n").unwrap();
    let mut collected = Collected::default();
    let early = tokio::time::timeout(
        Duration::from_millis(100),
        collected.read_to_end(&mut receiver, MAX_OUTPUT),
    )
    .await;
    assert!(early.is_err(), "the output ended while the shim's writer was open: {early:?}");
    shim.write_all(b"world\n").unwrap();
    drop(shim);
    tokio::time::timeout(Duration::from_secs(5), collected.read_to_end(&mut receiver, MAX_OUTPUT))
        .await
        .expect("the output's end did not come")
        .unwrap();
    assert_eq!(collected.bytes, b"hello\nworld\n");
}

#[tokio::test]
async fn output_that_ended_before_it_was_connected_still_ends() {
    // The command exited before `Tasks.Start` returned: the shim's writer came and went.
    // The reader sees what was written and the end (no hang).
    let dir = tempfile::tempdir().unwrap();
    let output = Output::make(dir.path().join("output")).unwrap();
    shim_writes(output.path(), b"quick\n".to_vec()).join().unwrap();
    let mut receiver = output.connected().unwrap();
    assert_eq!(read_all(&mut receiver).await.bytes, b"quick\n");

    // And with no output at all: nothing wakes the reader but the writers' going away.
    let output = Output::make(dir.path().join("silent")).unwrap();
    shim_writes(output.path(), Vec::new()).join().unwrap();
    let mut receiver = output.connected().unwrap();
    assert_eq!(read_all(&mut receiver).await.bytes, b"");
}

#[tokio::test]
async fn output_past_the_limit_is_read_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let output = Output::make(dir.path().join("output")).unwrap();
    // Far more than a pipe holds: the writer finishes only if everything is read.
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let writer = shim_writes(output.path(), data.clone());
    let mut receiver = output.connected().unwrap();
    let collected = read_all(&mut receiver).await;
    writer.join().unwrap();
    assert_eq!(collected.bytes, data[..MAX_OUTPUT]);
    assert_eq!(collected.total, data.len() as u64);
}

#[tokio::test]
async fn stdin_opens_the_shims_end_at_once_and_its_drop_is_eof() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stdin");
    let file = fifo::input(&path).unwrap();
    let mut shim = shim_opens(&path, false);
    let shim = std::thread::spawn(move || {
        let mut all = Vec::new();
        shim.read_to_end(&mut all).unwrap();
        all
    });
    let mut sender = fifo::sender(file).unwrap();
    sender.write_all(b"line 1\nline 2\n").await.unwrap();
    drop(sender);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !shim.is_finished() {
        assert!(std::time::Instant::now() < deadline, "no EOF after the sender's drop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(shim.join().unwrap(), b"line 1\nline 2\n");
}

#[test]
fn fifos_and_their_directory_are_private_and_removed() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("exec").join("exec-1");
    fifo::make_dir(&dir).unwrap();
    fifo::make(&dir.join("output")).unwrap();
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    let fifo = std::fs::metadata(dir.join("output")).unwrap();
    assert!(fifo.file_type().is_fifo());
    assert_eq!(fifo.permissions().mode() & 0o077, 0);
    fifo::remove_dir(&dir).unwrap();
    assert!(!dir.exists());
    fifo::remove_dir(&dir).unwrap();
}
