use super::*;
use crate::host::Call;

fn args(line: &str) -> Vec<&[u8]> {
    line.split(' ').map(str::as_bytes).collect()
}

#[test]
fn a_shim_is_known_by_its_namespace_and_containerd() {
    let line = "/usr/bin/containerd-shim-runc-v2 -namespace outpost -id abc -address /run/c.sock";
    assert_eq!(shim_of(&args(line), "outpost", "/run/c.sock").as_deref(), Some("abc"));
    assert_eq!(shim_of(&args(line), "other", "/run/c.sock"), None);
    assert_eq!(shim_of(&args(line), "outpost", "/run/other.sock"), None);
    let unix = "containerd-shim-runc-v2 -namespace outpost -id x -address unix:///run/c.sock";
    assert_eq!(shim_of(&args(unix), "outpost", "/run/c.sock").as_deref(), Some("x"));
    let not_a_shim = "/usr/bin/sleep -namespace outpost -id abc -address /run/c.sock";
    assert_eq!(shim_of(&args(not_a_shim), "outpost", "/run/c.sock"), None);
    assert_eq!(shim_of(&args("containerd-shim-runc-v2 -namespace outpost"), "outpost", ""), None);
}

fn tasks(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|id| (*id).to_owned()).collect()
}

/// A shim started for `first`, bound to `/run/containerd/s/<socket>`, and the address
/// each task's bundle names.
fn shim(first: &str, socket: &str, addresses: &[(&str, &str)]) -> Shim {
    Shim {
        pid: 1,
        id: first.to_owned(),
        sockets: vec![PathBuf::from(format!("/run/containerd/s/{socket}"))],
        addresses: addresses
            .iter()
            .map(|(task, address)| ((*task).to_owned(), (*address).to_owned()))
            .collect(),
    }
}

#[test]
fn a_shim_serves_the_task_it_was_started_for() {
    let shim = shim("a", "s1", &[]);
    assert!(shim.serves_any(&tasks(&["a"])));
    assert!(!shim.serves_any(&tasks(&["b"])));
    assert!(!shim.serves_any(&tasks(&[])));
}

#[test]
fn a_grouped_shim_serves_the_tasks_whose_bundle_names_its_socket() {
    // Its first container's task is gone; the pod's second container runs in it.
    let shim = shim("init", "s1", &[("app", "unix:///run/containerd/s/s1\n")]);
    assert!(shim.serves_any(&tasks(&["app"])));
    assert!(shim.serves_any(&tasks(&["other", "app"])));
    // A task served by another shim, or whose bundle could not be read.
    let other = self::shim("init", "s1", &[("app", "unix:///run/containerd/s/s2")]);
    assert!(!other.serves_any(&tasks(&["app"])));
    assert!(!self::shim("init", "s1", &[]).serves_any(&tasks(&["app"])));
    // An address without its scheme.
    let bare = self::shim("init", "s1", &[("app", "/run/containerd/s/s1")]);
    assert!(bare.serves_any(&tasks(&["app"])));
    // An address of a task containerd no longer lists does not count.
    assert!(!shim.serves_any(&tasks(&["gone"])));
}

#[test]
fn bound_sockets_are_read_by_inode() {
    let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
        0000000000000000: 00000002 00000000 00010000 0001 01 24519 /run/containerd/s/abc\n\
        0000000000000000: 00000003 00000000 00000000 0001 03 24520\n\
        0000000000000000: 00000002 00000000 00010000 0001 01 19 @/containerd-shim/x.sock\n";
    let bound = parse_net_unix(text);
    assert_eq!(bound.len(), 2);
    assert_eq!(bound[&24519], PathBuf::from("/run/containerd/s/abc"));
    assert_eq!(bound[&19], PathBuf::from("@/containerd-shim/x.sock"));
}

#[test]
fn this_process_started_after_its_parent() {
    let kernel = crate::host::Kernel;
    let me = start_time(&kernel, Pid::Own).unwrap();
    let parent = Pid::Id(std::os::unix::process::parent_id());
    assert!(start_time(&kernel, parent).unwrap() <= me);
    assert_eq!(start_time(&crate::host::Recording::new(), Pid::Id(42)), None);
}

/// The `/proc/<pid>/stat` line of a process started at `ticks`.
fn stat(pid: u32, ticks: u64) -> String {
    format!(
        "{pid} (containerd-shim) S 1 {pid} {pid} 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 10 0 {ticks} 0"
    )
}

#[test]
fn shims_their_sockets_and_their_tasks_addresses_are_read_from_proc() {
    let host = crate::host::Recording::new();
    let bundles = tempfile::tempdir().unwrap();
    for (task, socket) in [("first", "s1"), ("second", "s1"), ("elsewhere", "s2")] {
        let bundle = bundles.path().join(task);
        std::fs::create_dir(&bundle).unwrap();
        std::fs::write(bundle.join("address"), format!("unix:///run/containerd/s/{socket}\n"))
            .unwrap();
    }
    let cmdline = |namespace: &str, id: &str| {
        format!(
            "/usr/bin/containerd-shim-runc-v2\0-namespace\0{namespace}\0-id\0{id}\0-address\0/run/c.sock\0"
        )
    };
    host.file(
        "/proc/net/unix",
        "Num RefCount Protocol Flags Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 24519 /run/containerd/s/s1\n",
    )
    // The shim started for `first` (gone), serving `second` beside it.
    .file("/proc/40/cmdline", cmdline("outpost", "first"))
    .file("/proc/40/stat", stat(40, 100))
    .link("/proc/40/cwd", bundles.path().join("first (deleted)"))
    .link("/proc/40/fd/0", "/dev/null")
    .link("/proc/40/fd/12", "socket:[24519]")
    // Another namespace's shim, and a process that is no shim.
    .file("/proc/41/cmdline", cmdline("other", "x"))
    .file("/proc/42/cmdline", "/usr/bin/sleep\x00100\x00");
    let tasks = tasks(&["second", "elsewhere"]);
    let shims = shims(&host, "outpost", "/run/c.sock", &tasks);
    assert_eq!(shims.len(), 1, "{shims:?}");
    let shim = &shims[0];
    assert_eq!((shim.pid, shim.id.as_str()), (40, "first"));
    assert_eq!(shim.sockets, [PathBuf::from("/run/containerd/s/s1")]);
    assert_eq!(shim.addresses["second"].trim(), "unix:///run/containerd/s/s1");
    assert!(shim.serves_any(&tasks), "second's bundle names its socket");
    assert!(!shim.serves_any(&self::tasks(&["elsewhere"])), "served by s2");
    assert_eq!(start_time(&host, Pid::Id(40)), Some(100));
    // Of the processes that are not this namespace's shims, only the command lines.
    let others = host.calls().into_iter().filter(|call| {
        let (Call::Read(path) | Call::ReadLink(path)) = call else {
            return false;
        };
        path.starts_with("/proc/41") || path.starts_with("/proc/42")
    });
    let expected = ["/proc/41/cmdline", "/proc/42/cmdline"].map(|p| Call::Read(p.into()));
    assert_eq!(others.collect::<Vec<_>>(), expected);
}
