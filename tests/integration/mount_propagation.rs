//! End to end: mount propagation (SEMANTICS.md D6), as node-exporter's chart and CSI node
//! plugins use it. A hostPath on a shared host mount, mounted `HostToContainer`, shows
//! in the running container what the host mounts under it after the container started;
//! one on a private host mount fails the container with containerd's words. The agent
//! makes its state directory a shared mount, so a privileged container's `Bidirectional`
//! emptyDir shows on the host what the container mounts in it, until the pod goes. The
//! host mounts are tmpfs the test makes and unmounts, also when it fails. (node-exporter
//! itself: `node_exporter.rs`.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::needs;
use outpost_tests::pods::{Node, eventually, pod, wait_pod};
use outpost_tests::propagation::is_shared;
use outpost_tests::workload::{Workload, delete_and_wait, host_dir, is_running, status_of, text};

const LONG: Duration = Duration::from_secs(60);

/// The host mounts a test made, unmounted (the last first) when it ends.
#[derive(Default)]
struct Mounts(Vec<PathBuf>);

impl Mounts {
    /// A 1 MiB tmpfs at `dir`, then `mount --make-<propagation>` of it.
    fn tmpfs(&mut self, dir: &Path, propagation: &str) {
        run(&["-t", "tmpfs", "-o", "size=1m", "outpost-d6"], dir);
        self.0.push(dir.to_path_buf());
        run(&[&format!("--make-{propagation}")], dir);
    }
}

impl Drop for Mounts {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            let _ = Command::new("umount").arg(dir).status();
        }
    }
}

fn run(args: &[&str], dir: &Path) {
    let status = Command::new("mount").args(args).arg(dir).status().expect("run mount");
    assert!(status.success(), "mount {args:?} {}: {status}", dir.display());
}

fn watcher(name: &str, source: &Path) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: watcher
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["/bin/sh", "-c", "sleep 3600"]
    volumeMounts:
    - name: host
      mountPath: /host
      readOnly: true
      mountPropagation: HostToContainer
  volumes:
  - name: host
    hostPath:
      path: {source}
      type: Directory
"#,
        source = source.display()
    )
}

/// D6: `HostToContainer` is `rslave`: a tmpfs the host mounts under the shared source
/// after the container started, and a file on it, are seen in the container; on a
/// private source the container is not created (`CreateContainerError`, containerd's
/// message), and the pod's other rules are untouched.
#[needs(pods)]
#[test]
fn d6_a_host_mount_made_after_the_start_shows_in_a_host_to_container_volume() {
    let node = Node::new();
    let shared = host_dir(&node, "shared");
    let private = host_dir(&node, "private");
    let mut mounts = Mounts::default();
    mounts.tmpfs(&shared, "shared");
    mounts.tmpfs(&private, "private");
    let w = Workload::start(&node);

    node.put("watcher.yaml", &watcher("watcher", &shared));
    let name = "watcher-edge-1";
    wait_pod(&w.agent, name, LONG, |p| is_running(status_of(p, "watcher")));
    // After the start, on the host: a new mount under the source, and a file on it.
    let sub = shared.join("sub");
    std::fs::create_dir(&sub).expect("mkdir under the shared source");
    mounts.tmpfs(&sub, "shared");
    std::fs::write(sub.join("marker"), "mounted after the start\n").expect("write the marker");
    let pod_name = format!("default/{name}");
    eventually("the container sees the host's new mount", LONG, || {
        let out = w.exec(&pod_name, None, &["cat", "/host/sub/marker"]);
        out.status.success() && out.stdout == b"mounted after the start\n"
    });
    let out = w.exec(&pod_name, None, &["grep", " /host/sub ", "/proc/self/mountinfo"]);
    assert!(out.status.success(), "the new tmpfs is a mount in the container: {}", text(&out));

    node.put("private.yaml", &watcher("private", &private));
    let refused = wait_pod(&w.agent, "private-edge-1", LONG, |p| {
        status_of(p, "watcher")["state"]["waiting"]["reason"] == "CreateContainerError"
    });
    let message = status_of(&refused, "watcher")["state"]["waiting"]["message"].to_string();
    let words = format!(
        "path {} is mounted on {} but it is not a shared or slave mount",
        private.display(),
        private.display()
    );
    assert!(message.contains(&words), "containerd's words, naming the mount: {message}");

    node.remove("watcher.yaml");
    node.remove("private.yaml");
    for gone in ["watcher-edge-1", "private-edge-1"] {
        eventually("the pod is gone", LONG, || pod(&w.agent, gone).is_none());
    }
    eventually("containerd has no container left", LONG, || node.containers().is_empty());
}

/// A privileged pod (a CSI node plugin's shape) whose container mounts a tmpfs in its
/// emptyDir, mounted `Bidirectional`, and writes a file there.
const PLUGIN: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: plugin
spec:
  containers:
  - name: plugin
    image: outpost.test/busybox:latest
    imagePullPolicy: IfNotPresent
    securityContext:
      privileged: true
    command:
    - /bin/sh
    - -c
    - mkdir -p /plugin/sub && /bin/busybox mount -t tmpfs -o size=1m outpost-d6 /plugin/sub && echo made inside > /plugin/sub/marker && exec sleep 3600
    volumeMounts:
    - name: plugin-dir
      mountPath: /plugin
      mountPropagation: Bidirectional
  volumes:
  - name: plugin-dir
    emptyDir: {}
"#;

/// The mount points at or under `dir` in this process's mountinfo.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|point| point.starts_with(dir))
        .collect()
}

/// D6: the agent makes its state directory a shared mount at start (bound on itself:
/// this machine's `/` is private), as kubelet its root directory, so a privileged
/// container's `Bidirectional` emptyDir propagates: the tmpfs the container mounts in it
/// is a mount on the host under the pod's volume directory, with the file written
/// there; when the pod goes, the agent unmounts it with the pod's directory.
#[needs(pods)]
#[test]
fn d6_a_bidirectional_empty_dir_mount_shows_on_the_host_until_the_pod_goes() {
    let node = Node::new();
    let state = node.path("state").canonicalize().unwrap();
    let w = Workload::start(&node);
    assert_eq!(is_shared(&state), Some(true), "the state directory is a shared mount");
    assert_eq!(PLUGIN.matches(BUSYBOX_IMAGE).count(), 1);

    node.put("plugin.yaml", PLUGIN);
    let running = wait_pod(&w.agent, "plugin-edge-1", LONG, |p| is_running(status_of(p, "plugin")));
    let uid = running["metadata"]["uid"].as_str().unwrap().to_owned();
    let pod_dir = state.join("pods").join(&uid);
    let sub = pod_dir.join("volumes/kubernetes.io~empty-dir/plugin-dir/sub");
    eventually("the container's tmpfs is a mount on the host", LONG, || {
        mounts_under(&pod_dir).contains(&sub)
    });
    // The container mounts, then writes: the file may come a moment after the mount.
    eventually("the file written inside is on the host's copy of the mount", LONG, || {
        std::fs::read_to_string(sub.join("marker")).is_ok_and(|text| text == "made inside\n")
    });

    delete_and_wait(&node, &w.agent, &[("plugin.yaml", "plugin-edge-1")]);
    assert_eq!(mounts_under(&pod_dir), Vec::<PathBuf>::new(), "no mount left of the pod");
    assert!(!pod_dir.exists(), "the pod's directory is gone");
}
