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
    assert_eq!(etc_hosts(&pod, &[], "cluster.local"), HEADER);
    assert_eq!(
        etc_hosts(&pod, &ips(&["10.88.0.5", "fd00::5"]), "cluster.local"),
        format!("{HEADER}10.88.0.5\tweb-node1\nfd00::5\tweb-node1\n")
    );
}

#[test]
fn hostname_subdomain_and_aliases() {
    let pod = pod(
        "spec: {hostname: db, subdomain: backend, hostAliases: [{ip: 10.0.0.1, hostnames: [foo.local, bar.local]}, {ip: 10.0.0.2, hostnames: [baz]}], containers: [{name: a, image: b}]}",
    );
    assert_eq!(
        etc_hosts(&pod, &ips(&["10.88.0.5"]), ""),
        format!(
            "{HEADER}10.88.0.5\tdb.backend.default.svc\tdb\n\n# Entries added by HostAliases.\n10.0.0.1\tfoo.local\tbar.local\n10.0.0.2\tbaz\n"
        )
    );
}

/// K2: the cluster domain ends the pod's fully qualified name.
#[test]
fn k2_the_fully_qualified_name_ends_with_the_cluster_domain() {
    let pod = pod("spec: {hostname: db, subdomain: backend, containers: [{name: a, image: b}]}");
    assert_eq!(
        etc_hosts(&pod, &ips(&["10.88.0.5"]), "corp.internal"),
        format!("{HEADER}10.88.0.5\tdb.backend.default.svc.corp.internal\tdb\n")
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
    assert_eq!(
        pod_hostname(&pod, "cluster.local"),
        ("a".repeat(62), None),
        "cut at 63, trailing '-' dropped"
    );
}

#[test]
fn container_hostname_needs_its_own_uts_namespace() {
    let pod = pod("spec: {containers: [{name: a, image: b}]}");
    let mut ctx = context(&pod);
    let at = Subject::pod(&pod);
    assert_eq!(container_hostname(&ctx, &at).unwrap().as_deref(), Some("web-node1"));
    ctx.namespaces.uts = None;
    assert_eq!(container_hostname(&ctx, &at).unwrap(), None);
    let host =
        super::super::tests::pod("spec: {hostNetwork: true, containers: [{name: a, image: b}]}");
    assert_eq!(container_hostname(&context(&host), &at).unwrap(), None);
}

#[test]
fn set_hostname_as_fqdn_needs_a_subdomain_and_fits_the_kernel() {
    let hostname = |yaml: &str| {
        let pod = pod(yaml);
        container_hostname(&context(&pod), &Subject::pod(&pod)).map_err(|e| e.to_string())
    };
    let fqdn = "spec: {hostname: db, subdomain: backend, setHostnameAsFQDN: true, containers: []}";
    assert_eq!(hostname(fqdn).unwrap().as_deref(), Some("db.backend.default.svc.cluster.local"));
    let plain = "spec: {hostname: db, subdomain: backend, containers: []}";
    assert_eq!(hostname(plain).unwrap().as_deref(), Some("db"));
    let no_domain = "spec: {hostname: db, setHostnameAsFQDN: true, containers: []}";
    assert_eq!(hostname(no_domain).unwrap().as_deref(), Some("db"));

    // 26 + 1 + 12 + 1 + 7 + 4 + 14 (".cluster.local") = 65 characters.
    let long = format!(
        "spec: {{hostname: {}, subdomain: {}, setHostnameAsFQDN: true, containers: []}}",
        "h".repeat(26),
        "s".repeat(12)
    );
    let error = hostname(&long).unwrap_err();
    assert!(error.contains("FQDN hhhh"), "{error}");
    assert!(
        error.contains("too long (64 characters is the max, 65 characters requested)"),
        "{error}"
    );
    let fits = long.replace(&"h".repeat(26), &"h".repeat(25));
    assert_eq!(hostname(&fits).unwrap().unwrap().len(), 64);
}

/// KEP-4762: `hostnameOverride` is the hostname, over `hostname` and `subdomain`, with no
/// domain in `/etc/hosts`; 64 characters are cut to a label's 63, as the pod's name is.
#[test]
fn hostname_override_is_the_whole_hostname() {
    let overridden = pod(
        "spec: {hostname: db, subdomain: backend, hostnameOverride: db-1.plant.example, containers: [{name: a, image: b}]}",
    );
    assert_eq!(pod_hostname(&overridden, "cluster.local"), ("db-1.plant.example".to_owned(), None));
    assert_eq!(
        etc_hosts(&overridden, &ips(&["10.88.0.5"]), "cluster.local"),
        format!("{HEADER}10.88.0.5\tdb-1.plant.example\n")
    );
    let ctx = context(&overridden);
    let at = Subject::pod(&overridden);
    assert_eq!(container_hostname(&ctx, &at).unwrap().as_deref(), Some("db-1.plant.example"));
    let long = pod(&format!("spec: {{hostnameOverride: {}.b, containers: []}}", "a".repeat(62)));
    assert_eq!(pod_hostname(&long, "").0, "a".repeat(62));
}
