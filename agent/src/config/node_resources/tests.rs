use std::io::Write;

use outpost_core::qos::QosClass;

use super::*;
use crate::config::{Config, Settings};

fn resolve_file(yaml: &str) -> Result<NodeResources, crate::config::Error> {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(yaml.as_bytes()).unwrap();
    let flags = Settings {
        config: Some(f.path().into()),
        node_name: Some("n".into()),
        ..Settings::default()
    };
    Config::resolve(flags).map(|c| c.node_resources)
}

const MI: u64 = 1 << 20;

#[test]
fn defaults_are_kubelets() {
    let resources = NodeResources::resolve(Given::default()).unwrap();
    assert_eq!(resources.layout, Layout::new(Driver::Cgroupfs, "/"));
    assert_eq!(resources.layout.pods().path(Driver::Cgroupfs), "/kubepods");
    assert_eq!(resources.pod_pids_limit, None);
    assert_eq!(resources.reservation, Reservation::default());
    assert!(resources.enforce_pods);
    assert_eq!(resources, NodeResources::default());
}

#[test]
fn kubelet_configuration_names_in_the_file() {
    let resources = resolve_file(
        "cgroupDriver: cgroupfs\ncgroupRoot: /edge\npodPidsLimit: 1024\n\
         systemReserved: {cpu: 100m, memory: 100Mi, pid: 1000}\n\
         kubeReserved: {cpu: 1, ephemeral-storage: 1Gi}\nenforceNodeAllocatable: [pods]\n",
    )
    .unwrap();
    let pod = resources.layout.pod(QosClass::BestEffort, "u");
    assert_eq!(pod.path(Driver::Cgroupfs), "/edge/kubepods/besteffort/podu");
    assert_eq!(resources.pod_pids_limit, Some(1024));
    let reserved = resources.reservation.system_reserved;
    assert_eq!((reserved.cpu_milli, reserved.memory, reserved.pids), (100, 100 * MI, 1000));
    let kube = resources.reservation.kube_reserved;
    assert_eq!((kube.cpu_milli, kube.ephemeral_storage), (1000, 1 << 30));
    assert!(resources.enforce_pods);
    let none = resolve_file("enforceNodeAllocatable: []\n").unwrap();
    assert!(!none.enforce_pods, "an empty list enforces nothing");
}

#[test]
fn flags_as_kubelets() {
    let given = Given {
        cgroup_driver: Some(CgroupDriver::Systemd),
        system_reserved: vec!["cpu=200m,memory=1Gi".parse().unwrap(), "pid=10".parse().unwrap()],
        enforce_node_allocatable: Some(vec!["none".into()]),
        pod_max_pids: Some(-1),
        ..Given::default()
    };
    let resources = NodeResources::resolve(given).unwrap();
    assert_eq!(resources.layout.driver, Driver::Systemd);
    assert_eq!(resources.reservation.system_reserved.memory, 1 << 30);
    assert_eq!(resources.reservation.system_reserved.pids, 10);
    assert!(!resources.enforce_pods);
    assert!("cpu".parse::<ReservedList>().is_err());
}

#[test]
fn what_cannot_be_done_is_refused_with_the_reason() {
    let refused = |given: Given| NodeResources::resolve(given).unwrap_err().to_string();
    let enforce = |level: &str| Given {
        enforce_node_allocatable: Some(vec!["pods".into(), level.into()]),
        ..Given::default()
    };
    let e = refused(enforce("system-reserved"));
    assert!(e.contains("does not manage the system or kube cgroups"), "{e}");
    assert!(refused(enforce("kube-reserved")).contains("\"kube-reserved\""));
    assert!(refused(enforce("everything")).contains("expected pods or none"));
    let e = refused(Given { cgroup_root: Some("edge".into()), ..Given::default() });
    assert!(e.contains("absolute"), "{e}");
    let e = refused(Given { pod_max_pids: Some(0), ..Given::default() });
    assert!(e.contains("pod-max-pids 0"), "{e}");
    let e = refused(Given { kube_reserved: vec!["gpu=1".parse().unwrap()], ..Given::default() });
    assert!(e.starts_with("kube-reserved: gpu: cannot be reserved"), "{e}");
    assert!(
        resolve_file("cgroupDriver: docker\n").unwrap_err().to_string().contains("cgroupDriver")
    );
}

#[test]
fn the_systemd_driver_needs_systemd_as_pid_1() {
    let systemd =
        NodeResources { layout: Layout::new(Driver::Systemd, "/"), ..NodeResources::default() };
    systemd.check_driver("systemd\n").unwrap();
    let e = systemd.check_driver("process_api\n").unwrap_err().to_string();
    assert!(e.contains("systemd as PID 1") && e.contains("\"process_api\""), "{e}");
    NodeResources::default().check_driver("process_api").unwrap();
}
