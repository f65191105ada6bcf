//! D3: edits change an OCI spec as the CDI library's `Apply` changes it.

use std::collections::HashMap;
use std::io;

use oci_spec::runtime::{LinuxResources, Process, User};

use super::super::edits::NetDevice;
use super::*;

/// A spec with `env`, no mounts, no devices, a deny-all device rule, process user
/// `uid:gid`.
fn base(env: &[&str], uid: u32, gid: u32) -> Spec {
    let mut spec = Spec::default();
    let mut user = User::default();
    user.set_uid(uid).set_gid(gid);
    let mut process = Process::default();
    process.set_env(Some(env.iter().map(|e| (*e).to_owned()).collect())).set_user(user);
    let mut deny = LinuxDeviceCgroup::default();
    deny.set_allow(false).set_access(Some("rwm".into()));
    let mut resources = LinuxResources::default();
    resources.set_devices(Some(vec![deny]));
    let mut linux = oci_spec::runtime::Linux::default();
    linux.set_devices(None).set_resources(Some(resources));
    spec.set_process(Some(process)).set_linux(Some(linux)).set_mounts(Some(vec![])).set_hooks(None);
    spec
}

/// A host with `nodes` (path → device) where every other path does not exist, and
/// `others` paths that exist but are not device nodes.
fn host(
    nodes: &[(&str, HostDevice)],
    others: &[&str],
) -> impl FnMut(&Path) -> io::Result<Option<HostDevice>> {
    let nodes: HashMap<String, HostDevice> =
        nodes.iter().map(|(p, d)| ((*p).to_owned(), *d)).collect();
    let others: Vec<String> = others.iter().map(|p| (*p).to_owned()).collect();
    move |path: &Path| {
        let path = path.to_string_lossy().into_owned();
        match nodes.get(&path) {
            Some(device) => Ok(Some(*device)),
            None if others.contains(&path) => Ok(None),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("lstat {path}: no such file or directory"),
            )),
        }
    }
}

fn no_host() -> impl FnMut(&Path) -> io::Result<Option<HostDevice>> {
    host(&[], &[])
}

const CHAR_10_200: HostDevice =
    HostDevice { typ: HostDeviceType::Char, major: 10, minor: 200, file_mode: 0o660 };

fn node(path: &str) -> DeviceNode {
    DeviceNode { path: path.into(), ..DeviceNode::default() }
}

fn apply_edits(spec: &mut Spec, edits: &ContainerEdits) -> Result<(), Error> {
    apply(spec, edits, &mut no_host())
}

fn env_of(spec: &Spec) -> Vec<String> {
    spec.process().as_ref().unwrap().env().clone().unwrap_or_default()
}

fn devices_of(spec: &Spec) -> Vec<LinuxDevice> {
    spec.linux().as_ref().unwrap().devices().clone().unwrap_or_default()
}

fn rules_of(spec: &Spec) -> Vec<LinuxDeviceCgroup> {
    let linux = spec.linux().as_ref().unwrap();
    linux.resources().as_ref().unwrap().devices().clone().unwrap_or_default()
}

fn destinations(spec: &Spec) -> Vec<String> {
    spec.mounts().iter().flatten().map(|m| m.destination().display().to_string()).collect()
}

#[test]
fn d3_a_variable_replaces_the_one_of_its_name_else_is_appended() {
    let mut spec = base(&["PATH=/bin", "A=old", "B=1", "A=older"], 0, 0);
    let edits = ContainerEdits {
        env: vec!["A=new".into(), "C=3".into(), "C=4".into(), "NOEQUALS".into()],
        ..ContainerEdits::default()
    };
    apply_edits(&mut spec, &edits).unwrap();
    // The last variable of a name is the one replaced (the library's index of names).
    assert_eq!(env_of(&spec), ["PATH=/bin", "A=old", "B=1", "A=new", "C=4", "NOEQUALS"]);
}

#[test]
fn d3_a_fully_given_node_needs_no_host_node() {
    let mut spec = base(&[], 0, 0);
    let given = DeviceNode {
        typ: "c".into(),
        major: 1,
        minor: 3,
        permissions: "rw".into(),
        ..node("/dev/given")
    };
    let fifo = DeviceNode { typ: "p".into(), ..node("/dev/fifo") };
    let unbuffered = DeviceNode { typ: "u".into(), major: 4, minor: 5, ..node("/dev/unbuffered") };
    let edits =
        ContainerEdits { device_nodes: vec![given, fifo, unbuffered], ..ContainerEdits::default() };
    apply_edits(&mut spec, &edits).unwrap();
    let devices = devices_of(&spec);
    assert_eq!(devices.len(), 3);
    assert_eq!(
        (devices[0].typ(), devices[0].major(), devices[0].minor()),
        (LinuxDeviceType::C, 1, 3)
    );
    assert_eq!(devices[0].file_mode(), None);
    assert_eq!(devices[1].typ(), LinuxDeviceType::P);
    assert_eq!(devices[2].typ(), LinuxDeviceType::U);
    // Only block and character nodes get a cgroup rule (not `u`, not `p`).
    let rules = rules_of(&spec);
    assert_eq!(rules.len(), 2);
    assert!(rules[1].allow());
    assert_eq!(rules[1].typ(), Some(LinuxDeviceType::C));
    assert_eq!((rules[1].major(), rules[1].minor()), (Some(1), Some(3)));
    assert_eq!(rules[1].access().as_deref(), Some("rw"));
}

#[test]
fn d3_what_a_node_leaves_out_comes_from_its_host_node() {
    let mut spec = base(&[], 0, 0);
    let edits = ContainerEdits {
        device_nodes: vec![
            node("/dev/dri/card0"),
            DeviceNode { host_path: "/dev/host-card".into(), ..node("/dev/card") },
            // Given type and major: only the mode is taken.
            DeviceNode { typ: "c".into(), major: 7, minor: 8, ..node("/dev/dri/card0") },
        ],
        ..ContainerEdits::default()
    };
    let mut lookup = host(&[("/dev/dri/card0", CHAR_10_200), ("/dev/host-card", CHAR_10_200)], &[]);
    apply(&mut spec, &edits, &mut lookup).unwrap();
    let devices = devices_of(&spec);
    assert_eq!(devices.len(), 2, "{devices:?}");
    // The container path is the node's path; the host path is only read.
    assert_eq!(devices[0].path(), Path::new("/dev/card"));
    assert_eq!(
        (devices[0].typ(), devices[0].major(), devices[0].minor()),
        (LinuxDeviceType::C, 10, 200)
    );
    assert_eq!(devices[0].file_mode(), Some(0o660));
    assert_eq!(devices[1].path(), Path::new("/dev/dri/card0"));
    assert_eq!((devices[1].major(), devices[1].minor()), (7, 8));
    assert_eq!(devices[1].file_mode(), Some(0o660));
    let rules = rules_of(&spec);
    assert_eq!(rules.len(), 4, "one allow rule per node applied");
    assert_eq!(rules[1].access().as_deref(), Some("rwm"));
}

#[test]
fn d3_a_node_with_a_major_number_keeps_its_minor_and_a_given_mode_stays() {
    let mut spec = base(&[], 0, 0);
    let edits = ContainerEdits {
        device_nodes: vec![DeviceNode {
            major: 3,
            minor: 9,
            file_mode: Some(0o600),
            ..node("/dev/x")
        }],
        ..ContainerEdits::default()
    };
    apply(&mut spec, &edits, &mut host(&[("/dev/x", CHAR_10_200)], &[])).unwrap();
    let device = &devices_of(&spec)[0];
    assert_eq!((device.typ(), device.major(), device.minor()), (LinuxDeviceType::C, 3, 9));
    assert_eq!(device.file_mode(), Some(0o600));
}

#[test]
fn d3_a_node_that_needs_its_host_node_fails_without_one() {
    let cases = [
        (
            node("/dev/missing"),
            r#"failed to stat CDI host device "/dev/missing": lstat /dev/missing: no such file or directory"#,
        ),
        (node("/dev/file"), r#"failed to stat CDI host device "/dev/file": not a device node"#),
        (
            DeviceNode { typ: "b".into(), ..node("/dev/char") },
            r#"CDI device ("/dev/char", "/dev/char"), host type mismatch (b, c)"#,
        ),
        (
            DeviceNode { typ: "u".into(), host_path: "/dev/other".into(), ..node("/dev/u") },
            r#"CDI device ("/dev/u", "/dev/other"), host type mismatch (u, c)"#,
        ),
        (
            DeviceNode { typ: "c".into(), ..node("/dev/missing") },
            r#"failed to stat CDI host device "/dev/missing": lstat /dev/missing: no such file or directory"#,
        ),
    ];
    for (node, message) in cases {
        let mut spec = base(&[], 0, 0);
        let edits = ContainerEdits { device_nodes: vec![node], ..ContainerEdits::default() };
        let mut lookup =
            host(&[("/dev/char", CHAR_10_200), ("/dev/other", CHAR_10_200)], &["/dev/file"]);
        let error = apply(&mut spec, &edits, &mut lookup).unwrap_err();
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn d3_a_host_fifo_keeps_no_numbers() {
    let fifo = HostDevice { typ: HostDeviceType::Fifo, major: 0, minor: 0, file_mode: 0o644 };
    let mut spec = base(&[], 0, 0);
    let edits =
        ContainerEdits { device_nodes: vec![node("/run/fifo")], ..ContainerEdits::default() };
    apply(&mut spec, &edits, &mut host(&[("/run/fifo", fifo)], &[])).unwrap();
    let device = &devices_of(&spec)[0];
    assert_eq!(
        (device.typ(), device.major(), device.file_mode()),
        (LinuxDeviceType::P, 0, Some(0o644))
    );
    assert_eq!(rules_of(&spec).len(), 1, "no rule for a FIFO");
}

#[test]
fn d3_a_node_takes_the_process_s_ids_unless_it_names_its_own_or_they_are_root() {
    let given = |uid, gid| DeviceNode { typ: "c".into(), major: 1, uid, gid, ..node("/dev/a") };
    for (uid, gid, node, expected) in [
        (1000, 2000, given(None, None), (Some(1000), Some(2000))),
        (1000, 2000, given(Some(5), None), (Some(5), Some(2000))),
        (0, 2000, given(None, None), (None, Some(2000))),
        (0, 0, given(None, Some(7)), (None, Some(7))),
    ] {
        let mut spec = base(&[], uid, gid);
        let edits = ContainerEdits { device_nodes: vec![node], ..ContainerEdits::default() };
        apply_edits(&mut spec, &edits).unwrap();
        let device = &devices_of(&spec)[0];
        assert_eq!((device.uid(), device.gid()), expected);
    }
}

#[test]
fn d3_a_node_replaces_the_one_at_its_path() {
    let mut spec = base(&[], 0, 0);
    let old = |path: &str, major| {
        let mut device = LinuxDevice::default();
        device.set_path(path.into()).set_typ(LinuxDeviceType::C).set_major(major);
        device
    };
    spec.linux_mut().as_mut().unwrap().set_devices(Some(vec![old("/dev/a", 1), old("/dev/b", 2)]));
    let edits = ContainerEdits {
        device_nodes: vec![DeviceNode { typ: "c".into(), major: 9, ..node("/dev/a") }],
        ..ContainerEdits::default()
    };
    apply_edits(&mut spec, &edits).unwrap();
    let devices = devices_of(&spec);
    let paths: Vec<_> =
        devices.iter().map(|d| (d.path().display().to_string(), d.major())).collect();
    // Removed, then added at the end, as the library does.
    assert_eq!(paths, [("/dev/b".to_owned(), 2), ("/dev/a".to_owned(), 9)]);
}

#[test]
fn d3_mounts_replace_the_one_at_their_path_and_all_are_sorted_by_depth() {
    let mut spec = base(&[], 0, 0);
    let mount = |destination: &str| {
        let mut mount = OciMount::default();
        mount.set_destination(destination.into()).set_typ(Some("tmpfs".into()));
        mount
    };
    spec.set_mounts(Some(vec![
        mount("/proc"),
        mount("/dev"),
        mount("/dev/pts"),
        mount("/etc/hosts"),
        mount("/sys"),
        mount("/var/lib/data"),
    ]));
    let cdi = |host: &str, container: &str, typ: &str| Mount {
        host_path: host.into(),
        container_path: container.into(),
        options: vec!["ro".into(), "bind".into()],
        typ: typ.into(),
    };
    let edits = ContainerEdits {
        mounts: vec![
            cdi("/opt/lib", "/usr/lib/vendor", "bind"),
            cdi("/opt/data", "/var/lib/data", ""),
            cdi("/opt/x", "/x", "bind"),
            cdi("/opt/y", "/a//b/./c/../", "bind"),
        ],
        ..ContainerEdits::default()
    };
    apply_edits(&mut spec, &edits).unwrap();
    assert_eq!(
        destinations(&spec),
        [
            "/proc",
            "/dev",
            "/sys",
            "/x",
            "/dev/pts",
            "/etc/hosts",
            "/a//b/./c/../",
            "/usr/lib/vendor",
            "/var/lib/data"
        ]
    );
    let replaced = spec.mounts().as_ref().unwrap().last().unwrap().clone();
    assert_eq!(replaced.source().as_deref(), Some(Path::new("/opt/data")));
    assert_eq!(replaced.typ(), &None, "an empty type is left out");
    assert_eq!(replaced.options().as_deref(), Some(&["ro".to_owned(), "bind".to_owned()][..]));
}

#[test]
fn d3_paths_are_cleaned_as_go_cleans_them() {
    for (path, cleaned) in [
        ("", "."),
        ("/", "/"),
        ("//", "/"),
        ("/a/", "/a"),
        ("a//b", "a/b"),
        ("/a/./b/../c", "/a/c"),
        ("/../a", "/a"),
        ("../a", "../a"),
        ("a/../..", ".."),
        ("a/..", "."),
        ("./", "."),
        ("/a/b/../../..", "/"),
    ] {
        assert_eq!(clean(path), cleaned, "{path:?}");
    }
    assert_eq!(depth("/usr/lib/"), 2);
    assert_eq!(depth("relative"), 0);
}

#[test]
fn d3_hooks_go_to_their_hook_point() {
    let mut spec = base(&[], 0, 0);
    let hook = |name: &str, n: usize| Hook {
        hook_name: name.into(),
        path: format!("/hook{n}"),
        args: vec![format!("hook{n}")],
        env: if n == 0 { vec!["A=1".into()] } else { vec![] },
        timeout: (n == 0).then_some(3),
    };
    let names = super::super::edits::HOOK_NAMES;
    let edits = ContainerEdits {
        hooks: names
            .iter()
            .enumerate()
            .map(|(n, name)| hook(name, n))
            .chain([hook("prestart", 9)])
            .collect(),
        ..ContainerEdits::default()
    };
    apply_edits(&mut spec, &edits).unwrap();
    let hooks = spec.hooks().as_ref().unwrap();
    let paths = |list: &Option<Vec<OciHook>>| -> Vec<String> {
        list.iter().flatten().map(|h| h.path().display().to_string()).collect()
    };
    assert_eq!(paths(hooks.prestart()), ["/hook0", "/hook9"]);
    assert_eq!(paths(hooks.create_runtime()), ["/hook1"]);
    assert_eq!(paths(hooks.create_container()), ["/hook2"]);
    assert_eq!(paths(hooks.start_container()), ["/hook3"]);
    assert_eq!(paths(hooks.poststart()), ["/hook4"]);
    assert_eq!(paths(hooks.poststop()), ["/hook5"]);
    let first = &hooks.prestart().as_ref().unwrap()[0];
    assert_eq!(first.args().as_deref(), Some(&["hook0".to_owned()][..]));
    assert_eq!(first.env().as_deref(), Some(&["A=1".to_owned()][..]));
    assert_eq!(first.timeout(), Some(3));
    assert_eq!(hooks.poststop().as_ref().unwrap()[0].env(), &None);
    let unknown = ContainerEdits { hooks: vec![hook("prestop", 0)], ..ContainerEdits::default() };
    assert_eq!(
        apply_edits(&mut spec, &unknown).unwrap_err().to_string(),
        r#"unknown hook name "prestop""#
    );
}

#[test]
fn d3_groups_net_devices_and_rdt_are_set() {
    let mut spec = base(&[], 0, 0);
    spec.process_mut().as_mut().unwrap().user_mut().set_additional_gids(Some(vec![5]));
    let edits = ContainerEdits {
        additional_gids: vec![0, 5, 44, 44, 45],
        net_devices: vec![NetDevice { host_interface_name: "eth1".into(), name: "net0".into() }],
        intel_rdt: Some(IntelRdt {
            clos_id: "clos".into(),
            schemata: Some(vec!["L2:0=1".into()]),
            enable_monitoring: true,
            ..IntelRdt::default()
        }),
        ..ContainerEdits::default()
    };
    apply_edits(&mut spec, &edits).unwrap();
    let user = spec.process().as_ref().unwrap().user();
    assert_eq!(user.additional_gids().as_deref(), Some(&[5, 44, 45][..]));
    let linux = spec.linux().as_ref().unwrap();
    let net = linux.net_devices().as_ref().unwrap();
    assert_eq!(net["eth1"].name().as_deref(), Some("net0"));
    let rdt = linux.intel_rdt().as_ref().unwrap();
    assert_eq!(rdt.clos_id().as_deref(), Some("clos"));
    assert_eq!(rdt.l3_cache_schema(), &None);
    assert_eq!(rdt.schemata().as_deref(), Some(&["L2:0=1".to_owned()][..]));
    assert_eq!(rdt.enable_monitoring(), &Some(true));
}

#[test]
fn d3_empty_edits_change_nothing() {
    let mut spec = base(&["A=1"], 1000, 1000);
    let before = spec.clone();
    apply_edits(&mut spec, &ContainerEdits::default()).unwrap();
    assert_eq!(spec, before);
}
