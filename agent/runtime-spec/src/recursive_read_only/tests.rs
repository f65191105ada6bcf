use std::path::Path;

use k8s_openapi::api::core::v1::VolumeMount;

use super::super::tests::{busybox, context, first_container, mount, options, pod};
use super::super::{ContainerFiles, container_spec};
use super::*;

fn volume_mount(mode: Option<&str>, read_only: bool, propagation: Option<&str>) -> VolumeMount {
    VolumeMount {
        name: "data".to_owned(),
        mount_path: "/data".to_owned(),
        read_only: Some(read_only),
        recursive_read_only: mode.map(str::to_owned),
        mount_propagation: propagation.map(str::to_owned),
        ..VolumeMount::default()
    }
}

#[test]
fn recursive_read_only_is_resolved_as_kubelet_resolves_it() {
    for supported in [true, false] {
        assert_eq!(resolve(&volume_mount(None, true, None), supported), Ok(false));
        assert_eq!(resolve(&volume_mount(Some("Disabled"), false, None), supported), Ok(false));
        assert_eq!(
            resolve(&volume_mount(Some("IfPossible"), true, None), supported),
            Ok(supported)
        );
        let none = Some("None");
        assert_eq!(
            resolve(&volume_mount(Some("IfPossible"), true, none), supported),
            Ok(supported)
        );
    }
    assert_eq!(resolve(&volume_mount(Some("Enabled"), true, None), true), Ok(true));
    let unsupported = resolve(&volume_mount(Some("Enabled"), true, None), false).unwrap_err();
    assert!(unsupported.to_string().starts_with(
        "volume \"data\" requires recursive read-only mounts, but it is not supported by the runtime"
    ));
    assert_eq!(
        resolve(&volume_mount(Some("Enabled"), false, None), true).unwrap_err().to_string(),
        "volume \"data\" requires ReadOnly to be set to true"
    );
    let host_to_container = volume_mount(Some("IfPossible"), true, Some("HostToContainer"));
    assert_eq!(
        resolve(&host_to_container, true).unwrap_err().to_string(),
        "volume \"data\" requires MountPropagation to be set to None"
    );
    assert_eq!(
        resolve(&volume_mount(Some("Always"), true, None), true).unwrap_err().to_string(),
        "unknown recursive read-only mode \"Always\""
    );
}

#[test]
fn mount_setattr_is_in_linux_5_12_and_later() {
    for release in ["5.12.0", "6.1.0-18-amd64", "6.18.44-fc-v857", "10.0", "5.15.0-91-generic\n"] {
        assert!(kernel_supports(release), "{release}");
    }
    for release in ["5.11.22", "4.19.0-26-amd64", "", "linux", "5"] {
        assert!(!kernel_supports(release), "{release}");
    }
}

const POD: &str = r#"spec:
  volumes:
  - {name: data, hostPath: {path: /srv/data}}
  containers:
  - name: app
    image: b
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: true, recursiveReadOnly: MODE}
"#;

fn spec_with(mode: &str, supported: bool) -> Result<oci_spec::runtime::Spec, crate::Error> {
    let pod = pod(&POD.replace("MODE", mode));
    let ctx = crate::PodContext { recursive_read_only: supported, ..context(&pod) };
    container_spec(&ctx, first_container(&pod), &busybox(), &ContainerFiles::default(), "c1")
}

#[test]
fn a_recursively_read_only_mount_has_runcs_rro_option() {
    let enabled = spec_with("Enabled", true).unwrap();
    let data = mount(&enabled, "/data").unwrap();
    assert_eq!(data.source().as_deref(), Some(Path::new("/srv/data")));
    assert_eq!(options(data), ["rbind", "rprivate", "ro", "rro"]);
    let if_possible = spec_with("IfPossible", true).unwrap();
    assert_eq!(options(mount(&if_possible, "/data").unwrap()), ["rbind", "rprivate", "ro", "rro"]);
    for (mode, supported) in [("IfPossible", false), ("Disabled", true)] {
        let plain = spec_with(mode, supported).unwrap();
        assert_eq!(options(mount(&plain, "/data").unwrap()), ["rbind", "rprivate", "ro"]);
    }
    let error = outpost_core::error_chain::describe(&spec_with("Enabled", false).unwrap_err());
    assert!(
        error.starts_with(
            "pod default/web-node1 container app: volumeMounts[0].recursiveReadOnly: failed to \
             resolve recursive read-only mode: volume \"data\" requires recursive read-only mounts"
        ),
        "{error}"
    );
}
