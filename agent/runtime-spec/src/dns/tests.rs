use std::net::IpAddr;

use proptest::prelude::*;

use super::super::tests::pod;
use super::limits::{MAX_SEARCH_DOMAIN, MAX_SEARCH_LINE};
use super::*;

const HOST: &str = "# generated\n  # indented comment\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nsearch old.example\nsearch lan. example.com .\noptions ndots:2 timeout:1\noptions ndots:3 rotate\n\n";
const HOST_FILE: &str = "search lan example.com\nnameserver 192.168.1.1\nnameserver 192.168.1.2\noptions ndots:3 rotate\n";
const CLUSTER_FILE: &str = "search team.svc.cluster.local svc.cluster.local cluster.local lan example.com\nnameserver 10.96.0.10\noptions ndots:5\n";
const CONFIG: &str = "dnsConfig: {nameservers: [192.168.1.2, 1.1.1.1], searches: [svc.cluster.local, corp], options: [{name: ndots, value: '1'}, {name: edns0}]}";

fn node(cluster_dns: &[&str]) -> NodeDns {
    NodeDns {
        cluster_dns: cluster_dns.iter().map(|ip| ip.parse::<IpAddr>().unwrap()).collect(),
        ..NodeDns::default()
    }
}

/// A pod of namespace `team` with `spec` (fields after `containers`).
fn team_pod(spec: &str) -> Pod {
    pod(&format!(
        "metadata: {{name: web, namespace: team, uid: u1}}\nspec: {{containers: [{{name: a, image: b}}]{spec}}}"
    ))
}

fn form(spec: &str, node: &NodeDns) -> PodDns {
    resolv_conf(&team_pod(spec), node, Some(HOST)).unwrap()
}

fn reasons(dns: &PodDns) -> Vec<&'static str> {
    dns.events.iter().map(|e| e.reason).collect()
}

/// K2: every policy × hostNetwork × cluster DNS or not × dnsConfig or not.
#[test]
fn k2_every_policy_host_network_cluster_dns_and_dns_config() {
    let cluster_with_config = "search team.svc.cluster.local svc.cluster.local cluster.local lan example.com corp\nnameserver 10.96.0.10\nnameserver 192.168.1.2\nnameserver 1.1.1.1\noptions ndots:1 edns0\n";
    let host_with_config = "search lan example.com svc.cluster.local corp\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nnameserver 1.1.1.1\noptions ndots:1 rotate edns0\n";
    let none_with_config = "search svc.cluster.local corp\nnameserver 192.168.1.2\nnameserver 1.1.1.1\noptions ndots:1 edns0\n";
    let missing = vec![MISSING_CLUSTER_DNS];
    // (policy, hostNetwork, cluster DNS, dnsConfig) → (file, Event reasons)
    for policy in [
        "",
        ", dnsPolicy: ClusterFirst",
        ", dnsPolicy: ClusterFirstWithHostNet",
        ", dnsPolicy: Default",
        ", dnsPolicy: None",
    ] {
        for host_network in [false, true] {
            for cluster in [false, true] {
                for config in [false, true] {
                    let spec = format!(
                        "{policy}, hostNetwork: {host_network}{}",
                        if config { format!(", {CONFIG}") } else { String::new() }
                    );
                    let node = node(if cluster { &["10.96.0.10"] } else { &[] });
                    let asks_cluster = policy.contains("WithHostNet")
                        || (!host_network
                            && (policy.is_empty() || policy.contains("ClusterFirst")));
                    let (file, events): (&str, Vec<&str>) =
                        match (policy, asks_cluster, cluster, config) {
                            (", dnsPolicy: None", _, _, true) => (none_with_config, vec![]),
                            (", dnsPolicy: None", _, _, false) => {
                                let error = resolv_conf(&team_pod(&spec), &node, Some(HOST));
                                assert!(
                                    matches!(error, Err(Error::DnsNoNameserver { .. })),
                                    "{spec}"
                                );
                                continue;
                            }
                            (_, true, true, false) => (CLUSTER_FILE, vec![]),
                            (_, true, true, true) => (cluster_with_config, vec![]),
                            (_, true, false, false) => (HOST_FILE, missing.clone()),
                            (_, true, false, true) => (host_with_config, missing.clone()),
                            (_, false, _, false) => (HOST_FILE, vec![]),
                            (_, false, _, true) => (host_with_config, vec![]),
                        };
                    let dns = form(&spec, &node);
                    assert_eq!(dns.resolv_conf, file, "{spec} cluster={cluster}");
                    assert_eq!(reasons(&dns), events, "{spec} cluster={cluster}");
                }
            }
        }
    }
}

#[test]
fn k2_cluster_dns_keeps_its_servers_and_orders_searches_cluster_first() {
    let two = node(&["10.96.0.10", "fd00::a"]);
    let dns = form("", &two);
    assert_eq!(
        dns.resolv_conf,
        "search team.svc.cluster.local svc.cluster.local cluster.local lan example.com\nnameserver 10.96.0.10\nnameserver fd00::a\noptions ndots:5\n"
    );
    // The node's search domains that repeat the cluster's are left out.
    let host = "search cluster.local lan\nnameserver 1.1.1.1\n";
    let dns = resolv_conf(&team_pod(""), &node(&["10.96.0.10"]), Some(host)).unwrap();
    assert_eq!(
        dns.resolv_conf,
        "search team.svc.cluster.local svc.cluster.local cluster.local lan\nnameserver 10.96.0.10\noptions ndots:5\n"
    );
    // Another domain; no domain: the node's searches alone.
    let corp = NodeDns { cluster_domain: "corp.internal".to_owned(), ..node(&["10.0.0.10"]) };
    assert!(form("", &corp).resolv_conf.starts_with(
        "search team.svc.corp.internal svc.corp.internal corp.internal lan example.com\n"
    ));
    let bare = NodeDns { cluster_domain: String::new(), ..node(&["10.0.0.10"]) };
    assert_eq!(
        form("", &bare).resolv_conf,
        "search lan example.com\nnameserver 10.0.0.10\noptions ndots:5\n"
    );
}

#[test]
fn k2_an_empty_resolv_conf_setting_means_the_loopback_resolver() {
    let empty = NodeDns { resolv_conf: None, ..node(&[]) };
    let pod = team_pod(", dnsPolicy: Default");
    let dns = resolv_conf(&pod, &empty, None).unwrap();
    assert_eq!(dns.resolv_conf, "search .\nnameserver 127.0.0.1\n");
    let v6 = NodeDns { node_ipv6: true, ..empty.clone() };
    assert_eq!(resolv_conf(&pod, &v6, None).unwrap().resolv_conf, "search .\nnameserver ::1\n");
    // ClusterFirst without cluster DNS falls back to the same.
    let dns = resolv_conf(&team_pod(""), &empty, None).unwrap();
    assert_eq!(dns.resolv_conf, "search .\nnameserver 127.0.0.1\n");
    assert_eq!(reasons(&dns), [MISSING_CLUSTER_DNS]);
    // With cluster DNS: the cluster's searches alone.
    let cluster = NodeDns { resolv_conf: None, ..node(&["10.96.0.10"]) };
    assert_eq!(
        resolv_conf(&team_pod(""), &cluster, None).unwrap().resolv_conf,
        "search team.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
    );
}

#[test]
fn k2_missing_cluster_dns_is_kubelets_message() {
    let dns = resolv_conf(&pod("spec: {containers: []}"), &node(&[]), Some("")).unwrap();
    assert_eq!(
        dns.events,
        [DnsEvent {
            reason: MISSING_CLUSTER_DNS,
            message: "pod: \"web-node1_default(0123456789abcdef)\". kubelet does not have \
                      ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" \
                      policy. Falling back to \"Default\" policy."
                .to_owned()
        }]
    );
    assert_eq!(dns.resolv_conf, "", "an empty node resolv.conf gives an empty file");
}

#[test]
fn k2_the_host_file_is_parsed_as_kubelet_does() {
    let host = "options a b:1\nsearch x.example. . y.example\nnameserver 9.9.9.9\n# nameserver 8.8.8.8\noptions ndots:2 ndots:3\n";
    let dns = resolv_conf(&team_pod(", dnsPolicy: Default"), &node(&[]), Some(host)).unwrap();
    // The last options line, as it is (kubelet merges options only with a dnsConfig).
    assert_eq!(
        dns.resolv_conf,
        "search x.example y.example\nnameserver 9.9.9.9\noptions ndots:2 ndots:3\n"
    );
    let with_config = resolv_conf(
        &team_pod(", dnsPolicy: Default, dnsConfig: {options: [{name: edns0}]}"),
        &node(&[]),
        Some(host),
    )
    .unwrap();
    assert_eq!(with_config.resolv_conf.lines().last(), Some("options ndots:3 edns0"));
}

#[test]
fn k2_a_nameserver_line_without_an_address_is_an_error_for_every_pod() {
    let bad = "nameserver 10.0.0.1\nnameserver\n";
    for spec in
        ["", ", dnsPolicy: Default", ", dnsPolicy: None, dnsConfig: {nameservers: [1.1.1.1]}"]
    {
        let error = resolv_conf(&team_pod(spec), &node(&["10.96.0.10"]), Some(bad)).unwrap_err();
        assert!(matches!(error, Error::DnsHostNameserver { .. }), "{spec}: {error}");
    }
    assert!(error_text().contains("has a nameserver line without an address"));
    assert!(!is_systemd_resolved_stub("nameserver 127.0.0.53\nnameserver\n"));
    assert!(is_systemd_resolved_stub("nameserver 127.0.0.53\noptions edns0\n"));
}

fn error_text() -> String {
    let pod = team_pod("");
    resolv_conf(&pod, &node(&[]), Some("nameserver")).unwrap_err().to_string()
}

#[test]
fn k2_limits_are_cut_with_kubelets_warnings() {
    let many = node(&["10.0.0.1", "10.0.0.2"]);
    let dns = form(", dnsConfig: {nameservers: [10.0.0.3, 10.0.0.4]}", &many);
    let nameservers: Vec<_> =
        dns.resolv_conf.lines().filter(|l| l.starts_with("nameserver")).collect();
    assert_eq!(nameservers, ["nameserver 10.0.0.1", "nameserver 10.0.0.2", "nameserver 10.0.0.3"]);
    assert_eq!(
        dns.events,
        [DnsEvent {
            reason: DNS_CONFIG_FORMING,
            message: "Nameserver limits were exceeded, some nameservers have been omitted, the \
                      applied nameserver line is: 10.0.0.1 10.0.0.2 10.0.0.3"
                .to_owned()
        }]
    );

    let searches: Vec<String> = (0..30).map(|i| format!("s{i}.example")).collect();
    let dns = form(
        &format!(", dnsConfig: {{searches: [{}]}}", searches.join(", ")),
        &node(&["10.0.0.1"]),
    );
    let line = dns.resolv_conf.lines().next().unwrap();
    assert_eq!(line.split(' ').count(), 1 + 32, "{line}");
    assert!(line.ends_with(" example.com s0.example s1.example s2.example s3.example s4.example s5.example s6.example s7.example s8.example s9.example s10.example s11.example s12.example s13.example s14.example s15.example s16.example s17.example s18.example s19.example s20.example s21.example s22.example s23.example s24.example s25.example s26.example"), "{line}");
    assert_eq!(dns.events.len(), 1);
    assert_eq!(dns.events[0].reason, DNS_CONFIG_FORMING);
    assert_eq!(
        dns.events[0].message,
        format!(
            "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
            &line["search ".len()..]
        )
    );
}

#[test]
fn k2_long_search_lines_are_cut_from_the_end() {
    let mut resolver = Resolver {
        searches: (0..20).map(|i| format!("{i:02}{}", "x".repeat(150))).collect(),
        ..Resolver::default()
    };
    let long = "y".repeat(254);
    resolver.searches.insert(0, long.clone());
    let events = limits::fit_limits(&mut resolver);
    assert!(!resolver.searches.contains(&long), "a domain over 253 characters is dropped");
    assert!(resolver.searches.join(" ").len() <= MAX_SEARCH_LINE);
    assert_eq!(resolver.searches.len(), 13, "152 characters and a space each: 13 fit in 2048");
    assert!(resolver.searches[0].starts_with("00"));
    assert_eq!(events.len(), 1);
}

#[test]
fn k2_dns_config_over_the_limits_is_an_error() {
    let error = resolv_conf(
        &pod("spec: {containers: [], dnsConfig: {nameservers: [1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4]}}"),
        &node(&[]),
        Some(HOST),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "pod default/web-node1: dnsConfig.nameservers has 4 entries, over the limit of 3; remove some"
    );
    let searches: Vec<String> = (0..33).map(|i| format!("s{i}")).collect();
    let spec = format!(", dnsConfig: {{searches: [{}]}}", searches.join(", "));
    let error = resolv_conf(&team_pod(&spec), &node(&[]), Some(HOST)).unwrap_err();
    assert!(matches!(error, Error::DnsLimit { field: "searches", count: 33, limit: 32, .. }));
}

#[test]
fn k2_unknown_policy_is_an_error() {
    let error = resolv_conf(&team_pod(", dnsPolicy: Cluster"), &node(&[]), Some(HOST));
    let error = error.unwrap_err().to_string();
    assert!(error.contains("dnsPolicy \"Cluster\" is not supported"), "{error}");
}

fn domain() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{1,12}(\\.[a-z]{1,12}){0,3}", (200usize..260).prop_map(|n| "d".repeat(n)),]
}

proptest! {
    /// K2: whatever the node's file and the pod's dnsConfig, the file is within kubelet's
    /// limits, and a ClusterFirst pod's search path starts with the cluster's domains.
    #[test]
    fn k2_limits_hold_and_cluster_searches_come_first(
        host_searches in proptest::collection::vec(domain(), 0..40),
        host_servers in proptest::collection::vec("10\\.[0-9]{1,2}\\.0\\.[0-9]{1,2}", 0..6),
        cluster in proptest::collection::vec(1u8..=254, 0..5),
        pod_searches in proptest::collection::vec("s[a-z]{0,59}", 0..32),
        pod_servers in proptest::collection::vec("192\\.0\\.2\\.[0-9]{1,2}", 0..3),
        policy in prop_oneof![Just(""), Just(", dnsPolicy: ClusterFirstWithHostNet"), Just(", dnsPolicy: Default")],
    ) {
        let host = format!("search {}\n{}", host_searches.join(" "),
            host_servers.iter().map(|s| format!("nameserver {s}\n")).collect::<String>());
        let spec = format!("{policy}, dnsConfig: {{nameservers: [{}], searches: [{}]}}",
            pod_servers.join(", "), pod_searches.join(", "));
        let node = NodeDns { cluster_dns: cluster.iter().map(|c| IpAddr::from([10, 96, 0, *c])).collect(), ..NodeDns::default() };
        let dns = resolv_conf(&team_pod(&spec), &node, Some(&host)).unwrap();
        let servers = dns.resolv_conf.lines().filter(|l| l.starts_with("nameserver ")).count();
        prop_assert!(servers <= MAX_NAMESERVERS);
        let searches: Vec<&str> = dns.resolv_conf.lines()
            .find_map(|l| l.strip_prefix("search ")).map(|l| l.split(' ').collect()).unwrap_or_default();
        prop_assert!(searches.len() <= MAX_SEARCHES);
        prop_assert!(searches.join(" ").len() <= MAX_SEARCH_LINE);
        prop_assert!(searches.iter().all(|s| s.len() <= MAX_SEARCH_DOMAIN));
        if !cluster.is_empty() && policy != ", dnsPolicy: Default" {
            prop_assert_eq!(&searches[..3], ["team.svc.cluster.local", "svc.cluster.local", "cluster.local"]);
        }
    }
}
