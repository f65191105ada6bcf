use std::collections::HashSet;

use oci_spec::runtime::Capability;

use super::super::tests::{
    busybox, context, effective, error, first_container, mount, options, pod, spec,
};
use super::super::{ContainerFiles, container_spec, defaults, host_capabilities};

#[test]
fn capabilities_add_and_drop() {
    let caps = |security: &str| {
        effective(&spec(&format!(
            "spec: {{containers: [{{name: a, image: b, securityContext: {{capabilities: {security}}}}}]}}"
        )))
    };
    let default: HashSet<_> = defaults::CAPABILITIES.into_iter().collect();
    let mut expected = default.clone();
    expected.insert(Capability::NetAdmin);
    expected.insert(Capability::SysTime);
    expected.remove(&Capability::Chown);
    assert_eq!(caps("{add: [NET_ADMIN, cap_sys_time], drop: [CAP_CHOWN]}"), expected);
    assert_eq!(caps("{drop: [ALL]}"), HashSet::new());
    assert_eq!(caps("{drop: [all], add: [NET_BIND_SERVICE]}"), [Capability::NetBindService].into());
    let mut all: HashSet<_> = defaults::ALL_CAPABILITIES.into_iter().collect();
    assert_eq!(caps("{add: [ALL]}"), all);
    all.remove(&Capability::SysAdmin);
    assert_eq!(caps("{add: [ALL], drop: [SYS_ADMIN]}"), all);
    let error = error(
        "spec: {containers: [{name: a, image: b, securityContext: {capabilities: {add: [FLY]}}}]}",
    );
    assert!(error.contains("\"FLY\" is not a Linux capability"), "{error}");
}

#[test]
fn privileged_and_all_get_only_the_hosts_capabilities() {
    let host = [Capability::Chown, Capability::SysAdmin];
    let caps = |security: &str| {
        let pod = pod(&format!(
            "spec: {{containers: [{{name: a, image: b, securityContext: {security}}}]}}"
        ));
        let mut ctx = context(&pod);
        ctx.host_capabilities = &host;
        effective(
            &container_spec(
                &ctx,
                first_container(&pod),
                &busybox(),
                &ContainerFiles::default(),
                "c",
            )
            .unwrap(),
        )
    };
    assert_eq!(caps("{privileged: true}"), host.into());
    let mut expected: HashSet<_> = defaults::CAPABILITIES.into_iter().collect();
    expected.insert(Capability::SysAdmin);
    assert_eq!(caps("{capabilities: {add: [ALL]}}"), expected);
    assert_eq!(
        caps("{capabilities: {drop: [ALL], add: [ALL]}}"),
        HashSet::new(),
        "ALL: add, then drop"
    );
}

#[test]
fn host_capabilities_from_proc_status() {
    let status = "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001fffeffffff\nCapBnd:\t000001ffffffffff\n";
    let caps = host_capabilities(status);
    assert_eq!(caps.len(), 40);
    assert!(!caps.contains(&Capability::SysResource));
    assert!(caps.contains(&Capability::CheckpointRestore));
    assert_eq!(
        host_capabilities("CapEff:\t0000000000000401\n"),
        [Capability::Chown, Capability::NetBindService]
    );
    assert_eq!(host_capabilities("nothing"), []);
}

#[test]
fn every_capability_has_its_name() {
    for cap in defaults::ALL_CAPABILITIES {
        let json = serde_json::to_string(&cap).unwrap();
        assert_eq!(json, format!("\"CAP_{cap}\""));
    }
    assert_eq!(defaults::ALL_CAPABILITIES.into_iter().collect::<HashSet<_>>().len(), 41);
}

#[test]
fn privileged() {
    let spec = spec(
        "spec: {containers: [{name: a, image: b, securityContext: {privileged: true, capabilities: {drop: [ALL]}}}]}",
    );
    assert_eq!(effective(&spec), defaults::ALL_CAPABILITIES.into_iter().collect());
    let linux = spec.linux().as_ref().unwrap();
    assert_eq!(linux.masked_paths(), &None);
    assert_eq!(linux.readonly_paths(), &None);
    let devices = linux.resources().as_ref().unwrap().devices().as_ref().unwrap();
    assert!(devices.last().unwrap().allow());
    assert_eq!(devices.last().unwrap().access().as_deref(), Some("rwm"));
    assert!(options(mount(&spec, "/sys").unwrap()).contains(&"rw"));
    assert!(options(mount(&spec, "/sys/fs/cgroup").unwrap()).contains(&"rw"));
}
