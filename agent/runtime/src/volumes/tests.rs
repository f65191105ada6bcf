use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;

use outpost_host::Kernel;

use super::*;

fn pod(yaml: &str) -> Pod {
    let mut pod: Pod = serde_saphyr::from_str(yaml).unwrap();
    pod.metadata.name = Some("web-node1".to_owned());
    pod.metadata.namespace = Some("default".to_owned());
    pod
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Mounts need root: skips without it, except in CI where it must be there.
fn root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and these tests need root");
    eprintln!("skipping: not root (this would fail in CI)");
    false
}

struct Dirs {
    _temp: tempfile::TempDir,
    pod_dir: PathBuf,
    dns: spec::NodeDns,
    host: PathBuf,
}

fn dirs() -> Dirs {
    let temp = tempfile::tempdir().unwrap();
    let resolv = temp.path().join("host-resolv.conf");
    std::fs::write(&resolv, "nameserver 192.168.1.1\nsearch lan\n").unwrap();
    let host = temp.path().join("host");
    std::fs::create_dir(&host).unwrap();
    let dns = spec::NodeDns { resolv_conf: Some(resolv), ..spec::NodeDns::default() };
    Dirs { pod_dir: temp.path().join("pods/uid"), dns, host, _temp: temp }
}

#[test]
fn source_paths() {
    let pod = pod(
        "spec: {volumes: [{name: a, emptyDir: {}}, {name: h, hostPath: {path: /srv}}, {name: s, secret: {secretName: x}}, {name: c, nfs: {server: nas, path: /x}}, {name: m, image: {reference: model:v1}}], containers: []}",
    );
    let dir = Path::new("/state/pods/u");
    assert_eq!(
        source_path(dir, &pod, "a").unwrap(),
        Path::new("/state/pods/u/volumes/kubernetes.io~empty-dir/a")
    );
    assert_eq!(source_path(dir, &pod, "h").unwrap(), Path::new("/srv"));
    assert_eq!(
        source_path(dir, &pod, "s").unwrap(),
        Path::new("/state/pods/u/volumes/kubernetes.io~secret/s")
    );
    assert_eq!(
        source_path(dir, &pod, "c").unwrap_err().to_string(),
        "pod default/web-node1: volume \"c\" is of type nfs, which Outpost does not support; \
         use emptyDir, hostPath, configMap, secret, downwardAPI, projected, image, or a \
         persistentVolumeClaim of a hostPath or local PersistentVolume"
    );
    assert_eq!(
        source_path(dir, &pod, "m").unwrap(),
        Path::new("/state/pods/u/volumes/kubernetes.io~image/m"),
        "V4"
    );
    assert!(matches!(source_path(dir, &pod, "zz"), Err(layout::Error::NotDeclared { .. })));
}

#[test]
fn prepare_writes_the_pods_files_and_keeps_data() {
    let dirs = dirs();
    let pod = pod(&format!(
        "spec:\n  volumes: [{{name: cache, emptyDir: {{}}}}, {{name: h, hostPath: {{path: {}, type: Directory}}}}]\n  containers: [{{name: a, image: b, volumeMounts: [{{name: cache, mountPath: /c, subPath: x/y}}, {{name: h, mountPath: /h, subPath: ../no}}]}}]\n",
        dirs.host.display()
    ));
    let ips = ["10.88.0.7".parse().unwrap()];
    let events =
        prepare(&Kernel, &dirs.pod_dir, &pod, &ips, &dirs.dns, &Resolved::default()).unwrap();
    let reasons: Vec<_> = events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["MissingClusterDNS"], "no cluster DNS on this node");

    assert_eq!(mode(&dirs.pod_dir), 0o750);
    let hosts = std::fs::read_to_string(dirs.pod_dir.join(ETC_HOSTS)).unwrap();
    assert!(hosts.ends_with("10.88.0.7\tweb-node1\n"), "{hosts}");
    assert_eq!(mode(&dirs.pod_dir.join(ETC_HOSTS)), 0o644);
    let resolv = std::fs::read_to_string(dirs.pod_dir.join(RESOLV_CONF)).unwrap();
    assert_eq!(resolv, "search lan\nnameserver 192.168.1.1\n");
    let cache = dirs.pod_dir.join(EMPTY_DIR).join("cache");
    assert_eq!(mode(&cache), 0o777);
    assert_eq!(mode(&cache.join("x/y")), 0o777, "subPath made with the volume's mode");
    assert!(!dirs.host.parent().unwrap().join("no").exists(), "a subPath with .. is not made");

    std::fs::write(cache.join("data"), "kept").unwrap();
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &Resolved::default()).unwrap();
    assert_eq!(std::fs::read_to_string(cache.join("data")).unwrap(), "kept");
    let hosts = std::fs::read_to_string(dirs.pod_dir.join(ETC_HOSTS)).unwrap();
    assert!(!hosts.contains("10.88.0.7"), "rewritten: {hosts}");

    cleanup(&Kernel, &dirs.pod_dir).unwrap();
    assert!(!dirs.pod_dir.exists());
    assert!(dirs.host.exists(), "hostPath volumes are left alone");
    cleanup(&Kernel, &dirs.pod_dir).unwrap();
}

#[test]
fn memory_empty_dir_is_a_tmpfs_kept_across_prepares() {
    if !root() {
        return;
    }
    let dirs = dirs();
    let pod = pod(
        "spec: {volumes: [{name: mem, emptyDir: {medium: Memory, sizeLimit: 4Mi}}, {name: disk, emptyDir: {}}], containers: []}",
    );
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &Resolved::default()).unwrap();
    let mem = dirs.pod_dir.join(EMPTY_DIR).join("mem").canonicalize().unwrap();
    let tmpfs = |path: &Path| {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.split(' ').nth(4) == path.to_str())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let mounts = tmpfs(&mem);
    assert_eq!(mounts.len(), 1, "{mounts:?}");
    assert!(
        mounts[0].contains(" - tmpfs tmpfs ") && mounts[0].contains("size=4096k"),
        "{mounts:?}"
    );
    assert_eq!(mode(&mem), 0o777);
    std::fs::write(mem.join("data"), "in memory").unwrap();

    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &Resolved::default()).unwrap();
    assert_eq!(tmpfs(&mem).len(), 1, "not mounted twice");
    assert_eq!(std::fs::read_to_string(mem.join("data")).unwrap(), "in memory");

    // A mount the agent did not make is also undone before the directory goes.
    let disk = dirs.pod_dir.join(EMPTY_DIR).join("disk");
    nix::mount::mount(
        Some("tmpfs"),
        &disk,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    cleanup(&Kernel, &dirs.pod_dir).unwrap();
    assert!(tmpfs(&mem).is_empty());
    assert!(!dirs.pod_dir.exists());
}

#[test]
fn empty_dir_errors() {
    let dirs = dirs();
    let prepare_with = |volume: &str| {
        let pod = pod(&format!("spec: {{volumes: [{volume}], containers: []}}"));
        prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &Resolved::default())
            .unwrap_err()
            .to_string()
    };
    let error = prepare_with("{name: huge, emptyDir: {medium: HugePages}}");
    assert!(error.contains("volume \"huge\": emptyDir medium \"HugePages\""), "{error}");
    let error = prepare_with("{name: m, emptyDir: {medium: Memory, sizeLimit: lots}}");
    assert!(error.contains("sizeLimit \"lots\""), "{error}");
    let error = prepare_with("{name: nfs, nfs: {server: s, path: /p}}");
    assert!(error.contains("volume \"nfs\" is of type nfs"), "{error}");
}

fn check_host_path(path: &Path, kind: &str) -> Result<()> {
    let dirs = dirs();
    let pod = pod(&format!(
        "spec: {{volumes: [{{name: h, hostPath: {{path: '{}', type: '{kind}'}}}}], containers: []}}",
        path.display()
    ));
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &Resolved::default()).map(drop)
}

#[test]
fn host_path_types() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("made/dir");
    check_host_path(&dir, "DirectoryOrCreate").unwrap();
    assert!(dir.is_dir());
    check_host_path(&dir, "Directory").unwrap();
    check_host_path(&dir, "").unwrap();
    let file = temp.path().join("file");
    check_host_path(&file, "FileOrCreate").unwrap();
    assert!(file.is_file());
    std::fs::write(&file, "kept").unwrap();
    check_host_path(&file, "FileOrCreate").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept");
    check_host_path(&file, "File").unwrap();
    let socket = temp.path().join("sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    check_host_path(&socket, "Socket").unwrap();
    check_host_path(Path::new("/dev/null"), "CharDevice").unwrap();
    check_host_path(&temp.path().join("absent"), "").unwrap();
    assert!(!temp.path().join("absent").exists());

    let error = |path: &Path, kind: &str| check_host_path(path, kind).unwrap_err().to_string();
    assert!(
        error(&temp.path().join("absent"), "Directory")
            .contains("does not exist; type Directory needs it to")
    );
    assert!(error(&temp.path().join("absent"), "File").contains("does not exist"));
    assert!(error(&file, "Directory").contains("is not a directory, as type Directory requires"));
    assert!(error(&dir, "File").contains("is not a file"));
    assert!(error(&dir, "FileOrCreate").contains("is not a file"));
    assert!(error(&file, "DirectoryOrCreate").contains("is not a directory"));
    assert!(error(&file, "Socket").contains("is not a socket"));
    assert!(error(Path::new("/dev/null"), "BlockDevice").contains("is not a block device"));
    assert!(error(&file, "CharDevice").contains("is not a character device"));
    assert!(error(&file, "Pipe").contains("hostPath type \"Pipe\" is not valid"));
}

#[test]
fn missing_host_resolv_conf_gives_an_empty_file() {
    let dirs = dirs();
    let pod = pod("spec: {containers: []}");
    let absent = spec::NodeDns {
        resolv_conf: Some(dirs.pod_dir.join("absent")),
        ..spec::NodeDns::default()
    };
    prepare(&Kernel, &dirs.pod_dir, &pod, &[], &absent, &Resolved::default()).unwrap();
    assert_eq!(std::fs::read_to_string(dirs.pod_dir.join(RESOLV_CONF)).unwrap(), "");
}

/// K2: with cluster DNS, a ClusterFirst pod's file is the cluster's (no Event).
#[test]
fn k2_cluster_dns_makes_the_cluster_file() {
    let dirs = dirs();
    let dns =
        spec::NodeDns { cluster_dns: vec!["10.96.0.10".parse().unwrap()], ..dirs.dns.clone() };
    let pod = pod("spec: {containers: []}");
    let events = prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dns, &Resolved::default()).unwrap();
    assert_eq!(events, []);
    assert_eq!(
        std::fs::read_to_string(dirs.pod_dir.join(RESOLV_CONF)).unwrap(),
        "search default.svc.cluster.local svc.cluster.local cluster.local lan\nnameserver 10.96.0.10\noptions ndots:5\n"
    );
}

#[test]
fn resolv_conf_errors_are_reported() {
    let dirs = dirs();
    let pod = pod("spec: {dnsPolicy: None, containers: []}");
    let error =
        prepare(&Kernel, &dirs.pod_dir, &pod, &[], &dirs.dns, &Resolved::default()).unwrap_err();
    assert!(matches!(error, Error::Dns(spec::Error::DnsNoNameserver { .. })));
}

#[test]
fn plain_relative_paths() {
    assert!(is_plain_relative("a"));
    assert!(is_plain_relative("a/b/./c"));
    assert!(!is_plain_relative(""));
    assert!(!is_plain_relative("/a"));
    assert!(!is_plain_relative("a/../b"));
    assert!(!is_plain_relative(".."));
}

mod objects;

mod claims {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::spec::claims::{Claimed, Node};
    use crate::spec::projection::{Object, Reference, Resolution};

    /// The claim `www` bound to `pv-1`, a hostPath volume of `host_path`.
    fn claimed(host_path: serde_json::Value) -> Resolved {
        let claim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "www", "namespace": "default", "uid": "c1"},
            "spec": {"volumeName": "pv-1"},
            "status": {"phase": "Bound"},
        }))
        .unwrap();
        let mut pv = serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {"claimRef": {"name": "www", "namespace": "default", "uid": "c1"}},
        });
        pv["spec"]["hostPath"] = host_path;
        Resolved(BTreeMap::from([
            (
                Reference::PersistentVolumeClaim("www".into()),
                Resolution::Found(Object::PersistentVolumeClaim(Arc::new(claim))),
            ),
            (
                Reference::PersistentVolume("pv-1".into()),
                Resolution::Found(Object::PersistentVolume(Arc::new(
                    serde_json::from_value(pv).unwrap(),
                ))),
            ),
        ]))
    }

    fn set_up(dirs: &Dirs, pod: &Pod, resolved: &Resolved) -> Result<BTreeMap<String, Claimed>> {
        let labels = BTreeMap::from([("kubernetes.io/hostname".to_owned(), "node1".to_owned())]);
        set_up_claims(
            &Kernel,
            &dirs.pod_dir,
            pod,
            resolved,
            Node { name: "node1", labels: &labels },
        )
    }

    #[test]
    fn k3_a_host_path_volume_is_made_per_its_type_with_its_sub_paths() {
        let dirs = dirs();
        let path = dirs.host.join("pvc-1_default_www");
        let pod = pod(
            "spec:\n  volumes: [{name: data, persistentVolumeClaim: {claimName: www, readOnly: true}}]\n  containers: [{name: a, image: b, volumeMounts: [{name: data, mountPath: /d}, {name: data, mountPath: /l, subPath: logs}]}]\n",
        );
        let resolved = claimed(serde_json::json!({"path": path, "type": "DirectoryOrCreate"}));
        let set = set_up(&dirs, &pod, &resolved).unwrap();
        assert_eq!(set["data"], Claimed { path: path.clone(), read_only: true, device: None });
        assert!(path.join("logs").is_dir(), "the subPath is made in the volume");
        assert_eq!(mode(&path), 0o755);
    }

    #[test]
    fn k3_a_claim_not_ready_is_kubelets_failed_mount_and_an_unused_one_is_skipped() {
        let dirs = dirs();
        let pod = pod(
            "spec:\n  volumes: [{name: data, persistentVolumeClaim: {claimName: missing}}, {name: unused, persistentVolumeClaim: {claimName: missing}}]\n  containers: [{name: a, image: b, volumeMounts: [{name: data, mountPath: /d}]}]\n",
        );
        let error = set_up(&dirs, &pod, &Resolved::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], \
             failed to process volumes=[data]: error processing PVC default/missing: failed to \
             fetch PVC from API server: not fetched yet"
        );
        let unused = pod_with_no_mounts();
        assert_eq!(set_up(&dirs, &unused, &Resolved::default()).unwrap(), BTreeMap::new());
    }

    fn pod_with_no_mounts() -> Pod {
        pod(
            "spec:\n  volumes: [{name: unused, persistentVolumeClaim: {claimName: missing}}]\n  containers: [{name: a, image: b}]\n",
        )
    }

    #[test]
    fn k3_a_local_volume_is_bind_mounted_and_unmounted_at_cleanup() {
        if !root() {
            return;
        }
        let dirs = dirs();
        std::fs::write(dirs.host.join("data"), "kept").unwrap();
        let mut resolved = claimed(serde_json::Value::Null);
        let pv = serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {
                "claimRef": {"name": "www", "namespace": "default", "uid": "c1"},
                "local": {"path": dirs.host},
            },
        });
        resolved.0.insert(
            Reference::PersistentVolume("pv-1".into()),
            Resolution::Found(Object::PersistentVolume(Arc::new(
                serde_json::from_value(pv).unwrap(),
            ))),
        );
        let pod = pod(
            "spec:\n  securityContext: {fsGroup: 3456}\n  volumes: [{name: data, persistentVolumeClaim: {claimName: www}}]\n  containers: [{name: a, image: b, volumeMounts: [{name: data, mountPath: /d}]}]\n",
        );
        let set = set_up(&dirs, &pod, &resolved).unwrap();
        let mount = dirs.pod_dir.join("volumes/kubernetes.io~local-volume/pv-1");
        assert_eq!(set["data"].path, mount);
        assert_eq!(std::fs::read_to_string(mount.join("data")).unwrap(), "kept");
        assert!(mounts::mounted(&Kernel, &mount).unwrap());
        use std::os::unix::fs::MetadataExt as _;
        assert_eq!(std::fs::metadata(&dirs.host).unwrap().gid(), 3456, "the fsGroup's");
        set_up(&dirs, &pod, &resolved).unwrap();
        assert_eq!(
            mounts::under(&Kernel, &mount.canonicalize().unwrap()).unwrap().len(),
            1,
            "mounted once"
        );
        cleanup(&Kernel, &dirs.pod_dir).unwrap();
        assert!(!dirs.pod_dir.exists());
        assert_eq!(std::fs::read_to_string(dirs.host.join("data")).unwrap(), "kept");
    }

    /// The claim `www` bound to `pv-1`, a `local` volume in Block mode at `path`.
    fn block(path: &Path) -> Resolved {
        let mut resolved = claimed(serde_json::Value::Null);
        let pv = serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {
                "claimRef": {"name": "www", "namespace": "default", "uid": "c1"},
                "local": {"path": path},
                "volumeMode": "Block",
            },
        });
        resolved.0.insert(
            Reference::PersistentVolume("pv-1".into()),
            Resolution::Found(Object::PersistentVolume(Arc::new(
                serde_json::from_value(pv).unwrap(),
            ))),
        );
        resolved
    }

    #[test]
    fn k3_a_local_block_volume_is_its_device_linked_from_the_pod_dir() {
        use nix::sys::stat::{Mode, SFlag, makedev, mknod};
        use oci_spec::runtime::LinuxDeviceType;
        if !root() {
            return;
        }
        let dirs = dirs();
        let device = dirs.host.join("sdz");
        mknod(&device, SFlag::S_IFBLK, Mode::from_bits_truncate(0o640), makedev(7, 200)).unwrap();
        let pod = pod(
            "spec:\n  volumes: [{name: data, persistentVolumeClaim: {claimName: www, readOnly: true}}]\n  containers: [{name: a, image: b, volumeDevices: [{name: data, devicePath: /dev/xvda}]}]\n",
        );
        let set = set_up(&dirs, &pod, &block(&device)).unwrap();
        let link = dirs.pod_dir.join("volumeDevices/kubernetes.io~local-volume/pv-1");
        assert_eq!(set["data"].path, link);
        assert!(set["data"].read_only);
        let node = set["data"].device.clone().unwrap();
        assert_eq!(node.path(), &device, "the host's node");
        assert_eq!((node.typ(), node.major(), node.minor()), (LinuxDeviceType::B, 7, 200));
        assert_eq!((node.file_mode(), node.uid(), node.gid()), (Some(0o640), Some(0), Some(0)));
        assert_eq!(std::fs::read_link(&link).unwrap(), device);
        assert_eq!(set_up(&dirs, &pod, &block(&device)).unwrap(), set, "again, the same");
        cleanup(&Kernel, &dirs.pod_dir).unwrap();
        assert!(!dirs.pod_dir.exists());
        assert!(device.exists(), "the device stays");

        // A file is no block device: the pod's volumes are not set up, naming the path.
        let file = dirs.host.join("disk.img");
        std::fs::write(&file, "").unwrap();
        let error = set_up(&dirs, &pod, &block(&file)).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "MapVolume.MapBlockVolume failed for volume \"pv-1\" : local volume path {} is \
                 not a block device; a PersistentVolume in volumeMode Block must name one (e.g. \
                 /dev/sdb, a loop device)",
                file.display()
            )
        );
    }
}

#[test]
fn v4_an_image_volume_view_is_mounted_read_only() {
    use containerd_client::types::Mount;
    use nix::mount::MsFlags;
    let mount = |kind: &str, source: &str, options: &[&str]| Mount {
        r#type: kind.to_owned(),
        source: source.to_owned(),
        options: options.iter().map(|o| (*o).to_owned()).collect(),
        ..Mount::default()
    };
    let overlay = mount("overlay", "overlay", &["ro", "lowerdir=/s/2/fs:/s/1/fs"]);
    let calls = super::image::syscalls(&[overlay]).unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].fs_type.as_deref(), Some("overlay"));
    assert_eq!(calls[0].flags, MsFlags::MS_RDONLY);
    assert_eq!(calls[0].data.as_deref(), Some("lowerdir=/s/2/fs:/s/1/fs"));
    assert!(!calls[0].remount_read_only);

    let single = mount("bind", "/s/1/fs", &["ro", "rbind"]);
    let calls = super::image::syscalls(&[single]).unwrap();
    assert_eq!(calls[0].source, "/s/1/fs");
    assert_eq!(calls[0].flags, MsFlags::MS_BIND | MsFlags::MS_REC);
    assert!(calls[0].remount_read_only, "a bind is made read-only by a remount");

    let other = mount("erofs", "/dev/loop0", &[]);
    assert_eq!(super::image::syscalls(&[other]).unwrap_err(), "erofs");
}

#[test]
fn v4_an_image_volume_sub_path_is_a_directory_within_it() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("volume");
    std::fs::create_dir_all(dir.join("model")).unwrap();
    std::fs::write(dir.join("model/weights.txt"), "w").unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("out")).unwrap();
    let check = |sub: &str| super::image::check_sub_path(&dir, "v", sub).map_err(|e| e.to_string());
    assert_eq!(check("model"), Ok(()));
    let words = |sub: &str| check(sub).unwrap_err();
    assert!(
        words("model/weights.txt").contains("is not a directory"),
        "{}",
        words("model/weights.txt")
    );
    assert!(words("absent").contains("is not in the image"));
    assert!(words("out").contains("leads out of the image"));
    assert!(words("../..").contains("leads out of the image"));
}
