//! `/configz`: the effective configuration as kubelet serves it,
//! `{"kubeletconfig": {...}}` with KubeletConfiguration's field names, for the fields
//! Outpost has. Pure.

use serde_json::{Map, Value, json};

use super::Config;
use crate::runtime::cgroups::Driver;

/// kubelet's `/configz` body for `config`.
pub fn configz(config: &Config) -> Value {
    let mut c = Map::new();
    let mut set = |key: &str, value: Value| {
        c.insert(key.to_owned(), value);
    };
    set("kind", json!("KubeletConfiguration"));
    set("apiVersion", json!("kubelet.config.k8s.io/v1beta1"));
    set("enableServer", json!(true));
    set("staticPodPath", json!(config.sources.manifest_dir));
    if let Some(url) = &config.sources.manifest_url {
        set("staticPodURL", json!(url));
    }
    set("httpCheckFrequency", json!(seconds(config.sources.manifest_url_interval)));
    set("address", json!(config.api.listen.ip().to_string()));
    set("port", json!(config.api.listen.port()));
    set(
        "healthzBindAddress",
        json!(config.api.healthz.map_or(String::new(), |a| a.ip().to_string())),
    );
    set("healthzPort", json!(config.api.healthz.map_or(0, |a| a.port())));
    if let Some(tls) = &config.api.auth.tls {
        set("tlsCertFile", json!(tls.cert_file));
        set("tlsPrivateKeyFile", json!(tls.key_file));
    }
    let x509 = match &config.api.auth.client_ca_file {
        Some(file) => json!({"clientCAFile": file}),
        None => json!({}),
    };
    set("authentication", json!({"x509": x509}));
    set("streamingConnectionIdleTimeout", json!(seconds(config.api.streaming_idle_timeout)));
    set("podLogsDir", json!(config.node.pod_log_dir));
    set(
        "containerRuntimeEndpoint",
        json!(format!("unix://{}", config.containerd.socket.display())),
    );
    set("maxPods", json!(config.node.max_pods));
    set("nodeLeaseDurationSeconds", json!(config.node.lease_duration_seconds));
    let resources = &config.node_resources;
    let driver = match resources.layout.driver {
        Driver::Cgroupfs => "cgroupfs",
        Driver::Systemd => "systemd",
    };
    set("cgroupDriver", json!(driver));
    set("cgroupsPerQOS", json!(true));
    if let Some(limit) = resources.pod_pids_limit {
        set("podPidsLimit", json!(limit));
    }
    set("failSwapOn", json!(config.swap.fail_swap_on));
    set("memorySwap", json!({"swapBehavior": config.swap.behavior.as_str()}));
    if !config.pods.dns.cluster_dns.is_empty() {
        let servers: Vec<String> =
            config.pods.dns.cluster_dns.iter().map(ToString::to_string).collect();
        set("clusterDNS", json!(servers));
    }
    if !config.pods.dns.cluster_domain.is_empty() {
        set("clusterDomain", json!(config.pods.dns.cluster_domain));
    }
    set(
        "resolvConf",
        json!(
            config.pods.dns.resolv_conf.as_ref().map_or(String::new(), |p| p.display().to_string())
        ),
    );
    if !config.node.taints.is_empty() {
        set("registerWithTaints", json!(config.node.taints));
    }
    if !config.pods.allowed_unsafe_sysctls.is_empty() {
        set("allowedUnsafeSysctls", json!(config.pods.allowed_unsafe_sysctls));
    }
    json!({ "kubeletconfig": c })
}

/// A duration as a KubeletConfiguration writes one (`20s`, `1m30s`).
fn seconds(duration: std::time::Duration) -> String {
    let total = duration.as_secs();
    match (total / 60, total % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m0s"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n2_configz_has_kubelets_shape_and_names() {
        let flags = crate::config::Settings {
            node_name: Some("edge-1".into()),
            manifest_dir: Some("/etc/m".into()),
            max_pods: Some(30),
            ..Default::default()
        };
        let config = Config::resolve(flags).unwrap();
        let body = configz(&config);
        let c = &body["kubeletconfig"];
        assert_eq!(c["kind"], "KubeletConfiguration");
        assert_eq!(c["staticPodPath"], "/etc/m");
        assert_eq!(c["maxPods"], 30);
        assert_eq!(c["port"], 10250);
        assert_eq!(c["healthzPort"], 10248);
        assert_eq!(c["healthzBindAddress"], "127.0.0.1");
        assert_eq!(c["httpCheckFrequency"], "20s");
        assert_eq!(c["cgroupDriver"], "cgroupfs");
        assert_eq!(c["failSwapOn"], true);
        assert_eq!(c["memorySwap"]["swapBehavior"], "NoSwap");
        assert_eq!(seconds(std::time::Duration::from_secs(90)), "1m30s");
        assert_eq!(seconds(std::time::Duration::from_secs(120)), "2m0s");
    }
}
