//! End to end: what a volume mount asks of kubelet beyond its volume, on a real
//! containerd. `subPathExpr` in the shape of kubernetes.io's example (each pod logs under
//! its own name in a hostPath): the directory is made with the volume's mode, and a
//! reference with no value fails the container as kubelet fails it. `recursiveReadOnly`:
//! a tmpfs the test mounts under a hostPath (and unmounts, also when it fails) is
//! read-only in the container only when the mount is recursively so.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::needs;
use outpost_tests::pods::{Node, eventually, wait_pod};
use outpost_tests::workload::{Workload, delete_and_wait, host_dir, is_running, status_of, text};

const LONG: Duration = Duration::from_secs(60);

/// kubernetes.io's `pod1`, with `subPathExpr` naming `variable` (`POD_NAME` there).
fn pod1(name: &str, variable: &str, logs: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: container1
    env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          apiVersion: v1
          fieldPath: metadata.name
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: [ "sh", "-c", "while [ true ]; do echo 'Hello'; sleep 10; done | tee -a /logs/hello.txt" ]
    volumeMounts:
    - name: workdir1
      mountPath: /logs
      # The variable expansion uses round brackets (not curly brackets).
      subPathExpr: $({variable})
  restartPolicy: Never
  volumes:
  - name: workdir1
    hostPath:
      path: {logs}
"#,
        logs = logs.display()
    )
}

/// A1: `subPathExpr` is expanded with the container's variables (the downward API's
/// `metadata.name` here): the container writes under the pod's own directory of the
/// hostPath, which the agent made with the volume's mode. A name with no value fails
/// the container with kubelet's `CreateContainerConfigError` and its words.
#[needs(pods)]
#[test]
fn a1_subpathexpr_mounts_the_pods_own_directory_of_a_host_path() {
    let node = Node::new();
    let logs = host_dir(&node, "logs");
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o751)).unwrap();
    let w = Workload::start(&node);

    node.put("pod1.yaml", &pod1("pod1", "POD_NAME", &logs));
    let name = "pod1-edge-1";
    wait_pod(&w.agent, name, LONG, |p| is_running(status_of(p, "container1")));
    let hello = logs.join(name).join("hello.txt");
    eventually("the container logs under the pod's name", LONG, || {
        std::fs::read_to_string(&hello).is_ok_and(|text| text.starts_with("Hello\n"))
    });
    let mode = std::fs::metadata(logs.join(name)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o751, "the sub path has the volume's mode");

    node.put("pod2.yaml", &pod1("pod2", "NODE_NAME", &logs));
    let failed = wait_pod(&w.agent, "pod2-edge-1", LONG, |p| {
        status_of(p, "container1")["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    });
    let message = status_of(&failed, "container1")["state"]["waiting"]["message"].to_string();
    assert!(message.contains("missing value for NODE_NAME"), "kubelet's words: {message}");
    assert!(!logs.join("$(NODE_NAME)").exists() && !logs.join("pod2-edge-1").exists());

    delete_and_wait(&node, &w.agent, &[("pod1.yaml", name), ("pod2.yaml", "pod2-edge-1")]);
}

/// A tmpfs the test mounts at a directory, unmounted when the test ends.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("create the mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "outpost-rro"])
            .arg(dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount a tmpfs at {}: {status}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Two containers mount the same hostPath read-only, one recursively.
fn readers(data: &Path) -> String {
    let container = |name: &str, mode: &str| {
        format!(
            r#"  - name: {name}
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    volumeMounts:
    - name: data
      mountPath: /data
      readOnly: true
      recursiveReadOnly: {mode}
"#
        )
    };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: readers
spec:
  containers:
{}{}  volumes:
  - name: data
    hostPath:
      path: {}
      type: Directory
"#,
        container("enabled", "Enabled"),
        container("disabled", "Disabled"),
        data.display()
    )
}

/// A1: `recursiveReadOnly: Enabled` is a recursively read-only mount (runc's `rro`):
/// a tmpfs the host has mounted under the hostPath cannot be written in the container,
/// while under a plain read-only mount (`Disabled`) it can; the volume's own directory
/// is read-only in both.
#[needs(pods)]
#[test]
fn a1_recursive_read_only_makes_a_submount_read_only() {
    let node = Node::new();
    let data = host_dir(&node, "data");
    let _sub = Tmpfs::mount(&data.join("sub"));
    let w = Workload::start(&node);

    node.put("readers.yaml", &readers(&data));
    let name = "readers-edge-1";
    wait_pod(&w.agent, name, LONG, |p| {
        is_running(status_of(p, "enabled")) && is_running(status_of(p, "disabled"))
    });
    let pod = format!("default/{name}");
    let touch = |container: &str, file: &str| w.exec(&pod, Some(container), &["touch", file]);
    for container in ["enabled", "disabled"] {
        let top = touch(container, "/data/top");
        assert!(!top.status.success(), "{container}: the volume is read-only: {}", text(&top));
    }
    let recursive = touch("enabled", "/data/sub/enabled");
    assert!(!recursive.status.success(), "the submount is read-only: {}", text(&recursive));
    assert!(text(&recursive).contains("Read-only file system"), "{}", text(&recursive));
    let plain = touch("disabled", "/data/sub/disabled");
    assert!(plain.status.success(), "a plain read-only bind leaves it writable: {}", text(&plain));
    assert!(data.join("sub/disabled").exists() && !data.join("sub/enabled").exists());

    delete_and_wait(&node, &w.agent, &[("readers.yaml", name)]);
}
