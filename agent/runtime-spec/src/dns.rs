//! The pod's `/etc/resolv.conf` (K2), as kubelet's DNS configurer
//! (pkg/kubelet/network/dns) decides it and containerd's CRI plugin writes it: cluster
//! DNS for `ClusterFirst` pods when the node has `clusterDNS`, the node's resolver
//! otherwise, `dnsConfig` merged in, kubelet's limits applied.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Pod, PodDNSConfig};

use super::error::{Error, Result};
use super::subject::Subject;

mod limits;

use self::limits::{MAX_NAMESERVERS, MAX_SEARCHES, fit_limits};

/// kubelet's Event reasons about a pod's DNS (both Warnings).
pub use outpost_core::event_aggregate::reason::{DNS_CONFIG_FORMING, MISSING_CLUSTER_DNS};

/// kubelet's `MissingClusterDNS` message on the Node (the pod's names the pod first).
pub const MISSING_CLUSTER_DNS_ON_NODE: &str = "kubelet does not have ClusterDNS IP configured \
     and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";

/// kubelet's default options for cluster DNS.
const CLUSTER_OPTIONS: &str = "ndots:5";

/// K2: the node's DNS settings, kubelet's `clusterDNS`, `clusterDomain` and `resolvConf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDns {
    /// The cluster's DNS servers; empty: no cluster DNS (`ClusterFirst` pods fall back to
    /// the node's resolver, with `MissingClusterDNS`).
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster's domain; empty: no cluster search domains.
    pub cluster_domain: String,
    /// The node's resolv.conf; `None` (kubelet's `resolvConf: ""`): host-DNS pods get
    /// `nameserver 127.0.0.1` (`::1` on an IPv6 node) and `search .`.
    pub resolv_conf: Option<PathBuf>,
    /// The node's address is IPv6 (for the loopback nameserver above).
    pub node_ipv6: bool,
}

impl Default for NodeDns {
    /// No cluster DNS, the domain `cluster.local`, the node's /etc/resolv.conf.
    fn default() -> NodeDns {
        NodeDns {
            cluster_dns: Vec::new(),
            cluster_domain: "cluster.local".to_owned(),
            resolv_conf: Some(PathBuf::from("/etc/resolv.conf")),
            node_ipv6: false,
        }
    }
}

/// A Warning Event kubelet records about the pod while forming its DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEvent {
    pub reason: &'static str,
    pub message: String,
}

/// The pod's resolv.conf and the Events forming it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDns {
    pub resolv_conf: String,
    pub events: Vec<DnsEvent>,
}

/// A resolver configuration: nameservers, search domains and `name[:value]` options.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Resolver {
    pub(crate) nameservers: Vec<String>,
    pub(crate) searches: Vec<String>,
    pub(crate) options: Vec<String>,
}

/// How the pod's DNS is based (kubelet's `podDNSType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    Cluster,
    Host,
    None,
}

/// K2: the pod's resolv.conf, given the node's settings and the text of its resolv.conf
/// (`host`, read from `node.resolv_conf`; `None` when that is `None`).
///
/// kubelet's `GetPodDNS`: `ClusterFirst` without `hostNetwork` and
/// `ClusterFirstWithHostNet` get the cluster DNS servers, the search path
/// `<ns>.svc.<domain> svc.<domain> <domain>` then the node's (duplicates omitted), and
/// `ndots:5`; without cluster DNS they fall back to `Default` with `MissingClusterDNS`.
/// `Default` (and `ClusterFirst` with `hostNetwork`) get the node's resolver, `None`
/// nothing; `dnsConfig` is then merged (kubelet's `appendDNSConfig`) and the result cut
/// to kubelet's limits with `DNSConfigForming`. A `dnsConfig` over the limits by itself,
/// `None` without nameservers or an unknown policy are errors, as the API server's
/// validation refuses them.
pub fn resolv_conf(pod: &Pod, node: &NodeDns, host: Option<&str>) -> Result<PodDns> {
    let at = Subject::pod(pod);
    let spec = pod.spec.as_ref();
    let config = spec.and_then(|s| s.dns_config.as_ref());
    check_config(config, &at)?;
    let mut events = Vec::new();
    // kubelet reads the node's file for every pod, and fails on a bad one.
    let parsed = host.map(|text| parse_host(text, &at)).transpose()?;
    let host_resolver = || match &parsed {
        Some(resolver) => resolver.clone(),
        None => Resolver {
            nameservers: vec![if node.node_ipv6 { "::1" } else { "127.0.0.1" }.to_owned()],
            searches: vec![".".to_owned()],
            options: Vec::new(),
        },
    };
    let mut resolver = match base(pod, &at)? {
        Base::None => {
            if config.is_none_or(|c| c.nameservers.as_ref().is_none_or(Vec::is_empty)) {
                return Err(Error::DnsNoNameserver { at });
            }
            Resolver::default()
        }
        Base::Cluster if !node.cluster_dns.is_empty() => {
            let host = parsed.clone().unwrap_or_default();
            Resolver {
                nameservers: node.cluster_dns.iter().map(IpAddr::to_string).collect(),
                searches: cluster_searches(pod, &node.cluster_domain, host.searches),
                options: vec![CLUSTER_OPTIONS.to_owned()],
            }
        }
        Base::Cluster => {
            events.push(DnsEvent { reason: MISSING_CLUSTER_DNS, message: missing_message(pod) });
            host_resolver()
        }
        Base::Host => host_resolver(),
    };
    if let Some(config) = config {
        merge(&mut resolver, config);
    }
    events.extend(fit_limits(&mut resolver));
    Ok(PodDns { resolv_conf: format(&resolver), events })
}

/// K2: whether a resolv.conf is systemd-resolved's stub: 127.0.0.53 its only nameserver.
pub fn is_systemd_resolved_stub(text: &str) -> bool {
    let at = Subject { pod: String::new(), container: None };
    parse_host(text, &at).is_ok_and(|r| r.nameservers == ["127.0.0.53"])
}

/// kubelet's `getPodDNSType`.
fn base(pod: &Pod, at: &Subject) -> Result<Base> {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    Ok(match spec.and_then(|s| s.dns_policy.as_deref()) {
        None | Some("" | "ClusterFirst") if !host_network => Base::Cluster,
        Some("ClusterFirstWithHostNet") => Base::Cluster,
        None | Some("" | "ClusterFirst" | "Default") => Base::Host,
        Some("None") => Base::None,
        Some(other) => return Err(Error::DnsPolicy { at: at.clone(), policy: other.to_owned() }),
    })
}

/// kubelet's `generateSearchesForDNSClusterFirst`: the cluster's search domains first,
/// then the node's, without duplicates; only the node's without a cluster domain.
fn cluster_searches(pod: &Pod, domain: &str, host: Vec<String>) -> Vec<String> {
    if domain.is_empty() {
        return host;
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut searches =
        vec![format!("{namespace}.svc.{domain}"), format!("svc.{domain}"), domain.to_owned()];
    append_new(&mut searches, host);
    searches
}

/// kubelet's `MissingClusterDNS` message about the pod.
fn missing_message(pod: &Pod) -> String {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    format!("pod: \"{name}_{namespace}({uid})\". {MISSING_CLUSTER_DNS_ON_NODE}")
}

fn check_config(config: Option<&PodDNSConfig>, at: &Subject) -> Result<()> {
    let Some(config) = config else { return Ok(()) };
    let count = |list: &Option<Vec<String>>| list.as_ref().map_or(0, Vec::len);
    for (field, count, limit) in [
        ("nameservers", count(&config.nameservers), MAX_NAMESERVERS),
        ("searches", count(&config.searches), MAX_SEARCHES),
    ] {
        if count > limit {
            return Err(Error::DnsLimit { at: at.clone(), field, count, limit });
        }
    }
    Ok(())
}

/// kubelet's `parseResolvConf`: `#` comments; nameservers accumulate; the last `search`
/// line wins (trailing dots trimmed, the root `.` left out); the last `options` line wins.
/// A `nameserver` line without an address is an error.
fn parse_host(text: &str, at: &Subject) -> Result<Resolver> {
    let mut resolver = Resolver::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some(first) if first.starts_with('#') => {}
            Some("nameserver") => match fields.next() {
                Some(address) => resolver.nameservers.push(address.to_owned()),
                None => return Err(Error::DnsHostNameserver { at: at.clone() }),
            },
            Some("search") => {
                resolver.searches = fields
                    .filter(|s| *s != ".")
                    .map(|s| s.strip_suffix('.').unwrap_or(s).to_owned())
                    .collect();
            }
            Some("options") => resolver.options = fields.map(str::to_owned).collect(),
            _ => {}
        }
    }
    Ok(resolver)
}

/// Appends what `list` does not have yet (kubelet's `omitDuplicates` of an append).
fn append_new(list: &mut Vec<String>, new: impl IntoIterator<Item = String>) {
    for item in new {
        if !list.contains(&item) {
            list.push(item);
        }
    }
}

/// Sets an option, replacing one of the same name in place.
fn set_option(options: &mut Vec<String>, option: String) {
    let name = |o: &str| o.split_once(':').map_or(o, |(n, _)| n).to_owned();
    let wanted = name(&option);
    match options.iter_mut().find(|o| name(o) == wanted) {
        Some(existing) => *existing = option,
        None => options.push(option),
    }
}

/// kubelet's `appendDNSConfig`: nameservers and searches appended without duplicates,
/// options merged by name (the pod's value wins). kubelet merges options through a Go
/// map, in no set order; here the existing ones keep their place and new ones follow.
fn merge(resolver: &mut Resolver, config: &PodDNSConfig) {
    let chain = |list: &mut Vec<String>, new: &Option<Vec<String>>| {
        let old = std::mem::take(list);
        *list = dedup(old.into_iter().chain(new.iter().flatten().cloned()));
    };
    chain(&mut resolver.nameservers, &config.nameservers);
    chain(&mut resolver.searches, &config.searches);
    let host_options = std::mem::take(&mut resolver.options);
    for option in host_options {
        set_option(&mut resolver.options, option);
    }
    for option in config.options.iter().flatten() {
        let name = option.name.as_deref().unwrap_or_default();
        let option = match option.value.as_deref().filter(|v| !v.is_empty()) {
            Some(value) => format!("{name}:{value}"),
            None => name.to_owned(),
        };
        set_option(&mut resolver.options, option);
    }
}

/// The list without repeats, first occurrences kept.
fn dedup(list: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut unique = Vec::new();
    append_new(&mut unique, list);
    unique
}

/// containerd CRI's `parseDNSOptions`: a `search` line, a `nameserver` line each, an
/// `options` line; each only when it has entries.
fn format(resolver: &Resolver) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    if !resolver.searches.is_empty() {
        let _ = writeln!(text, "search {}", resolver.searches.join(" "));
    }
    for nameserver in &resolver.nameservers {
        let _ = writeln!(text, "nameserver {nameserver}");
    }
    if !resolver.options.is_empty() {
        let _ = writeln!(text, "options {}", resolver.options.join(" "));
    }
    text
}

#[cfg(test)]
mod tests;
