//! The pod's `/etc/resolv.conf`, as kubelet's DNS configurer and containerd's CRI plugin
//! make it. This agent has no cluster DNS, so `ClusterFirst` falls back to the node's
//! resolver as kubelet does when `clusterDNS` is empty, saying so
//! ([`missing_cluster_dns`]).

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Pod, PodDNSConfig};

use super::error::{Error, Result};
use super::subject::Subject;

/// kubelet's limits (and the API server's validation of `dnsConfig`).
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;
const MAX_SEARCH_LINE: usize = 2048;
const MAX_SEARCH_DOMAIN: usize = 253;

/// A resolver configuration: nameservers, search domains and `name[:value]` options.
#[derive(Debug, Default, PartialEq, Eq)]
struct Resolver {
    nameservers: Vec<String>,
    searches: Vec<String>,
    options: Vec<String>,
}

/// The pod's resolv.conf, given the node's (`host_resolv_conf`, its text).
///
/// `dnsPolicy` `Default`, `ClusterFirst` (the default) and `ClusterFirstWithHostNet` use
/// the node's resolver, `None` starts empty; `dnsConfig` is then merged in (nameservers
/// and searches appended without duplicates, options by name). More than 3 nameservers,
/// 32 search domains or a 2048-character search line are cut with a warning, as kubelet
/// does; a `dnsConfig` that is over those limits by itself is an error, as the API server
/// rejects it.
pub fn resolv_conf(pod: &Pod, host_resolv_conf: &str) -> Result<String> {
    let at = Subject::pod(pod);
    let spec = pod.spec.as_ref();
    let config = spec.and_then(|s| s.dns_config.as_ref());
    check_config(config, &at)?;
    let mut resolver = match spec.and_then(|s| s.dns_policy.as_deref()) {
        None | Some("" | "ClusterFirst" | "ClusterFirstWithHostNet" | "Default") => {
            parse_host(host_resolv_conf)
        }
        Some("None") => {
            if config.is_none_or(|c| c.nameservers.as_ref().is_none_or(Vec::is_empty)) {
                return Err(Error::DnsNoNameserver { at });
            }
            Resolver::default()
        }
        Some(other) => return Err(Error::DnsPolicy { at, policy: other.to_owned() }),
    };
    if let Some(config) = config {
        merge(&mut resolver, config);
    }
    fit_limits(&mut resolver, &at);
    Ok(format(&resolver))
}

/// kubelet's warning (Event `MissingClusterDNS`) for a pod that asks for cluster DNS
/// (`ClusterFirst` without `hostNetwork`, or `ClusterFirstWithHostNet`) and gets the
/// node's resolver instead; `None` for a pod that does not ask for it.
pub fn missing_cluster_dns(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let policy = spec.and_then(|s| s.dns_policy.as_deref()).unwrap_or("ClusterFirst");
    let cluster = match policy {
        "" | "ClusterFirst" => !host_network,
        "ClusterFirstWithHostNet" => true,
        _ => false,
    };
    cluster.then(|| {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        format!(
            "pod: \"{name}_{namespace}({uid})\". kubelet does not have ClusterDNS IP configured \
             and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy."
        )
    })
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

/// kubelet's `parseResolvConf`: nameservers accumulate, the last `search` line wins
/// (without `.` and trailing dots), options accumulate with the last of a name winning.
fn parse_host(text: &str) -> Resolver {
    let mut resolver = Resolver::default();
    for line in text.lines() {
        if line.starts_with(['#', ';']) {
            continue;
        }
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => resolver.nameservers.extend(fields.next().map(str::to_owned)),
            Some("search") => {
                resolver.searches = fields
                    .filter(|s| *s != ".")
                    .map(|s| s.trim_end_matches('.').to_owned())
                    .collect();
            }
            Some("options") => {
                for option in fields {
                    set_option(&mut resolver.options, option.to_owned());
                }
            }
            _ => {}
        }
    }
    resolver
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

/// kubelet's `appendDNSConfig`.
fn merge(resolver: &mut Resolver, config: &PodDNSConfig) {
    let append = |list: &mut Vec<String>, new: &Option<Vec<String>>| {
        for item in new.iter().flatten() {
            if !list.contains(item) {
                list.push(item.clone());
            }
        }
    };
    append(&mut resolver.nameservers, &config.nameservers);
    append(&mut resolver.searches, &config.searches);
    for option in config.options.iter().flatten() {
        let name = option.name.as_deref().unwrap_or_default();
        let option = match option.value.as_deref().filter(|v| !v.is_empty()) {
            Some(value) => format!("{name}:{value}"),
            None => name.to_owned(),
        };
        set_option(&mut resolver.options, option);
    }
}

/// kubelet's `formDNSConfigFitsLimits`: cuts what is over the limits, with a warning.
fn fit_limits(resolver: &mut Resolver, at: &Subject) {
    if resolver.nameservers.len() > MAX_NAMESERVERS {
        resolver.nameservers.truncate(MAX_NAMESERVERS);
        tracing::warn!(
            pod.namespace = at.namespace(), pod.name = at.name(),
            applied = %resolver.nameservers.join(" "),
            "nameserver limits were exceeded, some nameservers have been omitted"
        );
    }
    let searches = &mut resolver.searches;
    let before = searches.len();
    searches.truncate(MAX_SEARCHES);
    searches.retain(|s| s.len() <= MAX_SEARCH_DOMAIN);
    let mut line_len = searches.join(" ").len();
    while line_len > MAX_SEARCH_LINE {
        let Some(last) = searches.pop() else { break };
        line_len -= last.len() + usize::from(!searches.is_empty());
    }
    if searches.len() < before {
        tracing::warn!(
            pod.namespace = at.namespace(), pod.name = at.name(),
            applied = %searches.join(" "),
            "search line limits were exceeded, some search paths have been omitted"
        );
    }
}

/// containerd CRI's resolv.conf: `search`, then `nameserver` lines, then `options`.
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
