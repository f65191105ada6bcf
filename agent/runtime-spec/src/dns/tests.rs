use super::super::tests::pod;
use super::*;

const HOST: &str = "# generated\n; also a comment\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nsearch old.example\nsearch lan. example.com .\noptions ndots:2 timeout:1\noptions ndots:3 rotate\n\n";

fn resolv(spec: &str) -> Result<String> {
    resolv_conf(&pod(&format!("spec: {{containers: [{{name: a, image: b}}]{spec}}}")), HOST)
}

#[test]
fn default_and_cluster_first_use_the_hosts() {
    let expected = "search lan example.com\nnameserver 192.168.1.1\nnameserver 192.168.1.2\noptions ndots:3 timeout:1 rotate\n";
    for policy in [
        "",
        ", dnsPolicy: Default",
        ", dnsPolicy: ClusterFirst",
        ", dnsPolicy: ClusterFirstWithHostNet",
        ", hostNetwork: true",
    ] {
        assert_eq!(resolv(policy).unwrap(), expected, "{policy}");
    }
}

#[test]
fn dns_config_is_merged() {
    let text = resolv(
        ", dnsConfig: {nameservers: [192.168.1.2, 1.1.1.1], searches: [ns.svc, lan], options: [{name: ndots, value: '5'}, {name: edns0}, {name: timeout, value: ''}]}",
    )
    .unwrap();
    assert_eq!(
        text,
        "search lan example.com ns.svc\nnameserver 192.168.1.1\nnameserver 192.168.1.2\nnameserver 1.1.1.1\noptions ndots:5 timeout rotate edns0\n"
    );
}

#[test]
fn none_uses_only_dns_config() {
    let text = resolv(", dnsPolicy: None, dnsConfig: {nameservers: [9.9.9.9], searches: [a.b], options: [{name: ndots, value: '1'}]}").unwrap();
    assert_eq!(text, "search a.b\nnameserver 9.9.9.9\noptions ndots:1\n");
    assert!(matches!(resolv(", dnsPolicy: None"), Err(Error::DnsNoNameserver { .. })));
    assert!(matches!(
        resolv(", dnsPolicy: None, dnsConfig: {searches: [a]}"),
        Err(Error::DnsNoNameserver { .. })
    ));
}

#[test]
fn combined_limits_are_cut() {
    let text = resolv(", dnsConfig: {nameservers: [10.0.0.1, 10.0.0.2]}").unwrap();
    let nameservers: Vec<_> = text.lines().filter(|l| l.starts_with("nameserver")).collect();
    assert_eq!(
        nameservers,
        ["nameserver 192.168.1.1", "nameserver 192.168.1.2", "nameserver 10.0.0.1"]
    );

    let searches: Vec<String> = (0..31).map(|i| format!("s{i}.example")).collect();
    let text = resolv(&format!(", dnsConfig: {{searches: [{}]}}", searches.join(", "))).unwrap();
    let line = text.lines().next().unwrap();
    assert_eq!(line.split(' ').count(), 1 + 32, "{line}");
    assert!(line.starts_with("search lan example.com s0.example "));
}

#[test]
fn long_search_lines_are_cut() {
    let mut resolver = Resolver {
        searches: (0..20).map(|i| format!("{i:02}{}", "x".repeat(150))).collect(),
        ..Resolver::default()
    };
    let long = "y".repeat(254);
    resolver.searches.insert(0, long.clone());
    fit_limits(&mut resolver, &Subject { pod: "default/p".to_owned(), container: None });
    assert!(!resolver.searches.contains(&long), "a domain over 253 characters is dropped");
    assert!(resolver.searches.join(" ").len() <= MAX_SEARCH_LINE);
    assert_eq!(resolver.searches.len(), 13, "152 characters and a space each: 13 fit in 2048");
}

#[test]
fn dns_config_over_the_limits_is_an_error() {
    let error =
        resolv(", dnsConfig: {nameservers: [1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4]}").unwrap_err();
    assert_eq!(
        error.to_string(),
        "pod default/web-node1: dnsConfig.nameservers has 4 entries, over the limit of 3; remove some"
    );
    let searches: Vec<String> = (0..33).map(|i| format!("s{i}")).collect();
    let error =
        resolv(&format!(", dnsConfig: {{searches: [{}]}}", searches.join(", "))).unwrap_err();
    assert!(matches!(error, Error::DnsLimit { field: "searches", count: 33, limit: 32, .. }));
}

#[test]
fn unknown_policy_is_an_error() {
    let error = resolv(", dnsPolicy: Cluster").unwrap_err().to_string();
    assert!(error.contains("dnsPolicy \"Cluster\" is not supported"), "{error}");
}

#[test]
fn empty_host_config_gives_an_empty_file() {
    let pod = pod("spec: {containers: [{name: a, image: b}]}");
    assert_eq!(resolv_conf(&pod, "").unwrap(), "");
}

#[test]
fn cluster_first_says_it_falls_back_to_default() {
    let message = |yaml: &str| missing_cluster_dns(&pod(yaml));
    assert_eq!(
        message("spec: {containers: []}").unwrap(),
        "pod: \"web-node1_default(0123456789abcdef)\". kubelet does not have ClusterDNS IP \
         configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \
         \"Default\" policy."
    );
    assert!(message("spec: {dnsPolicy: ClusterFirst, containers: []}").is_some());
    assert!(
        message("spec: {dnsPolicy: ClusterFirstWithHostNet, hostNetwork: true, containers: []}")
            .is_some()
    );
    assert_eq!(message("spec: {hostNetwork: true, containers: []}"), None);
    assert_eq!(message("spec: {dnsPolicy: Default, containers: []}"), None);
    assert_eq!(message("spec: {dnsPolicy: None, containers: []}"), None);
}
