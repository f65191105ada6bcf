//! Acceptance (SEMANTICS.md D6): a real node-exporter (Debian's, in the test image
//! `cargo xtask images` packs) run as its Helm chart runs it: `hostNetwork`, `hostPID`,
//! the host's `/proc` and `/sys`, and `/` at `/host/root` with `mountPropagation:
//! HostToContainer` and `--path.rootfs=/host/root`, as nobody with a read-only root
//! filesystem. A tmpfs the host mounts after the pod started is in its
//! `node_filesystem_size_bytes`, scraped from its `/metrics` on a free loopback port.
//!
//! `HostToContainer` needs the host's `/` to be a shared mount (systemd mounts it so); on
//! a machine where it is private the test makes it shared for its duration
//! (`propagation::RootShared`, which waits for the other tests that make mounts or run
//! containers, and holds new ones back meanwhile). The tmpfs is unmounted when the test
//! ends, also when it fails.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use outpost_tests::containerd::{NODE_EXPORTER_IMAGE, NODE_EXPORTER_OCI};
use outpost_tests::needs;
use outpost_tests::pods::{Node, eventually, wait_pod};
use outpost_tests::propagation::RootShared;
use outpost_tests::workload::{
    Workload, delete_and_wait, free_ports, import, is_running, status_of, text,
};

const LONG: Duration = Duration::from_secs(60);

/// The chart's DaemonSet pod, as a static pod listening on `port` of the loopback.
fn node_exporter(port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: node-exporter
spec:
  hostNetwork: true
  hostPID: true
  securityContext:
    runAsNonRoot: true
    runAsUser: 65534
    runAsGroup: 65534
    fsGroup: 65534
  containers:
  - name: node-exporter
    image: {NODE_EXPORTER_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - --path.procfs=/host/proc
    - --path.sysfs=/host/sys
    - --path.rootfs=/host/root
    - --web.listen-address=127.0.0.1:{port}
    securityContext:
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
    volumeMounts:
    - name: proc
      mountPath: /host/proc
      readOnly: true
    - name: sys
      mountPath: /host/sys
      readOnly: true
    - name: root
      mountPath: /host/root
      mountPropagation: HostToContainer
      readOnly: true
  volumes:
  - name: proc
    hostPath:
      path: /proc
  - name: sys
    hostPath:
      path: /sys
  - name: root
    hostPath:
      path: /
"#
    )
}

/// A tmpfs of `size` mounted by the host at `dir` (made here), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "outpost-d6-exporter"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "mount a tmpfs on {}: {}", dir.display(), text(&out));
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).output();
    }
}

/// `GET /metrics` from 127.0.0.1:`port`: the body, or `None` while nothing answers.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| body.to_owned())
}

/// The value of `node_filesystem_size_bytes` for `mountpoint`, in a scrape.
fn filesystem_size(metrics: &str, mountpoint: &Path) -> Option<f64> {
    let label = format!("mountpoint=\"{}\"", mountpoint.display());
    metrics
        .lines()
        .filter(|line| line.starts_with("node_filesystem_size_bytes{") && line.contains(&label))
        .find_map(|line| line.rsplit(' ').next()?.parse().ok())
}

/// D6's acceptance: node-exporter, as its chart runs it, sees a filesystem the host
/// mounted after the pod started (`HostToContainer`: `/host/root` is a slave of `/`).
#[needs(pods, node_exporter)]
#[test]
fn d6_node_exporter_reports_a_filesystem_the_host_mounted_after_it_started() {
    let _root = RootShared::new();
    let node = Node::new();
    import(&node, NODE_EXPORTER_OCI);
    let w = Workload::start(&node);
    let [port] = free_ports::<1>();
    node.put("node-exporter.yaml", &node_exporter(port));
    wait_pod(&w.agent, "node-exporter-edge-1", LONG, |p| is_running(status_of(p, "node-exporter")));
    eventually("node-exporter serves /metrics", LONG, || scrape(port).is_some());
    let first = scrape(port).unwrap_or_default();
    assert!(first.contains("node_filesystem_size_bytes{"), "its filesystems: {first}");

    // After the start, on the host.
    let dir = node.path("exporter-tmpfs");
    let tmpfs = Tmpfs::mount(&dir, "3m");
    eventually("node-exporter reports the new tmpfs", LONG, || {
        scrape(port).and_then(|m| filesystem_size(&m, &dir)) == Some(f64::from(3u32 << 20))
    });
    drop(tmpfs);
    eventually("node-exporter no longer reports it", LONG, || {
        scrape(port).is_some_and(|m| filesystem_size(&m, &dir).is_none())
    });

    delete_and_wait(&node, &w.agent, &[("node-exporter.yaml", "node-exporter-edge-1")]);
}
