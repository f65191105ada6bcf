//! What Outpost (its agents, tests and benches) left on the machine, and its removal:
//! `cargo xtask leaks [--clean]` (CI fails when anything is left), the test nodes' drop,
//! and the chaos trials' invariants.
//!
//! An inventory of [`Scope`]: the whole machine's Outpost-made things for CI
//! ([`Scope::machine`]), or one agent's (its containerd namespace, cgroup root and
//! directories) for `chaos`. What counts:
//! - processes: containerd shims serving an Outpost namespace, `outpost` helpers
//!   (`container-log`, `container-log-node`, `pod-init`), `outpost-container-log` loggers
//!   (the node logger: `node`), agents (`run`), and
//!   managed containerds (their config under Outpost's directories);
//! - cgroups named after an Outpost root (`outpost*`, `kubepods*`) in every hierarchy;
//! - mounts under Outpost's directories (pod netns and tmpfs mounts);
//! - network links: the test bridges (`otb*`), Outpost's bridge, and veths on them;
//! - CNI state: libcni results and host-local allocations of Outpost's networks;
//! - in the containerd at `socket`: containers, tasks, leases and active and view snapshots;
//! - for the machine: shim sockets in `/run/containerd/s` no process has bound (what a
//!   SIGKILLed shim leaves: a shim ended by SIGTERM or by containerd removes its own), and
//!   runc's state of stopped containers in an Outpost namespace's runc root
//!   (`/run/containerd/runc/<namespace>`: what a containerd killed with its shims leaves,
//!   where a real reboot would have wiped `/run`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The first arguments of Outpost's helper processes: the per-container logger, the node
/// logger (`outpost-container-log node`, or the agent's `container-log-node`), a pod's
/// pid-namespace init, and agents.
const HELPER_SUBCOMMANDS: [&str; 5] =
    ["container-log", "node", "container-log-node", "pod-init", "run"];

/// Where Outpost's things are, for one inventory.
#[derive(Debug, Clone)]
pub struct Scope {
    /// containerd namespaces (prefixes) whose shims, containers, tasks, leases and
    /// snapshots count.
    pub namespaces: Vec<String>,
    /// Top-level cgroup names (prefixes) in each hierarchy.
    pub cgroups: Vec<String>,
    /// Mounts at or below these paths count; so do the processes whose command line names
    /// one of them (for the machine: every path holding `outpost`).
    pub roots: Vec<PathBuf>,
    /// Link names (prefixes): bridges, and the veths enslaved to them.
    pub links: Vec<String>,
    /// CNI network names (prefixes) whose libcni results and host-local IPs count.
    pub networks: Vec<String>,
    /// The containerd to ask about containers, tasks, leases and snapshots.
    pub socket: Option<PathBuf>,
    /// The machine-wide scope also counts any `outpost` agent or helper process.
    machine: bool,
}

/// One thing left behind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Leftover {
    /// A process: its PID and command line.
    Process(u32, String),
    /// A cgroup directory.
    Cgroup(PathBuf),
    /// A mount point.
    Mount(PathBuf),
    /// A network link.
    Link(String),
    /// A CNI file: a libcni result or a host-local allocation.
    Cni(PathBuf),
    /// In containerd: `(namespace, kind, id)`, kind one of container, task, lease,
    /// snapshot.
    Containerd(String, &'static str, String),
    /// A shim socket file nobody has bound.
    Socket(PathBuf),
    /// runc's state of a stopped container: its runc root and ID.
    RuncState(PathBuf, String),
    /// A directory a killed run left in the temporary directory (a fleet's
    /// `outpost-fleet-*`).
    Directory(PathBuf),
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Leftover::Process(pid, cmdline) => write!(f, "process {pid}: {cmdline}"),
            Leftover::Cgroup(path) => write!(f, "cgroup {}", path.display()),
            Leftover::Mount(path) => write!(f, "mount {}", path.display()),
            Leftover::Link(name) => write!(f, "link {name}"),
            Leftover::Cni(path) => write!(f, "CNI state {}", path.display()),
            Leftover::Containerd(ns, kind, id) => write!(f, "containerd {kind} {ns}/{id}"),
            Leftover::Socket(path) => write!(f, "stale shim socket {}", path.display()),
            Leftover::RuncState(root, id) => {
                write!(f, "runc state of stopped container {}/{id}", root.display())
            }
            Leftover::Directory(path) => write!(f, "directory {}", path.display()),
        }
    }
}

/// libcni's cache and the host-local plugin's default data directory.
const CNI_RESULTS: &str = "/var/lib/cni/results";
const CNI_NETWORKS: &str = "/var/lib/cni/networks";
const CGROUP_FS: &str = "/sys/fs/cgroup";
/// Where containerd 1.6's shims bind their sockets, whatever containerd's state dir.
const SHIM_SOCKETS: &str = "/run/containerd/s";
/// Where containerd's runc shim keeps runc's state, a root per namespace, whatever
/// containerd's state dir (the shim's default `Root`).
pub const RUNC_ROOT: &str = "/run/containerd/runc";
/// The prefix of the temporary directories of the tests' hollow fleets.
const FLEET_DIRS: &str = "outpost-fleet-";

impl Scope {
    /// Everything any Outpost agent, test or bench makes on this machine.
    pub fn machine(socket: Option<PathBuf>) -> Scope {
        Scope {
            namespaces: vec!["outpost".into()],
            cgroups: vec!["outpost".into(), "kubepods".into()],
            roots: vec!["/run/outpost".into(), "/var/lib/outpost".into(), "/tmp/opn".into()],
            links: vec!["otb".into(), "outpost0".into()],
            networks: vec!["net-otb".into(), "outpost".into()],
            socket,
            machine: true,
        }
    }

    /// One agent's things: its containerd namespace, cgroup root, directories and bridge.
    pub fn agent(
        namespace: &str,
        cgroup_root: &str,
        roots: Vec<PathBuf>,
        bridge: &str,
        socket: PathBuf,
    ) -> Scope {
        Scope {
            namespaces: vec![namespace.to_owned()],
            cgroups: vec![cgroup_root.trim_start_matches('/').to_owned()],
            roots,
            links: vec![bridge.to_owned()],
            networks: vec![format!("net-{bridge}")],
            socket: Some(socket),
            machine: false,
        }
    }

    /// What is left, sorted.
    pub fn inventory(&self) -> Vec<Leftover> {
        let mut left = BTreeSet::new();
        left.extend(self.processes());
        left.extend(self.cgroups());
        left.extend(self.mounts());
        left.extend(self.links());
        left.extend(self.cni());
        left.extend(self.containerd());
        if self.machine {
            left.extend(stale_shim_sockets().into_iter().map(Leftover::Socket));
            left.extend(self.stopped_runc_states());
            left.extend(fleet_dirs().into_iter().map(Leftover::Directory));
        }
        left.into_iter().collect()
    }

    /// Whether `name` is one of `names`: a prefix of it on the machine (`outpost*`), the
    /// whole of it for one agent (node 1's namespace is not node 10's).
    fn named(&self, names: &[String], name: &str) -> bool {
        names.iter().any(|n| if self.machine { name.starts_with(n.as_str()) } else { name == n })
    }

    fn namespace_is_ours(&self, namespace: &str) -> bool {
        self.named(&self.namespaces, namespace)
    }

    fn under_roots(&self, path: &str) -> bool {
        self.roots.iter().any(|root| {
            let root = root.to_string_lossy();
            path.starts_with(root.as_ref())
        })
    }

    fn processes(&self) -> Vec<Leftover> {
        let me = std::process::id();
        let mut found = Vec::new();
        for Process { pid, args, .. } in processes() {
            if pid == me {
                continue;
            }
            let flag = |name: &str| args.windows(2).find(|w| w[0] == name).map(|w| w[1].as_str());
            // One agent's shims also serve its containerd: the scope's, or the agent's
            // managed one under its roots (another agent's may use the same namespace
            // name on another containerd).
            let address = flag("-address").map(|a| a.trim_start_matches("unix://"));
            let our_containerd = self.machine
                || address.is_some_and(|a| self.under_roots(a))
                || self
                    .socket
                    .as_ref()
                    .is_none_or(|socket| address == Some(socket.to_string_lossy().as_ref()));
            let shim = args.first().is_some_and(|a| a.contains("containerd-shim"))
                && flag("-namespace").is_some_and(|ns| self.namespace_is_ours(ns))
                && our_containerd;
            // `--containerd managed`: a containerd whose config is under the roots.
            let managed =
                args.first().is_some_and(|a| a.ends_with("/containerd") || a == "containerd")
                    && flag("--config").is_some_and(|config| self.under_roots(config));
            let helper =
                args.first().is_some_and(|a| {
                    ["outpost", "outpost-container-log"]
                        .iter()
                        .any(|bin| a == bin || a.ends_with(&format!("/{bin}")))
                }) && args.get(1).is_some_and(|a| HELPER_SUBCOMMANDS.contains(&a.as_str()))
                    && (self.machine || args.iter().any(|a| self.under_roots(a)));
            if shim || helper || managed {
                found.push(Leftover::Process(pid, args.join(" ")));
            }
        }
        found
    }

    fn cgroups(&self) -> Vec<Leftover> {
        let mut found = Vec::new();
        let hierarchies = hierarchies();
        for hierarchy in hierarchies {
            let Ok(entries) = std::fs::read_dir(&hierarchy) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let ours = self.named(&self.cgroups, &name);
                if ours && entry.path().is_dir() {
                    found.push(Leftover::Cgroup(entry.path()));
                }
            }
        }
        found
    }

    fn mounts(&self) -> Vec<Leftover> {
        mount_points()
            .into_iter()
            .filter(|target| self.under_roots(target))
            .map(|target| Leftover::Mount(PathBuf::from(target)))
            .collect()
    }

    fn links(&self) -> Vec<Leftover> {
        let Ok(entries) = std::fs::read_dir("/sys/class/net") else { return Vec::new() };
        let ours = |name: &str| self.named(&self.links, name);
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // A veth on one of our bridges: its `master` links to the bridge.
            let master = std::fs::read_link(entry.path().join("master"))
                .ok()
                .and_then(|m| m.file_name().map(|n| n.to_string_lossy().into_owned()));
            if ours(&name) || master.as_deref().is_some_and(ours) {
                found.push(Leftover::Link(name));
            }
        }
        found
    }

    fn cni(&self) -> Vec<Leftover> {
        let ours = |name: &str| self.named(&self.networks, name);
        let mut found = Vec::new();
        // libcni names its cached results `<network>-<container id>-<ifname>`.
        for entry in std::fs::read_dir(CNI_RESULTS).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let of_network = self.networks.iter().any(|n| name.starts_with(&format!("{n}-")));
            let namespace_named = self.namespaces.iter().any(|ns| name.contains(ns.as_str()));
            if of_network || (self.machine && namespace_named) {
                found.push(Leftover::Cni(entry.path()));
            }
        }
        // host-local: one file per allocated IP, plus `last_reserved_ip.*` and `lock`.
        for network in std::fs::read_dir(CNI_NETWORKS).into_iter().flatten().flatten() {
            if !ours(&network.file_name().to_string_lossy()) {
                continue;
            }
            for entry in std::fs::read_dir(network.path()).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name != "lock" && !name.starts_with("last_reserved_ip") {
                    found.push(Leftover::Cni(entry.path()));
                }
            }
        }
        found
    }

    /// The stopped containers in the runc roots of the scope's namespaces (a running
    /// one is not a leftover of its own: its task, shim and cgroup are).
    fn stopped_runc_states(&self) -> Vec<Leftover> {
        let roots = std::fs::read_dir(RUNC_ROOT).into_iter().flatten().flatten();
        let ours = roots.filter(|root| self.namespace_is_ours(&root.file_name().to_string_lossy()));
        let mut found = Vec::new();
        for root in ours {
            let root = root.path();
            let Ok(out) = Command::new("runc").arg("--root").arg(&root).arg("list").output() else {
                continue;
            };
            found.extend(
                stopped_in_runc_list(&String::from_utf8_lossy(&out.stdout))
                    .into_iter()
                    .map(|id| Leftover::RuncState(root.clone(), id)),
            );
        }
        found
    }

    fn containerd(&self) -> Vec<Leftover> {
        let Some(socket) = &self.socket else { return Vec::new() };
        if !socket.exists() {
            return Vec::new();
        }
        let mut found = Vec::new();
        for namespace in ctr_lines(socket, None, &["namespaces", "list", "--quiet"]) {
            if !self.namespace_is_ours(&namespace) {
                continue;
            }
            let ns = Some(namespace.as_str());
            let mut add = |kind, ids: Vec<String>| {
                found.extend(
                    ids.into_iter().map(|id| Leftover::Containerd(namespace.clone(), kind, id)),
                );
            };
            add("container", ctr_lines(socket, ns, &["containers", "list", "--quiet"]));
            add("task", ctr_first_column(socket, ns, &["tasks", "list"]));
            add("lease", ctr_lines(socket, ns, &["leases", "list", "--quiet"]));
            add("snapshot", active_snapshots(socket, ns));
        }
        found
    }
}

/// Removes what [`Scope::inventory`] finds, in an order that leaves nothing behind:
/// containerd's tasks killed and deleted first (their shims then exit, and a container
/// killed with its shim would live on, reparented), then the containers, leases and
/// snapshots; then any process still there, and any process left in one of the scope's
/// cgroups; then mounts, links, CNI files and the cgroups, deepest first. What cannot be
/// removed is returned.
pub fn clean(scope: &Scope) -> Vec<Leftover> {
    let left = scope.inventory();
    if left.is_empty() {
        return left;
    }
    if let Some(socket) = &scope.socket {
        clean_containerd(socket, &left);
    }
    let left = scope.inventory();
    for leftover in &left {
        if let Leftover::Process(pid, _) = leftover {
            kill(*pid);
        }
    }
    for leftover in &left {
        if let Leftover::Cgroup(path) = leftover {
            kill_members(path);
        }
    }
    if left.iter().any(|l| matches!(l, Leftover::Process(..) | Leftover::Cgroup(..))) {
        std::thread::sleep(Duration::from_millis(200));
    }
    for leftover in &left {
        match leftover {
            Leftover::Mount(path) => {
                let _ = Command::new("umount").arg("--lazy").arg(path).output();
            }
            Leftover::Link(name) => {
                let _ = Command::new("ip").args(["link", "delete", name]).output();
            }
            Leftover::Cni(path) => {
                let _ = std::fs::remove_file(path);
            }
            Leftover::Cgroup(path) => remove_cgroup_tree(path),
            Leftover::Socket(path) => {
                let _ = std::fs::remove_file(path);
            }
            Leftover::Directory(path) => {
                let _ = std::fs::remove_dir_all(path);
            }
            Leftover::RuncState(root, id) => {
                let _ = Command::new("runc")
                    .arg("--root")
                    .arg(root)
                    .args(["delete", "--force", id])
                    .output();
            }
            Leftover::Process(..) | Leftover::Containerd(..) => {}
        }
    }
    scope.inventory()
}

fn clean_containerd(socket: &Path, left: &[Leftover]) {
    let of_kind = |wanted: &'static str| {
        left.iter().filter_map(move |l| match l {
            Leftover::Containerd(ns, kind, id) if *kind == wanted => Some((ns.as_str(), id)),
            _ => None,
        })
    };
    let mut killed = false;
    for (ns, id) in of_kind("task") {
        ctr(socket, Some(ns), &["tasks", "kill", "--all", "--signal", "SIGKILL", id]);
        killed = true;
    }
    if killed {
        std::thread::sleep(Duration::from_millis(300));
    }
    for (ns, id) in of_kind("task") {
        ctr(socket, Some(ns), &["tasks", "delete", "--force", id]);
    }
    for (ns, id) in of_kind("container") {
        ctr(socket, Some(ns), &["containers", "delete", id]);
    }
    for (ns, id) in of_kind("lease") {
        ctr(socket, Some(ns), &["leases", "delete", id]);
    }
    for (ns, id) in of_kind("snapshot") {
        ctr(socket, Some(ns), &["snapshots", "--snapshotter", "overlayfs", "rm", id]);
    }
}

/// The IDs of the stopped containers in `runc list`'s table (`ID PID STATUS BUNDLE
/// CREATED OWNER`).
fn stopped_in_runc_list(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(2) == Some(&"stopped")).then(|| fields[0].to_owned())
        })
        .collect()
}

/// SIGKILLs process `pid` (gone already is fine), and removes the shim sockets it had
/// bound: a SIGKILLed shim cannot, and a reboot's fresh `/run` would not have them.
pub fn kill(pid: u32) {
    let sockets = shim_sockets_of(pid);
    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).output();
    for socket in sockets {
        let _ = std::fs::remove_file(socket);
    }
}

/// The bound unix sockets of this network namespace: inode to path (`/proc/net/unix`:
/// `Num RefCount Protocol Flags Type St Inode Path`).
fn bound_sockets() -> HashMap<u64, PathBuf> {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some((fields.get(6)?.parse().ok()?, PathBuf::from(fields.get(7)?)))
        })
        .collect()
}

/// The sockets under [`SHIM_SOCKETS`] that process `pid` holds.
fn shim_sockets_of(pid: u32) -> Vec<PathBuf> {
    let bound = bound_sockets();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten();
    fds.filter_map(|fd| {
        let target = std::fs::read_link(fd.path()).ok()?;
        let inode = target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()?;
        bound.get(&inode).filter(|path| path.starts_with(SHIM_SOCKETS)).cloned()
    })
    .collect()
}

/// The socket files under [`SHIM_SOCKETS`] no process has bound.
fn stale_shim_sockets() -> Vec<PathBuf> {
    stale_sockets_in(Path::new(SHIM_SOCKETS))
}

/// The socket files in `dir` no process has bound.
/// The hollow fleets' directories in the temporary directory: a fleet removes its own
/// when it ends, so one that is there when nothing runs is a killed run's.
fn fleet_dirs() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(FLEET_DIRS))
        .map(|entry| entry.path())
        .collect()
}

fn stale_sockets_in(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_socket()))
        .map(|entry| entry.path())
        .collect();
    // Listed after the files: a socket bound meanwhile is among them.
    let bound: HashSet<PathBuf> = bound_sockets().into_values().collect();
    files.into_iter().filter(|file| !bound.contains(file)).collect()
}

/// SIGKILLs every process in the cgroup `dir` and below it.
pub fn kill_members(dir: &Path) {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse().ok()) {
        kill(pid);
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            kill_members(&entry.path());
        }
    }
}

/// Every cgroup hierarchy's mount point: v1 controllers and the v2 `unified` (hybrid),
/// or the v2 root itself.
fn hierarchies() -> Vec<PathBuf> {
    let root = Path::new(CGROUP_FS);
    if root.join("cgroup.controllers").exists() {
        return vec![root.to_path_buf()];
    }
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.is_symlink())
        .collect()
}

/// Removes a cgroup and everything below it, deepest first (a cgroup with children or
/// processes cannot go); what cannot go stays.
pub fn remove_cgroup_tree(path: &Path) {
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.path().is_dir() {
                remove_cgroup_tree(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(path);
}

/// A process: its PID, parent and command line.
#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub args: Vec<String>,
}

impl Process {
    /// The base name of `argv[0]` (`/usr/bin/conmon` → `conmon`).
    pub fn name(&self) -> &str {
        let first = self.args.first().map_or("", String::as_str);
        first.rsplit('/').next().unwrap_or(first)
    }

    /// The value after `flag` (`-namespace ns` → `ns`).
    pub fn flag(&self, flag: &str) -> Option<&str> {
        self.args.windows(2).find(|w| w[0] == flag).map(|w| w[1].as_str())
    }
}

/// Every process with a command line (kernel threads have none).
pub fn processes() -> Vec<Process> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // After the parenthesized command name: state, then the parent's PID.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            (!args.is_empty()).then_some(Process { pid, ppid, args })
        })
        .collect()
}

/// Every mount point of this mount namespace (`/proc/self/mountinfo`).
fn mount_points() -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mounts.lines().filter_map(|line| line.split(' ').nth(4)).map(unescape_mount_path).collect()
}

/// The mount points at or below `root`, deepest first (the order to unmount them in).
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let root = root.to_string_lossy();
    let mut found: Vec<String> =
        mount_points().into_iter().filter(|t| t.starts_with(root.as_ref())).collect();
    found.sort_by_key(|t| std::cmp::Reverse(t.len()));
    found.into_iter().map(PathBuf::from).collect()
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape_mount_path(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4).and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn ctr_command(socket: &Path, namespace: Option<&str>, args: &[&str]) -> Command {
    let mut command = Command::new("ctr");
    command.arg("--address").arg(socket);
    if let Some(namespace) = namespace {
        command.args(["--namespace", namespace]);
    }
    command.args(args);
    command
}

fn ctr(socket: &Path, namespace: Option<&str>, args: &[&str]) {
    let _ = ctr_command(socket, namespace, args).output();
}

/// `ctr …`'s output lines, or none if it fails.
fn ctr_lines(socket: &Path, namespace: Option<&str>, args: &[&str]) -> Vec<String> {
    ctr_output(socket, namespace, args)
        .map(|out| {
            out.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
        })
        .unwrap_or_default()
}

/// The first column of a `ctr … list` table, header skipped.
fn ctr_first_column(socket: &Path, namespace: Option<&str>, args: &[&str]) -> Vec<String> {
    table(socket, namespace, args).into_iter().filter_map(|row| row.into_iter().next()).collect()
}

/// The active and view snapshots of the overlayfs snapshotter (`KEY PARENT KIND`): a
/// container's rootfs, an image volume's read-only view (V4).
fn active_snapshots(socket: &Path, namespace: Option<&str>) -> Vec<String> {
    let args = ["snapshots", "--snapshotter", "overlayfs", "list"];
    table(socket, namespace, &args)
        .into_iter()
        .filter(|row| row.last().is_some_and(|kind| kind == "Active" || kind == "View"))
        .filter_map(|row| row.into_iter().next())
        .collect()
}

fn table(socket: &Path, namespace: Option<&str>, args: &[&str]) -> Vec<Vec<String>> {
    let Some(out) = ctr_output(socket, namespace, args) else { return Vec::new() };
    out.lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|row| !row.is_empty())
        .collect()
}

fn ctr_output(socket: &Path, namespace: Option<&str>, args: &[&str]) -> Option<String> {
    let out = ctr_command(socket, namespace, args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runc_lists_stopped_containers_apart_from_running_ones() {
        let table =
            "ID                                 PID         STATUS      BUNDLE    CREATED   OWNER
16c654c85539066eb2a8b9c601d9208d   0           stopped     /tmp/b1   2026-11-29T01:45:54Z   root
22c29fac1d9e7b728f6457f2b00290ca   4242        running     /tmp/b2   2026-11-29T02:49:33Z   root
";
        assert_eq!(super::stopped_in_runc_list(table), ["16c654c85539066eb2a8b9c601d9208d"]);
        assert!(super::stopped_in_runc_list("").is_empty());
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape_mount_path(r"/tmp/x\011y\134z"), "/tmp/x\ty\\z");
        assert_eq!(unescape_mount_path(r"/plain"), "/plain");
        assert_eq!(unescape_mount_path(r"/bad\0"), r"/bad\0");
    }

    #[test]
    fn a_socket_file_nobody_binds_is_stale() {
        let dir = std::env::temp_dir().join(format!("outpost-leaks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bound = std::os::unix::net::UnixListener::bind(dir.join("bound")).unwrap();
        drop(std::os::unix::net::UnixListener::bind(dir.join("stale")).unwrap());
        std::fs::write(dir.join("not-a-socket"), "").unwrap();
        assert_eq!(stale_sockets_in(&dir), [dir.join("stale")]);
        drop(bound);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_agent_scope_names_its_own_things_only() {
        let scope = Scope::agent(
            "outpost-chaos-1",
            "/outpost-chaos-1",
            vec!["/tmp/chaos-1".into()],
            "otbchaos1",
            "/tmp/c.sock".into(),
        );
        assert!(scope.namespace_is_ours("outpost-chaos-1"));
        assert!(!scope.namespace_is_ours("outpost"));
        assert!(scope.under_roots("/tmp/chaos-1/run/pods/x/ns/net"));
        assert!(!scope.under_roots("/tmp/chaos-2/run"));
        assert_eq!(scope.cgroups, ["outpost-chaos-1"]);
        assert_eq!(scope.networks, ["net-otbchaos1"]);
    }
}
