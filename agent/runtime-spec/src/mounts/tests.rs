use std::path::Path;

use super::super::tests::{
    PLAIN, busybox, context, error, first_container, mount, options, pod, spec,
};
use super::super::{ContainerFiles, container_spec};

#[test]
fn pod_files_are_bound_from_the_pod_dir() {
    let spec = spec(PLAIN);
    let hosts = mount(&spec, "/etc/hosts").unwrap();
    assert_eq!(hosts.typ().as_deref(), Some("bind"));
    assert_eq!(hosts.source().as_deref(), Some(Path::new("/var/lib/outpost/pods/0123/etc-hosts")));
    assert_eq!(options(hosts), ["rbind", "rprivate", "rw"]);
    let resolv = mount(&spec, "/etc/resolv.conf").unwrap();
    assert_eq!(
        resolv.source().as_deref(),
        Some(Path::new("/var/lib/outpost/pods/0123/resolv.conf"))
    );

    let pod = pod(PLAIN);
    let mut ctx = context(&pod);
    ctx.pod_ips = &[];
    let spec =
        container_spec(&ctx, first_container(&pod), &busybox(), &ContainerFiles::default(), "c1")
            .unwrap();
    assert!(mount(&spec, "/etc/hosts").is_none(), "no hosts file before the pod has an IP");
}

const VOLUMES: &str = r#"spec:
  volumes:
  - {name: cache, emptyDir: {}}
  - {name: host, hostPath: {path: /srv/data}}
  - {name: config, configMap: {name: c}}
  - {name: claim, persistentVolumeClaim: {claimName: c}}
  containers:
  - name: app
    image: b
    volumeMounts:
    - {name: host, mountPath: /data/deeper, readOnly: true, subPath: sub/dir}
    - {name: cache, mountPath: /data}
    - {name: cache, mountPath: dev/shm}
"#;

#[test]
fn volume_mounts() {
    let spec = spec(VOLUMES);
    let destinations: Vec<_> =
        spec.mounts().iter().flatten().map(|m| m.destination().to_str().unwrap()).collect();
    assert_eq!(
        destinations,
        [
            "/proc",
            "/dev",
            "/dev/pts",
            "/dev/mqueue",
            "/sys",
            "/sys/fs/cgroup",
            "/data",
            "/data/deeper",
            "/dev/shm",
            "/etc/hosts",
            "/etc/resolv.conf",
            "/dev/termination-log",
        ],
        "a volume replaces the default /dev/shm; parents first"
    );
    let cache = mount(&spec, "/data").unwrap();
    let empty_dir = "/var/lib/outpost/pods/0123/volumes/kubernetes.io~empty-dir/cache";
    assert_eq!(cache.source().as_deref(), Some(Path::new(empty_dir)));
    assert_eq!(options(cache), ["rbind", "rprivate", "rw"]);
    let host = mount(&spec, "/data/deeper").unwrap();
    assert_eq!(host.source().as_deref(), Some(Path::new("/srv/data/sub/dir")));
    assert_eq!(options(host), ["rbind", "rprivate", "ro"]);
}

#[test]
fn v1_api_object_volumes_are_mounted_read_only() {
    let spec = spec(&VOLUMES.replace(
        "    - {name: cache, mountPath: /data}\n",
        "    - {name: config, mountPath: /etc/app, readOnly: false}\n    - {name: config, mountPath: /etc/one.conf, subPath: one.conf}\n",
    ));
    let config = mount(&spec, "/etc/app").unwrap();
    let dir = "/var/lib/outpost/pods/0123/volumes/kubernetes.io~configmap/config";
    assert_eq!(config.source().as_deref(), Some(Path::new(dir)));
    assert_eq!(options(config), ["rbind", "rprivate", "ro"]);
    let file = mount(&spec, "/etc/one.conf").unwrap();
    assert_eq!(file.source().as_deref(), Some(Path::new(&format!("{dir}/one.conf"))));
    assert_eq!(options(file), ["rbind", "rprivate", "ro"]);
}

const IMAGE_VOLUME: &str = r#"spec:
  volumes:
  - name: model
    image: {reference: "outpost.test/model:v1", pullPolicy: IfNotPresent}
  containers:
  - name: app
    image: b
    volumeMounts:
    - {name: model, mountPath: /model, readOnly: false}
    - {name: model, mountPath: /weights, subPath: model}
"#;

#[test]
fn v4_image_volumes_are_bound_from_their_view_read_only() {
    let spec = spec(IMAGE_VOLUME);
    let dir = "/var/lib/outpost/pods/0123/volumes/kubernetes.io~image/model";
    let whole = mount(&spec, "/model").unwrap();
    assert_eq!(whole.source().as_deref(), Some(Path::new(dir)));
    assert_eq!(options(whole), ["rbind", "rprivate", "ro"], "readOnly: false is overruled");
    let sub = mount(&spec, "/weights").unwrap();
    assert_eq!(sub.source().as_deref(), Some(Path::new(&format!("{dir}/model"))));
    assert_eq!(options(sub), ["rbind", "rprivate", "ro"]);
}

#[test]
fn v4_image_volume_snapshot_keys_are_the_pods() {
    use crate::layout::{image_volume_key, image_volume_key_prefix};
    let key = image_volume_key("0123", "model");
    assert_eq!(key, "outpost-image-volume/0123/model");
    assert!(key.starts_with(&image_volume_key_prefix("0123")));
    assert!(!key.starts_with(&image_volume_key_prefix("012")), "a UID is not another's prefix");
}

#[test]
fn volume_mount_errors() {
    let with_mount = |mount: &str| {
        error(
            &VOLUMES
                .replace("    - {name: cache, mountPath: /data}\n", &format!("    - {mount}\n")),
        )
    };
    let error = with_mount("{name: claim, mountPath: /etc/app}");
    assert!(error.starts_with("pod default/web-node1 container app: volumeMounts[1]"), "{error}");
    assert!(error.contains("is of type persistentVolumeClaim"), "{error}");
    assert!(
        with_mount("{name: cache, mountPath: /x, subPath: ../escape}")
            .contains("subPath \"../escape\"")
    );
    assert!(with_mount("{name: cache, mountPath: /x, subPath: /abs}").contains("relative path"));
    assert!(
        with_mount("{name: cache, mountPath: /x, subPathExpr: $(POD)}")
            .ends_with("subPathExpr \"$(POD)\": missing value for POD")
    );
    assert!(with_mount("{name: nope, mountPath: /x}").contains("not declared"));
}

#[test]
fn a_user_dev_mount_replaces_all_of_dev() {
    let spec = spec(
        "spec: {volumes: [{name: d, hostPath: {path: /dev}}], containers: [{name: a, image: b, volumeMounts: [{name: d, mountPath: /dev}]}]}",
    );
    let under_dev: Vec<_> = spec
        .mounts()
        .iter()
        .flatten()
        .filter(|m| m.destination().starts_with("/dev"))
        .map(|m| m.destination().to_str().unwrap().to_owned())
        .collect();
    // The defaults under /dev go; the pod's /dev/shm is not a default (containerd adds
    // the sandbox's shm unless a volume is mounted there).
    assert_eq!(under_dev, ["/dev", "/dev/termination-log", "/dev/shm"]);
}

#[test]
fn user_mounts_of_pod_files_win() {
    let spec = spec(
        "spec: {volumes: [{name: h, hostPath: {path: /etc/hosts}}], containers: [{name: a, image: b, volumeMounts: [{name: h, mountPath: /etc/hosts}]}]}",
    );
    let hosts: Vec<_> = spec
        .mounts()
        .iter()
        .flatten()
        .filter(|m| m.destination() == Path::new("/etc/hosts"))
        .collect();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].source().as_deref(), Some(Path::new("/etc/hosts")));
}

#[test]
fn the_termination_message_file_is_bound_per_instance() {
    let default = spec("spec: {containers: [{name: app, image: b}]}");
    let file = mount(&default, "/dev/termination-log").unwrap();
    assert_eq!(
        file.source().as_deref(),
        Some(Path::new("/var/lib/outpost/pods/0123/containers/app/c1"))
    );
    assert_eq!(options(file), ["rbind", "rprivate", "rw"]);
    let custom =
        spec("spec: {containers: [{name: app, image: b, terminationMessagePath: /tmp/../msg}]}");
    assert!(mount(&custom, "/msg").is_some());
    assert!(mount(&custom, "/dev/termination-log").is_none());
}

#[test]
fn k3_a_claims_volume_is_bound_from_its_set_up_path_read_only_when_the_claim_is() {
    use crate::claims::Claimed;
    use std::collections::BTreeMap;
    let pod = pod(&VOLUMES.replace(
        "    - {name: cache, mountPath: /data}\n",
        "    - {name: claim, mountPath: /www}\n    - {name: claim, mountPath: /logs, subPath: logs}\n",
    ));
    for (read_only, access) in [(false, "rw"), (true, "ro")] {
        let path = Path::new("/var/lib/outpost/pods/0123/volumes/kubernetes.io~local-volume/pv-1");
        let claimed = BTreeMap::from([(
            "claim".to_owned(),
            Claimed { path: path.to_path_buf(), read_only, device: None },
        )]);
        let ctx = crate::PodContext { claimed: &claimed, ..context(&pod) };
        let spec = container_spec(
            &ctx,
            first_container(&pod),
            &busybox(),
            &ContainerFiles::default(),
            "c1",
        )
        .unwrap();
        let www = mount(&spec, "/www").unwrap();
        assert_eq!(www.source().as_deref(), Some(path));
        assert_eq!(options(www), ["rbind", "rprivate", access]);
        let logs = mount(&spec, "/logs").unwrap();
        assert_eq!(logs.source().as_deref(), Some(path.join("logs").as_path()));
        assert_eq!(options(logs), ["rbind", "rprivate", access]);
    }
}

const NODE_EXPORTER: &str = r#"spec:
  volumes:
  - {name: root, hostPath: {path: /}}
  - {name: plugins, hostPath: {path: /var/lib/plugins}}
  containers:
  - name: node-exporter
    image: b
    securityContext: {privileged: PRIVILEGED}
    volumeMounts:
    - {name: root, mountPath: /host, readOnly: true, mountPropagation: HostToContainer}
    - {name: plugins, mountPath: /plugins, mountPropagation: PLUGINS}
"#;

fn host_mount(mount_point: &str, shared: bool, slave: bool) -> crate::HostMount {
    crate::HostMount { mount_point: mount_point.into(), shared, slave }
}

/// The spec of [`NODE_EXPORTER`] (`privileged`, the plugins' mount's propagation) on a
/// host with `host_mounts`.
fn propagated(
    privileged: bool,
    plugins: &str,
    host_mounts: &[crate::HostMount],
) -> crate::Result<oci_spec::runtime::Spec> {
    let text =
        NODE_EXPORTER.replace("PRIVILEGED", &privileged.to_string()).replace("PLUGINS", plugins);
    let pod = pod(&text);
    let ctx = crate::PodContext { host_mounts, ..context(&pod) };
    container_spec(&ctx, first_container(&pod), &busybox(), &ContainerFiles::default(), "c1")
}

#[test]
fn d6_host_to_container_is_rslave_and_the_rootfs_follows() {
    let host = [host_mount("/", true, false), host_mount("/var/lib/plugins", false, true)];
    let spec = propagated(false, "None", &host).unwrap();
    assert_eq!(options(mount(&spec, "/host").unwrap()), ["rbind", "rslave", "ro"]);
    assert_eq!(options(mount(&spec, "/plugins").unwrap()), ["rbind", "rprivate", "rw"]);
    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(linux.rootfs_propagation().as_deref(), Some("rslave"), "containerd's CRI");
    // A slave host mount is enough for HostToContainer.
    let spec = propagated(false, "HostToContainer", &host).unwrap();
    assert_eq!(options(mount(&spec, "/plugins").unwrap()), ["rbind", "rslave", "rw"]);
}

#[test]
fn d6_bidirectional_is_rshared_for_a_privileged_container_on_a_shared_mount() {
    let host = [host_mount("/", true, false), host_mount("/var/lib/plugins", true, false)];
    let spec = propagated(true, "Bidirectional", &host).unwrap();
    assert_eq!(options(mount(&spec, "/plugins").unwrap()), ["rbind", "rshared", "rw"]);
    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(linux.rootfs_propagation().as_deref(), Some("rshared"));
    let error = propagated(false, "Bidirectional", &host).unwrap_err().to_string();
    assert!(error.contains("available only to privileged containers"), "{error}");
}

#[test]
fn d6_a_source_on_a_private_mount_cannot_have_propagation() {
    // The deepest mount above the source decides: /var/lib/plugins is private.
    let host = [host_mount("/", true, false), host_mount("/var/lib/plugins", false, false)];
    let error = propagated(false, "HostToContainer", &host).unwrap_err().to_string();
    assert!(
        error.contains(
            "path /var/lib/plugins is mounted on /var/lib/plugins but it is not a shared or \
             slave mount"
        ),
        "containerd's words: {error}"
    );
    let host = [host_mount("/", false, true), host_mount("/var/lib/plugins", false, true)];
    let error = propagated(true, "Bidirectional", &host).unwrap_err().to_string();
    assert!(error.contains("is not a shared mount"), "{error}");
    // Not one mount known: said so.
    let error = propagated(false, "None", &[]).unwrap_err().to_string();
    assert!(error.contains("no mount the agent can see"), "{error}");
    let error = propagated(false, "Sideways", &host).unwrap_err().to_string();
    assert!(error.contains("invalid MountPropagation mode"), "{error}");
}
