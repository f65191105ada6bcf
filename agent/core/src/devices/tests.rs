//! D1, D2: the device manager's decisions and kubelet's checkpoint.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::checkpoint::{Checkpoint, Data, Error as CheckpointError, checksum};
use super::*;

/// Checkpoints real kubelets wrote (a Jetson's `tegra`, a T4 with no pod, and two pods
/// on two NUMA nodes), as their users published them.
const KUBELET_CHECKPOINTS: [&str; 3] = [
    r#"{"Data":{"PodDeviceEntries":[{"PodUID":"bf52b2cd-b611-4e79-86b1-280b283185c3","ContainerName":"check","ResourceName":"nvidia.com/gpu","DeviceIDs":{"-1":["tegra"]},"AllocResp":"Ch8KFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSBXRlZ3Jh"}],"RegisteredDevices":{"nvidia.com/gpu":["tegra"]}},"Checksum":3660592824}"#,
    r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"nvidia.com/gpu":["GPU-0650a168-e770-3ea8-8ac3-8a1d419763e0"]}},"Checksum":3952659280}"#,
    r#"{"Data":{"PodDeviceEntries":[{"PodUID":"513cb897-0262-4868-826f-aa943ee45a38","ContainerName":"app","ResourceName":"nvidia.com/gpu","DeviceIDs":{"0":["GPU-77a702db-e37f-3a74-d46d-c5713f66058c"]},"AllocResp":"CkIKFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSKEdQVS03N2E3MDJkYi1lMzdmLTNhNzQtZDQ2ZC1jNTcxM2Y2NjA1OGMaJAoOL2Rldi9udmlkaWFjdGwSDi9kZXYvbnZpZGlhY3RsGgJydxomCg8vZGV2L252aWRpYS11dm0SDy9kZXYvbnZpZGlhLXV2bRoCcncaMgoVL2Rldi9udmlkaWEtdXZtLXRvb2xzEhUvZGV2L252aWRpYS11dm0tdG9vbHMaAnJ3Gi4KEy9kZXYvbnZpZGlhLW1vZGVzZXQSEy9kZXYvbnZpZGlhLW1vZGVzZXQaAnJ3GiAKDC9kZXYvbnZpZGlhMBIML2Rldi9udmlkaWEwGgJydw=="},{"PodUID":"94283d1b-ce5a-4797-bff8-0cf0c7143b2b","ContainerName":"app","ResourceName":"nvidia.com/gpu","DeviceIDs":{"1":["GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841","GPU-9b341c59-f96b-ba85-c137-78c3652fea65"]},"AllocResp":"CmsKFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSUUdQVS1jMWU5ZjI0OS1iMzdiLTgxYzItYThkOS1iYTVjYTAyOTQ4NDEsR1BVLTliMzQxYzU5LWY5NmItYmE4NS1jMTM3LTc4YzM2NTJmZWE2NRokCg4vZGV2L252aWRpYWN0bBIOL2Rldi9udmlkaWFjdGwaAnJ3GiYKDy9kZXYvbnZpZGlhLXV2bRIPL2Rldi9udmlkaWEtdXZtGgJydxoyChUvZGV2L252aWRpYS11dm0tdG9vbHMSFS9kZXYvbnZpZGlhLXV2bS10b29scxoCcncaLgoTL2Rldi9udmlkaWEtbW9kZXNldBITL2Rldi9udmlkaWEtbW9kZXNldBoCcncaIAoML2Rldi9udmlkaWExEgwvZGV2L252aWRpYTEaAnJ3GiAKDC9kZXYvbnZpZGlhMhIML2Rldi9udmlkaWEyGgJydw=="}],"RegisteredDevices":{"nvidia.com/gpu":["GPU-77a702db-e37f-3a74-d46d-c5713f66058c","GPU-9b341c59-f96b-ba85-c137-78c3652fea65","GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841"]}},"Checksum":2442330366}"#,
];

fn device(id: &str, healthy: bool) -> Device {
    Device { id: id.to_owned(), healthy, numa: Vec::new() }
}

fn serial(ids: &[&str]) -> Devices {
    let mut devices = Devices::default();
    devices.registered("squat.ai/serial");
    devices.update("squat.ai/serial", ids.iter().map(|id| device(id, true)).collect());
    devices
}

const SERIAL: &str = "squat.ai/serial";

fn take(devices: &mut Devices, uid: &str, container: &str, n: usize) -> Result<Vec<String>, Error> {
    devices.begin_pod(uid);
    let plan = devices.plan(uid, container, SERIAL, n)?;
    let chosen = choose(&plan, None);
    if plan != Plan::Allocated {
        devices.insert(uid, container, SERIAL, &chosen, vec![1, 2]);
    }
    Ok(chosen)
}

/// D2: kubelet's checkpoints verify, read and write back byte for byte.
#[test]
fn d2_kubelets_checkpoints_verify_and_write_back_the_same_bytes() {
    for text in KUBELET_CHECKPOINTS {
        let checkpoint = Checkpoint::parse(text.as_bytes()).unwrap();
        assert_eq!(checkpoint.to_json(), text.as_bytes(), "written back as kubelet wrote it");
        assert_eq!(checksum(&checkpoint.data), checkpoint.checksum);
    }
}

/// D2: a checkpoint whose data changed is corrupt, as kubelet's `VerifyChecksum` says.
#[test]
fn d2_a_changed_checkpoint_fails_its_checksum() {
    let text = KUBELET_CHECKPOINTS[0].replace("\"check\"", "\"other\"");
    let error = Checkpoint::parse(text.as_bytes()).unwrap_err();
    assert!(matches!(error, CheckpointError::Checksum { stored: 3660592824, .. }), "{error}");
    assert!(Checkpoint::parse(b"{\"Data\":").is_err());
}

/// D2: `nil` and an empty list print differently in the checksum, as in Go.
#[test]
fn d2_nil_and_empty_lists_checksum_differently() {
    let none = Data { entries: None, registered: Some(Default::default()) };
    let empty = Data { entries: Some(Vec::new()), registered: Some(Default::default()) };
    assert_ne!(checksum(&none), checksum(&empty));
}

/// D2: an agent restart reads back every allocation; the resources are registered with
/// no device until their plugins register again (capacity 0, as kubelet's).
#[test]
fn d2_a_restart_keeps_the_allocations_and_waits_for_the_plugins() {
    let checkpoint = Checkpoint::parse(KUBELET_CHECKPOINTS[2].as_bytes()).unwrap();
    let (devices, stopped) = Devices::from_checkpoint(checkpoint.data.clone());
    assert_eq!(stopped, ["nvidia.com/gpu"]);
    let allocation =
        devices.allocation("94283d1b-ce5a-4797-bff8-0cf0c7143b2b", "app", "nvidia.com/gpu");
    let ids: Vec<&str> = allocation.unwrap().ids().into_iter().collect();
    assert_eq!(
        ids,
        ["GPU-9b341c59-f96b-ba85-c137-78c3652fea65", "GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841"]
    );
    assert_eq!(devices.capacity().capacity["nvidia.com/gpu"], 0);
    assert!(devices.is_device_resource("nvidia.com/gpu"));
    // The allocations are written back as they were read.
    let again = devices.checkpoint_data();
    assert_eq!(
        again.entries,
        checkpoint.data.entries.map(|mut e| {
            e.sort_by(|a, b| a.pod_uid.cmp(&b.pod_uid));
            e
        })
    );
}

/// D1: capacity counts every device, allocatable the healthy ones; a stopped plugin's
/// devices stay in capacity, unhealthy; a removed one is 0 in both.
#[test]
fn d1_capacity_and_allocatable_follow_health_and_the_plugins_life() {
    let mut devices = serial(&["ttyUSB0", "ttyUSB1"]);
    assert_eq!(devices.capacity().capacity[SERIAL], 2);
    assert_eq!(devices.capacity().allocatable[SERIAL], 2);
    assert!(devices.update(SERIAL, vec![device("ttyUSB0", true), device("ttyUSB1", false)]));
    assert_eq!(devices.capacity().allocatable[SERIAL], 1);
    assert!(!devices.update(SERIAL, vec![device("ttyUSB0", true), device("ttyUSB1", false)]));
    devices.stopped(SERIAL);
    assert_eq!(
        (devices.capacity().capacity[SERIAL], devices.capacity().allocatable[SERIAL]),
        (2, 0)
    );
    devices.remove(SERIAL);
    assert_eq!(
        (devices.capacity().capacity[SERIAL], devices.capacity().allocatable[SERIAL]),
        (0, 0)
    );
    devices.registered(SERIAL);
    devices.update(SERIAL, vec![device("ttyUSB0", true)]);
    assert_eq!(devices.capacity().allocatable[SERIAL], 1);
}

/// D2: kubelet's errors: unregistered, none healthy, too few, a changed request.
#[test]
fn d2_allocation_errors_are_kubelets() {
    let mut devices = serial(&["a", "b"]);
    let unregistered = devices.plan("p", "c", "example.com/none", 1).unwrap_err();
    assert_eq!(unregistered.to_string(), "cannot allocate unregistered device example.com/none");
    take(&mut devices, "p1", "c", 2).unwrap();
    let short = take(&mut devices, "p2", "c", 1).unwrap_err();
    assert_eq!(
        short.to_string(),
        "requested number of devices unavailable for squat.ai/serial. Requested: 1, Available: 0"
    );
    let changed = devices.plan("p1", "c", SERIAL, 1).unwrap_err();
    assert_eq!(
        changed.to_string(),
        r#"pod "p1" container "c" changed request for resource "squat.ai/serial" from 2 to 1"#
    );
    devices.stopped(SERIAL);
    let none = devices.plan("p3", "c", SERIAL, 1).unwrap_err();
    assert_eq!(
        none.to_string(),
        "no healthy devices present; cannot allocate unhealthy devices squat.ai/serial"
    );
    // A container that has its devices needs nothing, healthy or not (a restart).
    assert_eq!(devices.plan("p1", "c", SERIAL, 2), Ok(Plan::Allocated));
}

/// D2: an init container's devices go to the pod's next container first; an app
/// container's stay its own; another pod's admission does not reuse them.
#[test]
fn d2_init_containers_devices_are_reused_by_the_next_container() {
    let mut devices = serial(&["a", "b", "c"]);
    devices.begin_pod("p");
    let init = take(&mut devices, "p", "init", 1).unwrap();
    devices.init_container_allocated("p", "init");
    let app = take(&mut devices, "p", "app", 2).unwrap();
    devices.container_allocated("p", "app");
    assert!(app.contains(&init[0]), "the app container reuses {init:?}: {app:?}");
    let second = take(&mut devices, "p", "second", 1).unwrap();
    assert!(!app.contains(&second[0]), "the app's devices are its own: {second:?}");
    devices.begin_pod("q");
    assert!(take(&mut devices, "q", "app", 1).is_err(), "all three are held");
}

/// D2: the plugin's preferred devices are taken when available; the reused ones always.
#[test]
fn d2_preferred_allocation_is_honoured_within_what_is_available() {
    let plan = Plan::Choose {
        available: vec!["b".into(), "c".into(), "d".into()],
        must_include: vec!["a".into()],
        size: 3,
    };
    assert_eq!(choose(&plan, Some(&["d".into(), "x".into()])), ["a", "d", "b"]);
    assert_eq!(choose(&plan, None), ["a", "b", "c"]);
    assert!(choose(&Plan::Allocated, None).is_empty());
}

/// D2: pods that are gone free their devices.
#[test]
fn d2_inactive_pods_free_their_devices() {
    let mut devices = serial(&["a"]);
    take(&mut devices, "p1", "c", 1).unwrap();
    assert!(devices.release_inactive(&BTreeSet::from(["p2".to_owned()])));
    assert_eq!(take(&mut devices, "p2", "c", 1).unwrap(), ["a"]);
    assert_eq!(devices.allocated_count(SERIAL), 1);
}

/// D1: kubelet's `IsExtendedResourceName`.
#[test]
fn d1_extended_resource_names_are_kubelets() {
    for yes in ["squat.ai/serial", "nvidia.com/gpu", "example.com/foo_bar", "a.b/C.d"] {
        assert!(is_extended_resource(yes), "{yes}");
    }
    for no in [
        "cpu",
        "kubernetes.io/foo",
        "x.kubernetes.io/foo",
        "requests.example.com/x",
        "Example.com/x",
        "example.com/",
        "example.com/-x",
        "/x",
    ] {
        assert!(!is_extended_resource(no), "{no}");
    }
    // The domain's limit counts quota's `requests.` prefix.
    assert!(is_extended_resource(&format!("{}/x", "a".repeat(244))));
    assert!(!is_extended_resource(&format!("{}/x", "a".repeat(245))));
}

proptest! {
    /// D2: whatever the order of admissions, health flips and releases, no device is
    /// held by two containers of different pods, and no container holds more than it
    /// asked for; the checkpoint always verifies and reads back the same allocations.
    #[test]
    fn d2_no_device_is_given_twice(ops in prop::collection::vec((0u8..4, 0usize..4, 0usize..3, any::<bool>()), 1..40)) {
        let ids = ["d0", "d1", "d2", "d3"];
        let mut devices = serial(&ids);
        let mut health = [true; 4];
        for (op, pod, n, flag) in ops {
            let uid = format!("pod{pod}");
            match op {
                0 | 1 => {
                    let _ = take(&mut devices, &uid, if flag { "init" } else { "app" }, n);
                    if flag { devices.init_container_allocated(&uid, "init") } else { devices.container_allocated(&uid, "app") }
                }
                2 => {
                    health[n] = flag;
                    devices.update(SERIAL, ids.iter().zip(health).map(|(id, h)| device(id, h)).collect());
                }
                _ => {
                    let active: BTreeSet<String> = (0..4).filter(|p| *p != pod).map(|p| format!("pod{p}")).collect();
                    devices.release_inactive(&active);
                }
            }
            let mut owner: std::collections::BTreeMap<String, String> = Default::default();
            for p in 0..4 {
                let uid = format!("pod{p}");
                for (container, resources) in devices.pod(&uid).into_iter().flatten() {
                    let held = resources[SERIAL].ids();
                    prop_assert!(held.len() <= 3, "{container} holds {held:?}");
                    for id in held {
                        if let Some(other) = owner.insert(id.to_owned(), uid.clone()) {
                            prop_assert_eq!(&other, &uid, "{} held by two pods", id);
                        }
                    }
                }
            }
            let checkpoint = Checkpoint::new(devices.checkpoint_data(), String::new());
            let read = Checkpoint::parse(&checkpoint.to_json()).unwrap();
            prop_assert_eq!(read.data.entries, devices.checkpoint_data().entries);
        }
    }
}
