use super::*;

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
    let me = start_time("self").unwrap();
    let parent = std::os::unix::process::parent_id().to_string();
    assert!(start_time(&parent).unwrap() <= me);
    assert_eq!(start_time("not-a-pid"), None);
}
