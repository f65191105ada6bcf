//! A node for end-to-end tests that run real pods: the test containerd (its own
//! containerd namespace per node, so parallel tests never see each other's containers),
//! the busybox test image imported there, and private state, run, log and CNI dirs with a
//! bridge network of its own. Dropping it removes whatever the test left in containerd,
//! the mounts and the bridge.

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::agent::Agent;
use crate::containerd::{BUSYBOX_OCI, find_containerd, find_image};
use crate::{is_root, missing, outpost_bin};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Where the Debian package puts the CNI plugins.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// A test node's containerd, dirs and network.
#[derive(Debug)]
pub struct Node {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub namespace: String,
    pub bridge: String,
    /// The pod subnet, e.g. `10.214.7.0/24`.
    pub subnet: String,
    /// The node's `--cgroup-root` (`/outpost-test-<pid>-<n>`): its kubepods is its own,
    /// and dropping the node removes it.
    pub cgroup_root: String,
    /// Its pods make host mounts (D6: not while another test has `/` shared).
    _mounts: crate::propagation::MountUser,
}

impl Node {
    /// A node; panics (see [`missing`]) without root, the test containerd, the test
    /// image or the CNI plugins. Tests using it carry `outpost_has_pods`.
    #[allow(clippy::new_without_default, reason = "it sets up real resources, not a default value")]
    pub fn new() -> Node {
        Node::try_new().unwrap_or_else(|what| missing(&what))
    }

    /// [`Node::new`], or what is missing (for the benchmarks, which report it and go on).
    pub fn try_new() -> Result<Node, String> {
        if !is_root() {
            return Err("root (pods need namespaces, mounts and cgroups)".into());
        }
        let socket = find_containerd()?;
        let image = find_image(BUSYBOX_OCI)?;
        if !Path::new(CNI_BIN_DIR).join("bridge").is_file() {
            return Err("the CNI plugins in /usr/lib/cni (containernetworking-plugins)".into());
        }
        let mounts = crate::propagation::MountUser::new();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let dir = tempfile::Builder::new().prefix("opn").tempdir_in("/tmp").expect("temp dir");
        for sub in ["manifests", "state", "run", "logs", "cni"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("node dirs");
        }
        let node = Node {
            socket,
            namespace: format!("outpost-test-{pid}-{n}"),
            bridge: format!("otb{}x{n}", pid % 100_000),
            subnet: format!("10.{}.{}.0/24", 214 + (pid % 20), n % 250),
            cgroup_root: format!("/outpost-test-{pid}-{n}"),
            dir,
            _mounts: mounts,
        };
        node.write_cni(&node.bridge_conflist());
        let out = Command::new(outpost_bin())
            .args(["images", "import", "--containerd-socket"])
            .arg(&node.socket)
            .args(["--containerd-namespace", &node.namespace])
            .arg(&image)
            .output()
            .expect("run outpost images import");
        assert!(out.status.success(), "importing the test image: {}", text(&out));
        Ok(node)
    }

    pub fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    pub fn manifests(&self) -> PathBuf {
        self.path("manifests")
    }

    /// The `run` arguments that point the agent at this node.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::new();
        let mut arg = |flag: &str, value: &Path| {
            args.push(flag.into());
            args.push(value.into());
        };
        arg("--containerd", Path::new("external"));
        arg("--containerd-socket", &self.socket);
        arg("--containerd-namespace", Path::new(&self.namespace));
        arg("--state-dir", &self.path("state"));
        arg("--root-dir", &self.path("kubelet"));
        arg("--run-dir", &self.path("run"));
        arg("--pod-log-dir", &self.path("logs"));
        arg("--cni-conf-dir", &self.path("cni"));
        arg("--cni-bin-dir", Path::new(CNI_BIN_DIR));
        // Only kubelet's memory threshold: the disk ones (imagefs.available<15%,
        // nodefs.available<10%) would evict the tests' API pods on a machine whose disk
        // is that full. The eviction tests set their own thresholds after these.
        arg("--eviction-hard", Path::new("memory.available<100Mi"));
        arg("--cgroup-root", Path::new(&self.cgroup_root));
        args
    }

    /// The node's pods cgroup (`<cgroup-root>/kubepods`), below a hierarchy's root.
    pub fn kubepods(&self) -> String {
        format!("{}/kubepods", self.cgroup_root)
    }

    /// Where pod `uid`'s cgroup may be, below a hierarchy's root (each QoS class).
    pub fn pod_cgroups(&self, uid: &str) -> [String; 3] {
        let pods = self.kubepods();
        [
            format!("{pods}/pod{uid}"),
            format!("{pods}/burstable/pod{uid}"),
            format!("{pods}/besteffort/pod{uid}"),
        ]
    }

    /// `outpost run` on this node.
    pub fn start(&self) -> Agent {
        Agent::start_pods(&self.manifests(), &self.args())
    }

    /// `outpost run` on this node with `token` in its `--token-file` (written private);
    /// the agent and the file's path.
    pub fn start_with_token(&self, token: &str) -> (Agent, PathBuf) {
        let file = self.path("token");
        crate::write_private(&file, format!("{token}\n"));
        let mut args = self.args();
        args.extend(["--token-file".into(), file.clone().into_os_string()]);
        (Agent::start_pods(&self.manifests(), &args), file)
    }

    /// Puts the static pod `name`, one busybox container `main` running `sh -c script`
    /// (`extra_spec`: more lines of its spec, such as `  restartPolicy: Never\n`), and
    /// waits for `agent` to run it.
    pub fn run_script_pod(&self, agent: &Agent, name: &str, extra_spec: &str, script: &str) {
        let script = serde_json::to_string(script).expect("a script is a string");
        self.put(
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{extra_spec}  containers:\n  - name: main\n    image: {}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n",
                crate::containerd::BUSYBOX_IMAGE
            ),
        );
        wait_pod(agent, &format!("{name}-edge-1"), Duration::from_secs(60), |p| {
            container(p)["state"]["running"].is_object()
        });
    }

    /// The bridge network this node's pods get: its own bridge, subnet and IPAM dir.
    pub fn bridge_conflist(&self) -> String {
        serde_json::json!({
            "cniVersion": "1.0.0",
            "name": format!("net-{}", self.bridge),
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": true,
                    "ipMasq": false,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{ "subnet": self.subnet }]],
                        "dataDir": self.path("state/ipam"),
                    }
                },
                { "type": "portmap", "capabilities": { "portMappings": true } }
            ]
        })
        .to_string()
    }

    /// Replaces the node's CNI config.
    pub fn write_cni(&self, conflist: &str) {
        write_atomically(&self.path("cni/10-test.conflist"), conflist);
    }

    /// Writes `manifests/<file>` atomically (as editors and config tools do).
    pub fn put(&self, file: &str, yaml: &str) {
        write_atomically(&self.manifests().join(file), yaml);
    }

    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.manifests().join(file)).expect("remove manifest");
    }

    /// `ctr` against the test containerd, in this node's namespace; its stdout.
    pub fn ctr(&self, args: &[&str]) -> String {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", &self.namespace])
            .args(args)
            .output()
            .expect("run ctr");
        assert!(out.status.success(), "ctr {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// IDs of the containers in this node's namespace.
    pub fn containers(&self) -> Vec<String> {
        self.ctr(&["containers", "list", "--quiet"]).lines().map(str::to_owned).collect()
    }

    /// `(container ID, status)` of the tasks in this node's namespace.
    pub fn tasks(&self) -> Vec<(String, String)> {
        self.ctr(&["tasks", "list"])
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some((f.first()?.to_string(), f.get(2)?.to_string()))
            })
            .collect()
    }

    /// What a reboot does to the node, the agent being stopped: every task is killed and
    /// deleted (the containers stay, as containerd keeps them), everything mounted under
    /// the node's directory is unmounted (the pods' namespaces and shm, tmpfs volumes),
    /// and the run dir (on the tmpfs `/run`) is gone.
    pub fn reboot(&self) {
        for (id, _) in self.tasks() {
            let _ = self.ctr_quiet(&["tasks", "kill", "--all", "--signal", "SIGKILL", &id]);
        }
        eventually("every task stopped", Duration::from_secs(30), || {
            self.tasks().iter().all(|(_, status)| status == "STOPPED")
        });
        for (id, _) in self.tasks() {
            self.ctr(&["tasks", "delete", "--force", &id]);
        }
        for target in outpost_leaks::mounts_under(self.dir.path()) {
            let out = Command::new("umount").arg(&target).output().expect("run umount");
            assert!(out.status.success(), "umount {}: {}", target.display(), text(&out));
        }
        let run = self.path("run");
        if run.exists() {
            std::fs::remove_dir_all(&run).expect("remove the run dir");
        }
    }

    fn ctr_quiet(&self, args: &[&str]) -> std::io::Result<Output> {
        Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", &self.namespace])
            .args(args)
            .output()
    }

    /// What is left on the host for the pod `uid`: run dir, pod dir, CNI cache, IPAM
    /// allocations, cgroups (empty when the pod is fully removed).
    pub fn leftovers(&self, uid: &str) -> Vec<String> {
        let mut left = Vec::new();
        for p in [self.path("run/pods").join(uid), self.path("state/pods").join(uid)] {
            if p.exists() {
                left.push(p.display().to_string());
            }
        }
        for dir in
            [self.path("state/cni/results"), self.path(&format!("state/ipam/net-{}", self.bridge))]
        {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let allocation = name.parse::<std::net::IpAddr>().is_ok();
                let contents = std::fs::read_to_string(entry.path()).unwrap_or_default();
                if name.contains(uid) || (allocation && contents.contains(uid)) {
                    left.push(entry.path().display().to_string());
                }
            }
        }
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            let legacy = format!("/outpost/pod{uid}");
            for cgroup in self.pod_cgroups(uid).iter().chain([&legacy]) {
                let p = hierarchy.path().join(cgroup.trim_start_matches('/'));
                if p.exists() {
                    left.push(p.display().to_string());
                }
            }
        }
        left
    }
}

impl Node {
    /// The node loggers of this node's agents (`outpost-container-log node`, under its
    /// run dir): pid and command line.
    pub fn node_loggers(&self) -> Vec<(u32, Vec<String>)> {
        let state = self.path("run/logger");
        outpost_leaks::processes()
            .into_iter()
            .filter(|p| {
                p.args.get(1).is_some_and(|a| a == "node" || a == "container-log-node")
                    && p.args.iter().any(|a| Path::new(a) == state)
            })
            .map(|p| (p.pid, p.args))
            .collect()
    }

    /// Everything of this node's on the machine: its containerd namespace, cgroup root,
    /// directory (mounts, helper processes) and bridge.
    pub fn scope(&self) -> outpost_leaks::Scope {
        outpost_leaks::Scope::agent(
            &self.namespace,
            &self.cgroup_root,
            vec![self.dir.path().to_path_buf()],
            &self.bridge,
            self.socket.clone(),
        )
    }
}

/// Whatever a test left, also after a panic: shims, helpers (loggers, pod-init),
/// containers, tasks, leases, active snapshots, mounts, the bridge and its veths, CNI
/// state, the cgroup root; then the node's images and containerd namespace, and the
/// namespace's runc root (empty by then: the shim makes one per namespace and never
/// removes it).
impl Drop for Node {
    fn drop(&mut self) {
        report_orphaned_shims(&self.scope());
        let left = outpost_leaks::clean(&self.scope());
        if !left.is_empty() {
            eprintln!("test node {}: cannot remove {left:?}", self.namespace);
        }
        let ctr = |args: &[&str]| {
            Command::new("ctr")
                .arg("--address")
                .arg(&self.socket)
                .args(["--namespace", &self.namespace])
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        // Every image: the busybox one, and any a test imported as well.
        for image in ctr(&["images", "list", "--quiet"]).lines() {
            ctr(&["images", "remove", "--sync", image]);
        }
        let _ = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["namespaces", "remove", &self.namespace])
            .output();
        let _ = std::fs::remove_dir(Path::new(outpost_leaks::RUNC_ROOT).join(&self.namespace));
    }
}

/// Names, on stderr, the shims left with no process to serve (no container process nor
/// logger is their child): a leak of the agent's (or of containerd's), which the node's
/// drop then removes. (A shim serves a group of containers: the container its command
/// line names may be gone while it serves the others.)
fn report_orphaned_shims(scope: &outpost_leaks::Scope) {
    use outpost_leaks::Leftover;
    let processes = outpost_leaks::processes();
    for leftover in scope.inventory() {
        let Leftover::Process(pid, cmdline) = leftover else { continue };
        if !cmdline.contains("containerd-shim") || processes.iter().any(|p| p.ppid == pid) {
            continue;
        }
        let test = std::thread::current().name().unwrap_or("?").to_owned();
        eprintln!("orphaned shim: test {test}: shim {pid} serves no process: {cmdline}");
    }
}

/// The pod named `name` (static pods: `<name>-edge-1`) from the agent's `/pods`.
pub fn pod(agent: &Agent, name: &str) -> Option<serde_json::Value> {
    let (status, body) = agent.get("/pods");
    assert_eq!(status, 200, "GET /pods: {body}");
    let list: serde_json::Value = serde_json::from_str(&body).expect("/pods is JSON");
    list["items"].as_array()?.iter().find(|p| p["metadata"]["name"] == name).cloned()
}

/// Polls `/pods` until the pod `name` satisfies `done` (within `timeout`); returns it.
pub fn wait_pod(
    agent: &Agent,
    name: &str,
    timeout: Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    loop {
        let found = pod(agent, name);
        if let Some(p) = &found
            && done(p)
        {
            return p.clone();
        }
        assert!(
            Instant::now() < deadline,
            "pod {name} never got there; last seen: {}",
            serde_json::to_string_pretty(&found).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `check` until it is true (within `timeout`), panicking with `what` otherwise.
pub fn eventually(what: &str, timeout: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first container status of a pod.
pub fn container(pod: &serde_json::Value) -> &serde_json::Value {
    &pod["status"]["containerStatuses"][0]
}

fn write_atomically(path: &Path, text: &str) {
    // A dotfile: the file source ignores those, as kubelet does.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).expect("write temp file");
    std::fs::rename(&tmp, path).expect("rename into place");
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
