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
    PodNamespaces::remove(&outpost_host::Kernel, &dir.path().join("gone")).unwrap();
}

#[test]
fn names_match_proc_ns() {
    for kind in Kind::ALL {
        assert!(Path::new("/proc/self/ns").join(kind.name()).exists(), "{kind:?}");
    }
}

/// A listener on 127.0.0.1 inside the namespace of `file` (made the way [`dial`] makes
/// its sockets: from a thread of its own).
fn listen_in(file: &Path) -> std::net::TcpListener {
    let namespace = fs::File::open(file).unwrap();
    std::thread::spawn(move || {
        nix::sched::setns(&namespace, CloneFlags::CLONE_NEWNET).unwrap();
        std::net::TcpListener::bind("127.0.0.1:0").unwrap()
    })
    .join()
    .unwrap()
}

/// N3 (port-forward): a dial reaches the pod's own loopback, not the host's.
#[tokio::test]
async fn n3_dial_connects_inside_the_pods_network_namespace() {
    use std::io::{Read, Write};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: creating network namespaces needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = dir.path().join("ns");
    let namespaces = PodNamespaces::create(&ns, Sharing::default()).unwrap();
    let file = namespaces.network.clone().unwrap();
    assert_eq!(network_file(&ns), file);

    let inside = listen_in(&file);
    let port = inside.local_addr().unwrap().port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = dial::connect(&file, addr).await.unwrap();
    let (mut accepted, _) = inside.accept().unwrap();
    stream.write_all(b"ping").await.unwrap();
    let mut got = [0; 4];
    accepted.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
    accepted.write_all(b"pong").unwrap();
    stream.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"pong");

    // A port open on the host's loopback is closed on the pod's.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = host.local_addr().unwrap();
    let refused = dial::connect(&file, addr).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused, "{refused}");

    // A namespace file that is not there says so.
    let missing = dial::connect(&dir.path().join("gone"), addr).await.unwrap_err();
    assert!(matches!(missing, dial::DialError::Open { .. }), "{missing}");

    drop((stream, accepted, inside));
    PodNamespaces::remove(&outpost_host::Kernel, &ns).unwrap();
}
