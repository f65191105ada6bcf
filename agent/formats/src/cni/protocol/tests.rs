use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

fn list() -> NetworkList {
    NetworkList::parse(
        Path::new("/d/10.conflist"),
        br#"{"cniVersion": "1.0.0", "name": "net", "plugins": [
            {"type": "bridge", "runtimeConfig": {"stale": 1}},
            {"type": "portmap", "capabilities": {"portMappings": true, "bandwidth": false}}
        ]}"#,
    )
    .unwrap()
}

#[test]
fn env_holds_every_cni_variable() {
    let dirs = [PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")];
    let call = Call {
        command: Command::Del,
        container_id: "uid-1",
        netns: Path::new("/run/ns/net"),
        ifname: "eth0",
        args: "IgnoreUnknown=1",
        bin_dirs: &dirs,
    };
    let env: Vec<(&str, String)> =
        call.env().into_iter().map(|(k, v)| (k, v.into_string().unwrap())).collect();
    assert_eq!(
        env,
        [
            ("CNI_COMMAND", "DEL".to_owned()),
            ("CNI_CONTAINERID", "uid-1".to_owned()),
            ("CNI_NETNS", "/run/ns/net".to_owned()),
            ("CNI_IFNAME", "eth0".to_owned()),
            ("CNI_ARGS", "IgnoreUnknown=1".to_owned()),
            ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni".to_owned()),
        ]
    );
}

#[test]
fn cni_args_are_the_kubelets() {
    assert_eq!(
        cni_args("default", "web", "u-1", "u-1").unwrap(),
        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;\
         K8S_POD_INFRA_CONTAINER_ID=u-1;K8S_POD_UID=u-1"
    );
    for bad in ["a;b", "a=b"] {
        let error = cni_args("ns", bad, "u", "u").unwrap_err();
        assert!(matches!(error, Error::ArgValue { field: "K8S_POD_NAME", .. }), "{error:?}");
    }
}

#[test]
fn container_ids_follow_the_spec() {
    for good in ["a", "0f8e-11", "pod_1.x-y", "6c1b3a0e-9a55-4d3c-9d7d-0e7e3f0f7a11"] {
        check_container_id(good).unwrap();
    }
    for bad in ["", ".", "..", "-a", "_a", "a/b", "a b", "é"] {
        assert!(check_container_id(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn port_mappings_are_containerds() {
    let ports = [
        PortMapping { host_port: 8080, container_port: 80, protocol: Protocol::Tcp, host_ip: None },
        PortMapping {
            host_port: 53,
            container_port: 5353,
            protocol: Protocol::Udp,
            host_ip: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        },
        PortMapping { host_port: 9, container_port: 9, protocol: Protocol::Sctp, host_ip: None },
    ];
    assert_eq!(
        Value::Object(capability_args(&ports)),
        json!({"portMappings": [
            {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
            {"hostPort": 53, "containerPort": 5353, "protocol": "udp", "hostIP": "127.0.0.1"},
            {"hostPort": 9, "containerPort": 9, "protocol": "sctp"},
        ]})
    );
    assert_eq!(Value::Object(capability_args(&[])), json!({"portMappings": []}));
}

#[test]
fn stdin_injects_name_version_prev_result_and_declared_capabilities() {
    let list = list();
    let caps = capability_args(&[PortMapping {
        host_port: 1,
        container_port: 2,
        protocol: Protocol::Tcp,
        host_ip: None,
    }]);
    let prev = json!({"cniVersion": "1.0.0", "ips": []});
    let bridge = stdin(&list, &list.plugins[0], None, &caps);
    assert_eq!(
        bridge,
        json!({"type": "bridge", "name": "net", "cniVersion": "1.0.0", "runtimeConfig": {"stale": 1}})
    );
    let portmap = stdin(&list, &list.plugins[1], Some(&prev), &caps);
    assert_eq!(
        portmap,
        json!({
            "type": "portmap", "name": "net", "cniVersion": "1.0.0",
            "capabilities": {"portMappings": true, "bandwidth": false},
            "prevResult": prev,
            "runtimeConfig": {"portMappings": [{"hostPort": 1, "containerPort": 2, "protocol": "tcp"}]},
        })
    );
}

#[test]
fn pod_ips_come_from_the_sandbox_interface_ipv4_first() {
    let result = json!({
        "cniVersion": "1.0.0",
        "interfaces": [
            {"name": "cni0", "mac": "aa"},
            {"name": "veth1", "mac": "bb"},
            {"name": "eth0", "mac": "cc", "sandbox": "/run/ns/net"},
        ],
        "ips": [
            {"address": "fd00::5/64", "interface": 2},
            {"address": "10.1.0.1/24", "interface": 0},
            {"address": "10.1.0.5/24", "interface": 2, "gateway": "10.1.0.1"},
        ],
    });
    assert_eq!(
        pod_ips(&result, "eth0").unwrap(),
        [
            IpAddr::V4(Ipv4Addr::new(10, 1, 0, 5)),
            IpAddr::V6("fd00::5".parse::<Ipv6Addr>().unwrap())
        ]
    );
    assert_eq!(pod_ips(&result, "net1").unwrap(), Vec::<IpAddr>::new());
}

#[test]
fn pod_ips_of_an_old_result_without_interfaces() {
    let result =
        json!({"cniVersion": "0.3.1", "ips": [{"version": "4", "address": "10.2.0.9/16"}]});
    assert_eq!(pod_ips(&result, "eth0").unwrap(), [IpAddr::V4(Ipv4Addr::new(10, 2, 0, 9))]);
}

#[test]
fn bad_results_are_errors() {
    assert!(matches!(pod_ips(&json!("x"), "eth0"), Err(Error::Result(_))));
    let bad = json!({"ips": [{"address": "10.2.0.9"}]});
    assert!(matches!(pod_ips(&bad, "eth0"), Err(Error::Address { .. })));
}

#[test]
fn plugin_errors_show_message_details_and_code() {
    let error = PluginError::parse(
        br#"{"cniVersion": "1.0.0", "code": 11, "msg": "failed to allocate", "details": "range full"}"#,
    )
    .unwrap();
    assert_eq!(error.to_string(), "failed to allocate: range full (CNI error code 11)");
    let error = PluginError::parse(br#"{"code": 7, "msg": "bad config"}"#).unwrap();
    assert_eq!(error.to_string(), "bad config (CNI error code 7)");
    assert_eq!(PluginError::parse(b"panic: oops"), None);
    assert_eq!(PluginError::parse(br#"{"code": 1, "msg": ""}"#), None);
}

proptest! {
    #[test]
    fn valid_container_ids_are_safe_file_names(id in "\\PC{0,12}") {
        if check_container_id(&id).is_ok() {
            prop_assert!(!id.is_empty() && !id.starts_with('.') && !id.contains('/'));
        }
    }
}
