use std::net::IpAddr;

use super::super::tests::{context, pod};
use super::*;

const HEADER: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|ip| ip.parse().unwrap()).collect()
}

#[test]
fn managed_hosts_file() {
    let pod = pod("spec: {containers: [{name: a, image: b}]}");
    assert_eq!(etc_hosts(&pod, &[]), HEADER);
    assert_eq!(
        etc_hosts(&pod, &ips(&["10.88.0.5", "fd00::5"])),
        format!("{HEADER}10.88.0.5\tweb-node1\nfd00::5\tweb-node1\n")
    );
}

#[test]
fn hostname_subdomain_and_aliases() {
    let pod = pod(
        "spec: {hostname: db, subdomain: backend, hostAliases: [{ip: 10.0.0.1, hostnames: [foo.local, bar.local]}, {ip: 10.0.0.2, hostnames: [baz]}], containers: [{name: a, image: b}]}",
    );
    assert_eq!(
        etc_hosts(&pod, &ips(&["10.88.0.5"])),
        format!(
            "{HEADER}10.88.0.5\tdb.backend.default.svc\tdb\n\n# Entries added by HostAliases.\n10.0.0.1\tfoo.local\tbar.local\n10.0.0.2\tbaz\n"
        )
    );
}

#[test]
fn host_network_hosts_file() {
    let pod = pod(
        "spec: {hostNetwork: true, hostAliases: [{ip: 10.0.0.1, hostnames: [foo]}], containers: [{name: a, image: b}]}",
    );
    assert_eq!(
        host_network_etc_hosts(&pod, "127.0.0.1 localhost\n"),
        "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.0.0.1\tfoo\n"
    );
}

#[test]
fn long_names_are_cut_to_a_label() {
    let name = format!("{}-{}", "a".repeat(62), "b".repeat(10));
    let pod =
        pod(&format!("metadata: {{name: {name}}}\nspec: {{containers: [{{name: a, image: b}}]}}"));
    assert_eq!(pod_hostname(&pod), ("a".repeat(62), None), "cut at 63, trailing '-' dropped");
}

#[test]
fn container_hostname_needs_its_own_uts_namespace() {
    let pod = pod("spec: {containers: [{name: a, image: b}]}");
    let mut ctx = context(&pod);
    assert_eq!(container_hostname(&ctx).as_deref(), Some("web-node1"));
    ctx.namespaces.uts = None;
    assert_eq!(container_hostname(&ctx), None);
    let host =
        super::super::tests::pod("spec: {hostNetwork: true, containers: [{name: a, image: b}]}");
    assert_eq!(container_hostname(&context(&host)), None);
}
