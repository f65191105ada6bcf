//! The test device plugin (`tests/device-plugin`, D1, D2): built beside the tests, and
//! run either as a process in a test's device-plugin directory ([`PluginProcess`]) or as
//! a DaemonSet-shaped pod the agent runs ([`daemonset_pod`], `support/device-plugin.yaml`).

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The plugin's binary, built (once per test process) with the tests' cargo and profile.
pub fn device_plugin_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            crate::cargo_build(&[("outpost-test-device-plugin", "outpost-test-device-plugin")])
        })
        .clone()
}

/// A plugin's command line (see `tests/device-plugin/src/main.rs` for each flag).
#[derive(Debug, Clone)]
pub struct PluginArgs {
    pub resource: String,
    pub socket: String,
    pub devices: Vec<(String, PathBuf)>,
    pub health_dir: Option<PathBuf>,
    pub pre_start_log: Option<PathBuf>,
    pub pre_start_required: bool,
    pub preferred_allocation: bool,
    /// More flags, as they are (`--mount`, `--annotation`, `--cdi-device`, `--env`,
    /// `--api-version`).
    pub extra: Vec<String>,
}

impl PluginArgs {
    /// A plugin of `resource` on `socket` (a file name), with no devices yet.
    pub fn new(resource: &str, socket: &str) -> PluginArgs {
        PluginArgs {
            resource: resource.to_owned(),
            socket: socket.to_owned(),
            devices: Vec::new(),
            health_dir: None,
            pre_start_log: None,
            pre_start_required: false,
            preferred_allocation: false,
            extra: Vec::new(),
        }
    }

    /// Adds the device `id` at `path`.
    pub fn device(mut self, id: &str, path: &Path) -> PluginArgs {
        self.devices.push((id.to_owned(), path.to_owned()));
        self
    }

    /// Adds flags as they are.
    pub fn flags(mut self, flags: &[&str]) -> PluginArgs {
        self.extra.extend(flags.iter().map(|f| (*f).to_owned()));
        self
    }

    /// The plugin's arguments, for the device-plugin directory `plugin_dir`.
    pub fn args(&self, plugin_dir: &Path) -> Vec<String> {
        let mut args = vec![
            "--resource".to_owned(),
            self.resource.clone(),
            "--socket".to_owned(),
            self.socket.clone(),
            "--plugin-dir".to_owned(),
            plugin_dir.display().to_string(),
        ];
        for (id, path) in &self.devices {
            args.extend(["--device".to_owned(), format!("{id}={}", path.display())]);
        }
        if let Some(dir) = &self.health_dir {
            args.extend(["--health-dir".to_owned(), dir.display().to_string()]);
        }
        if let Some(log) = &self.pre_start_log {
            args.extend(["--pre-start-log".to_owned(), log.display().to_string()]);
        }
        if self.pre_start_required {
            args.push("--pre-start-required".to_owned());
        }
        if self.preferred_allocation {
            args.push("--preferred-allocation".to_owned());
        }
        args.extend(self.extra.iter().cloned());
        args
    }
}

/// A plugin process. Dropping it stops it (SIGTERM, then SIGKILL) and waits for it.
#[derive(Debug)]
pub struct PluginProcess {
    child: Child,
    stderr: PathBuf,
    exited: Option<ExitStatus>,
}

impl PluginProcess {
    /// Starts the plugin in `plugin_dir`; its stderr goes to `stderr`.
    pub fn start(plugin_dir: &Path, args: &PluginArgs, stderr: &Path) -> PluginProcess {
        let log = std::fs::File::create(stderr).expect("the plugin's stderr file");
        let child = Command::new(device_plugin_bin())
            .args(args.args(plugin_dir))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the test device plugin");
        PluginProcess { child, stderr: stderr.to_owned(), exited: None }
    }

    /// What the plugin wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Kills the plugin (SIGKILL: it cleans nothing up) and waits for it.
    pub fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.exited = self.child.wait().ok();
    }

    /// Waits for the plugin to exit by itself (within `timeout`): its status and stderr.
    pub fn wait_exit(&mut self, timeout: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("the plugin's status") {
                self.exited = Some(status);
                return (status, self.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "the plugin did not exit; stderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, signal: Signal) {
        if self.exited.is_none() {
            let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(i32::MAX));
            let _ = kill(pid, signal);
        }
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        if self.exited.is_some() {
            return;
        }
        self.signal(Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.signal(Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Makes a character device at `path` that acts as `/dev/null` (1:3), for a plugin to
/// hand out (mknod: root).
pub fn char_device(path: &Path) {
    use nix::sys::stat::{Mode, SFlag, makedev, mknod};
    mknod(path, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), makedev(1, 3))
        .unwrap_or_else(|e| panic!("mknod {}: {e}", path.display()));
}

/// The host libraries `bin` loads (its interpreter among them), as `ldd` lists them.
pub fn host_libraries(bin: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(bin).output().expect("run ldd");
    assert!(
        out.status.success(),
        "ldd {}: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, to)) => to.trim().split(' ').next()?,
                None => line.trim().split(' ').next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// The plugin as a DaemonSet-shaped static pod named `name` (`support/device-plugin.yaml`):
/// the device-plugin directory is `plugin_dir` on the host (the pod sees it at
/// `/var/lib/kubelet/device-plugins`), and `state_dir` on the host is the pod's
/// `/var/lib/outpost-test-device-plugin`, where `args`' health directory and pre-start
/// log should be (as the pod sees them).
pub fn daemonset_pod(name: &str, args: &PluginArgs, plugin_dir: &Path, state_dir: &Path) -> String {
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("support/device-plugin.yaml"),
    )
    .expect("support/device-plugin.yaml");
    let bin = device_plugin_bin();
    let mut mounts = String::new();
    let mut volumes = String::new();
    for (i, library) in host_libraries(&bin).iter().enumerate() {
        let path = library.display();
        mounts.push_str(&format!(
            "    - name: host-library-{i}\n      mountPath: {path}\n      readOnly: true\n"
        ));
        volumes.push_str(&format!(
            "  - name: host-library-{i}\n    hostPath:\n      path: {path}\n      type: File\n"
        ));
    }
    let pod_args = args.args(Path::new("/var/lib/kubelet/device-plugins"));
    template
        .replace("@NAME@", name)
        .replace("@IMAGE@", crate::containerd::BUSYBOX_IMAGE)
        .replace("@ARGS@", &serde_json::to_string(&pod_args).expect("arguments as JSON"))
        .replace("@PLUGIN_DIR@", &plugin_dir.display().to_string())
        .replace("@STATE_DIR@", &state_dir.display().to_string())
        .replace("@PLUGIN_BIN@", &bin.display().to_string())
        .replace("@LIBRARY_MOUNTS@\n", &mounts)
        .replace("@LIBRARY_VOLUMES@\n", &volumes)
}
