//! D3: the parts together (annotations, registry, injection), and the invariants of
//! applying edits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxDeviceType, Spec as OciSpec};
use proptest::prelude::*;

use super::edits::{DeviceNode, Mount};
use super::*;

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn d3_annotations_name_devices_comma_separated_in_key_order() {
    let given = annotations(&[
        ("cdi.k8s.io/vendor.b", "vendor.com/class=b1,vendor.com/class=b2"),
        ("cdi.k8s.io/vendor.a", "vendor.com/class=a"),
        ("other.io/cdi", "not a name"),
        ("CDI.k8s.io/upper", "not a name either"),
    ]);
    assert_eq!(
        annotation_devices(&given).unwrap(),
        ["vendor.com/class=a", "vendor.com/class=b1", "vendor.com/class=b2"]
    );
    assert!(annotation_devices(&BTreeMap::new()).unwrap().is_empty());
}

#[test]
fn d3_an_annotation_naming_anything_but_qualified_names_is_refused() {
    for (value, bad) in [
        ("vendor.com/class=a, vendor.com/class=b", " vendor.com/class=b"),
        ("vendor.com/class=a,", ""),
        ("", ""),
        ("/dev/fuse", "/dev/fuse"),
    ] {
        let given = annotations(&[("cdi.k8s.io/x", value)]);
        assert_eq!(
            annotation_devices(&given).unwrap_err().to_string(),
            format!("failed to parse CDI device annotations: invalid CDI device name {bad:?}")
        );
        // Even with devices given otherwise, as containerd fails the container.
        assert!(requested(&strings(&["vendor.com/class=a"]), &given).is_err());
    }
}

#[test]
fn d3_given_devices_come_first_and_each_name_once() {
    let given = annotations(&[(
        "cdi.k8s.io/a",
        "vendor.com/class=b,vendor.com/class=c,vendor.com/class=b",
    )]);
    let devices =
        strings(&["vendor.com/class=c", "vendor.com/class=a", "vendor.com/class=c", "unqualified"]);
    assert_eq!(
        requested(&devices, &given).unwrap(),
        ["vendor.com/class=c", "vendor.com/class=a", "unqualified", "vendor.com/class=b"]
    );
}

const SPEC: &str = r#"
cdiVersion: 0.5.0
kind: vendor.com/device
containerEdits:
  env: [VENDOR=1]
devices:
- name: one
  containerEdits:
    deviceNodes:
    - path: /dev/vendor1
      hostPath: /host/dev/vendor1
    mounts:
    - hostPath: /opt/vendor
      containerPath: /usr/lib/vendor
      options: [ro, rbind]
"#;

#[test]
fn d3_inject_resolves_then_applies_or_applies_nothing() {
    let registry = Registry::new([SpecFile {
        path: "/etc/cdi/vendor.yaml".into(),
        priority: 0,
        data: SPEC.into(),
    }]);
    assert!(registry.errors().is_empty(), "{:?}", registry.errors());
    let host_device =
        HostDevice { typ: HostDeviceType::Char, major: 240, minor: 1, file_mode: 0o666 };
    let mut host = |path: &Path| {
        assert_eq!(path, Path::new("/host/dev/vendor1"));
        Ok(Some(host_device))
    };
    let mut spec = OciSpec::default();
    let before = spec.clone();
    let error = inject(
        &mut spec,
        &registry,
        &strings(&["vendor.com/device=one", "vendor.com/device=two"]),
        &mut host,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "CDI device injection failed: unresolvable CDI devices vendor.com/device=two"
    );
    assert_eq!(spec, before, "nothing applied");
    inject(&mut spec, &registry, &strings(&["vendor.com/device=one"]), &mut host).unwrap();
    let env = spec.process().as_ref().unwrap().env().clone().unwrap();
    assert_eq!(env.last().map(String::as_str), Some("VENDOR=1"));
    let device = spec.linux().as_ref().unwrap().devices().as_ref().unwrap()[0].clone();
    assert_eq!(
        (device.path().as_path(), device.typ(), device.major(), device.minor()),
        (Path::new("/dev/vendor1"), LinuxDeviceType::C, 240, 1)
    );
    let mounts = spec.mounts().as_ref().unwrap();
    assert!(mounts.iter().any(|m| m.destination() == Path::new("/usr/lib/vendor")));
    let mut failing = |_: &Path| Err(std::io::Error::other("permission denied"));
    let error = inject(&mut spec, &registry, &strings(&["vendor.com/device=one"]), &mut failing)
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"CDI device injection failed: failed to inject devices: failed to stat CDI host device "/host/dev/vendor1": permission denied"#
    );
}

/// Device nodes at a few paths, each fully given (no host node needed) or not (the host
/// has every path as a character device).
fn device_node() -> impl Strategy<Value = DeviceNode> {
    (0..4usize, any::<bool>(), 1..300i64, 0..10i64).prop_map(|(path, given, major, minor)| {
        DeviceNode {
            path: format!("/dev/d{path}"),
            typ: if given { "c".into() } else { String::new() },
            major: if given { major } else { 0 },
            minor,
            ..DeviceNode::default()
        }
    })
}

fn mount() -> impl Strategy<Value = Mount> {
    prop::sample::select(vec!["/a", "/a/b", "/a/b/c", "/d", "/d/e/", "/x//y"]).prop_map(
        |destination| Mount {
            host_path: format!("/host{destination}"),
            container_path: destination.to_owned(),
            options: vec!["rbind".into()],
            typ: String::new(),
        },
    )
}

fn edits() -> impl Strategy<Value = ContainerEdits> {
    (
        prop::collection::vec(prop::sample::select(vec!["A=1", "B=2", "A=3", "C=4"]), 0..5),
        prop::collection::vec(device_node(), 0..6),
        prop::collection::vec(mount(), 0..6),
        prop::collection::vec(0..4u32, 0..5),
    )
        .prop_map(|(env, device_nodes, mounts, additional_gids)| ContainerEdits {
            env: env.into_iter().map(str::to_owned).collect(),
            device_nodes,
            mounts,
            additional_gids,
            ..ContainerEdits::default()
        })
}

fn host_char(_: &Path) -> std::io::Result<Option<HostDevice>> {
    Ok(Some(HostDevice { typ: HostDeviceType::Char, major: 10, minor: 1, file_mode: 0o600 }))
}

fn paths(spec: &OciSpec) -> Vec<PathBuf> {
    let devices = spec.linux().as_ref().and_then(|l| l.devices().clone()).unwrap_or_default();
    devices.iter().map(|d| d.path().clone()).collect()
}

proptest! {
    /// D3: applying the same edits twice leaves one device node per path, the same nodes,
    /// variables, mounts and groups as applying them once; edits with mounts leave the mounts
    /// sorted by depth.
    #[test]
    fn d3_applying_edits_again_changes_no_node_variable_mount_or_group(edits in edits()) {
        let mut once = OciSpec::default();
        apply(&mut once, &edits, &mut host_char).unwrap();
        let mut twice = once.clone();
        apply(&mut twice, &edits, &mut host_char).unwrap();

        let mut unique = paths(&twice);
        unique.sort();
        unique.dedup();
        prop_assert_eq!(unique.len(), paths(&twice).len(), "one node per path");
        let mut wanted: Vec<PathBuf> = edits.device_nodes.iter().map(|n| PathBuf::from(&n.path)).collect();
        wanted.sort();
        wanted.dedup();
        prop_assert_eq!(&unique, &wanted);
        let sorted_devices = |spec: &OciSpec| {
            let mut devices = spec.linux().as_ref().and_then(|l| l.devices().clone()).unwrap_or_default();
            devices.sort_by(|a, b| a.path().cmp(b.path()));
            devices
        };
        prop_assert_eq!(sorted_devices(&once), sorted_devices(&twice));
        prop_assert_eq!(once.process().as_ref().unwrap().env(), twice.process().as_ref().unwrap().env());
        prop_assert_eq!(once.process().as_ref().unwrap().user(), twice.process().as_ref().unwrap().user());
        let destinations = |spec: &OciSpec| {
            let mut all: Vec<_> = spec.mounts().iter().flatten().map(|m| m.destination().clone()).collect();
            all.sort();
            all
        };
        prop_assert_eq!(destinations(&once), destinations(&twice));
        let depths: Vec<usize> = twice
            .mounts()
            .iter()
            .flatten()
            .map(|m| apply::depth(&m.destination().to_string_lossy()))
            .collect();
        if !edits.mounts.is_empty() {
            prop_assert!(depths.windows(2).all(|w| w[0] <= w[1]), "{depths:?}");
        }
    }
}
