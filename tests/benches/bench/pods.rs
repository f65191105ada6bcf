//! Realistic static pod manifests: two containers with commands, env, ports, resources,
//! probes and mounts, and two volumes.

use std::path::Path;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Pod;
use outpost_core::manifest::{self, Origin};

/// The node name every benchmark decodes for.
pub const NODE: &str = "bench-node";

/// A manifest for the pod `name`; `revision` changes its content (and so its UID) while
/// keeping its name.
pub fn manifest(name: &str, revision: u64) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: kube-system
  labels:
    app.kubernetes.io/name: {name}
    app.kubernetes.io/component: edge-proxy
    tier: node
  annotations:
    example.com/revision: "{revision}"
    prometheus.io/scrape: "true"
    prometheus.io/port: "9090"
spec:
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 30
  containers:
  - name: proxy
    image: registry.example.com/edge/proxy:1.{revision}.0
    imagePullPolicy: IfNotPresent
    command: ["/usr/local/bin/proxy"]
    args:
    - --listen=0.0.0.0:8443
    - --admin=127.0.0.1:9901
    - --config=/etc/proxy/proxy.yaml
    - --log-format=json
    env:
    - name: LOG_LEVEL
      value: info
    - name: REVISION
      value: "{revision}"
    - name: GOMAXPROCS
      value: "2"
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    ports:
    - name: https
      containerPort: 8443
      protocol: TCP
    - name: metrics
      containerPort: 9090
      protocol: TCP
    resources:
      requests:
        cpu: 100m
        memory: 64Mi
      limits:
        cpu: "1"
        memory: 256Mi
    readinessProbe:
      httpGet:
        path: /ready
        port: 9090
      periodSeconds: 5
      failureThreshold: 3
    livenessProbe:
      httpGet:
        path: /healthz
        port: 9090
      initialDelaySeconds: 10
      periodSeconds: 10
    volumeMounts:
    - name: config
      mountPath: /etc/proxy
      readOnly: true
    - name: cache
      mountPath: /var/cache/proxy
  - name: log-shipper
    image: registry.example.com/observability/shipper:2.3.1
    args: ["--input=/var/cache/proxy/logs", "--output=stdout"]
    env:
    - name: SHIPPER_BATCH
      value: "512"
    - name: SHIPPER_FLUSH_INTERVAL
      value: 5s
    resources:
      requests:
        cpu: 10m
        memory: 16Mi
      limits:
        cpu: 100m
        memory: 64Mi
    volumeMounts:
    - name: cache
      mountPath: /var/cache/proxy
      readOnly: true
  volumes:
  - name: config
    hostPath:
      path: /etc/edge-proxy
      type: Directory
  - name: cache
    emptyDir:
      sizeLimit: 512Mi
"#
    )
}

/// Decodes one manifest as the file source would for `path`: exactly one pod.
pub fn decode(bytes: &[u8], path: &Path) -> anyhow::Result<Pod> {
    let mut pods = manifest::decode(bytes, Origin::File(path), NODE)
        .with_context(|| format!("the benchmark manifest for {} is rejected", path.display()))?;
    ensure!(pods.len() == 1, "{} holds {} pods, not 1", path.display(), pods.len());
    pods.pop().context("no pod")
}

/// The UID the file source gives the pod in these bytes at `path` (S5).
pub fn uid(bytes: &[u8], path: &Path) -> anyhow::Result<String> {
    let pod = decode(bytes, path)?;
    Ok(outpost_core::pod::uid(&pod).to_owned())
}
