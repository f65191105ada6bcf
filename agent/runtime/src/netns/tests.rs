use super::*;

#[test]
fn a_pod_sharing_nothing_gets_every_kind() {
    assert_eq!(Sharing::default().own_kinds(), Kind::ALL.to_vec());
}

#[test]
fn host_network_also_means_the_hosts_uts() {
    let sharing = Sharing { host_network: true, host_ipc: false };
    assert_eq!(sharing.own_kinds(), vec![Kind::Ipc]);
}

#[test]
fn host_ipc_keeps_network_and_uts() {
    let sharing = Sharing { host_network: false, host_ipc: true };
    assert_eq!(sharing.own_kinds(), vec![Kind::Network, Kind::Uts]);
}

#[test]
fn sharing_everything_needs_no_namespace_nor_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-created");
    let sharing = Sharing { host_network: true, host_ipc: true };
    assert_eq!(PodNamespaces::create(&missing, sharing).unwrap(), PodNamespaces::default());
    assert!(!missing.exists());
}

#[test]
fn removing_a_missing_directory_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    PodNamespaces::remove(&dir.path().join("gone")).unwrap();
}

#[test]
fn names_match_proc_ns() {
    for kind in Kind::ALL {
        assert!(Path::new("/proc/self/ns").join(kind.name()).exists(), "{kind:?}");
    }
}
