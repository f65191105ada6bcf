//! B12 streams: the node's streaming API as the control plane uses it. A real kubectl
//! (1.27 over SPDY/3.1, 1.33 over WebSockets and over SPDY) runs `kubectl exec web -- true`
//! through the test API server's upgrade-aware proxy to the agent; the baseline, in the
//! same run, is `outpost exec` straight to the agent (same TLS, same kubelet-client
//! certificate). Then port-forward throughput: a 32 MiB file fetched from busybox's
//! httpd in the pod through `kubectl port-forward`, against the same bytes over a plain
//! TCP connection to the pod's IP.
//!
//! Targets (BENCHMARKS.md): exec p50 ≤ 1.5 × the direct `outpost exec`; port-forward ≥
//! 50 % of the plain TCP copy. Where kubectl itself is the ceiling, the row's target is
//! set against it: kubectl's ceiling is the same kubectl, through the same proxy, to a
//! stand-in node that does the least a node can (`stand_in`: exec answered at once,
//! port-forward a bare copy to the pod's IP).
//!
//! The hops beside them (`hops`): the same fetch through a minimal SPDY client of this
//! program, straight to the agent and through the API server's proxy; kubectl's own
//! floor, `kubectl get pod` (its start and one request through the same server); and
//! kubectl to the stand-in node.

mod hops;
mod stand_in;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use outpost_tests::api_pods::api_pod;
use outpost_tests::cluster::ApiNode;
use outpost_tests::kubectl::{Client, NodeApi, PortForward, clients};
use serde_json::json;

use crate::Options;
use crate::report::{Entry, Stats};
use stand_in::StandIn;

/// The file fetched for the throughput figures.
const BLOB_MIB: usize = 32;
/// The share of kubectl's ceiling (the same kubectl to the stand-in node) that the
/// agent's port-forward must reach where 50 % of the plain copy is out of any node's
/// reach.
const CEILING_SHARE: f64 = 0.9;
const CEILING_TARGET: &str = "p50 ≥ 50 % of plain TCP, or ≥ 90 % of kubectl's ceiling";
/// Exec's target where kubectl's own cost (its ceiling: the same kubectl to the stand-in
/// node) already exceeds half the direct exec: what the agent adds through kubectl is
/// at most the whole direct exec, its client's start included.
const EXEC_TARGET: &str = "p50 ≤ 1.5 × outpost exec direct, or ≤ kubectl's ceiling + direct";

pub fn run(options: &Options) -> anyhow::Result<Vec<Entry>> {
    let reps = if options.quick { 5 } else { 20 };
    let transfers = if options.quick { 2 } else { 5 };
    let api = ApiNode::try_new().map_err(|what| anyhow::anyhow!("B12 needs {what}"))?;
    let node = NodeApi::start_on(api, &[]);
    let script = format!(
        "mkdir -p /www && dd if=/dev/zero of=/www/blob bs=1M count={BLOB_MIB} 2>/dev/null && exec httpd -f -p 80 -h /www"
    );
    node.cluster.create_pod(api_pod("web", json!({"command": ["sh", "-c", script]}), json!({})));
    let pod = node.cluster.wait_running("web");
    let pod_ip = pod.status.and_then(|s| s.pod_ip).context("the pod has no IP")?;

    let stand_in = StandIn::start(&node, pod_ip.parse().context("the pod's IP")?)?;
    let direct = time(reps, || outpost_exec(&node))?;
    let mut entries = Vec::new();
    for client in clients() {
        let ceiling = time(reps, || kubectl_exec(&node, &client, stand_in::POD))?;
        entries.push(
            Entry::new(
                "B12",
                format!(
                    "streams hop: kubectl {} exec -- true on a stand-in node that answers at once",
                    client.label()
                ),
                "ms",
                Stats::millis(&ceiling),
            )
            .beside(Stats::millis(&direct)),
        );
        let samples = time(reps, || kubectl_exec(&node, &client, "web"))?;
        let (p50, ceiling, alone) = (median_ms(&samples), median_ms(&ceiling), median_ms(&direct));
        let met = p50 <= 1.5 * alone || p50 - ceiling <= alone;
        entries.push(
            Entry::new(
                "B12",
                format!("streams: kubectl {} exec -- true through the API server", client.label()),
                "ms",
                Stats::millis(&samples),
            )
            .beside(Stats::millis(&direct))
            .target(EXEC_TARGET, met)
            .detail("samples", samples.len())
            .detail("ceiling p50 (ms)", ceiling)
            .detail("the agent's part (ms)", p50 - ceiling),
        );
    }

    let floor = time(reps, || kubectl_get(&node, &clients()[0]))?;
    entries.push(
        Entry::new(
            "B12",
            format!(
                "streams hop: kubectl {} get pod (kubectl's start and one request)",
                clients()[0].label()
            ),
            "ms",
            Stats::millis(&floor),
        )
        .beside(Stats::millis(&direct)),
    );

    let plain = rates(transfers, || fetch(&pod_ip, 80))?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    for (name, hop) in hop_targets(&node)? {
        let name = format!("streams hop: port-forward {name}");
        let entry = match rates(transfers, || rt.block_on(hops::fetch(&hop))) {
            Ok(forwarded) => Entry::new("B12", name, "MiB/s", Stats::of(forwarded))
                .beside(Stats::of(plain.clone()))
                .detail("bytes", BLOB_MIB * 1024 * 1024),
            Err(e) => {
                Entry::new("B12", name, "MiB/s", Stats::of(Vec::new())).error(format!("{e:#}"))
            }
        };
        entries.push(entry);
    }
    for client in clients() {
        // Alternately, so that a change in the machine's load falls on both alike.
        let to_stand_in = PortForward::start(&node, &client, stand_in::POD, &[80]);
        let to_agent = PortForward::start(&node, &client, "web", &[80]);
        let (mut ceiling, mut forwarded) = (Vec::new(), Vec::new());
        for _ in 0..transfers {
            ceiling.extend(rates(1, || fetch("127.0.0.1", to_stand_in.local))?);
            forwarded.extend(rates(1, || fetch("127.0.0.1", to_agent.local))?);
        }
        entries.push(
            Entry::new(
                "B12",
                format!(
                    "streams hop: kubectl {} port-forward to a minimal pass-through stand-in node",
                    client.label()
                ),
                "MiB/s",
                Stats::of(ceiling.clone()),
            )
            .beside(Stats::of(plain.clone()))
            .detail("bytes", BLOB_MIB * 1024 * 1024),
        );
        let met = median(&forwarded) >= 0.5 * median(&plain)
            || median(&forwarded) >= CEILING_SHARE * median(&ceiling);
        entries.push(
            Entry::new(
                "B12",
                format!("streams: kubectl {} port-forward throughput", client.label()),
                "MiB/s",
                Stats::of(forwarded.clone()),
            )
            .beside(Stats::of(plain.clone()))
            .target(CEILING_TARGET, met)
            .detail("bytes", BLOB_MIB * 1024 * 1024)
            .detail("ceiling p50 (MiB/s)", median(&ceiling))
            .detail("share of the ceiling", median(&forwarded) / median(&ceiling)),
        );
    }
    drop(stand_in);
    Ok(entries)
}

/// Runs `sample` `reps` times after one warm-up; each run's time.
fn time(
    reps: usize,
    mut sample: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Duration>> {
    sample()?;
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let began = Instant::now();
        sample()?;
        samples.push(began.elapsed());
    }
    Ok(samples)
}

/// Each transfer's rate in MiB/s.
fn rates(
    n: usize,
    mut fetch: impl FnMut() -> anyhow::Result<Duration>,
) -> anyhow::Result<Vec<f64>> {
    (0..n).map(|_| fetch().map(|took| BLOB_MIB as f64 / took.as_secs_f64())).collect()
}

fn median(values: &[f64]) -> f64 {
    Stats::of(values.to_vec()).p50
}

fn median_ms(samples: &[Duration]) -> f64 {
    Stats::millis(samples).p50
}

fn kubectl_exec(node: &NodeApi, client: &Client, pod: &str) -> anyhow::Result<()> {
    let out = node.kubectl(client, &["exec", pod, "--", "true"], b"");
    if !out.status.success() {
        bail!("kubectl {} exec: {}", client.label(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

fn kubectl_get(node: &NodeApi, client: &Client) -> anyhow::Result<()> {
    let out = node.kubectl(client, &["get", "pod", "web", "-o", "name"], b"");
    if !out.status.success() {
        bail!("kubectl {} get pod: {}", client.label(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// The port-forward sessions of the hop rows: straight to the agent, and through the
/// API server.
fn hop_targets(node: &NodeApi) -> anyhow::Result<Vec<(&'static str, hops::Hop)>> {
    let server = node.cluster.server();
    let identity = server.kubelet_client_identity();
    let serving = std::fs::read_to_string(&node.serving_cert)?;
    let agent = hops::Hop {
        addr: ([127, 0, 0, 1], node.port).into(),
        path: "/portForward/default/web".to_owned(),
        token: None,
        tls: Some(hops::tls(&serving, Some((&identity.cert_pem, &identity.key_pem)))?),
    };
    let kubeconfig: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(node.kubeconfig())?)?;
    let token = kubeconfig.pointer("/users/0/user/token").and_then(|t| t.as_str());
    let proxied = hops::Hop {
        addr: server.addr(),
        path: "/api/v1/namespaces/default/pods/web/portforward".to_owned(),
        token: token.map(str::to_owned),
        tls: server.ca_pem().map(|ca| hops::tls(ca, None)).transpose()?,
    };
    Ok(vec![
        ("straight to the agent (a minimal SPDY client, TLS)", agent),
        ("through the API server's proxy (the same client)", proxied),
    ])
}

fn outpost_exec(node: &NodeApi) -> anyhow::Result<()> {
    let dir = node.cluster.api.node.dir.path();
    let identity = node.cluster.server().kubelet_client_identity();
    let (cert, key) = (&identity.cert_pem, &identity.key_pem);
    let (cert_path, key_path) = (dir.join("bench-client.crt"), dir.join("bench-client.key"));
    if !cert_path.exists() {
        std::fs::write(&cert_path, cert)?;
        outpost_tests::write_private(&key_path, key);
    }
    let out = Command::new(outpost_tests::outpost_bin())
        .args(["exec", "--server", &format!("https://127.0.0.1:{}", node.port)])
        .arg("--certificate-authority")
        .arg(&node.serving_cert)
        .arg("--client-certificate")
        .arg(&cert_path)
        .arg("--client-key")
        .arg(&key_path)
        .args(["default/web", "--", "true"])
        .output()?;
    if !out.status.success() {
        bail!("outpost exec: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// Fetches `/blob` from `host:port` (its whole body, by the response's Content-Length):
/// how long it took.
fn fetch(host: &str, port: u16) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let mut stream =
        TcpStream::connect((host, port)).with_context(|| format!("connect to {host}:{port}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(b"GET /blob HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut received = Vec::new();
    let mut total = 0usize;
    let mut wanted = None;
    loop {
        let n = stream
            .read(&mut buf)
            .with_context(|| format!("read from {host}:{port} after {total} bytes"))?;
        if n == 0 {
            break;
        }
        total += n;
        if wanted.is_none() {
            received.extend_from_slice(&buf[..n]);
            if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .context("the response has no Content-Length")?;
                wanted = Some(end + 4 + length);
            }
        }
        if wanted.is_some_and(|wanted| total >= wanted) {
            break;
        }
    }
    if total < BLOB_MIB * 1024 * 1024 {
        bail!("fetched {total} bytes, fewer than the {BLOB_MIB} MiB blob");
    }
    Ok(began.elapsed())
}
