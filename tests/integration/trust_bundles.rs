//! End to end: projected `clusterTrustBundle` sources (SEMANTICS.md V1, V3), through the
//! real binary, real pods and the test API server (which serves
//! `certificates.k8s.io/v1beta1` ClusterTrustBundles and runs the Node authorizer). A
//! bundle by name and the bundles of a signer selected by labels land in the pod, each
//! certificate once; `openssl verify` takes the file as its CA file; edits and deletes
//! follow; a missing bundle keeps the pod waiting with kubelet's message until it comes;
//! after a reboot without the API server the pod comes back with the same files.

use std::collections::BTreeSet;

use outpost_tests::api_pods::{Cluster, LONG, api_pod, inside, read};
use outpost_tests::needs;
use outpost_tests::pods::eventually;
use serde_json::{Value, json};

/// A self-signed CA certificate (PEM) named `name`, with its signer for leaves.
fn ca(name: &str) -> (String, rcgen::CertifiedIssuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    let issuer = rcgen::CertifiedIssuer::self_signed(params, key).unwrap();
    (issuer.pem(), issuer)
}

/// The DER of each certificate of a PEM text.
fn certificates(pem: &str) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()).map(|b| b.unwrap().contents).collect()
}

/// The certificates of a PEM text, as a set, checking none is there twice.
fn set(pem: &str) -> BTreeSet<Vec<u8>> {
    let all = certificates(pem);
    let set: BTreeSet<Vec<u8>> = all.iter().cloned().collect();
    assert_eq!(set.len(), all.len(), "each certificate once:\n{pem}");
    set
}

fn union(pems: &[&str]) -> BTreeSet<Vec<u8>> {
    pems.iter().flat_map(|p| certificates(p)).collect()
}

fn bundle(name: &str, signer: Option<&str>, labels: Value, pems: &[&str]) -> Value {
    let mut spec = json!({"trustBundle": pems.concat()});
    if let Some(signer) = signer {
        spec["signerName"] = json!(signer);
    }
    json!({
        "apiVersion": "certificates.k8s.io/v1beta1", "kind": "ClusterTrustBundle",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    })
}

/// A pod that projects a bundle by name, a signer's bundles of one site, and all of a
/// signer's bundles (as a workload trusting a private CA mounts them).
fn projecting() -> Value {
    api_pod(
        "client",
        json!({"volumeMounts": [{"name": "trust", "mountPath": "/etc/ssl/trust", "readOnly": true}]}),
        json!({"volumes": [{"name": "trust", "projected": {"sources": [
            {"clusterTrustBundle": {"name": "edge-roots", "path": "roots.pem"}},
            {"clusterTrustBundle": {"signerName": "example.com/edge", "labelSelector": {"matchLabels": {"site": "north"}}, "path": "north.pem"}},
            {"clusterTrustBundle": {"signerName": "example.com/edge", "labelSelector": {}, "path": "edge.pem"}},
        ]}}]}),
    )
}

#[needs(pods)]
#[test]
fn v1_cluster_trust_bundles_are_projected_and_follow_their_edits() {
    let mut c = Cluster::start();
    let (root, _) = ca("edge root");
    let (north, north_ca) = ca("edge north");
    let (south, _) = ca("edge south");
    let (rotated, _) = ca("edge north, next");
    c.create(bundle("edge-roots", None, json!({}), &[&root]));
    c.create(bundle(
        "example.com:edge:north",
        Some("example.com/edge"),
        json!({"site": "north"}),
        &[&north],
    ));
    // The south bundle also carries the north CA: it is written once.
    c.create(bundle(
        "example.com:edge:south",
        Some("example.com/edge"),
        json!({"site": "south"}),
        &[&south, &north],
    ));
    let uid = c.create_pod(projecting()).metadata.uid.unwrap();
    let pid = c.pid("client");
    assert_eq!(set(&read(pid, "/etc/ssl/trust/roots.pem")), union(&[&root]));
    assert_eq!(set(&read(pid, "/etc/ssl/trust/north.pem")), union(&[&north]));
    assert_eq!(set(&read(pid, "/etc/ssl/trust/edge.pem")), union(&[&north, &south]));

    // A real TLS client takes the file as its CA file: a leaf of the north CA verifies.
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["gateway.example.com".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &north_ca)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let leaf_file = dir.path().join("leaf.pem");
    std::fs::write(&leaf_file, leaf.pem()).unwrap();
    let verified = std::process::Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(inside(pid, "/etc/ssl/trust/north.pem"))
        .arg(&leaf_file)
        .output()
        .unwrap();
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stderr));

    // The north CA rotates (both in the bundle for a while), the south site goes.
    let mut edited = c.server().get("clustertrustbundles", None, "example.com:edge:north").unwrap();
    edited["spec"]["trustBundle"] = json!([north.as_str(), rotated.as_str()].concat());
    c.server().update(edited).unwrap();
    c.server().delete("clustertrustbundles", None, "example.com:edge:south", None).unwrap();
    eventually("the edits in the container", LONG, || {
        let edge = std::fs::read_to_string(inside(pid, "/etc/ssl/trust/edge.pem"));
        edge.is_ok_and(|pem| set(&pem) == union(&[&north, &rotated]))
    });
    assert_eq!(set(&read(pid, "/etc/ssl/trust/north.pem")), union(&[&north, &rotated]));

    // V3: the node reboots without the API server; the pod comes back with the bundles.
    let after = c.reboot_offline("client", &uid);
    assert_eq!(set(&read(after, "/etc/ssl/trust/roots.pem")), union(&[&root]));
    assert_eq!(set(&read(after, "/etc/ssl/trust/edge.pem")), union(&[&north, &rotated]));
    c.api.rt.block_on(c.server().restore()).unwrap();
}

#[needs(pods)]
#[test]
fn v1_a_missing_bundle_keeps_the_pod_waiting_until_it_comes() {
    let c = Cluster::start();
    c.create_pod(api_pod(
        "waits",
        json!({"volumeMounts": [{"name": "trust", "mountPath": "/etc/ssl/trust"}]}),
        json!({"volumes": [{"name": "trust", "projected": {"sources": [
            {"clusterTrustBundle": {"name": "late-roots", "path": "roots.pem"}},
            {"clusterTrustBundle": {"signerName": "example.com/edge", "labelSelector": {}, "optional": true, "path": "edge.pem"}},
        ]}}]}),
    ));
    eventually("FailedMount for the missing bundle", LONG, || {
        c.events("waits").iter().any(|e| {
            e["reason"] == "FailedMount"
                && e["message"]
                    == "MountVolume.SetUp failed for volume \"trust\" : while getting \
                        ClusterTrustBundle: clustertrustbundle.certificates.k8s.io \"late-roots\" \
                        not found"
        })
    });
    let (root, _) = ca("late root");
    c.create(bundle("late-roots", None, json!({}), &[&root]));
    let pid = c.pid("waits");
    assert_eq!(set(&read(pid, "/etc/ssl/trust/roots.pem")), union(&[&root]));
    assert_eq!(read(pid, "/etc/ssl/trust/edge.pem"), "", "an optional source that selects nothing");
}
