//! The OCI runtime spec made by `outpost::runtime::spec` is accepted by the real runc
//! and gives the container what the pod asks: user, env, /etc/hosts, volumes, limits.
//!
//! Each test builds a bundle with a busybox-static rootfs, runs `runc run` with host
//! namespaces (none of the pod's) and a unique cgroup parent, and checks the output.

use outpost_tests::needs;
use outpost_tests::propagation::MountUser;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use oci_spec::image::ImageConfiguration;
use outpost::host::Kernel;
use outpost::runtime::spec::projection::{Object, Reference, Resolution, Resolved};
use outpost::runtime::spec::{
    ContainerFiles, Namespaces, NodeDns, PodContext, container_spec, host_capabilities, layout,
};
use outpost::runtime::termination;
use outpost::runtime::volumes;

const BUSYBOX: &str = "/bin/busybox";
const APPLETS: &[&str] = &["sh", "id", "cat", "echo", "touch", "grep", "sleep"];

/// Fails the test without root, runc or busybox-static (tests carry `outpost_has_runc`).
fn prerequisites() {
    let runc = Command::new("runc").arg("--version").output().is_ok_and(|o| o.status.success());
    outpost_tests::prerequisite(outpost_tests::is_root(), "root");
    outpost_tests::prerequisite(runc, "runc");
    outpost_tests::prerequisite(Path::new(BUSYBOX).is_file(), "busybox-static");
}

/// A bundle: `rootfs/` with busybox and a few applets, the pod's directory, runc's state.
struct Bundle {
    dir: tempfile::TempDir,
    id: String,
    cgroup_parent: String,
    /// It runs a container and mounts volumes (D6: not while another test has `/` shared).
    _mounts: MountUser,
}

impl Bundle {
    fn new(name: &str) -> Self {
        let mounts = MountUser::new();
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("rootfs/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(BUSYBOX, bin.join("busybox")).unwrap();
        for applet in APPLETS {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
        }
        let id = format!("outpost-spec-{name}-{}", std::process::id());
        Bundle { dir, cgroup_parent: format!("/outpost-test/{id}"), id, _mounts: mounts }
    }

    fn pod_dir(&self) -> PathBuf {
        self.dir.path().join("pod")
    }

    /// Prepares the pod's files, writes config.json for its first container, runs it.
    fn run(&self, pod: &Pod) -> Output {
        self.run_with(pod, &Resolved::default())
    }

    /// [`Bundle::run`] with the API objects the pod refers to.
    fn run_with(&self, pod: &Pod, resolved: &Resolved) -> Output {
        let ips: [IpAddr; 1] = ["10.88.0.5".parse().unwrap()];
        let resolv = self.dir.path().join("host-resolv.conf");
        std::fs::write(&resolv, "nameserver 192.0.2.53\n").unwrap();
        let dns = NodeDns { resolv_conf: Some(resolv), ..NodeDns::default() };
        volumes::prepare(&Kernel, &self.pod_dir(), pod, &ips, &dns, resolved).unwrap();
        let capabilities =
            host_capabilities(&std::fs::read_to_string("/proc/self/status").unwrap());
        let cgroups_path = format!("{}/{}", self.cgroup_parent, self.id);
        let ctx = PodContext {
            pod,
            node_name: "node1",
            pod_ips: &ips,
            host_ip: None,
            cluster_domain: "cluster.local",
            namespaces: Namespaces::default(),
            dev_shm: Path::new("/dev/shm"),
            pod_dir: &self.pod_dir(),
            cgroups_path: &cgroups_path,
            host_capabilities: &capabilities,
            apparmor_enabled: false,
            resolved,
            services: &outpost::runtime::spec::services::NO_SERVICES,
            claimed: &std::collections::BTreeMap::new(),
            host_mounts: &[],
            swap: outpost::runtime::spec::NodeSwap::default(),
            recursive_read_only: false,
        };
        let image: ImageConfiguration = serde_json::from_str(
            r#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{"Env":["PATH=/bin"],"Cmd":["sh"]}}"#,
        )
        .unwrap();
        let container = &pod.spec.as_ref().unwrap().containers[0];
        let spec =
            container_spec(&ctx, container, &image, &ContainerFiles::default(), &self.id).unwrap();
        let message_file =
            layout::termination_message_file(&self.pod_dir(), &container.name, &self.id);
        termination::create(&message_file).unwrap();
        spec.save(self.dir.path().join("config.json")).unwrap();
        Command::new("runc")
            .arg("--root")
            .arg(self.dir.path().join("runc"))
            .args(["run", "--bundle"])
            .arg(self.dir.path())
            .arg(&self.id)
            .output()
            .unwrap()
    }
}

impl Drop for Bundle {
    fn drop(&mut self) {
        let root = self.dir.path().join("runc");
        let _ = Command::new("runc")
            .arg("--root")
            .arg(&root)
            .args(["delete", "--force", &self.id])
            .output();
        // runc removes the container's cgroup; the parent is the test's own.
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            let parent = hierarchy.path().join(self.cgroup_parent.trim_start_matches('/'));
            let _ = std::fs::remove_dir(&parent);
            let _ = parent.parent().map(std::fs::remove_dir);
        }
        let _ = volumes::cleanup(&Kernel, &self.pod_dir());
    }
}

fn pod(yaml: &str) -> Pod {
    let mut pod: Pod = serde_saphyr::from_str(yaml).unwrap();
    pod.metadata.namespace = Some("default".to_owned());
    pod.metadata.uid = Some("uid-runc-test".to_owned());
    pod
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "runc failed: {:?}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[needs(runc)]
#[test]
fn runc_runs_the_spec_with_user_env_and_hosts() {
    prerequisites();
    let bundle = Bundle::new("plain");
    let pod = pod(r#"
metadata: {name: spec-test-node1}
spec:
  securityContext: {runAsUser: 1000, runAsGroup: 1001, supplementalGroups: [2000]}
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'id; cat /etc/hosts /etc/resolv.conf; echo "name=$POD_NAME greeting=$(GREETING)"']
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: GREETING, value: hello}
"#);
    let out = stdout(&bundle.run(&pod));
    assert!(out.contains("uid=1000 gid=1001 groups=2000"), "{out}");
    assert!(out.contains("# Kubernetes-managed hosts file.\n"), "{out}");
    assert!(out.contains("10.88.0.5\tspec-test-node1\n"), "{out}");
    assert!(out.contains("nameserver 192.0.2.53\n"), "{out}");
    assert!(out.contains("name=spec-test-node1 greeting=hello"), "{out}");
}

#[needs(runc)]
#[test]
fn runc_applies_memory_limit_read_only_root_and_volumes() {
    prerequisites();
    let bundle = Bundle::new("limits");
    let pod = pod(r#"
metadata: {name: spec-limits-node1}
spec:
  volumes:
  - {name: scratch, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
  containers:
  - name: app
    image: busybox
    command:
    - sh
    - -c
    - |
      cat /sys/fs/cgroup/memory/memory.limit_in_bytes
      touch /root-file 2>/dev/null && echo root-writable || echo root-read-only
      echo kept > /scratch/file && cat /scratch/file
      grep CapEff /proc/self/status
    resources: {limits: {memory: 32Mi, cpu: 500m}}
    securityContext: {readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
"#);
    let out = stdout(&bundle.run(&pod));
    assert!(out.contains(&format!("{}\n", 32 << 20)), "{out}");
    assert!(out.contains("root-read-only\n"), "{out}");
    assert!(out.contains("kept\n"), "{out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    let scratch = bundle.pod_dir().join(volumes::EMPTY_DIR).join("scratch/file");
    assert_eq!(std::fs::read_to_string(scratch).unwrap(), "kept\n");
}

#[needs(runc)]
#[test]
fn runc_runs_a_privileged_container() {
    prerequisites();
    let bundle = Bundle::new("privileged");
    let pod = pod(r#"
metadata: {name: spec-privileged-node1}
spec:
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'grep CapEff /proc/self/status; touch /sys/fs/cgroup/x 2>/dev/null; echo done']
    securityContext: {privileged: true}
"#);
    let out = stdout(&bundle.run(&pod));
    assert!(out.contains("done"), "{out}");
    assert!(!out.contains("CapEff:\t0000000000000000"), "{out}");
}

fn config_map(name: &str, key: &str, value: &str) -> Resolved {
    let data = [(key.to_owned(), value.to_owned())].into();
    let object = ConfigMap { data: Some(data), ..ConfigMap::default() };
    let found = Resolution::Found(Object::ConfigMap(Arc::new(object)));
    Resolved([(Reference::ConfigMap(name.to_owned()), found)].into())
}

/// Waits for `path` to exist: the container's sign that it got there.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[needs(runc)]
#[test]
fn v1_runc_sees_a_config_map_change_but_not_in_a_sub_path_mount() {
    prerequisites();
    let bundle = Bundle::new("configmap");
    let pod = pod(r#"
metadata: {name: spec-configmap-node1}
spec:
  volumes:
  - {name: cfg, configMap: {name: app}}
  - {name: sync, emptyDir: {}}
  containers:
  - name: app
    image: busybox
    command:
    - sh
    - -c
    - |
      echo "start $(cat /etc/app/mode) $(cat /etc/mode) $MODE"
      touch /sync/started
      while [ ! -e /sync/go ]; do sleep 0.05; done
      echo "later $(cat /etc/app/mode) $(cat /etc/mode)"
      touch /etc/app/x 2>/dev/null && echo volume-writable || echo volume-read-only
    env:
    - {name: MODE, valueFrom: {configMapKeyRef: {name: app, key: mode}}}
    volumeMounts:
    - {name: cfg, mountPath: /etc/app, readOnly: false}
    - {name: cfg, mountPath: /etc/mode, subPath: mode}
    - {name: sync, mountPath: /sync}
"#);
    let sync = bundle.pod_dir().join(volumes::EMPTY_DIR).join("sync");
    let output = std::thread::scope(|scope| {
        let run = scope.spawn(|| bundle.run_with(&pod, &config_map("app", "mode", "fast")));
        wait_for(&sync.join("started"));
        volumes::refresh(&Kernel, &bundle.pod_dir(), &pod, &config_map("app", "mode", "slow"))
            .unwrap();
        std::fs::write(sync.join("go"), "").unwrap();
        run.join().unwrap()
    });
    let out = stdout(&output);
    assert!(out.contains("start fast fast fast\n"), "{out}");
    assert!(out.contains("later slow fast\n"), "V1: updated in place, not in subPath: {out}");
    assert!(out.contains("volume-read-only\n"), "{out}");
}
