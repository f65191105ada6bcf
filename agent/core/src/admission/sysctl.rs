//! kubelet's sysctl admission: the safe sysctls, those allowed by
//! `--allowed-unsafe-sysctls`, and the namespaces they live in.

/// Why a sysctl is refused, in kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `--allowed-unsafe-sysctls` names a sysctl (or prefix) that is not namespaced.
    #[error("the sysctl {0:?} is not known to be namespaced")]
    NotNamespaced(String),
    /// A pod's sysctl is neither safe nor allowed by `--allowed-unsafe-sysctls`.
    #[error("{0:?} not allowlisted")]
    NotAllowlisted(String),
    /// A pod's sysctl lives in a namespace the pod shares with the host.
    #[error("{name:?} not allowed with host {} enabled", namespace.host_word())]
    HostNamespace { name: String, namespace: Namespace },
}

/// kubelet's pod status reason for a refused sysctl.
pub(super) const FORBIDDEN: &str = "SysctlForbidden";

/// kubelet's safe sysctls: namespaced, and without effect on other pods.
pub(super) const SAFE: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The host namespaces a pod shares.
#[derive(Debug, Clone, Copy)]
pub(super) struct HostNamespaces {
    pub(super) network: bool,
    pub(super) ipc: bool,
}

/// The namespace a (normalized) sysctl lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    Ipc,
    Network,
    /// `kernel.hostname` and `kernel.domainname`: the pod's UTS namespace, the host's with
    /// `hostNetwork` here. Not something `--allowed-unsafe-sysctls` may list.
    Uts,
}

impl Namespace {
    /// kubelet's word for it in its errors ("not allowed with host net enabled").
    pub fn host_word(self) -> &'static str {
        match self {
            Namespace::Ipc => "ipc",
            Namespace::Network => "net",
            Namespace::Uts => "uts",
        }
    }
}

/// kubelet's `NamespacedBy`: IPC and network by kubelet's names and prefixes, and UTS for
/// the host and domain names; `None` for a sysctl that is not namespaced.
pub fn namespace(name: &str) -> Option<Namespace> {
    const IPC_PREFIXES: &[&str] = &["kernel.shm", "kernel.msg", "fs.mqueue."];
    if name == "kernel.sem" || IPC_PREFIXES.iter().any(|p| name.starts_with(p)) {
        Some(Namespace::Ipc)
    } else if name.starts_with("net.") {
        Some(Namespace::Network)
    } else if name == "kernel.hostname" || name == "kernel.domainname" {
        Some(Namespace::Uts)
    } else {
        None
    }
}

/// Patterns that allow every namespaced sysctl.
pub(super) const ALL_NAMESPACED: &[&str] =
    &["kernel.sem", "kernel.shm*", "kernel.msg*", "fs.mqueue.*", "net.*"];

/// A sysctl name with `.` as separator: kubelet's `NormalizeName` turns `net/ipv4/x`
/// (a `/` first) into `net.ipv4.x`, keeping a `.` inside a part as `/`.
pub fn normalize(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_owned(),
    }
}

/// Whether `--allowed-unsafe-sysctls` may hold `pattern` (a name, or a prefix ending in
/// `*`): kubelet allows only namespaced sysctls there.
pub fn check_allowed_pattern(pattern: &str) -> Result<(), Error> {
    let name = normalize(pattern);
    let probe = name.strip_suffix('*').map_or(name.clone(), |prefix| format!("{prefix}x"));
    if matches!(namespace(&probe), Some(Namespace::Ipc | Namespace::Network)) {
        Ok(())
    } else {
        Err(Error::NotNamespaced(pattern.to_owned()))
    }
}

/// Admits one sysctl of a pod, or says why not in kubelet's words (after
/// "forbidden sysctl: ").
pub(super) fn admit(name: &str, host: HostNamespaces, allowed: &[String]) -> Result<(), Error> {
    let name = normalize(name);
    let matches = |pattern: &String| {
        let pattern = normalize(pattern);
        match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        }
    };
    if !SAFE.contains(&name.as_str()) && !allowed.iter().any(matches) {
        return Err(Error::NotAllowlisted(name));
    }
    match namespace(&name) {
        Some(namespace @ Namespace::Network) if host.network => {
            Err(Error::HostNamespace { name, namespace })
        }
        Some(namespace @ Namespace::Ipc) if host.ipc => {
            Err(Error::HostNamespace { name, namespace })
        }
        _ => Ok(()),
    }
}
