use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use oci_spec::image::ImageConfiguration;
use oci_spec::runtime::{Capability, LinuxNamespaceType, Mount, PosixRlimitType, Spec};

use super::container::OCI_VERSION;
use super::projection::Resolved;
use super::*;

/// A pod from YAML, named and namespaced as the manifest defaulting leaves it.
pub(super) fn pod(yaml: &str) -> Pod {
    let mut pod: Pod = serde_saphyr::from_str(yaml).unwrap();
    pod.metadata.name.get_or_insert_with(|| "web-node1".to_owned());
    pod.metadata.namespace.get_or_insert_with(|| "default".to_owned());
    pod.metadata.uid.get_or_insert_with(|| "0123456789abcdef".to_owned());
    pod
}

/// An image configuration from its JSON.
pub(super) fn image(json: &str) -> ImageConfiguration {
    serde_json::from_str(json).unwrap()
}

pub(super) fn busybox() -> ImageConfiguration {
    image(
        r#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{"Env":["PATH=/bin"],"Cmd":["sh"]}}"#,
    )
}

const IPS: &[IpAddr] = &[IpAddr::V4(std::net::Ipv4Addr::new(10, 88, 0, 5))];

pub(super) fn context(pod: &Pod) -> PodContext<'_> {
    PodContext {
        pod,
        node_name: "node1",
        pod_ips: IPS,
        host_ip: Some("192.168.1.10".parse().unwrap()),
        cluster_domain: "cluster.local",
        namespaces: Namespaces {
            pid: None,
            network: Some(Path::new("/run/outpost/netns/p")),
            ipc: Some(Path::new("/run/outpost/ipc/p")),
            uts: Some(Path::new("/run/outpost/uts/p")),
        },
        dev_shm: Path::new("/run/outpost/pods/0123/shm"),
        pod_dir: Path::new("/var/lib/outpost/pods/0123"),
        cgroups_path: "/kubepods/besteffort/pod0123/c1",
        host_capabilities: &defaults::ALL_CAPABILITIES,
        apparmor_enabled: false,
        resolved: &NO_OBJECTS,
        services: &crate::services::NO_SERVICES,
        claimed: &NO_CLAIMS,
        host_mounts: &[],
        swap: crate::NodeSwap::default(),
        recursive_read_only: true,
    }
}

static NO_OBJECTS: Resolved = Resolved(std::collections::BTreeMap::new());
static NO_CLAIMS: std::collections::BTreeMap<String, crate::claims::Claimed> =
    std::collections::BTreeMap::new();

pub(super) fn first_container(pod: &Pod) -> &Container {
    &pod.spec.as_ref().unwrap().containers[0]
}

pub(super) fn spec_of(pod: &Pod, image: &ImageConfiguration) -> Result<Spec> {
    container_spec(&context(pod), first_container(pod), image, &ContainerFiles::default(), "c1")
}

pub(super) fn spec(yaml: &str) -> Spec {
    spec_of(&pod(yaml), &busybox()).unwrap()
}

/// The error with its causes, as the agent shows it.
pub(super) fn error(yaml: &str) -> String {
    outpost_core::error_chain::describe(&spec_of(&pod(yaml), &busybox()).unwrap_err())
}

pub(super) fn mount<'s>(spec: &'s Spec, destination: &str) -> Option<&'s Mount> {
    spec.mounts().iter().flatten().find(|m| m.destination() == Path::new(destination))
}

pub(super) fn options(mount: &Mount) -> Vec<&str> {
    mount.options().iter().flatten().map(String::as_str).collect()
}

pub(super) fn effective(spec: &Spec) -> HashSet<Capability> {
    let caps = spec.process().as_ref().unwrap().capabilities().as_ref().unwrap();
    assert_eq!(caps.bounding(), caps.effective());
    assert_eq!(caps.permitted(), caps.effective());
    assert_eq!(caps.inheritable(), &None);
    assert_eq!(caps.ambient(), &None);
    caps.effective().clone().unwrap()
}

pub(super) const PLAIN: &str = "spec: {containers: [{name: app, image: busybox}]}";

#[test]
fn defaults_follow_containerd() {
    let spec = spec(PLAIN);
    assert_eq!(spec.version(), OCI_VERSION);
    let root = spec.root().as_ref().unwrap();
    assert_eq!(root.path(), Path::new("rootfs"));
    assert_eq!(root.readonly(), Some(false));
    let process = spec.process().as_ref().unwrap();
    assert_eq!(process.args().as_deref(), Some(&["sh".to_owned()][..]));
    assert_eq!(process.cwd(), Path::new("/"));
    assert_eq!((process.user().uid(), process.user().gid()), (0, 0));
    assert_eq!(process.no_new_privileges(), Some(false));
    assert_eq!(process.terminal(), Some(false));
    let rlimits = process.rlimits().as_ref().unwrap();
    assert_eq!(rlimits.len(), 1);
    assert_eq!(rlimits[0].typ(), PosixRlimitType::RlimitNofile);
    assert_eq!((rlimits[0].soft(), rlimits[0].hard()), (1024, 1024));
    assert_eq!(effective(&spec), defaults::CAPABILITIES.into_iter().collect());

    let destinations: Vec<_> =
        spec.mounts().iter().flatten().map(|m| m.destination().to_path_buf()).collect();
    let expected = [
        "/proc",
        "/dev",
        "/dev/pts",
        "/dev/mqueue",
        "/sys",
        "/sys/fs/cgroup",
        "/etc/hosts",
        "/etc/resolv.conf",
        "/dev/termination-log",
        "/dev/shm",
    ];
    assert_eq!(destinations, expected.map(PathBuf::from));
    assert!(options(mount(&spec, "/sys").unwrap()).contains(&"ro"));
    assert!(options(mount(&spec, "/sys/fs/cgroup").unwrap()).contains(&"ro"));

    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(linux.masked_paths().as_ref().unwrap().len(), 10);
    assert!(linux.masked_paths().as_ref().unwrap().contains(&"/proc/kcore".to_owned()));
    assert_eq!(linux.readonly_paths().as_ref().unwrap().len(), 5);
    assert_eq!(linux.cgroups_path().as_deref(), Some(Path::new("/kubepods/besteffort/pod0123/c1")));
    let devices = linux.resources().as_ref().unwrap().devices().as_ref().unwrap();
    assert_eq!(devices.len(), 1);
    assert!(!devices[0].allow());
    assert_eq!(devices[0].access().as_deref(), Some("rwm"));
    assert_eq!(spec.hostname().as_deref(), Some("web-node1"));
    assert_eq!(spec.annotations(), &None);
}

#[test]
fn namespaces_join_the_pods_or_the_hosts() {
    let spec = spec(PLAIN);
    let namespaces = spec.linux().as_ref().unwrap().namespaces().as_ref().unwrap();
    let found: Vec<_> = namespaces.iter().map(|n| (n.typ(), n.path().clone())).collect();
    assert_eq!(
        found,
        [
            (LinuxNamespaceType::Pid, None),
            (LinuxNamespaceType::Ipc, Some("/run/outpost/ipc/p".into())),
            (LinuxNamespaceType::Uts, Some("/run/outpost/uts/p".into())),
            (LinuxNamespaceType::Mount, None),
            (LinuxNamespaceType::Network, Some("/run/outpost/netns/p".into())),
        ]
    );

    let pod = pod("spec: {hostPID: true, hostNetwork: true, containers: [{name: app, image: b}]}");
    let mut ctx = context(&pod);
    ctx.namespaces = Namespaces::default();
    let spec =
        container_spec(&ctx, first_container(&pod), &busybox(), &ContainerFiles::default(), "c1")
            .unwrap();
    let namespaces = spec.linux().as_ref().unwrap().namespaces().as_ref().unwrap();
    let types: Vec<_> = namespaces.iter().map(|n| n.typ()).collect();
    assert_eq!(types, [LinuxNamespaceType::Mount]);
    assert_eq!(spec.hostname(), &None, "no hostname without a UTS namespace of its own");
}

#[test]
fn command_and_args_over_entrypoint_and_cmd() {
    let image = image(
        r#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},
            "config":{"Entrypoint":["/entry"],"Cmd":["--default"],"WorkingDir":"/srv","User":"1000:2000"}}"#,
    );
    let args = |yaml: &str| -> Vec<String> {
        let spec = spec_of(&pod(yaml), &image).unwrap();
        spec.process().as_ref().unwrap().args().clone().unwrap()
    };
    assert_eq!(args(PLAIN), ["/entry", "--default"]);
    assert_eq!(
        args("spec: {containers: [{name: a, image: b, command: [/bin/x, -v]}]}"),
        ["/bin/x", "-v"]
    );
    assert_eq!(
        args("spec: {containers: [{name: a, image: b, args: [--mine]}]}"),
        ["/entry", "--mine"]
    );
    assert_eq!(
        args("spec: {containers: [{name: a, image: b, command: [/x], args: [y]}]}"),
        ["/x", "y"]
    );
    let spec = spec_of(&pod(PLAIN), &image).unwrap();
    let process = spec.process().as_ref().unwrap();
    assert_eq!(process.cwd(), Path::new("/srv"));
    assert_eq!(
        (process.user().uid(), process.user().gid()),
        (1000, 0),
        "kubelet passes the image USER's uid alone: its gid comes from /etc/passwd, else 0"
    );
}

#[test]
fn command_expands_the_containers_env() {
    let spec = spec(
        r#"spec: {containers: [{name: a, image: b,
            env: [{name: WHO, value: world}],
            command: [echo, "hello $(WHO)", "$$(WHO)", "$(PATH)"]}]}"#,
    );
    let args = spec.process().as_ref().unwrap().args().clone().unwrap();
    assert_eq!(args, ["echo", "hello world", "$(WHO)", "$(PATH)"], "image env is not expanded");
}

#[test]
fn no_command_is_an_error() {
    let empty =
        image(r#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#);
    let error = spec_of(&pod(PLAIN), &empty).unwrap_err().to_string();
    assert!(error.starts_with("pod default/web-node1 container app: no command"), "{error}");
}

#[test]
fn working_dir_from_the_container() {
    let spec = spec("spec: {containers: [{name: a, image: b, workingDir: /work}]}");
    assert_eq!(spec.process().as_ref().unwrap().cwd(), Path::new("/work"));
}

#[test]
fn users_and_groups() {
    let user = |yaml: &str, image_user: &str| {
        let config = format!(
            r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":[]}},"config":{{"User":"{image_user}","Cmd":["sh"]}}}}"#
        );
        let spec = spec_of(&pod(yaml), &image(&config))?;
        let user = spec.process().as_ref().unwrap().user().clone();
        Ok::<_, Error>((user.uid(), user.gid(), user.additional_gids().clone()))
    };
    assert_eq!(user(PLAIN, "").unwrap(), (0, 0, None));
    assert_eq!(user(PLAIN, "7").unwrap(), (7, 0, None));
    assert_eq!(user(PLAIN, "7:8").unwrap(), (7, 0, None), "kubelet drops the image's group");
    let error = user(PLAIN, "nobody").unwrap_err().to_string();
    assert!(error.contains("\"nobody\"") && error.contains("no /etc/passwd"), "{error}");
    assert_eq!(user(PLAIN, "7:staff").unwrap(), (7, 0, None));

    let pod_level = "spec: {securityContext: {runAsUser: 100, runAsGroup: 200, supplementalGroups: [5, 6], fsGroup: 7}, containers: [{name: a, image: b}]}";
    assert_eq!(user(pod_level, "nobody").unwrap(), (100, 200, Some(vec![5, 6, 7])));
    let container_level = "spec: {securityContext: {runAsUser: 100, runAsGroup: 200}, containers: [{name: a, image: b, securityContext: {runAsUser: 300}}]}";
    assert_eq!(user(container_level, "").unwrap(), (300, 200, None));
    let group_only = "spec: {containers: [{name: a, image: b, securityContext: {runAsGroup: 9}}]}";
    assert_eq!(user(group_only, "7:8").unwrap(), (7, 9, None));
    let user_and_group =
        "spec: {containers: [{name: a, image: b, securityContext: {runAsUser: 9, runAsGroup: 9}}]}";
    assert_eq!(user(user_and_group, "").unwrap(), (9, 9, None));
    let user_only = "spec: {containers: [{name: a, image: b, securityContext: {runAsUser: 9}}]}";
    assert_eq!(user(user_only, "7:8").unwrap(), (9, 0, None));

    let non_root =
        "spec: {securityContext: {runAsNonRoot: true}, containers: [{name: a, image: b}]}";
    assert!(matches!(user(non_root, ""), Err(Error::RunAsRoot { .. })));
    assert_eq!(user(non_root, "1").unwrap(), (1, 0, None));
    let groups = "spec: {securityContext: {supplementalGroups: [7, 5, 7], fsGroup: 5}, containers: [{name: a, image: b}]}";
    assert_eq!(user(groups, "").unwrap(), (0, 0, Some(vec![5, 7])), "sorted, once each");
    let negative = "spec: {containers: [{name: a, image: b, securityContext: {runAsUser: -1}}]}";
    assert!(matches!(user(negative, ""), Err(Error::Id { value: -1, .. })));
}

const IMAGE_PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n";
const IMAGE_GROUP: &str = "root:x:0:\napp:x:1001:\naudio:x:63:app\nwheel:x:10:root\n";

/// uid, gid and supplementary groups for `yaml` with an image whose USER is `image_user`
/// and whose /etc/passwd and /etc/group are the above.
fn user_from_files(yaml: &str, image_user: &str) -> Result<(u32, u32, Option<Vec<u32>>)> {
    let config = format!(
        r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":[]}},"config":{{"User":"{image_user}","Cmd":["sh"]}}}}"#
    );
    let pod = pod(yaml);
    let files = ContainerFiles {
        passwd: Some(IMAGE_PASSWD.to_owned()),
        group: Some(IMAGE_GROUP.to_owned()),
        ..ContainerFiles::default()
    };
    let spec =
        container_spec(&context(&pod), first_container(&pod), &image(&config), &files, "c1")?;
    let user = spec.process().as_ref().unwrap().user().clone();
    Ok((user.uid(), user.gid(), user.additional_gids().clone()))
}

#[test]
fn users_from_the_images_files() {
    assert_eq!(user_from_files(PLAIN, "app").unwrap(), (1000, 1001, Some(vec![63])));
    assert_eq!(user_from_files(PLAIN, "app:wheel").unwrap(), (1000, 1001, Some(vec![63])));
    assert_eq!(user_from_files(PLAIN, "").unwrap(), (0, 0, Some(vec![10])), "root's groups");
    let run_as = "spec: {securityContext: {runAsUser: 1000, supplementalGroups: [5]}, containers: [{name: a, image: b}]}";
    assert_eq!(user_from_files(run_as, "").unwrap(), (1000, 1001, Some(vec![5, 63])));
    let error = user_from_files(PLAIN, "ghost").unwrap_err().to_string();
    assert!(error.contains("\"ghost\", which is not in the image's /etc/passwd"), "{error}");

    let non_root =
        "spec: {securityContext: {runAsNonRoot: true}, containers: [{name: a, image: b}]}";
    assert_eq!(user_from_files(non_root, "app").unwrap().0, 1000, "the resolved uid is checked");
    assert!(matches!(user_from_files(non_root, "root"), Err(Error::RunAsRoot { .. })));
}

#[test]
fn privilege_escalation_and_proc_mount_rules() {
    let error = |security: &str| {
        spec_of(
            &pod(&format!(
                "spec: {{containers: [{{name: a, image: b, securityContext: {security}}}]}}"
            )),
            &busybox(),
        )
        .unwrap_err()
        .to_string()
    };
    let message = error("{allowPrivilegeEscalation: false, privileged: true}");
    assert!(
        message.contains("allowPrivilegeEscalation: false cannot be set with privileged: true"),
        "{message}"
    );
    let message = error("{allowPrivilegeEscalation: false, capabilities: {add: [SYS_ADMIN]}}");
    assert!(message.contains("with capabilities.add CAP_SYS_ADMIN"), "{message}");
    let message = error("{procMount: Unmasked}");
    assert!(
        message.contains("procMount: Unmasked needs a user namespace (hostUsers: false)"),
        "{message}"
    );
    let message = error("{procMount: Raw}");
    assert!(message.contains("procMount: \"Raw\" is not valid"), "{message}");
    let default =
        spec("spec: {containers: [{name: a, image: b, securityContext: {procMount: Default}}]}");
    let linux = default.linux().as_ref().unwrap();
    assert!(
        linux.masked_paths().as_ref().is_some_and(|paths| paths.iter().any(|p| p == "/proc/kcore"))
    );
    let allowed = spec(
        "spec: {containers: [{name: a, image: b, securityContext: {allowPrivilegeEscalation: true}}]}",
    );
    assert_eq!(allowed.process().as_ref().unwrap().no_new_privileges(), Some(false));
    let unset = spec(PLAIN);
    assert_eq!(
        unset.process().as_ref().unwrap().no_new_privileges(),
        Some(false),
        "unset: allowed"
    );
}

#[test]
fn read_only_root_and_no_new_privileges() {
    let spec = spec(
        "spec: {containers: [{name: a, image: b, securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}}]}",
    );
    assert_eq!(spec.root().as_ref().unwrap().readonly(), Some(true));
    assert_eq!(spec.process().as_ref().unwrap().no_new_privileges(), Some(true));
    assert!(options(mount(&spec, "/etc/resolv.conf").unwrap()).contains(&"ro"));
    assert!(options(mount(&spec, "/etc/hosts").unwrap()).contains(&"rw"), "kubelet's is rw");
}

#[test]
fn resources_reach_the_cgroup() {
    let spec = spec(
        "spec: {containers: [{name: a, image: b, resources: {limits: {cpu: 500m, memory: 64Mi}, requests: {cpu: 250m}}}]}",
    );
    let resources = spec.linux().as_ref().unwrap().resources().clone().unwrap();
    assert_eq!(resources.memory().unwrap().limit(), Some(64 << 20));
    let cpu = resources.cpu().clone().unwrap();
    assert_eq!((cpu.quota(), cpu.period(), cpu.shares()), (Some(50_000), Some(100_000), Some(256)));
}

#[test]
fn errors_name_pod_and_container() {
    let error =
        error("spec: {containers: [{name: app, image: b, resources: {limits: {memory: 12XB}}}]}");
    assert_eq!(
        error,
        "pod default/web-node1 container app: resources.limits.memory: \"12XB\" is not a valid \
         quantity (e.g. \"500m\", \"2\", \"64Mi\", \"1G\"): unknown suffix \"XB\"; use one of n u m \
         k M G T P E Ki Mi Gi Ti Pi Ei, or e<exponent>"
    );
}

#[test]
fn share_process_namespace_joins_the_pods_pid_namespace() {
    let pod = pod("spec: {shareProcessNamespace: true, containers: [{name: app, image: b}]}");
    let mut ctx = context(&pod);
    ctx.namespaces.pid = Some(Path::new("/run/outpost/pods/0123/ns/pid"));
    let spec =
        container_spec(&ctx, first_container(&pod), &busybox(), &ContainerFiles::default(), "c1")
            .unwrap();
    let namespaces = spec.linux().as_ref().unwrap().namespaces().as_ref().unwrap();
    let pid = namespaces.iter().find(|n| n.typ() == LinuxNamespaceType::Pid).unwrap();
    assert_eq!(pid.path().as_deref(), Some(Path::new("/run/outpost/pods/0123/ns/pid")));

    assert_eq!(
        error(
            "spec: {shareProcessNamespace: true, hostPID: true, containers: [{name: app, image: b}]}"
        ),
        "pod default/web-node1 container app: shareProcessNamespace and hostPID cannot both be \
         set (the API server rejects it too); remove one"
    );
}

#[test]
fn dev_shm_is_the_pods() {
    let plain = spec(PLAIN);
    let shm = mount(&plain, "/dev/shm").unwrap();
    assert_eq!(shm.source().as_deref(), Some(Path::new("/run/outpost/pods/0123/shm")));
    assert_eq!(shm.typ().as_deref(), Some("bind"));
    assert_eq!(options(shm), ["rbind", "rprivate", "rw"]);
    let count =
        plain.mounts().iter().flatten().filter(|m| m.destination() == Path::new("/dev/shm"));
    assert_eq!(count.count(), 1, "the default tmpfs is replaced");

    // A volume at /dev/shm wins, as in containerd.
    let with_volume = spec(
        "spec: {volumes: [{name: s, emptyDir: {medium: Memory}}], containers: [{name: app, image: b, volumeMounts: [{name: s, mountPath: /dev/shm}]}]}",
    );
    let shm = mount(&with_volume, "/dev/shm").unwrap();
    assert!(shm.source().as_ref().unwrap().ends_with("kubernetes.io~empty-dir/s"));
}

#[test]
fn tty_gives_a_terminal_and_stdin_is_the_stdio_s_not_the_spec_s() {
    let tty = spec("spec: {containers: [{name: app, image: b, tty: true}]}");
    assert_eq!(tty.process().as_ref().unwrap().terminal(), Some(true));
    // The stdin FIFO is the task's (runtime::stdio); the spec is the same with or without.
    let with_stdin = spec(
        "spec: {containers: [{name: app, image: b, stdin: true, stdinOnce: true, tty: true}]}",
    );
    assert_eq!(with_stdin.process(), tty.process());
}

/// D2: a device plugin's answer in the spec: the node in `linux.devices`, admitted by the
/// device cgroup with the plugin's permissions (after the deny-all rule), the mount a
/// private bind, the variable set over the image's but under the container's own, the
/// annotation on the spec.
#[test]
fn d2_plugin_devices_are_nodes_cgroup_rules_mounts_env_and_annotations() {
    use oci_spec::runtime::{LinuxDeviceBuilder, LinuxDeviceType};
    let pod = pod(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: zigbee, namespace: default, uid: u1}\nspec:\n  containers:\n  - name: z2m\n    image: busybox\n    env: [{name: OWN, value: mine}]\n",
    );
    let node = LinuxDeviceBuilder::default()
        .path("/dev/ttyACM0")
        .typ(LinuxDeviceType::C)
        .major(166)
        .minor(0)
        .file_mode(0o660u32)
        .uid(0u32)
        .gid(20u32)
        .build()
        .unwrap();
    let files = ContainerFiles {
        devices: PluginDevices {
            nodes: vec![(node.clone(), "rw".to_owned())],
            mounts: vec![PluginMount {
                container_path: "/opt/zigbee".into(),
                host_path: "/usr/share/zigbee".into(),
                read_only: true,
            }],
            env: vec![
                ("ZIGBEE_DEVICE".to_owned(), "/dev/ttyACM0".to_owned()),
                ("OWN".to_owned(), "plugin".to_owned()),
            ],
            annotations: [("example.com/stick".to_owned(), "sonoff".to_owned())].into(),
        },
        ..ContainerFiles::default()
    };
    let config = r#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{"Env":["ZIGBEE_DEVICE=image"],"Cmd":["sh"]}}"#;
    let spec = container_spec(&context(&pod), first_container(&pod), &image(config), &files, "c1")
        .unwrap();
    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(linux.devices().as_deref(), Some(&[node][..]));
    let rules = linux.resources().as_ref().unwrap().devices().clone().unwrap();
    assert!(!rules[0].allow(), "deny all first");
    let last = rules.last().unwrap();
    assert!(last.allow());
    assert_eq!(
        (last.typ(), last.major(), last.minor(), last.access().as_deref()),
        (Some(LinuxDeviceType::C), Some(166), Some(0), Some("rw"))
    );
    let mount = spec
        .mounts()
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.destination() == std::path::Path::new("/opt/zigbee"))
        .unwrap();
    assert_eq!(mount.source().as_deref(), Some(std::path::Path::new("/usr/share/zigbee")));
    assert_eq!(
        mount.options().as_deref(),
        Some(&["rbind".to_owned(), "rprivate".to_owned(), "ro".to_owned()][..])
    );
    let env = spec.process().as_ref().unwrap().env().clone().unwrap();
    assert!(env.contains(&"ZIGBEE_DEVICE=/dev/ttyACM0".to_owned()), "over the image's: {env:?}");
    assert!(env.contains(&"OWN=mine".to_owned()), "under the container's own: {env:?}");
    assert_eq!(spec.annotations().as_ref().unwrap()["example.com/stick"], "sonoff");
}

/// K3: a block volume in the spec, as containerd's CRI applies kubelet's `Devices`: the
/// host's node (type, numbers, mode, owner) at `devicePath` in `linux.devices`, admitted
/// by the device cgroup with `mrw` after the plugins' devices.
#[test]
fn k3_a_volume_device_is_a_node_and_a_cgroup_rule_after_the_plugins() {
    use oci_spec::runtime::{LinuxDeviceBuilder, LinuxDeviceType};
    let pod = pod(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: block, namespace: default, uid: u1}\nspec:\n  volumes: [{name: data, persistentVolumeClaim: {claimName: block-pvc}}]\n  containers:\n  - name: main\n    image: busybox\n    volumeDevices: [{name: data, devicePath: /dev/xvda}]\n",
    );
    let device = |path: &str, typ, major, minor| {
        LinuxDeviceBuilder::default()
            .path(path)
            .typ(typ)
            .major(major)
            .minor(minor)
            .file_mode(0o660u32)
            .uid(0u32)
            .gid(6u32)
            .build()
            .unwrap()
    };
    let claimed = std::collections::BTreeMap::from([(
        "data".to_owned(),
        claims::Claimed {
            path: "/var/lib/outpost/pods/u1/volumeDevices/kubernetes.io~local-volume/pv-1".into(),
            read_only: false,
            device: Some(device("/dev/loop3", LinuxDeviceType::B, 7, 3)),
        },
    )]);
    let plugin = device("/dev/ttyACM0", LinuxDeviceType::C, 166, 0);
    let files = ContainerFiles {
        devices: PluginDevices {
            nodes: vec![(plugin.clone(), "rw".to_owned())],
            ..PluginDevices::default()
        },
        ..ContainerFiles::default()
    };
    let ctx = PodContext { claimed: &claimed, ..context(&pod) };
    let spec = container_spec(&ctx, first_container(&pod), &busybox(), &files, "c1").unwrap();
    let linux = spec.linux().as_ref().unwrap();
    let block = device("/dev/xvda", LinuxDeviceType::B, 7, 3);
    assert_eq!(linux.devices().as_deref(), Some(&[plugin, block][..]));
    let rules = linux.resources().as_ref().unwrap().devices().clone().unwrap();
    let last = rules.last().unwrap();
    assert!(last.allow());
    assert_eq!(
        (last.typ(), last.major(), last.minor(), last.access().as_deref()),
        (Some(LinuxDeviceType::B), Some(7), Some(3), Some("mrw"))
    );

    // Without its volume set up as a block volume, the container is not made.
    let none = std::collections::BTreeMap::new();
    let ctx = PodContext { claimed: &none, ..context(&pod) };
    let error = container_spec(&ctx, first_container(&pod), &busybox(), &files, "c1").unwrap_err();
    assert_eq!(error.to_string(), "cannot find volume \"data\" to pass into container \"main\"");
}
