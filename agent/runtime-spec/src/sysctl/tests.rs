use super::super::tests::{PLAIN, error, pod, spec};
use super::*;

fn sysctls_of(yaml: &str) -> Option<HashMap<String, String>> {
    let pod = pod(yaml);
    sysctls(&pod, &Subject::pod(&pod)).unwrap()
}

#[test]
fn none_without_sysctls() {
    assert_eq!(sysctls_of(PLAIN), None);
    assert_eq!(sysctls_of("spec: {securityContext: {sysctls: []}, containers: []}"), None);
}

#[test]
fn sysctls_go_into_every_containers_spec() {
    let yaml = "spec: {securityContext: {sysctls: [{name: net/ipv4/ip_local_port_range, value: '1024 65000'}, {name: kernel.shm_rmid_forced, value: '1'}]}, containers: [{name: app, image: busybox}]}";
    let spec = spec(yaml);
    let sysctl = spec.linux().as_ref().unwrap().sysctl().clone().unwrap();
    assert_eq!(
        sysctl,
        HashMap::from([
            ("net.ipv4.ip_local_port_range".to_owned(), "1024 65000".to_owned()),
            ("kernel.shm_rmid_forced".to_owned(), "1".to_owned()),
        ])
    );
    assert_eq!(spec_linux_sysctl(PLAIN), None);
}

fn spec_linux_sysctl(yaml: &str) -> Option<HashMap<String, String>> {
    spec(yaml).linux().as_ref().unwrap().sysctl().clone()
}

#[test]
fn host_namespaces_refuse_their_sysctls() {
    let net = "spec: {hostNetwork: true, securityContext: {sysctls: [{name: net.ipv4.ip_forward, value: '1'}]}, containers: [{name: app, image: busybox}]}";
    assert_eq!(
        error(net),
        "pod default/web-node1 container app: securityContext.sysctls: \"net.ipv4.ip_forward\" \
         not allowed with host net enabled; remove the sysctl, or run the pod without hostNetwork/hostIPC"
    );
    let ipc = "spec: {hostIPC: true, securityContext: {sysctls: [{name: kernel.msgmax, value: '8192'}]}, containers: [{name: app, image: busybox}]}";
    assert!(error(ipc).contains("\"kernel.msgmax\" not allowed with host ipc enabled"));
    let uts = "spec: {hostNetwork: true, securityContext: {sysctls: [{name: kernel.domainname, value: x}]}, containers: [{name: app, image: busybox}]}";
    assert!(error(uts).contains("\"kernel.domainname\" not allowed with host uts enabled"));

    // Only the shared namespace's sysctls are refused.
    let other = "spec: {hostIPC: true, securityContext: {sysctls: [{name: net.ipv4.ip_forward, value: '1'}]}, containers: [{name: app, image: busybox}]}";
    assert_eq!(sysctls_of(other).unwrap().len(), 1);
}
