//! Services: what the real server's Service registry adds on create (a cluster IP from
//! the service range, the defaults of `type`, `sessionAffinity`, the IP family fields and
//! each port's `protocol` and `targetPort`), and the `kubernetes` Service of `default`
//! the API server keeps for itself.
//!
//! Simplified: cluster IPs are handed out in order from `10.96.0.10` up (the real
//! allocator picks at random in `--service-cluster-ip-range`), never freed and never
//! checked for conflicts with an asked-for one; node ports are not allocated; an update
//! may change `spec.clusterIP` (immutable on the real server).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

use super::error::Error;
use super::resource::SERVICES;
use super::store::Store;

/// The first address handed out (`10.96.0.1` is the `kubernetes` Service's on a real
/// cluster with kubeadm's default range; here that Service has the server's address).
const FIRST: u32 = u32::from_be_bytes([10, 96, 0, 10]);

/// Hands out cluster IPs.
#[derive(Debug)]
pub struct Allocator {
    next: AtomicU32,
}

impl Default for Allocator {
    fn default() -> Allocator {
        Allocator { next: AtomicU32::new(FIRST) }
    }
}

impl Allocator {
    /// The registry's defaults and allocation for a Service about to be created.
    pub fn prepare(&self, service: &mut Value) {
        let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else { return };
        let kind = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_owned();
        spec.insert("type".into(), json!(kind));
        spec.entry("sessionAffinity").or_insert(json!("None"));
        if kind == "ExternalName" {
            return;
        }
        spec.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
        let asked = spec.get("clusterIP").and_then(Value::as_str).unwrap_or_default().to_owned();
        let ip = if asked.is_empty() {
            Ipv4Addr::from(self.next.fetch_add(1, Ordering::Relaxed)).to_string()
        } else {
            asked
        };
        spec.insert("clusterIP".into(), json!(ip));
        if ip != "None" {
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
        spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
        for port in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
            let Some(port) = port.as_object_mut() else { continue };
            port.entry("protocol").or_insert(json!("TCP"));
            if let Some(number) = port.get("port").cloned() {
                port.entry("targetPort").or_insert(number);
            }
        }
    }
}

/// The `kubernetes` Service of `default`, as kube-apiserver's own controller makes it
/// (`port` 443 named `https` to the server's port, `ClusterIP`, `component=apiserver`
/// labels), except for its addresses: here the cluster IP is the address the server
/// listens on and the Service's port is its port. A real cluster's `10.96.0.1:443` is
/// reached through kube-proxy's rules, which a test node does not have; with the
/// server's own address the in-cluster configuration that containers build from
/// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` reaches this server, and its
/// certificate (for `127.0.0.1`) verifies.
pub fn ensure_master(store: &Store, addr: SocketAddr) {
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": { "component": "apiserver", "provider": "kubernetes" },
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": addr.ip().to_string(),
            "clusterIPs": [addr.ip().to_string()],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "ports": [{
                "name": "https",
                "port": addr.port(),
                "protocol": "TCP",
                "targetPort": addr.port(),
            }],
        },
    });
    if matches!(store.get(&SERVICES, Some("default"), "kubernetes"), Err(Error::NotFound { .. })) {
        // Made once at start, before any request: nothing else can make it first.
        let _ = store.create(&SERVICES, Some("default"), service);
    }
}
