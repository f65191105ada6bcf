//! The chaos rig: one agent with everything of its own — a managed containerd (data on a
//! small tmpfs state dir, so the disk can be filled), a bridge network, a cgroup root,
//! the test API server — and the means to hurt it: `kill -9` of the agent or its
//! containerd, a cut API server, a full state dir, an offline reboot.
//!
//! The agent joins as a real node does (J1, J2): over TLS, with a bootstrap token, its
//! client certificate from the cluster's signer. It lasts [`CERTIFICATE_LIFETIME`], so
//! it is renewed every minute or so under the churn, and a cut of a minute outlives it.
//! (The local API stays plain HTTP, which the rig's checks read: no serving
//! certificate.)

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use outpost_tests::agent::Agent;
use outpost_tests::apiserver::TestApiServer;
use outpost_tests::containerd::{BUSYBOX_OCI, find_image};
use outpost_tests::faketime::FakeClock;
use outpost_tests::pods::CNI_BIN_DIR;

/// `kill -9` of a process (the agent's containerd, a shim).
pub use outpost_leaks::kill;

/// The containerd namespace of the rig's agent.
pub const NAMESPACE: &str = "outpost-chaos";
/// The node the agent registers (its pods' `spec.nodeName`).
pub const NODE: &str = "edge-1";
/// The state dir's tmpfs: room for the test image, its snapshots and the pods.
const STATE_SIZE: &str = "192m";
/// How long the signer's certificates last.
pub const CERTIFICATE_LIFETIME: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Rig {
    pub rt: tokio::runtime::Runtime,
    pub server: TestApiServer,
    pub dir: tempfile::TempDir,
    /// The kubeconfig with the bootstrap token the agent joins with.
    bootstrap_kubeconfig: PathBuf,
    pub cgroup_root: String,
    pub bridge: String,
    pub agent: Option<Agent>,
    /// The agent's `--shim-grouping`, when given.
    shim_grouping: Option<String>,
    /// The agent's wall clock (libfaketime's; `+0` but in the clock-jump trials).
    pub clock: FakeClock,
}

impl Rig {
    pub fn new(shim_grouping: Option<String>) -> anyhow::Result<Rig> {
        ensure!(outpost_tests::is_root(), "chaos needs root (pods, mounts, cgroups)");
        ensure!(
            Path::new(CNI_BIN_DIR).join("bridge").is_file(),
            "chaos needs the CNI plugins in {CNI_BIN_DIR}"
        );
        let image =
            find_image(BUSYBOX_OCI).map_err(|what| anyhow::anyhow!("chaos needs {what}"))?;
        ensure!(
            outpost_tests::faketime::library().is_some(),
            "chaos needs libfaketime (the faketime package: cargo xtask deps)"
        );
        let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
        let server = TestApiServer::builder().tls().signing_duration(CERTIFICATE_LIFETIME);
        let server = rt.block_on(server.start()).context("test API server")?;
        let token = server.create_bootstrap_token(None).context("a bootstrap token")?;
        let dir = tempfile::Builder::new().prefix("opn-chaos").tempdir_in("/tmp")?;
        let pid = std::process::id();
        let bootstrap_kubeconfig = server.kubeconfig_for_user(
            dir.path(),
            "bootstrap-kubeconfig",
            serde_json::json!({ "token": token }),
        )?;
        let rig = Rig {
            clock: FakeClock::new(dir.path(), "+0"),
            bootstrap_kubeconfig,
            rt,
            server,
            cgroup_root: format!("/outpost-chaos-{pid}"),
            bridge: format!("otbc{}", pid % 100_000),
            agent: None,
            shim_grouping,
            dir,
        };
        for sub in ["manifests", "state", "run", "logs", "cni", "images"] {
            std::fs::create_dir_all(rig.path(sub))?;
        }
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={STATE_SIZE},mode=0700"), "tmpfs"])
            .arg(rig.path("state")))?;
        std::fs::copy(&image, rig.path("images").join(BUSYBOX_OCI))?;
        std::fs::write(rig.path("cni/10-chaos.conflist"), rig.conflist())?;
        Ok(rig)
    }

    pub fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    fn conflist(&self) -> String {
        serde_json::json!({
            "cniVersion": "1.0.0",
            "name": format!("net-{}", self.bridge),
            "plugins": [{
                "type": "bridge",
                "bridge": self.bridge,
                "isGateway": true,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{ "subnet": format!("10.{}.{}.0/24", 234 + std::process::id() % 10, std::process::id() % 250) }]],
                    "dataDir": self.path("state/ipam"),
                }
            }]
        })
        .to_string()
    }

    /// Starts the agent (debug logs: the faults wait for its phases).
    pub fn start(&mut self) -> anyhow::Result<()> {
        ensure!(self.agent.is_none(), "the agent already runs");
        let mut args: Vec<OsString> = Vec::new();
        let mut arg = |flag: &str, value: &Path| {
            args.push(flag.into());
            args.push(value.into());
        };
        arg("--containerd", Path::new("managed"));
        arg("--containerd-namespace", Path::new(NAMESPACE));
        arg("--state-dir", &self.path("state"));
        arg("--root-dir", &self.path("kubelet"));
        arg("--run-dir", &self.path("run"));
        arg("--pod-log-dir", &self.path("logs"));
        arg("--cni-conf-dir", &self.path("cni"));
        arg("--cni-bin-dir", Path::new(CNI_BIN_DIR));
        arg("--images-dir", &self.path("images"));
        arg("--kubeconfig", &self.path("state/kubeconfig"));
        arg("--bootstrap-kubeconfig", &self.bootstrap_kubeconfig);
        arg("--cgroup-root", Path::new(&self.cgroup_root));
        // No disk thresholds (this machine's disk may be fuller than kubelet's defaults
        // allow) and no image GC: the image cannot be pulled again here.
        arg("--eviction-hard", Path::new("memory.available<100Mi"));
        arg("--image-gc-high-threshold", Path::new("100"));
        if let Some(grouping) = &self.shim_grouping {
            args.extend(["--shim-grouping".into(), grouping.into()]);
        }
        let mut command = self.clock.command(&outpost_tests::outpost_bin());
        command.env("OUTPOST_LOG", "info,outpost=debug");
        let agent = Agent::start_pods_with(command, &self.path("manifests"), &args);
        self.agent = Some(agent);
        Ok(())
    }

    pub fn agent(&self) -> anyhow::Result<&Agent> {
        self.agent.as_ref().context("the agent is not running")
    }

    /// `kill -9` of the agent.
    pub fn kill_agent(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.signal("KILL");
            drop(agent);
        }
    }

    /// Waits up to `timeout` for a line of the agent's log, after the first `skip` lines,
    /// containing `needle`; returns how many lines it has logged.
    pub fn wait_for_log(&self, needle: &str, skip: usize, timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let agent = self.agent.as_ref()?;
            let log = agent.log();
            let lines: Vec<&str> = log.lines().collect();
            if lines.iter().skip(skip).any(|l| l.contains(needle)) {
                return Some(lines.len());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        None
    }

    pub fn log_lines(&self) -> usize {
        self.agent.as_ref().map_or(0, |a| a.log().lines().count())
    }

    /// The agent's `/pods`, by pod name.
    pub fn pods(&self) -> anyhow::Result<std::collections::BTreeMap<String, serde_json::Value>> {
        let (status, body) = self.agent()?.get("/pods");
        let list: serde_json::Value =
            serde_json::from_str(&body).with_context(|| format!("GET /pods: {status} {body}"))?;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        Ok(items
            .into_iter()
            .filter_map(|p| Some((p["metadata"]["name"].as_str()?.to_owned(), p)))
            .collect())
    }

    /// The managed containerd's socket.
    pub fn socket(&self) -> PathBuf {
        self.path("run/containerd/containerd.sock")
    }

    /// The managed containerd's pid (its pid file), if it runs.
    pub fn containerd_pid(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.path("run/containerd/containerd.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    }

    /// `ctr` against the managed containerd in the agent's namespace; stdout, or an error.
    pub fn ctr(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(self.socket())
            .args(["--namespace", NAMESPACE])
            .args(args)
            .output()
            .context("run ctr")?;
        if !out.status.success() {
            bail!("ctr {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Everything of the rig's on the machine (see `outpost_leaks`).
    pub fn scope(&self) -> outpost_leaks::Scope {
        outpost_leaks::Scope::agent(
            NAMESPACE,
            &self.cgroup_root,
            vec![self.dir.path().to_path_buf()],
            &self.bridge,
            self.socket(),
        )
    }

    /// What an offline reboot does: the agent, every shim and container and containerd
    /// die; the pods' namespace and tmpfs mounts go, the run dir is wiped (a tmpfs at
    /// boot). The state dir (a disk) stays. The API server is not touched here.
    pub fn reboot(&mut self) -> anyhow::Result<()> {
        self.kill_agent();
        let scope = self.scope();
        for leftover in scope.inventory() {
            if let outpost_leaks::Leftover::Process(pid, _) = leftover {
                kill(pid);
            }
        }
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            outpost_leaks::kill_members(
                &hierarchy.path().join(self.cgroup_root.trim_start_matches('/')),
            );
        }
        if let Some(pid) = self.containerd_pid() {
            kill(pid);
        }
        std::thread::sleep(Duration::from_millis(300));
        for target in outpost_leaks::mounts_under(&self.path("run")) {
            let _ = Command::new("umount").arg("--lazy").arg(target).output();
        }
        // A reboot loses the links and the bridge too, and runc's state of the dead
        // containers (its root is in `/run`, outside the rig's run dir).
        let _ = Command::new("ip").args(["link", "delete", &self.bridge]).output();
        forget_runc_state();
        std::fs::remove_dir_all(self.path("run")).context("wipe the run dir")?;
        std::fs::create_dir_all(self.path("run"))?;
        Ok(())
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.kill_agent();
        let left = outpost_leaks::clean(&self.scope());
        if let Some(pid) = self.containerd_pid() {
            kill(pid);
            std::thread::sleep(Duration::from_millis(300));
        }
        let left: Vec<_> = left.into_iter().chain(outpost_leaks::clean(&self.scope())).collect();
        let _ = Command::new("umount").arg("--lazy").arg(self.path("state")).output();
        // Its containers are all gone: runc's state of them goes too.
        forget_runc_state();
        if !left.is_empty() {
            eprintln!("chaos: could not remove {left:?}");
        }
    }
}

/// Removes runc's state of the rig's namespace (its root is in `/run`, which a reboot
/// wipes): call it once every container of the rig is dead.
fn forget_runc_state() {
    let _ = std::fs::remove_dir_all(Path::new(outpost_leaks::RUNC_ROOT).join(NAMESPACE));
}

fn run(command: &mut Command) -> anyhow::Result<()> {
    let out = command.output().with_context(|| format!("run {command:?}"))?;
    ensure!(out.status.success(), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}
