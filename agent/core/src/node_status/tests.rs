use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::{NodeAddress, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use serde_json::json;

use super::conditions::{Conditions, TYPES};
use super::machine::{self, MemInfo};
use super::*;
use crate::eviction::Pressure;

const GI: u64 = 1024 * 1024 * 1024;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

fn healthy() -> Readings {
    Readings {
        cpus: 4,
        memory: Some(MemInfo { total: 16 * GI, available: 8 * GI }),
        swap: Some(2 * GI),
        nodefs: Some(FsStats { capacity: 100 * GI, available: 50 * GI }),
        pids: Some(PidStats { max: 4_194_304, running: 300 }),
        machine_id: "0123abcd".into(),
        system_uuid: "uuid-1".into(),
        boot_id: "boot-1".into(),
        kernel_version: "6.1.0-18-amd64".into(),
        os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        architecture: "amd64".into(),
        node_ip: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))),
        hostname: "edge-1".into(),
        runtime_ready: true,
        shutting_down: false,
        pressure: Pressure::default(),
        runtime_version: Some("1.6.20".into()),
        kubelet_port: Some(10250),
        max_pods: MAX_PODS,
        certificates: Vec::new(),
        certificates_judged_at: None,
        devices: crate::devices::Capacity::default(),
    }
}

/// D1: the device plugins' resources are in capacity (every device) and allocatable
/// (the healthy ones), as whole numbers.
#[test]
fn d1_device_plugin_resources_are_in_capacity_and_allocatable() {
    let mut readings = healthy();
    readings.devices.capacity.insert("squat.ai/serial".into(), 2);
    readings.devices.allocatable.insert("squat.ai/serial".into(), 1);
    let status = status(&readings, Vec::new(), &Reservation::default(), "v1");
    assert_eq!(status.capacity.unwrap()["squat.ai/serial"].0, "2");
    assert_eq!(status.allocatable.unwrap()["squat.ai/serial"].0, "1");
}

fn condition<'a>(conditions: &'a [NodeCondition], type_: &str) -> &'a NodeCondition {
    conditions.iter().find(|c| c.type_ == type_).unwrap()
}

fn summary(conditions: &[NodeCondition]) -> Vec<(String, String, String)> {
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn meminfo_in_bytes() {
    let text =
        "MemTotal:       24684096 kB\nMemFree:        17729916 kB\nMemAvailable:   23082216 kB\n";
    let mem = machine::meminfo(text).unwrap();
    assert_eq!(mem, MemInfo { total: 24_684_096 * 1024, available: 23_082_216 * 1024 });
    assert_eq!(machine::meminfo("MemTotal: 10 kB\n"), None, "MemAvailable missing");
    assert_eq!(machine::meminfo("MemTotal: x kB\nMemAvailable: 1 kB"), None);
    assert_eq!(machine::meminfo("MemTotalX: 1 kB\nMemAvailable: 1 kB"), None);
}

#[test]
fn os_release_pretty_name() {
    let debian = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
    assert_eq!(machine::os_release_pretty_name(debian).unwrap(), "Debian GNU/Linux 12 (bookworm)");
    assert_eq!(machine::os_release_pretty_name("PRETTY_NAME='Alpine v3'").unwrap(), "Alpine v3");
    assert_eq!(machine::os_release_pretty_name("PRETTY_NAME=Plain").unwrap(), "Plain");
    assert_eq!(
        machine::os_release_pretty_name(r#"PRETTY_NAME="A \"q\" \\ b""#).unwrap(),
        r#"A "q" \ b"#
    );
    assert_eq!(machine::os_release_pretty_name("NAME=x\n"), None);
    assert_eq!(machine::os_release_pretty_name("PRETTY_NAME=\"\""), None);
}

#[test]
fn cpu_lists() {
    assert_eq!(machine::cpu_list_count("0-1\n"), Some(2));
    assert_eq!(machine::cpu_list_count("0"), Some(1));
    assert_eq!(machine::cpu_list_count("0-3,6,8-9"), Some(7));
    assert_eq!(machine::cpu_list_count(""), None);
    assert_eq!(machine::cpu_list_count("3-1"), None);
    assert_eq!(machine::cpu_list_count("a-b"), None);
}

#[test]
fn loadavg_and_ids() {
    assert_eq!(machine::loadavg_tasks("0.85 0.79 1.24 2/111 16658\n"), Some(111));
    assert_eq!(machine::loadavg_tasks("0.85 0.79"), None);
    assert_eq!(machine::first_line("abc \nxyz"), "abc");
    assert_eq!(machine::first_line(""), "");
}

#[test]
fn go_architecture_names() {
    assert_eq!(machine::go_arch("x86_64"), "amd64");
    assert_eq!(machine::go_arch("aarch64"), "arm64");
    assert_eq!(machine::go_arch("arm"), "arm");
    assert_eq!(machine::go_arch("x86"), "386");
    assert_eq!(machine::go_arch("riscv64"), "riscv64");
    assert_eq!(machine::go_arch("s390x"), "s390x");
    assert_eq!(machine::go_arch("loongarch64"), "loong64");
}

#[test]
fn healthy_node_conditions_are_kubelets() {
    let conditions = Conditions::default().observe(&healthy(), at(0));
    assert_eq!(
        summary(&conditions),
        [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID"),
            ("Ready", "True", "KubeletReady"),
        ]
        .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    );
    let ready = condition(&conditions, "Ready");
    assert_eq!(ready.message.as_deref(), Some("outpost is posting ready status"));
    assert!(conditions.iter().all(|c| c.last_heartbeat_time == Some(Time(at(0)))
        && c.last_transition_time == Some(Time(at(0)))));
}

#[test]
fn runtime_down_is_not_ready() {
    let readings = Readings { runtime_ready: false, ..healthy() };
    let conditions = Conditions::default().observe(&readings, at(0));
    let ready = condition(&conditions, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref(), ready.message.as_deref()),
        ("False", Some("KubeletNotReady"), Some("container runtime is down"))
    );
}

#[test]
fn a_node_shutting_down_is_not_ready_whatever_the_runtime() {
    for runtime_ready in [true, false] {
        let readings = Readings { runtime_ready, shutting_down: true, ..healthy() };
        let conditions = Conditions::default().observe(&readings, at(0));
        let ready = condition(&conditions, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref(), ready.message.as_deref()),
            ("False", Some("KubeletNotReady"), Some("node is shutting down"))
        );
    }
}

// E1: the pressure conditions are the eviction manager's, with kubelet's reasons.
#[test]
fn pressure_conditions_follow_the_eviction_manager() {
    let pressed = |pressure| {
        let readings = Readings { pressure, ..healthy() };
        let conditions = Conditions::default().observe(&readings, at(0));
        ["MemoryPressure", "DiskPressure", "PIDPressure"].map(|t| {
            let c = condition(&conditions, t);
            (c.status.clone(), c.reason.clone().unwrap())
        })
    };
    let none = pressed(Pressure::default());
    assert_eq!(
        none,
        [
            ("False".into(), "KubeletHasSufficientMemory".into()),
            ("False".into(), "KubeletHasNoDiskPressure".into()),
            ("False".into(), "KubeletHasSufficientPID".into()),
        ]
    );
    let all = pressed(Pressure { memory: true, disk: true, pid: true });
    assert_eq!(
        all,
        [
            ("True".into(), "KubeletHasInsufficientMemory".into()),
            ("True".into(), "KubeletHasDiskPressure".into()),
            ("True".into(), "KubeletHasInsufficientPID".into()),
        ]
    );
    // Low readings alone do not make a condition: the manager's thresholds decide.
    let low = Readings {
        memory: Some(MemInfo { total: GI, available: 1 }),
        nodefs: Some(FsStats { capacity: 1000, available: 1 }),
        pids: Some(PidStats { max: 1000, running: 999 }),
        ..healthy()
    };
    let conditions = Conditions::default().observe(&low, at(0));
    assert_eq!(condition(&conditions, "MemoryPressure").status, "False");
}

#[test]
fn transition_time_moves_only_when_the_status_flips() {
    let mut conditions = Conditions::default();
    conditions.observe(&healthy(), at(0));
    let later = conditions.observe(&healthy(), at(10));
    let ready = condition(&later, "Ready");
    assert_eq!(ready.last_heartbeat_time, Some(Time(at(10))));
    assert_eq!(ready.last_transition_time, Some(Time(at(0))));
    let down = conditions.observe(&Readings { runtime_ready: false, ..healthy() }, at(20));
    assert_eq!(condition(&down, "Ready").last_transition_time, Some(Time(at(20))));
    assert_eq!(condition(&down, "MemoryPressure").last_transition_time, Some(Time(at(0))));
    let up = conditions.observe(&healthy(), at(30));
    assert_eq!(condition(&up, "Ready").last_transition_time, Some(Time(at(30))));
}

/// J2: a node that keeps its certificates reports `CertificateExpired` after kubelet's
/// conditions; the serving certificate's end turns it True at once, and an adopted Node
/// keeps its transition time.
#[test]
fn j2_certificate_condition_follows_the_certificates() {
    use crate::certificates::Held;
    let end = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_015);
    let held = |kind| Held { kind, not_after: Some(end), problem: None, lapse: None };
    let readings = Readings { certificates: vec![held("client"), held("server")], ..healthy() };
    assert_eq!(summary(&Conditions::default().observe(&healthy(), at(0))).len(), 4);
    let mut conditions = Conditions::default();
    let valid = conditions.observe(&readings, at(0));
    assert_eq!(
        summary(&valid).last().cloned(),
        Some(("CertificateExpired".into(), "False".into(), "CertificatesValid".into()))
    );
    let serving_ended = Readings {
        certificates: vec![
            Held { not_after: Some(end + std::time::Duration::from_secs(60)), ..held("client") },
            held("server"),
        ],
        ..healthy()
    };
    let expired = conditions.observe(&serving_ended, at(20));
    let c = condition(&expired, "CertificateExpired");
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("ServingCertificateExpired"))
    );
    assert_eq!(c.last_transition_time, Some(Time(at(20))));
    let mut adopted = Conditions::adopt(&expired);
    let again = adopted.observe(&serving_ended, at(30));
    assert_eq!(condition(&again, "CertificateExpired").last_transition_time, Some(Time(at(20))));
}

/// J2, issue 54: the certificates are judged at the time the readings give (the API
/// server's), not at the local clock's: a clock stepped ahead past their end does not
/// report them expired, and one behind does not hide an end that came.
#[test]
fn j2_the_certificate_condition_takes_the_time_the_certificates_are_judged_at() {
    use crate::certificates::Held;
    let end = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_015);
    let held = Held { kind: "client", not_after: Some(end), problem: None, lapse: None };
    let before_end = Some(end - std::time::Duration::from_secs(10));
    let ahead = Readings {
        certificates: vec![held.clone()],
        certificates_judged_at: before_end,
        ..healthy()
    };
    // The local clock reads 90 days after the end; the server's, 10 s before it.
    let local = at(90 * 86_400);
    let valid = Conditions::default().observe(&ahead, local);
    assert_eq!(condition(&valid, "CertificateExpired").status, "False");
    let past_end = Some(end + std::time::Duration::from_secs(10));
    let behind = Readings { certificates_judged_at: past_end, ..ahead };
    let expired = Conditions::default().observe(&behind, at(-86_400));
    assert_eq!(condition(&expired, "CertificateExpired").status, "True");
}

#[test]
fn adopted_conditions_keep_their_transition_times() {
    let existing = Conditions::default().observe(&healthy(), at(-1000));
    let mut conditions = Conditions::adopt(&existing);
    let now = conditions.observe(&Readings { runtime_ready: false, ..healthy() }, at(0));
    assert_eq!(condition(&now, "MemoryPressure").last_transition_time, Some(Time(at(-1000))));
    assert_eq!(condition(&now, "Ready").last_transition_time, Some(Time(at(0))));
}

#[test]
fn a_pressure_flip_moves_its_transition_time() {
    let mut conditions = Conditions::default();
    conditions.observe(&healthy(), at(0));
    let disk = Pressure { disk: true, ..Pressure::default() };
    let pressed = conditions.observe(&Readings { pressure: disk, ..healthy() }, at(10));
    let condition_now = condition(&pressed, "DiskPressure");
    assert_eq!(
        (condition_now.status.as_str(), condition_now.last_transition_time.clone()),
        ("True", Some(Time(at(10))))
    );
    assert_eq!(condition(&pressed, "MemoryPressure").last_transition_time, Some(Time(at(0))));
    let cleared = conditions.observe(&healthy(), at(300));
    let disk = condition(&cleared, "DiskPressure");
    assert_eq!(
        (disk.status.as_str(), disk.last_transition_time.clone()),
        ("False", Some(Time(at(300))))
    );
}

#[test]
fn allocatable_is_capacity_less_the_reservations_and_hard_thresholds() {
    use super::allocatable::{HardEviction, Reserved, Threshold};
    let reservation = Reservation {
        system_reserved: Reserved { cpu_milli: 100, memory: 100 << 20, ..Reserved::default() },
        kube_reserved: Reserved { cpu_milli: 150, ephemeral_storage: GI, ..Reserved::default() },
        eviction_hard: HardEviction {
            memory_available: Some(Threshold::Bytes(200 << 20)),
            nodefs_available: Some(Threshold::Percentage(5.0)),
        },
    };
    let status = status(&healthy(), Vec::new(), &reservation, "v");
    let q = |map: &Option<BTreeMap<String, Quantity>>, k: &str| map.as_ref().unwrap()[k].0.clone();
    assert_eq!(q(&status.capacity, "cpu"), "4");
    assert_eq!(q(&status.allocatable, "cpu"), "3750m");
    assert_eq!(q(&status.capacity, "memory"), "16777216Ki");
    assert_eq!(q(&status.allocatable, "memory"), format!("{}Ki", 16_777_216 - 300 * 1024));
    assert_eq!(q(&status.allocatable, "ephemeral-storage"), (100 * GI - GI - 5 * GI).to_string());
}

#[test]
fn status_from_readings() {
    let readings = healthy();
    let conditions = Conditions::default().observe(&readings, at(0));
    let status = status(&readings, conditions, &Reservation::default(), &kubelet_version("0.1.0"));
    let q = |map: &Option<BTreeMap<String, Quantity>>, k: &str| map.as_ref().unwrap()[k].0.clone();
    assert_eq!(q(&status.capacity, "cpu"), "4");
    assert_eq!(q(&status.capacity, "memory"), "16777216Ki");
    assert_eq!(q(&status.allocatable, "memory"), "16674816Ki", "less 100Mi");
    assert_eq!(q(&status.capacity, "ephemeral-storage"), "104857600Ki");
    assert_eq!(q(&status.allocatable, "ephemeral-storage"), (100 * GI / 100 * 90).to_string());
    assert_eq!(q(&status.capacity, "pods"), "110");
    assert_eq!(q(&status.allocatable, "pods"), "110");
    let addresses: Vec<(String, String)> =
        status.addresses.unwrap().into_iter().map(|a| (a.type_, a.address)).collect();
    assert_eq!(
        addresses,
        [("InternalIP".into(), "10.0.0.7".into()), ("Hostname".into(), "edge-1".into())]
    );
    let info = status.node_info.unwrap();
    assert_eq!(info.container_runtime_version, "containerd://1.6.20");
    assert_eq!(info.kubelet_version, "v1.37.0+outpost-0.1.0");
    assert_eq!(info.operating_system, "linux");
    assert_eq!(info.architecture, "amd64");
    assert_eq!(info.kube_proxy_version, "");
    // D6: the swap the node has, in bytes, as kubelet reports it (0 without swap).
    assert_eq!(info.swap.and_then(|s| s.capacity), Some(2 * GI as i64));
    assert_eq!(status.conditions.unwrap().len(), TYPES.len());
    let endpoint = status.daemon_endpoints.unwrap().kubelet_endpoint.unwrap();
    assert_eq!(endpoint.port, 10250);
    assert_eq!(status.declared_features.unwrap(), ["ExtendWebSocketsToKubelet"]);
}

#[test]
fn status_without_optional_readings() {
    let readings = Readings {
        memory: None,
        nodefs: None,
        node_ip: None,
        runtime_version: None,
        kubelet_port: None,
        swap: None,
        ..healthy()
    };
    let status = status(&readings, Vec::new(), &Reservation::default(), "v");
    assert_eq!(status.daemon_endpoints, None);
    assert_eq!(status.node_info.as_ref().unwrap().swap, None);
    let capacity = status.capacity.unwrap();
    assert_eq!(capacity.keys().collect::<Vec<_>>(), ["cpu", "pods"]);
    assert_eq!(status.addresses.unwrap().len(), 1, "Hostname only");
    assert_eq!(status.node_info.unwrap().container_runtime_version, "");
}

#[test]
fn node_to_register() {
    let readings = healthy();
    let status = status(&readings, Vec::new(), &Reservation::default(), "v");
    let labels = BTreeMap::from([
        ("role".to_owned(), "edge".to_owned()),
        (LABEL_OS.to_owned(), "windows".to_owned()),
    ]);
    let taint = Taint { key: "dedicated".into(), effect: "NoSchedule".into(), ..Taint::default() };
    let node = node("edge-1", &labels, std::slice::from_ref(&taint), status);
    let labels = node.metadata.labels.unwrap();
    assert_eq!(labels["role"], "edge");
    assert_eq!(labels[LABEL_OS], "linux", "the well-known labels win");
    assert_eq!(labels[LABEL_HOSTNAME], "edge-1");
    assert_eq!(labels[LABEL_ARCH], "amd64");
    assert_eq!(labels[LABEL_ARCH_BETA], "amd64");
    assert_eq!(labels[LABEL_OS_BETA], "linux");
    assert_eq!(node.spec.unwrap().taints, Some(vec![taint]));
    let untainted = super::node("edge-1", &BTreeMap::new(), &[], NodeStatus::default());
    assert_eq!(untainted.spec.unwrap().taints, None);
}

#[test]
fn default_labels_are_reconciled_on_an_existing_node() {
    let wanted = well_known_labels("edge-1", "arm64");
    assert_eq!(default_labels_patch(&wanted, Some(&wanted)), None);
    let mut existing = wanted.clone();
    existing.insert(LABEL_ARCH.into(), "amd64".into());
    existing.remove(LABEL_OS_BETA);
    existing.insert("custom".into(), "kept".into());
    assert_eq!(
        default_labels_patch(&wanted, Some(&existing)),
        Some(json!({ "metadata": { "labels": { LABEL_ARCH: "arm64", LABEL_OS_BETA: "linux" } } }))
    );
    let all = default_labels_patch(&wanted, None).unwrap();
    assert_eq!(all["metadata"]["labels"].as_object().unwrap().len(), 5);
}

#[test]
fn report_only_on_change_or_after_the_report_period() {
    let readings = healthy();
    let mut conditions = Conditions::default();
    let first =
        status(&readings, conditions.observe(&readings, at(0)), &Reservation::default(), "v");
    assert!(report_due(None, &first, at(0)), "never reported");
    let same =
        status(&readings, conditions.observe(&readings, at(10)), &Reservation::default(), "v");
    assert!(!report_due(Some((&first, at(0))), &same, at(10)), "only heartbeats moved");
    assert!(!report_due(Some((&first, at(0))), &same, at(299)));
    assert!(report_due(Some((&first, at(0))), &same, at(300)), "5 minutes passed");
    let down = Readings { runtime_ready: false, ..readings.clone() };
    let flipped = status(&down, conditions.observe(&down, at(20)), &Reservation::default(), "v");
    assert!(report_due(Some((&first, at(0))), &flipped, at(20)), "Ready flipped");
    let versioned = Readings { runtime_version: Some("1.7.0".into()), ..readings.clone() };
    let other =
        status(&versioned, conditions.observe(&readings, at(30)), &Reservation::default(), "v");
    assert!(report_due(Some((&first, at(0))), &other, at(30)), "nodeInfo changed");
}

#[test]
fn status_patch_deletes_addresses_that_went() {
    let readings = healthy();
    let server = status(&readings, Vec::new(), &Reservation::default(), "v");
    let now =
        status(&Readings { node_ip: None, ..readings }, Vec::new(), &Reservation::default(), "v");
    let patch = status_patch(Some(&server), &now);
    assert_eq!(
        patch["status"]["addresses"],
        json!([
            { "type": "Hostname", "address": "edge-1" },
            { "type": "InternalIP", "$patch": "delete" },
        ])
    );
    assert_eq!(patch["status"]["nodeInfo"]["machineID"], "0123abcd");
    let fresh = status_patch(None, &server);
    assert_eq!(fresh["status"]["addresses"].as_array().unwrap().len(), 2);
    let same = vec![NodeAddress { type_: "Hostname".into(), address: "x".into() }];
    let unchanged =
        status_patch(Some(&server), &NodeStatus { addresses: Some(same), ..server.clone() });
    assert_eq!(unchanged["status"]["addresses"].as_array().unwrap().len(), 2, "InternalIP deleted");
}

proptest! {
    /// Whatever the sequence of readings, every condition's transition time is the time
    /// of the first observation since its status last flipped, and its heartbeat is now.
    #[test]
    fn transition_times_follow_flips(
        steps in prop::collection::vec((any::<bool>(), 0u64..300, 0u64..200), 1..40),
    ) {
        let mut conditions = Conditions::default();
        let mut flips: BTreeMap<String, (String, Timestamp)> = BTreeMap::new();
        let mut now = at(0);
        for (ready, memory_mib, gap) in steps {
            now = now.checked_add(SignedDuration::from_secs(gap as i64)).unwrap();
            let readings = Readings {
                runtime_ready: ready,
                memory: Some(MemInfo { total: GI, available: memory_mib * 1024 * 1024 }),
                ..healthy()
            };
            for c in conditions.observe(&readings, now) {
                let since = flips.entry(c.type_.clone()).or_insert((c.status.clone(), now));
                if since.0 != c.status {
                    *since = (c.status.clone(), now);
                }
                prop_assert_eq!(c.last_transition_time.clone(), Some(Time(since.1)));
                prop_assert_eq!(c.last_heartbeat_time.clone(), Some(Time(now)));
            }
        }
    }

    /// A report is due exactly when something but the heartbeats changed, or when the
    /// report period has passed.
    #[test]
    fn report_due_ignores_heartbeats(gap in 0i64..1000, ready in any::<bool>()) {
        let readings = healthy();
        let mut conditions = Conditions::default();
        let first = status(&readings, conditions.observe(&readings, at(0)), &Reservation::default(), "v");
        let next = Readings { runtime_ready: ready, ..readings };
        let current = status(&next, conditions.observe(&next, at(gap)), &Reservation::default(), "v");
        let due = report_due(Some((&first, at(0))), &current, at(gap));
        prop_assert_eq!(due, !ready || gap >= 300);
    }
}
