//! Podman beside Outpost: the side-by-side baseline of the benchmarks (B2, B5, B10),
//! Debian's podman 4.3 (CNI backend) doing the same work as an Outpost pod (an infra
//! container, the CNI ADD of podman's own network, the app container), and the reference
//! the CDI test compares a container's devices with (D3: [`Podman::run_once`]).
//!
//! Each [`Podman`] keeps its own storage, run and tmp directories (`--root`,
//! `--runroot`, `--tmpdir` under a benchmark's directory): the test image is loaded from
//! the same OCI tarball the tests import into containerd, without a network, and
//! whatever podman keeps on the machine is left as it was. Its network is podman's
//! default one (bridge `cni-podman0`, 10.88.0.0/16), as a user would get, made by podman
//! in memory: its CNI config directory is one of its own (`network_config_dir`), so
//! nothing of podman's is in `/etc/cni/net.d`, where an agent would take it for the pod
//! network (`cargo xtask deps` removes the package's `87-podman-bridge.conflist`).
//!
//! `podman kube play` cannot start a pod on these VMs: podman gives containers
//! `RLIMIT_NOFILE` 1048576 by default, above the hard limit here, and raising it needs
//! `CAP_SYS_RESOURCE`, which the VM withholds. `podman run` takes `--ulimit`, but
//! `podman pod create` (4.3) does not, and the infra container gets the same defaults:
//! so the benchmark's podman reads a `containers.conf` (`CONTAINERS_CONF`) that is the
//! distribution's with the same limits as `default_ulimits`.
//!
//! Dropping it removes every pod and container of its storage (and so their network
//! namespaces and CNI allocations), kills any conmon of its left, unmounts what is left
//! under its directory, and deletes the `cni-podman0` bridge and the `libpod_parent`
//! cgroups if they were not there before.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};

use crate::containerd::{BUSYBOX_IMAGE, BUSYBOX_OCI, find_image};

/// The limits podman is given for every container (`--ulimit`, `default_ulimits`).
const ULIMITS: [&str; 2] = ["nproc=4096:4096", "nofile=1024:1024"];
/// The distribution's `containers.conf`, the benchmark's copy is made from.
const SYSTEM_CONF: &str = "/usr/share/containers/containers.conf";
/// The bridge of podman's default network.
const BRIDGE: &str = "cni-podman0";
/// The cgroup podman (cgroupfs manager) puts its pods and containers under, in each
/// hierarchy.
const CGROUP_PARENT: &str = "libpod_parent";

/// A podman with storage of its own, and the busybox test image in it.
#[derive(Debug)]
pub struct Podman {
    dir: PathBuf,
    conf: PathBuf,
    /// Whether `cni-podman0` was there before this podman's first pod.
    bridge_existed: bool,
    /// The `libpod_parent` cgroups that were not there before (podman leaves them).
    new_cgroups: Vec<PathBuf>,
}

impl Podman {
    /// Sets up podman's directories under `dir` and loads the test image.
    pub fn new(dir: &Path) -> anyhow::Result<Podman> {
        let version = Command::new("podman").arg("--version").output();
        ensure!(
            version.is_ok_and(|out| out.status.success()),
            "podman is not installed (cargo xtask deps installs Debian's)"
        );
        let image =
            find_image(BUSYBOX_OCI).map_err(|what| anyhow::anyhow!("podman needs {what}"))?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let conf = dir.join("containers.conf");
        let system = std::fs::read_to_string(SYSTEM_CONF).unwrap_or_default();
        let cni = dir.join("cni");
        std::fs::create_dir_all(&cni)
            .with_context(|| format!("cannot create {}", cni.display()))?;
        std::fs::write(&conf, with_settings(&system, &cni))
            .with_context(|| format!("cannot write {}", conf.display()))?;
        let bridge_existed = Path::new("/sys/class/net").join(BRIDGE).exists();
        let new_cgroups = std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
            .map(|hierarchy| hierarchy.path().join(CGROUP_PARENT))
            .filter(|cgroup| !cgroup.exists())
            .collect();
        let podman = Podman { dir: dir.to_owned(), conf, bridge_existed, new_cgroups };
        let source = format!("oci-archive:{}", image.display());
        let id = podman.run(&["pull", "--quiet", &source])?;
        podman.run(&["tag", id.trim(), BUSYBOX_IMAGE])?;
        Ok(podman)
    }

    /// `podman ARGS` with this podman's storage and configuration, and runc: the OCI
    /// runtime Outpost uses by default (podman would take crun when it is installed, and
    /// crun cannot run containers on these hosts' hybrid cgroups).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("podman");
        command
            .args(["--runtime", "runc"])
            .arg("--root")
            .arg(self.dir.join("root"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .arg("--tmpdir")
            .arg(self.dir.join("tmp"))
            .args(args)
            .env("CONTAINERS_CONF", &self.conf)
            .stdin(Stdio::null());
        command
    }

    /// Runs `podman ARGS`; its stdout, or an error with its output.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out =
            self.command(args).output().with_context(|| format!("cannot run podman {args:?}"))?;
        ensure!(out.status.success(), "podman {args:?} failed: {}", text(&out));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// What a user does for one pod: `podman pod create`, then `podman run -d --pod` of
    /// the container, which runs `sh -c script` with `volumes` (`SRC:DST`) mounted.
    pub fn pod(&self, name: &str, volumes: &[&str], script: &str) -> anyhow::Result<()> {
        self.run(&["pod", "create", "--name", name])?;
        let container = format!("{name}-main");
        let mut args = vec!["run", "-d", "--pod", name, "--name", &container];
        for ulimit in ULIMITS {
            args.extend(["--ulimit", ulimit]);
        }
        for volume in volumes {
            args.extend(["--volume", volume]);
        }
        args.extend([BUSYBOX_IMAGE, "sh", "-c", script]);
        self.run(&args)?;
        Ok(())
    }

    /// `podman run --rm --network none ARGS IMAGE sh -c SCRIPT` with the busybox image (no
    /// pod, no network); the container's output.
    pub fn run_once(&self, args: &[&str], script: &str) -> anyhow::Result<String> {
        let mut all = vec!["run", "--rm", "--network", "none"];
        for ulimit in ULIMITS {
            all.extend(["--ulimit", ulimit]);
        }
        all.extend(args);
        all.extend([BUSYBOX_IMAGE, "sh", "-c", script]);
        self.run(&all)
    }

    /// Starts the pods `names` with `parallelism` of them under way at a time, as
    /// `xargs -P` would (each pod's two commands in order, [`Podman::pod`]); `script`
    /// gives a pod's command from its name. Returns once every command returned.
    pub fn pods(
        &self,
        names: &[String],
        parallelism: usize,
        volumes: &[&str],
        script: impl Fn(&str) -> String + Sync,
    ) -> anyhow::Result<()> {
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..parallelism.max(1))
                .map(|_| {
                    scope.spawn(|| -> anyhow::Result<()> {
                        while let Some(name) = names.get(next.fetch_add(1, Ordering::Relaxed)) {
                            self.pod(name, volumes, &script(name))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for worker in workers {
                match worker.join() {
                    Ok(result) => result?,
                    Err(_) => bail!("a podman worker thread panicked"),
                }
            }
            Ok(())
        })
    }

    /// Removes every pod and container (killed at once: `sleep` ignores SIGTERM); how
    /// long that took. Podman 4.3 leaves each pod's cgroup in the `systemd` and
    /// `unified` hierarchies of a hybrid cgroup setup (empty): those go too.
    pub fn remove_all(&self) -> anyhow::Result<Duration> {
        let pods = self.run(&["pod", "ps", "--quiet", "--no-trunc"])?;
        let start = Instant::now();
        self.run(&["pod", "rm", "--all", "--force", "--time", "0"])?;
        self.run(&["rm", "--all", "--force", "--time", "0"])?;
        let took = start.elapsed();
        for hierarchy in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            for pod in pods.lines() {
                outpost_leaks::remove_cgroup_tree(&hierarchy.path().join(CGROUP_PARENT).join(pod));
            }
        }
        Ok(took)
    }

    /// Names of the pods and containers left in this podman's storage.
    pub fn leftovers(&self) -> anyhow::Result<Vec<String>> {
        let pods = self.run(&["pod", "ps", "--quiet"])?;
        let containers = self.run(&["ps", "--all", "--quiet"])?;
        Ok(pods
            .lines()
            .map(|id| format!("pod {id}"))
            .chain(containers.lines().map(|id| format!("container {id}")))
            .collect())
    }

    /// The PIDs of the conmon processes of this podman's containers (conmon's command
    /// line names the container's directories in this podman's storage).
    pub fn conmons(&self) -> Vec<u32> {
        let dir = self.dir.to_string_lossy().into_owned();
        outpost_leaks::processes()
            .into_iter()
            .filter(|p| p.name() == "conmon" && p.args.iter().any(|a| a.contains(&dir)))
            .map(|p| p.pid)
            .collect()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        if let Err(error) = self.remove_all() {
            eprintln!("podman baseline: {error:#}");
        }
        match self.leftovers() {
            Ok(left) if !left.is_empty() => eprintln!("podman baseline: left {left:?}"),
            Ok(_) => {}
            Err(error) => eprintln!("podman baseline: {error:#}"),
        }
        // A conmon outliving its container would keep the container's cgroup and files.
        for pid in self.conmons() {
            eprintln!("podman baseline: conmon {pid} left; killing it");
            outpost_leaks::kill(pid);
        }
        // Its storage's own mounts (the overlay driver's), which the directory's removal
        // would otherwise trip on.
        for target in outpost_leaks::mounts_under(&self.dir) {
            let _ = Command::new("umount").arg("--lazy").arg(&target).output();
        }
        if !self.bridge_existed {
            let _ = Command::new("ip").args(["link", "delete", BRIDGE]).output();
        }
        // Empty once the pods are gone; a cgroup with members stays, and shows.
        for cgroup in &self.new_cgroups {
            outpost_leaks::remove_cgroup_tree(cgroup);
            if cgroup.exists() {
                eprintln!("podman baseline: cannot remove the cgroup {}", cgroup.display());
            }
        }
    }
}

/// `containers.conf` text `system` with [`ULIMITS`] as the containers' default ulimits
/// and `cni` as the network config directory.
fn with_settings(system: &str, cni: &Path) -> String {
    let settings = [
        ("[containers]", format!("default_ulimits = {ULIMITS:?}")),
        ("[network]", format!("network_config_dir = {:?}", cni.display().to_string())),
    ];
    let mut out = String::new();
    let mut added = [false; 2];
    for line in system.lines() {
        out.push_str(line);
        out.push('\n');
        for (i, (table, setting)) in settings.iter().enumerate() {
            if !added[i] && line.trim() == *table {
                out.push_str(setting);
                out.push('\n');
                added[i] = true;
            }
        }
    }
    for (i, (table, setting)) in settings.iter().enumerate() {
        if !added[i] {
            out.push_str(&format!("{table}\n{setting}\n"));
        }
    }
    out
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
