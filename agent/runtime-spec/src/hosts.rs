//! The pod's hostname and kubelet's managed `/etc/hosts`.

use std::fmt::Write as _;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{HostAlias, Pod};

use super::context::PodContext;
use super::error::{Error, Result};
use super::subject::Subject;

/// The longest hostname (a DNS label).
const MAX_HOSTNAME: usize = 63;
/// The longest name the kernel's `nodename` holds (kubelet's `fqdnMaxLen`).
pub(super) const MAX_KERNEL_HOSTNAME: usize = 64;

/// kubelet's `GeneratePodHostNameAndDomain`: `spec.hostname`, else the pod's name cut to
/// 63 characters (without a trailing `-` or `.`); the domain is
/// `<subdomain>.<namespace>.svc.<cluster domain>` (K2) when `spec.subdomain` is set
/// (`<subdomain>.<namespace>.svc` without a cluster domain). `spec.hostnameOverride`
/// (KEP-4762) replaces both: the hostname is the override, cut as the pod's name is, and
/// there is no domain (the API server keeps it from `setHostnameAsFQDN` and `hostNetwork`).
pub(super) fn pod_hostname(pod: &Pod, cluster_domain: &str) -> (String, Option<String>) {
    let spec = pod.spec.as_ref();
    let cut = |name: &str| {
        let cut = name.get(..MAX_HOSTNAME).unwrap_or(name);
        cut.trim_end_matches(['-', '.']).to_owned()
    };
    if let Some(hostname) = spec.and_then(|s| s.hostname_override.as_deref()) {
        return (cut(hostname), None);
    }
    let hostname = match spec.and_then(|s| s.hostname.as_deref()).filter(|h| !h.is_empty()) {
        Some(hostname) => hostname.to_owned(),
        None => cut(pod.metadata.name.as_deref().unwrap_or_default()),
    };
    let domain = spec.and_then(|s| s.subdomain.as_deref()).filter(|s| !s.is_empty()).map(|sub| {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        match cluster_domain {
            "" => format!("{sub}.{namespace}.svc"),
            domain => format!("{sub}.{namespace}.svc.{domain}"),
        }
    });
    (hostname, domain)
}

/// The hostname a container sets: the pod's, when the container has a UTS namespace of
/// its own (runc cannot set one in the host's); none for a `hostNetwork` pod. With
/// `setHostnameAsFQDN` and a `subdomain` it is the fully qualified name, which must fit
/// the kernel's 64 characters (kubelet's `GetNodenameForKernel`).
pub(super) fn container_hostname(ctx: &PodContext<'_>, at: &Subject) -> Result<Option<String>> {
    let spec = ctx.pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    if host_network || ctx.namespaces.uts.is_none() {
        return Ok(None);
    }
    let (hostname, domain) = pod_hostname(ctx.pod, ctx.cluster_domain);
    let as_fqdn = spec.and_then(|s| s.set_hostname_as_fqdn).unwrap_or(false);
    match domain.filter(|_| as_fqdn) {
        None => Ok(Some(hostname)),
        Some(domain) => {
            let fqdn = format!("{hostname}.{domain}");
            if fqdn.len() > MAX_KERNEL_HOSTNAME {
                let length = fqdn.len();
                let max = MAX_KERNEL_HOSTNAME;
                return Err(Error::FqdnTooLong { at: at.clone(), fqdn, length, max });
            }
            Ok(Some(fqdn))
        }
    }
}

/// kubelet's managed hosts file: localhost entries, each pod IP with the pod's hostname
/// (and its fully qualified name when `spec.subdomain` is set), then `hostAliases`.
pub fn etc_hosts(pod: &Pod, pod_ips: &[IpAddr], cluster_domain: &str) -> String {
    let (hostname, domain) = pod_hostname(pod, cluster_domain);
    let mut hosts = String::from(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n",
    );
    for ip in pod_ips {
        // Writing to a String cannot fail.
        let _ = match &domain {
            Some(domain) => writeln!(hosts, "{ip}\t{hostname}.{domain}\t{hostname}"),
            None => writeln!(hosts, "{ip}\t{hostname}"),
        };
    }
    hosts.push_str(&host_aliases(pod));
    hosts
}

/// kubelet's hosts file for a `hostNetwork` pod: the node's `/etc/hosts` (given as
/// `host_etc_hosts`) under a header, then `hostAliases`.
pub fn host_network_etc_hosts(pod: &Pod, host_etc_hosts: &str) -> String {
    let mut hosts = String::from("# Kubernetes-managed hosts file (host network).\n");
    hosts.push_str(host_etc_hosts);
    hosts.push_str(&host_aliases(pod));
    hosts
}

/// `hostAliases`, one line per IP, under a comment; empty when there are none.
fn host_aliases(pod: &Pod) -> String {
    let aliases: &[HostAlias] =
        pod.spec.as_ref().and_then(|s| s.host_aliases.as_deref()).unwrap_or_default();
    if aliases.is_empty() {
        return String::new();
    }
    let mut text = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
        let _ = writeln!(text, "{}\t{names}", alias.ip);
    }
    text
}

#[cfg(test)]
mod tests;
