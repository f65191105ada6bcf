//! D3: spec files are read from JSON and YAML as the CDI library reads them, and checked
//! (versions, kind, edits, devices) as it checks them, refused in its words.

use super::super::edits::{DeviceNode, Hook, IntelRdt, Mount, NetDevice};
use super::*;

const FULL_JSON: &str = r#"{
  "cdiVersion": "1.1.0",
  "kind": "vendor.com/class",
  "annotations": {"vendor.com/note": "spec"},
  "devices": [
    {
      "name": "dev0",
      "annotations": {"vendor.com/note": "device"},
      "containerEdits": {
        "env": ["DEV=0"],
        "deviceNodes": [
          {"path": "/dev/dev0", "hostPath": "/dev/host0", "type": "c", "major": 10,
           "minor": 200, "fileMode": 438, "permissions": "rw", "uid": 1000, "gid": 1001}
        ],
        "netDevices": [{"hostInterfaceName": "eth1", "name": "net0"}],
        "hooks": [
          {"hookName": "createContainer", "path": "/usr/bin/hook", "args": ["hook", "x"],
           "env": ["HOOK=1"], "timeout": 5}
        ],
        "mounts": [
          {"hostPath": "/opt/lib", "containerPath": "/usr/lib/dev", "type": "bind",
           "options": ["ro", "rbind"]}
        ],
        "intelRdt": {"closID": "clos", "l3CacheSchema": "L3:0=f", "memBwSchema": "MB:0=50",
                     "schemata": ["L2:0=1"], "enableMonitoring": true},
        "additionalGids": [44, 0]
      }
    }
  ],
  "containerEdits": {"env": ["SPEC=1"]}
}"#;

const FULL_YAML: &str = r#"---
cdiVersion: "1.1.0"
kind: vendor.com/class
annotations:
  vendor.com/note: spec
devices:
- name: dev0
  annotations:
    vendor.com/note: device
  containerEdits:
    env: [DEV=0]
    deviceNodes:
    - path: /dev/dev0
      hostPath: /dev/host0
      type: c
      major: 10
      minor: 200
      fileMode: 0666
      permissions: rw
      uid: 1000
      gid: 1001
    netDevices:
    - hostInterfaceName: eth1
      name: net0
    hooks:
    - hookName: createContainer
      path: /usr/bin/hook
      args: [hook, x]
      env: [HOOK=1]
      timeout: 5
    mounts:
    - hostPath: /opt/lib
      containerPath: /usr/lib/dev
      type: bind
      options: [ro, rbind]
    intelRdt:
      closID: clos
      l3CacheSchema: L3:0=f
      memBwSchema: MB:0=50
      schemata: [L2:0=1]
      enableMonitoring: true
    additionalGids: [44, 0]
containerEdits:
  env: [SPEC=1]
"#;

fn full() -> Spec {
    let s = |v: &str| v.to_owned();
    let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let note = |v: &str| BTreeMap::from([(s("vendor.com/note"), s(v))]);
    Spec {
        cdi_version: s("1.1.0"),
        kind: s("vendor.com/class"),
        annotations: note("spec"),
        devices: vec![Device {
            name: s("dev0"),
            annotations: note("device"),
            container_edits: ContainerEdits {
                env: strings(&["DEV=0"]),
                device_nodes: vec![DeviceNode {
                    path: s("/dev/dev0"),
                    host_path: s("/dev/host0"),
                    typ: s("c"),
                    major: 10,
                    minor: 200,
                    file_mode: Some(0o666),
                    permissions: s("rw"),
                    uid: Some(1000),
                    gid: Some(1001),
                }],
                net_devices: vec![NetDevice { host_interface_name: s("eth1"), name: s("net0") }],
                hooks: vec![Hook {
                    hook_name: s("createContainer"),
                    path: s("/usr/bin/hook"),
                    args: strings(&["hook", "x"]),
                    env: strings(&["HOOK=1"]),
                    timeout: Some(5),
                }],
                mounts: vec![Mount {
                    host_path: s("/opt/lib"),
                    container_path: s("/usr/lib/dev"),
                    options: strings(&["ro", "rbind"]),
                    typ: s("bind"),
                }],
                intel_rdt: Some(IntelRdt {
                    clos_id: s("clos"),
                    l3_cache_schema: s("L3:0=f"),
                    mem_bw_schema: s("MB:0=50"),
                    schemata: Some(strings(&["L2:0=1"])),
                    enable_monitoring: true,
                }),
                additional_gids: vec![44, 0],
            },
        }],
        container_edits: ContainerEdits { env: strings(&["SPEC=1"]), ..ContainerEdits::default() },
    }
}

#[test]
fn d3_every_field_is_read_from_json_and_from_yaml() {
    let json = Spec::parse(FULL_JSON.as_bytes()).unwrap();
    assert_eq!(json, full());
    // YAML 1.1's 0666 is octal, as the library's YAML reader takes it.
    let yaml = Spec::parse(FULL_YAML.as_bytes()).unwrap();
    assert_eq!(yaml, full());
    json.validate().unwrap();
}

#[test]
fn d3_a_minimal_spec_needs_only_version_kind_and_a_device() {
    let yaml = "cdiVersion: 0.3.0\nkind: vendor.com/class\ndevices:\n- name: a\n  containerEdits:\n    env: [A=1]\n";
    let spec = Spec::parse(yaml.as_bytes()).unwrap();
    spec.validate().unwrap();
    assert_eq!(spec.vendor_class(), ("vendor.com", "class"));
    assert_eq!(spec.devices[0].container_edits.env, ["A=1"]);
}

#[test]
fn d3_null_fields_are_their_zero_values() {
    let json = r#"{"cdiVersion": "0.3.0", "kind": "v.com/c", "annotations": null,
        "devices": [{"name": "a", "containerEdits": {"env": ["A=1"], "mounts": null,
        "deviceNodes": [{"path": "/dev/a", "hostPath": null, "major": null}]}}],
        "containerEdits": null}"#;
    let spec = Spec::parse(json.as_bytes()).unwrap();
    let edits = &spec.devices[0].container_edits;
    assert!(edits.mounts.is_empty());
    assert_eq!(
        edits.device_nodes[0],
        DeviceNode { path: "/dev/a".into(), ..DeviceNode::default() }
    );
    assert!(spec.container_edits.is_empty());
}

#[test]
fn d3_unknown_fields_duplicate_keys_and_empty_files_are_refused() {
    let unknown = r#"{"cdiVersion": "0.3.0", "kind": "v.com/c", "devices": [], "ociEdits": {}}"#;
    let error = Spec::parse(unknown.as_bytes()).unwrap_err().to_string();
    assert!(error.starts_with("failed to unmarshal CDI Spec: unknown field `ociEdits`"), "{error}");
    let nested = "cdiVersion: 0.3.0\nkind: v.com/c\ndevices:\n- name: a\n  containerEdits:\n    envs: [A=1]\n";
    let error = Spec::parse(nested.as_bytes()).unwrap_err().to_string();
    assert!(error.contains("unknown field `envs`"), "{error}");
    let twice = "cdiVersion: 0.3.0\nkind: v.com/c\nkind: v.com/d\n";
    assert!(Spec::parse(twice.as_bytes()).is_err());
    let twice_json = r#"{"cdiVersion": "0.3.0", "kind": "v.com/c", "kind": "v.com/d"}"#;
    let error = Spec::parse(twice_json.as_bytes()).unwrap_err().to_string();
    assert!(error.contains("duplicate field `kind`"), "{error}");
    let nested_twice = r#"{"cdiVersion": "0.3.0", "kind": "v.com/c", "devices": [{"name": "a",
        "containerEdits": {"env": ["A=1"], "env": ["B=2"]}}]}"#;
    let error = Spec::parse(nested_twice.as_bytes()).unwrap_err().to_string();
    assert!(error.contains("duplicate field `env`"), "{error}");
    for empty in ["", "  \n", "---\n", "null"] {
        assert!(matches!(Spec::parse(empty.as_bytes()), Err(Error::Empty)), "{empty:?}");
    }
    let wrong_type = r#"{"cdiVersion": "0.3.0", "kind": "v.com/c", "devices": [{"name": "a",
        "containerEdits": {"deviceNodes": [{"path": "/dev/a", "major": "ten"}]}}]}"#;
    assert!(Spec::parse(wrong_type.as_bytes()).is_err());
}

/// A valid spec of `version` with one device `a` that has `edits`, else `A=1`.
fn spec_with(version: &str, edits: ContainerEdits) -> Spec {
    let edits =
        if edits.is_empty() { ContainerEdits { env: vec!["A=1".into()], ..edits } } else { edits };
    Spec {
        cdi_version: version.into(),
        kind: "vendor.com/class".into(),
        devices: vec![Device { name: "a".into(), container_edits: edits, ..Device::default() }],
        ..Spec::default()
    }
}

fn refusal(spec: &Spec) -> String {
    spec.validate().unwrap_err().to_string()
}

#[test]
fn d3_versions_known_with_or_without_a_v_are_accepted() {
    for version in
        ["0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0", "v1.1.0", "v0.3.0"]
    {
        spec_with(version, ContainerEdits::default()).validate().unwrap();
    }
    for version in ["", "1.2.0", "0.9.0", "1.1", "V1.0.0", "vv1.0.0"] {
        assert_eq!(
            refusal(&spec_with(version, ContainerEdits::default())),
            format!("invalid CDI Spec: invalid version {version:?}")
        );
    }
    // Known, but older than any spec can be.
    for version in ["0.1.0", "0.2.0"] {
        assert_eq!(
            refusal(&spec_with(version, ContainerEdits::default())),
            "invalid CDI Spec: the spec version must be at least v0.3.0"
        );
    }
}

#[test]
fn d3_a_field_newer_than_the_spec_s_version_is_refused() {
    let node = |host_path: &str| DeviceNode {
        path: "/dev/a".into(),
        host_path: host_path.into(),
        ..DeviceNode::default()
    };
    let mount = Mount {
        host_path: "/a".into(),
        container_path: "/a".into(),
        typ: "bind".into(),
        options: vec![],
    };
    let rdt = IntelRdt::default();
    let cases: Vec<(ContainerEdits, &str)> = vec![
        (ContainerEdits { mounts: vec![mount.clone()], ..ContainerEdits::default() }, "0.4.0"),
        (
            ContainerEdits { device_nodes: vec![node("/dev/b")], ..ContainerEdits::default() },
            "0.5.0",
        ),
        (ContainerEdits { intel_rdt: Some(rdt.clone()), ..ContainerEdits::default() }, "0.7.0"),
        (ContainerEdits { additional_gids: vec![5], ..ContainerEdits::default() }, "0.7.0"),
        (
            ContainerEdits {
                intel_rdt: Some(IntelRdt { schemata: Some(vec![]), ..rdt.clone() }),
                ..ContainerEdits::default()
            },
            "1.1.0",
        ),
        (
            ContainerEdits {
                intel_rdt: Some(IntelRdt { enable_monitoring: true, ..rdt }),
                ..ContainerEdits::default()
            },
            "1.1.0",
        ),
        (
            ContainerEdits {
                net_devices: vec![NetDevice {
                    host_interface_name: "eth1".into(),
                    name: "n".into(),
                }],
                ..ContainerEdits::default()
            },
            "1.1.0",
        ),
    ];
    for (edits, needed) in cases {
        let older =
            version::VERSIONS[version::VERSIONS.iter().position(|v| *v == needed).unwrap() + 1];
        let spec = spec_with(needed, edits.clone());
        assert_eq!(version::minimum(&spec), needed, "{edits:?}");
        spec.validate().unwrap();
        assert_eq!(
            refusal(&spec_with(older, edits.clone())),
            format!("invalid CDI Spec: the spec version must be at least v{needed}"),
            "{edits:?}"
        );
        // The spec's own edits count as a device's do.
        let mut at_spec_level = spec_with(older, ContainerEdits::default());
        at_spec_level.container_edits = edits;
        assert!(refusal(&at_spec_level).contains(needed));
    }
    let mut annotated = spec_with("0.5.0", ContainerEdits::default());
    annotated.annotations.insert("a".into(), "b".into());
    assert_eq!(refusal(&annotated), "invalid CDI Spec: the spec version must be at least v0.6.0");
    let mut device_annotated = spec_with("0.5.0", ContainerEdits::default());
    device_annotated.devices[0].annotations.insert("a".into(), "b".into());
    assert!(refusal(&device_annotated).ends_with("v0.6.0"));
    let mut dotted = spec_with("0.5.0", ContainerEdits::default());
    dotted.kind = "vendor.com/cl.ass".into();
    assert!(refusal(&dotted).ends_with("v0.6.0"));
    let mut digit = spec_with("0.4.0", ContainerEdits::default());
    digit.devices[0].name = "0".into();
    assert!(refusal(&digit).ends_with("v0.5.0"));
    // The version is checked before the kind, as the library does.
    dotted.kind = "/cl.ass".into();
    assert!(refusal(&dotted).ends_with("v0.6.0"));
}

#[test]
fn d3_the_kind_needs_a_valid_vendor_and_class() {
    let kinds = [
        ("vendor.com", "invalid vendor. empty name"),
        ("vendor.com/", "invalid vendor. empty name"),
        ("1vendor/class", r#"invalid vendor. "1vendor", should start with letter"#),
        ("vendor.com/class-", r#"invalid class. "class-", should end with a letter or digit"#),
    ];
    for (kind, reason) in kinds {
        let mut spec = spec_with("1.1.0", ContainerEdits::default());
        spec.kind = kind.into();
        assert_eq!(refusal(&spec), format!("invalid CDI Spec: {reason}"), "{kind}");
    }
}

#[test]
fn d3_edits_are_checked_in_the_library_s_words() {
    let node = |f: fn(&mut DeviceNode)| {
        let mut node = DeviceNode { path: "/dev/a".into(), ..DeviceNode::default() };
        f(&mut node);
        ContainerEdits { device_nodes: vec![node], ..ContainerEdits::default() }
    };
    let hook = |f: fn(&mut Hook)| {
        let mut hook = Hook { hook_name: "prestart".into(), path: "/h".into(), ..Hook::default() };
        f(&mut hook);
        ContainerEdits { hooks: vec![hook], ..ContainerEdits::default() }
    };
    let mount = |host: &str, container: &str| ContainerEdits {
        mounts: vec![Mount {
            host_path: host.into(),
            container_path: container.into(),
            ..Mount::default()
        }],
        ..ContainerEdits::default()
    };
    let rdt = |clos: &str| ContainerEdits {
        intel_rdt: Some(IntelRdt { clos_id: clos.into(), ..IntelRdt::default() }),
        ..ContainerEdits::default()
    };
    let net = |pairs: &[(&str, &str)]| ContainerEdits {
        net_devices: pairs
            .iter()
            .map(|(h, n)| NetDevice { host_interface_name: (*h).into(), name: (*n).into() })
            .collect(),
        ..ContainerEdits::default()
    };
    let env = |v: &str| ContainerEdits {
        env: vec!["OK=1".into(), v.into()],
        ..ContainerEdits::default()
    };
    let cases: Vec<(ContainerEdits, &str)> = vec![
        (env("NOVALUE"), r#"invalid container edits: invalid environment variable "NOVALUE""#),
        (env("=x"), r#"invalid container edits: invalid environment variable "=x""#),
        (node(|n| n.path.clear()), "invalid (empty) device path"),
        (node(|n| n.typ = "x".into()), r#"device "/dev/a": invalid type "x""#),
        (node(|n| n.permissions = "rwx".into()), r#"device "/dev/a": invalid permissions "rwx""#),
        (node(|n| n.permissions = "none".into()), r#"device "/dev/a": invalid permissions "none""#),
        (hook(|h| h.hook_name = "prestop".into()), r#"invalid hook name "prestop""#),
        (hook(|h| h.path.clear()), r#"invalid hook "prestart" with empty path"#),
        (
            hook(|h| h.env = vec!["X".into()]),
            r#"invalid hook "prestart": invalid environment variable "X""#,
        ),
        (mount("", "/a"), "invalid mount, empty host path"),
        (mount("/a", ""), "invalid mount, empty container path"),
        (rdt(".."), "invalid ClosID"),
        (rdt("a/b"), "invalid ClosID"),
        (rdt("a\nb"), "invalid ClosID"),
        (rdt(&"c".repeat(4096)), "invalid ClosID"),
        (net(&[("", "n")]), "invalid linux net device, empty HostInterfaceName"),
        (net(&[("eth1", "")]), "invalid linux net device, empty Name"),
        (
            net(&[("eth1", "a"), ("eth1", "b")]),
            r#"invalid linux net device, duplicate HostInterfaceName "eth1" with names "b" and "a""#,
        ),
        (
            net(&[("eth1", "a"), ("eth2", "a")]),
            r#"invalid linux net device, duplicate Name "a" with HostInterfaceName "eth2" and "eth1""#,
        ),
    ];
    for (edits, reason) in cases {
        assert_eq!(edits.validate().unwrap_err().to_string(), reason);
        let mut spec = spec_with("1.1.0", ContainerEdits::default());
        spec.container_edits = edits.clone();
        assert_eq!(refusal(&spec), format!("invalid CDI Spec: {reason}"));
        assert_eq!(
            refusal(&spec_with("1.1.0", edits)),
            format!(r#"invalid CDI Spec: failed add device "a": invalid device "a": {reason}"#)
        );
    }
    for fine in [rdt("/"), rdt(""), rdt("clos"), node(|n| n.permissions = "mr".into())] {
        fine.validate().unwrap();
    }
    for name in super::super::edits::HOOK_NAMES {
        let edits = ContainerEdits {
            hooks: vec![Hook { hook_name: name.into(), path: "/h".into(), ..Hook::default() }],
            ..ContainerEdits::default()
        };
        edits.validate().unwrap();
    }
}

#[test]
fn d3_devices_need_a_valid_unique_name_and_an_edit() {
    let mut spec = spec_with("1.1.0", ContainerEdits::default());
    spec.devices[0].name = "-a".into();
    assert_eq!(
        refusal(&spec),
        r#"invalid CDI Spec: failed add device "-a": invalid class "-a", should start with a letter or digit"#
    );
    let mut spec = spec_with("1.1.0", ContainerEdits::default());
    spec.devices[0].container_edits = ContainerEdits::default();
    assert_eq!(
        refusal(&spec),
        r#"invalid CDI Spec: failed add device "a": invalid device, empty device edits"#
    );
    let mut spec = spec_with("1.1.0", ContainerEdits::default());
    spec.devices.push(spec.devices[0].clone());
    assert_eq!(refusal(&spec), r#"invalid CDI Spec: invalid spec, multiple device "a""#);
    let mut spec = spec_with("1.1.0", ContainerEdits::default());
    spec.devices.clear();
    assert_eq!(refusal(&spec), "invalid CDI Spec: invalid spec, no devices");
    // An edit of any kind is an edit.
    let gids = ContainerEdits { additional_gids: vec![0], ..ContainerEdits::default() };
    assert!(!gids.is_empty());
}
