//! K2: the cluster DNS settings, kubelet's `clusterDNS`, `clusterDomain` and `resolvConf`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::runtime::spec::{self, NodeDns};

/// kubeadm's and k3s's cluster domain (kubelet itself has none by default).
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// kubelet's `resolvConf` default.
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";
/// systemd-resolved's file of the real upstream servers (its stub's is /etc/resolv.conf).
pub const SYSTEMD_RESOLVED_UPSTREAM: &str = "/run/systemd/resolve/resolv.conf";

/// The node's DNS settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dns {
    /// The cluster DNS servers; empty: none (ClusterFirst pods get the node's resolver).
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster domain; empty: no cluster search domains.
    pub cluster_domain: String,
    /// The resolv.conf pods start from; `None` for `--resolv-conf ""`.
    pub resolv_conf: Option<PathBuf>,
}

impl Dns {
    /// The settings as given, with the defaults for what is not.
    pub fn resolve(
        cluster_dns: Vec<IpAddr>,
        cluster_domain: Option<String>,
        resolv_conf: Option<String>,
    ) -> Dns {
        let resolv_conf = resolv_conf.unwrap_or_else(|| DEFAULT_RESOLV_CONF.to_owned());
        Dns {
            cluster_dns,
            cluster_domain: cluster_domain.unwrap_or_else(|| DEFAULT_CLUSTER_DOMAIN.to_owned()),
            resolv_conf: (!resolv_conf.is_empty()).then(|| PathBuf::from(resolv_conf)),
        }
    }

    /// What the runtime forms pods' resolv.conf from, on a node with address `node_ip`.
    pub fn node(&self, node_ip: Option<IpAddr>) -> NodeDns {
        NodeDns {
            cluster_dns: self.cluster_dns.clone(),
            cluster_domain: self.cluster_domain.clone(),
            resolv_conf: self.resolv_conf.clone(),
            node_ipv6: node_ip.is_some_and(|ip| ip.is_ipv6()),
        }
    }

    /// K2: a warning when the resolv.conf pods start from is systemd-resolved's stub (its
    /// only nameserver 127.0.0.53, which is the node's loopback, not the pod's) while
    /// systemd-resolved's real file exists; kubeadm makes this choice at `init`, the agent
    /// says it at start.
    pub fn stub_warning(&self) -> Option<String> {
        stub_warning(self.resolv_conf.as_deref()?, Path::new(SYSTEMD_RESOLVED_UPSTREAM))
    }
}

fn stub_warning(resolv_conf: &Path, upstream: &Path) -> Option<String> {
    let text = std::fs::read_to_string(resolv_conf).ok()?;
    (spec::is_systemd_resolved_stub(&text) && upstream.is_file()).then(|| {
        format!(
            "{} is systemd-resolved's stub: its only nameserver, 127.0.0.53, is not reachable \
             from pods (Default, and ClusterFirst without cluster DNS, get it); set \
             --resolv-conf {} (resolvConf in the config file), the real upstream servers",
            resolv_conf.display(),
            upstream.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k2_defaults_and_the_empty_resolv_conf() {
        let dns = Dns::resolve(Vec::new(), None, None);
        assert_eq!(dns.cluster_domain, "cluster.local");
        assert_eq!(dns.resolv_conf.as_deref(), Some(Path::new("/etc/resolv.conf")));
        let dns = Dns::resolve(Vec::new(), Some(String::new()), Some(String::new()));
        assert_eq!((dns.cluster_domain.as_str(), dns.resolv_conf.as_deref()), ("", None));
        let v6 = dns.node(Some("fd00::1".parse().unwrap()));
        assert!(v6.node_ipv6);
        assert!(!dns.node(None).node_ipv6);
    }

    #[test]
    fn k2_the_systemd_resolved_stub_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let (stub, upstream) = (dir.path().join("stub"), dir.path().join("upstream"));
        std::fs::write(
            &stub,
            "# systemd-resolved\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n",
        )
        .unwrap();
        assert_eq!(stub_warning(&stub, &upstream), None, "no upstream file: nothing better");
        std::fs::write(&upstream, "nameserver 192.168.1.1\n").unwrap();
        let warning = stub_warning(&stub, &upstream).unwrap();
        assert!(warning.contains("is systemd-resolved's stub"), "{warning}");
        assert!(warning.contains(&format!("--resolv-conf {}", upstream.display())), "{warning}");
        assert_eq!(stub_warning(&upstream, &upstream), None, "a real file");
        std::fs::write(&stub, "nameserver 127.0.0.53\nnameserver 1.1.1.1\n").unwrap();
        assert_eq!(stub_warning(&stub, &upstream), None, "another server besides the stub");
    }
}
