//! End to end: claim volumes of API pods (SEMANTICS.md K3), through the real binary, real
//! pods and the test API server, which the tests drive as the cluster's controllers
//! would (local-path-provisioner, the PersistentVolume binder, the ephemeral-volume
//! controller). A StatefulSet-shaped pod's data on a local-path volume survives an agent
//! restart and an offline reboot; an unbound claim keeps its pod `ContainerCreating` with
//! kubelet's FailedMount until it binds; a `local` volume is bind-mounted and given to
//! the `fsGroup`; a volume pinned to another node is refused; an ephemeral volume waits
//! for the claim made for its pod; a `local` volume in Block mode (a loop device) is a
//! device in the container.

use outpost_tests::needs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use outpost_tests::api_pods::{
    Cluster, LONG, NODE, SERVE, api_pod, container_id, inside, read, state,
};
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

const PROVISIONER: &str = "rancher.io/local-path";

/// What these tests do with a [`Cluster`] beyond the shared harness.
trait ClaimVolumes {
    /// Waits for a FailedMount Event of pod `name` with `message`, the pod waiting in
    /// ContainerCreating.
    fn wait_failed_mount(&self, name: &str, message: &str);

    /// A claim as a StatefulSet's template and local-path's scheduler-side annotations
    /// make it (`selected-node` set by the scheduler), not bound yet.
    fn claim(&self, name: &str, labels: Value) -> Value;

    /// What local-path-provisioner and the binder do for `claim`: a PersistentVolume
    /// `pvc-<claim uid>` with `source` (and local-path's node affinity on `node`), bound
    /// to the claim, then the claim bound to it. The volume's name.
    fn bind(&self, claim: &Value, source: Value, node: &str) -> String;

    /// What the binder does: `volume` (a PersistentVolume) made with its `claimRef` to
    /// `claim` and `Bound`, then the claim bound to it. The volume's name.
    fn bind_volume(&self, claim: &Value, volume: Value) -> String;

    /// local-path's hostPath source for `claim`, under the node's directory (for
    /// `/opt/local-path-provisioner`): `<base>/pvc-<uid>_<namespace>_<name>`.
    fn local_path(&self, claim: &Value) -> (PathBuf, Value);
}

impl ClaimVolumes for Cluster {
    fn wait_failed_mount(&self, name: &str, message: &str) {
        let found = |events: &[Value]| {
            events.iter().any(|e| {
                e["reason"] == "FailedMount"
                    && e["message"].as_str().map(without_random_names).as_deref() == Some(message)
            })
        };
        let deadline = Instant::now() + LONG;
        while !found(&self.events(name)) {
            assert!(
                Instant::now() < deadline,
                "no FailedMount {message:?} in {:#?}",
                self.events(name)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // The Event is posted as the mount fails; the status reaches the API server on
        // the status sync's own write, possibly a moment later.
        eventually("the pod's container is waiting in ContainerCreating", LONG, || {
            self.server()
                .get_pod("default", name)
                .is_ok_and(|pod| state(&pod, "main")["waiting"]["reason"] == "ContainerCreating")
        });
    }

    fn claim(&self, name: &str, labels: Value) -> Value {
        self.create(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": labels,
                "annotations": {
                    "volume.beta.kubernetes.io/storage-provisioner": PROVISIONER,
                    "volume.kubernetes.io/storage-provisioner": PROVISIONER,
                    "volume.kubernetes.io/selected-node": NODE,
                },
                "finalizers": ["kubernetes.io/pvc-protection"],
            },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "local-path",
                "volumeMode": "Filesystem",
            },
        }))
    }

    fn bind(&self, claim: &Value, source: Value, node: &str) -> String {
        let name = format!("pvc-{}", claim["metadata"]["uid"].as_str().unwrap());
        let mut volume = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {
                    "pv.kubernetes.io/provisioned-by": PROVISIONER,
                    "local.path.provisioner/selected-node": node,
                },
                "finalizers": ["kubernetes.io/pv-protection"],
            },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]},
                ]}]}},
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": "local-path",
                "volumeMode": "Filesystem",
            },
        });
        for (key, value) in source.as_object().unwrap() {
            volume["spec"][key] = value.clone();
        }
        self.bind_volume(claim, volume)
    }

    fn bind_volume(&self, claim: &Value, mut volume: Value) -> String {
        let name = volume["metadata"]["name"].as_str().unwrap().to_owned();
        let claim_name = claim["metadata"]["name"].as_str().unwrap();
        volume["spec"]["claimRef"] = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "name": claim_name,
            "namespace": "default",
            "resourceVersion": claim["metadata"]["resourceVersion"],
            "uid": claim["metadata"]["uid"],
        });
        let created = self.create(volume);
        let mut status = created.clone();
        status["status"] = json!({"phase": "Bound"});
        self.server().update_status(status).unwrap();
        let mut bound =
            self.server().get("persistentvolumeclaims", Some("default"), claim_name).unwrap();
        bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = json!("yes");
        bound["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] = json!("yes");
        bound["spec"]["volumeName"] = json!(name);
        let mut bound = self.server().update(bound).unwrap();
        bound["status"] = json!({
            "phase": "Bound",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"},
        });
        self.server().update_status(bound).unwrap();
        name
    }

    fn local_path(&self, claim: &Value) -> (PathBuf, Value) {
        let uid = claim["metadata"]["uid"].as_str().unwrap();
        let name = claim["metadata"]["name"].as_str().unwrap();
        let base = self.api.node.path("opt/local-path-provisioner");
        let path = base.join(format!("pvc-{uid}_default_{name}"));
        let source = json!({"hostPath": {"path": path, "type": "DirectoryOrCreate"}});
        (path, source)
    }
}

/// `message` with the random part of `kube-api-access-xxxxx` as `*`.
fn without_random_names(message: &str) -> String {
    const PREFIX: &str = "kube-api-access-";
    match message.find(PREFIX) {
        Some(at) => {
            let rest = &message[at + PREFIX.len()..];
            let end = rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(rest.len());
            format!("{}{PREFIX}*{}", &message[..at], without_random_names(&rest[end..]))
        }
        None => message.to_owned(),
    }
}

/// An API pod on this node: busybox `main` running `script` then serving, with the
/// volume `www` (`volume`) mounted at `/data` (`mount` merged into the mount).
fn pod(name: &str, script: &str, volume: Value, mount: Value) -> Value {
    let mut volume_mount = json!({"name": "www", "mountPath": "/data"});
    for (k, v) in mount.as_object().into_iter().flatten() {
        volume_mount[k] = v.clone();
    }
    let mut www = json!({"name": "www"});
    for (k, v) in volume.as_object().unwrap() {
        www[k] = v.clone();
    }
    let container = json!({
        "command": ["sh", "-c", format!("{script}; {SERVE}")],
        "volumeMounts": [volume_mount],
    });
    api_pod(name, container, json!({"volumes": [www]}))
}

/// kubernetes.io's StatefulSet example: the pod `web-0` of StatefulSet `web`, its
/// claim `www-web-0` from the `www` volume claim template.
fn stateful_set_pod(script: &str) -> Value {
    let mut pod = pod(
        "web-0",
        script,
        json!({"persistentVolumeClaim": {"claimName": "www-web-0"}}),
        json!({"mountPath": "/usr/share/nginx/html"}),
    );
    pod["metadata"]["labels"] = json!({
        "app": "nginx",
        "apps.kubernetes.io/pod-index": "0",
        "controller-revision-hash": "web-6d5c8f5d7b",
        "statefulset.kubernetes.io/pod-name": "web-0",
    });
    pod["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
        "uid": "5a7e0c1e-0000-4000-8000-000000000001",
        "controller": true, "blockOwnerDeletion": true,
    }]);
    pod["spec"]["hostname"] = json!("web-0");
    pod["spec"]["subdomain"] = json!("nginx");
    pod
}

#[needs(pods)]
#[test]
fn k3_a_local_path_volume_keeps_a_stateful_pods_data_across_an_agent_restart_and_a_reboot() {
    let mut c = Cluster::start();
    let claim = c.claim("www-web-0", json!({"app": "nginx"}));
    let (path, source) = c.local_path(&claim);
    c.bind(&claim, source, NODE);
    let uid = c
        .create_pod(stateful_set_pod("echo started >> /usr/share/nginx/html/starts"))
        .metadata
        .uid
        .unwrap();
    let first = c.pid("web-0");
    assert_eq!(read(first, "/usr/share/nginx/html/starts"), "started\n");
    assert_eq!(std::fs::read_to_string(path.join("starts")).unwrap(), "started\n");

    // An agent restart: the pod keeps running, its volume with it.
    c.agent.take().unwrap().stop();
    c.agent = Some(c.api.start(&[]));
    eventually("the restarted agent reports the pod", LONG, || {
        c.server().get_pod("default", "web-0").is_ok_and(|p| {
            state(&p, "main")["running"].is_object() && !container_id(&p, "main").is_empty()
        })
    });
    assert_eq!(c.pid("web-0"), first, "the same container");
    assert_eq!(read(first, "/usr/share/nginx/html/starts"), "started\n");

    // A reboot without the API server: the claim and its volume come from the
    // checkpoint, the new container finds what the first wrote.
    let after = c.reboot_offline("web-0", &uid);
    assert_ne!(after, first, "a new container");
    assert_eq!(read(after, "/usr/share/nginx/html/starts"), "started\nstarted\n");
    c.api.rt.block_on(c.server().restore()).unwrap();
}

#[needs(pods)]
#[test]
fn k3_an_unbound_claim_keeps_the_pod_creating_until_it_binds() {
    let c = Cluster::start();
    c.create_pod(pod(
        "waits",
        "echo ok > /data/f",
        json!({"persistentVolumeClaim": {"claimName": "late"}}),
        json!({}),
    ));
    c.wait_failed_mount(
        "waits",
        "Unable to attach or mount volumes: unmounted volumes=[kube-api-access-* www], unattached volumes=[], \
         failed to process volumes=[www]: error processing PVC default/late: failed to fetch \
         PVC from API server: persistentvolumeclaims \"late\" not found",
    );
    let claim = c.claim("late", json!({}));
    c.wait_failed_mount(
        "waits",
        "Unable to attach or mount volumes: unmounted volumes=[kube-api-access-* www], unattached volumes=[], \
         failed to process volumes=[www]: error processing PVC default/late: PVC is not bound",
    );
    let (path, source) = c.local_path(&claim);
    c.bind(&claim, source, NODE);
    // The pod reads the claim again (K5: with `get`) at each retry of its sandbox, at most
    // about 10 s apart: the time is reported, not asserted.
    let bound = Instant::now();
    let pid = c.pid("waits");
    let server = c.server();
    eprintln!(
        "K3 figures: claim bound -> pod running in {:?}; requests: {} get of the claim, {} get \
         of volumes, {} list and {} watch of claims and volumes",
        bound.elapsed(),
        server.count_object("get", "persistentvolumeclaims", "default/late"),
        server.count("get", "persistentvolumes"),
        server.count("list", "persistentvolumeclaims") + server.count("list", "persistentvolumes"),
        server.count("watch", "persistentvolumeclaims")
            + server.count("watch", "persistentvolumes"),
    );
    for verb in ["list", "watch"] {
        assert_eq!(server.count(verb, "persistentvolumeclaims"), 0, "claims are only got");
        assert_eq!(server.count(verb, "persistentvolumes"), 0, "volumes are only got");
    }
    assert_eq!(read(pid, "/data/f"), "ok\n");
    assert_eq!(std::fs::read_to_string(path.join("f")).unwrap(), "ok\n");
}

#[needs(pods)]
#[test]
fn k3_a_local_volume_is_bind_mounted_given_to_the_fs_group_and_unmounted_with_the_pod() {
    use std::os::unix::fs::MetadataExt as _;
    let c = Cluster::start();
    let disk = c.api.node.path("disks/vol1");
    std::fs::create_dir_all(&disk).unwrap();
    let claim = c.claim("data", json!({}));
    let volume = c.bind(&claim, json!({"local": {"path": disk}}), NODE);
    let mut spec = pod(
        "local",
        "echo hi > /data/sub/f",
        json!({"persistentVolumeClaim": {"claimName": "data"}}),
        json!({}),
    );
    spec["spec"]["securityContext"] = json!({"fsGroup": 2345});
    spec["spec"]["containers"][0]["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "www", "mountPath": "/data/sub", "subPath": "sub"}));
    let uid = c.create_pod(spec).metadata.uid.unwrap();
    let pid = c.pid("local");
    assert_eq!(read(pid, "/data/sub/f"), "hi\n");
    assert_eq!(std::fs::read_to_string(disk.join("sub/f")).unwrap(), "hi\n");
    let mount = c
        .api
        .node
        .path("state/pods")
        .join(&uid)
        .join("volumes/kubernetes.io~local-volume")
        .join(&volume);
    let mounts = outpost_leaks::mounts_under(&mount.canonicalize().unwrap());
    assert_eq!(mounts.len(), 1, "{mounts:?}");
    let root = std::fs::metadata(&disk).unwrap();
    assert_eq!(root.gid(), 2345, "the volume is the fsGroup's");
    assert_eq!(root.mode() & 0o2000, 0o2000, "setgid");
    assert_eq!(std::fs::metadata(disk.join("sub/f")).unwrap().gid(), 2345);

    c.server().delete_pod("default", "local").unwrap();
    eventually("the pod's directory is gone", LONG, || {
        !c.api.node.path("state/pods").join(&uid).exists()
    });
    assert!(outpost_leaks::mounts_under(&disk.canonicalize().unwrap()).is_empty());
    assert_eq!(std::fs::read_to_string(disk.join("sub/f")).unwrap(), "hi\n", "the data stays");
}

#[needs(pods)]
#[test]
fn k3_a_volume_pinned_to_another_node_is_refused_with_kubelets_message() {
    let c = Cluster::start();
    let claim = c.claim("elsewhere", json!({}));
    let (_, source) = c.local_path(&claim);
    let volume = c.bind(&claim, source, "edge-2");
    c.create_pod(pod(
        "pinned",
        "true",
        json!({"persistentVolumeClaim": {"claimName": "elsewhere"}}),
        json!({}),
    ));
    c.wait_failed_mount(
        "pinned",
        &format!(
            "MountVolume.NodeAffinity check failed for volume \"{volume}\" : no matching \
             NodeSelectorTerms"
        ),
    );
}

/// K3 (A1): a claim bound to a network volume (NFS here) is not mounted, nor a `hostPath`
/// one in Block mode given as a device: the pod waits in ContainerCreating, its
/// FailedMount naming the type.
#[needs(pods)]
#[test]
fn k3_network_and_block_host_path_volumes_are_refused_naming_the_type() {
    let c = Cluster::start();
    let shared = c.claim("shared", json!({}));
    let nfs = json!({"nfs": {"server": "nfs.example.internal", "path": "/exports/www"}});
    let volume = c.bind(&shared, nfs, NODE);
    c.create_pod(pod(
        "on-nfs",
        "true",
        json!({"persistentVolumeClaim": {"claimName": "shared"}}),
        json!({}),
    ));
    c.wait_failed_mount(
        "on-nfs",
        &format!(
            "MountVolume.SetUp failed for volume \"{volume}\" : PersistentVolume {volume} is of \
             type nfs, which Outpost does not mount; use a hostPath or local PersistentVolume \
             (local-path-provisioner makes them)"
        ),
    );

    let raw = c.claim("raw", json!({}));
    let (_, mut source) = c.local_path(&raw);
    source["volumeMode"] = json!("Block");
    let volume = c.bind(&raw, source, NODE);
    let mut spec =
        pod("on-block", "true", json!({"persistentVolumeClaim": {"claimName": "raw"}}), json!({}));
    let main = &mut spec["spec"]["containers"][0];
    main.as_object_mut().unwrap().remove("volumeMounts");
    main["volumeDevices"] = json!([{"name": "www", "devicePath": "/dev/xvda"}]);
    c.create_pod(spec);
    c.wait_failed_mount(
        "on-block",
        &format!(
            "MapVolume.FindMapperPluginBySpec failed for volume \"{volume}\" : no volume plugin \
             matched: PersistentVolume {volume} is a hostPath volume in volumeMode Block, which \
             kubelet's hostPath plugin does not map; use a local PersistentVolume for a block \
             device"
        ),
    );
}

/// A loop device on an 8 MiB file of its own: a block device a test can write and read
/// back through its file. Detached, and its file removed, when dropped (on failure too).
struct LoopDisk {
    device: String,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopDisk {
    fn new() -> LoopDisk {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("disk.img");
        let run = |program: &str, args: &[&str]| {
            let out = std::process::Command::new(program).args(args).output().unwrap();
            assert!(out.status.success(), "{program} {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        };
        run("truncate", &["-s", "8M", file.to_str().unwrap()]);
        let device = run("losetup", &["--find", "--show", file.to_str().unwrap()]);
        LoopDisk { device, file, _dir: dir }
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let detached = std::process::Command::new("losetup").args(["-d", &self.device]).status();
        if !detached.is_ok_and(|s| s.success()) {
            eprintln!("losetup -d {} failed", self.device);
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// K3: kubernetes.io's raw block volume: a claim with `volumeMode: Block` bound to a
/// `local` PersistentVolume in Block mode (a loop device here), and a pod that takes it
/// in `volumeDevices` at `/dev/xvda`, writes to the device with `dd` and reads it back;
/// the bytes are on the loop device's file. A Filesystem claim in `volumeDevices` waits
/// with kubelet's message.
#[needs(pods)]
#[test]
fn k3_a_local_block_volume_is_a_device_in_the_container() {
    const WRITTEN: &str = "outpost-k3-block";
    // Made first, dropped last: the agent and its pods are gone before it is detached.
    let disk = LoopDisk::new();
    let c = Cluster::start();
    let claim = c.create(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "block-pvc", "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Block",
            "resources": {"requests": {"storage": "8Mi"}},
            "storageClassName": "local-storage",
        },
    }));
    // kubernetes.io's local PersistentVolume, in Block mode, pinned to this node.
    let volume = c.bind_volume(
        &claim,
        json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": "block-pv",
                "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
                "finalizers": ["kubernetes.io/pv-protection"],
            },
            "spec": {
                "capacity": {"storage": "8Mi"},
                "volumeMode": "Block",
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "local-storage",
                "local": {"path": disk.device},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]},
                ]}]}},
            },
        }),
    );
    let script = format!(
        "set -e; printf {WRITTEN} > /written; dd if=/written of=/dev/xvda conv=fsync; \
         dd if=/dev/xvda of=/read bs={} count=1",
        WRITTEN.len()
    );
    let uid = c
        .create_pod(api_pod(
            "pod-with-block-volume",
            json!({
                "command": ["sh", "-c", format!("{script}; {SERVE}")],
                "volumeDevices": [{"name": "data", "devicePath": "/dev/xvda"}],
            }),
            json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "block-pvc"}}]}),
        ))
        .metadata
        .uid
        .unwrap();
    let pid = c.pid("pod-with-block-volume");
    eventually("the container read the device back", LONG, || {
        std::fs::read_to_string(inside(pid, "/read")).is_ok_and(|r| r.len() == WRITTEN.len())
    });
    assert_eq!(read(pid, "/read"), WRITTEN);
    let on_disk = std::fs::read(&disk.file).unwrap();
    assert_eq!(&on_disk[..WRITTEN.len()], WRITTEN.as_bytes(), "the bytes are on the device");
    let link = c
        .api
        .node
        .path("state/pods")
        .join(&uid)
        .join("volumeDevices/kubernetes.io~local-volume")
        .join(&volume);
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new(&disk.device));

    // A Filesystem claim is no device: kubelet's populator says so, the pod waits.
    let claim = c.claim("fs", json!({}));
    let (_, source) = c.local_path(&claim);
    c.bind(&claim, source, NODE);
    let mut spec = pod(
        "fs-as-device",
        "true",
        json!({"persistentVolumeClaim": {"claimName": "fs"}}),
        json!({}),
    );
    let main = &mut spec["spec"]["containers"][0];
    main.as_object_mut().unwrap().remove("volumeMounts");
    main["volumeDevices"] = json!([{"name": "www", "devicePath": "/dev/xvda"}]);
    c.create_pod(spec);
    c.wait_failed_mount(
        "fs-as-device",
        "Unable to attach or mount volumes: unmounted volumes=[kube-api-access-* www], \
         unattached volumes=[], failed to process volumes=[www]: volume www has volumeMode \
         Filesystem, but is specified in volumeDevices",
    );

    c.server().delete_pod("default", "pod-with-block-volume").unwrap();
    eventually("the pod's directory is gone", LONG, || {
        !c.api.node.path("state/pods").join(&uid).exists()
    });
    assert!(Path::new(&disk.device).exists(), "the device stays");
}

#[needs(pods)]
#[test]
fn k3_an_ephemeral_volume_waits_for_the_claim_made_for_its_pod() {
    let c = Cluster::start();
    let template = json!({"ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "local-path",
    }}}});
    let created = c.create_pod(pod("eph", "echo e > /data/f", template, json!({})));
    c.wait_failed_mount(
        "eph",
        "Unable to attach or mount volumes: unmounted volumes=[kube-api-access-* www], unattached volumes=[], \
         failed to process volumes=[www]: error processing PVC default/eph-www: failed to \
         fetch PVC from API server: persistentvolumeclaims \"eph-www\" not found",
    );
    // The ephemeral-volume controller's claim: named `<pod>-<volume>`, the pod its controller.
    let claim = c.create(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "eph-www",
            "namespace": "default",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": "eph",
                "uid": created.metadata.uid.clone().unwrap(),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "local-path",
            "volumeMode": "Filesystem",
        },
    }));
    let (path, source) = c.local_path(&claim);
    c.bind(&claim, source, NODE);
    let pid = c.pid("eph");
    assert_eq!(read(pid, "/data/f"), "e\n");
    assert_eq!(std::fs::read_to_string(path.join("f")).unwrap(), "e\n");
}
