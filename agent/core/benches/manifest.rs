//! Manifest decoding time for a 10 KiB kubeadm-style static pod (issue 36's figure):
//! `cargo bench -p outpost-core --bench manifest`.
//!
//! The pod is the corpus' kube-apiserver manifest with more flags and host-path volumes,
//! as kubeadm writes them for a control plane with audit logging and extra certificates,
//! until it is 10 KiB.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use outpost_core::manifest::{Origin, decode};

const BASE: &str = include_str!("../../../tests/manifests/kubeadm-kube-apiserver.yaml");

/// The manifest, grown to 10 KiB with flags and volumes of the same shape.
fn kubeadm_pod() -> String {
    let mut flags = String::new();
    let mut mounts = String::new();
    let mut volumes = String::new();
    let mut i = 0;
    while BASE.len() + flags.len() + mounts.len() + volumes.len() < 10 * 1024 {
        flags.push_str(&format!(
            "    - --audit-policy-file-{i}=/etc/kubernetes/audit/policy-{i}.yaml\n"
        ));
        mounts.push_str(&format!(
            "    - mountPath: /etc/kubernetes/audit-{i}\n      name: audit-{i}\n      readOnly: true\n"
        ));
        volumes.push_str(&format!(
            "  - hostPath:\n      path: /etc/kubernetes/audit-{i}\n      type: DirectoryOrCreate\n    name: audit-{i}\n"
        ));
        i += 1;
    }
    BASE.replacen("    - kube-apiserver\n", &format!("    - kube-apiserver\n{flags}"), 1)
        .replacen("    volumeMounts:\n", &format!("    volumeMounts:\n{mounts}"), 1)
        .replacen("  volumes:\n", &format!("  volumes:\n{volumes}"), 1)
}

fn decoding(c: &mut Criterion) {
    let manifest = kubeadm_pod();
    let origin = Origin::File(Path::new("/etc/kubernetes/manifests/kube-apiserver.yaml"));
    let pods = decode(manifest.as_bytes(), origin, "cp-1").map(|pods| pods.len());
    assert_eq!(pods.ok(), Some(1), "the benchmark's manifest decodes");
    let name = format!("decode a {} KiB kubeadm-style pod", manifest.len() / 1024);
    c.bench_function(&name, |b| b.iter(|| decode(black_box(manifest.as_bytes()), origin, "cp-1")));
}

criterion_group!(benches, decoding);
criterion_main!(benches);
