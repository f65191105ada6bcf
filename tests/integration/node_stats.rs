//! N2 end to end: kubelet's stats and metrics endpoints of a real agent running a real
//! pod. `/stats/summary` holds the pod with plausible figures (CPU used, a working set,
//! its logs), `/metrics/cadvisor` and `/metrics/resource` have its series under kubelet's
//! and cAdvisor's names and labels, `/metrics/probes` counts its readiness probe,
//! `/runningpods` lists it, `/configz` has kubelet's shape, and `/healthz` answers on the
//! healthz port (and a taken healthz port does not stop the agent). The acceptance test
//! with a real Prometheus is `prometheus`.

mod prometheus;

use std::net::TcpListener;
use std::time::Duration;

use outpost_tests::agent::{Agent, request_head, split_response};
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::needs;
use outpost_tests::pods::{Node, eventually};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(90);
/// The static pod's name on node `edge-1`.
const POD: &str = "stats-edge-1";

/// A busybox pod that spends some CPU, writes a log line, then sleeps, with a readiness
/// probe that runs every second.
pub(crate) fn manifest() -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: stats\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; echo counted; while true; do sleep 1; done\"]\n    readinessProbe:\n      exec:\n        command: [\"true\"]\n      periodSeconds: 1\n"
    )
}

/// A port free on loopback now.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

/// The pod's entry in a summary.
fn pod_stats(summary: &Value) -> Option<&Value> {
    summary["pods"].as_array()?.iter().find(|p| p["podRef"]["name"] == POD)
}

/// The summary, once the pod's container has a CPU rate and a working set (two scrapes
/// at least a second apart).
fn summary_with_rates(agent: &Agent) -> Value {
    let summary = std::cell::RefCell::new(Value::Null);
    eventually("the pod's container has cpu, a rate and a working set", LONG, || {
        let (status, body) = agent.get("/stats/summary");
        assert_eq!(status, 200, "{body}");
        let read: Value = serde_json::from_str(&body).expect("/stats/summary is JSON");
        let ready = pod_stats(&read).is_some_and(|pod| {
            let c = &pod["containers"][0];
            c["cpu"]["usageCoreNanoSeconds"].as_u64().is_some_and(|n| n > 0)
                && c["cpu"]["usageNanoCores"].is_u64()
                && c["memory"]["workingSetBytes"].as_u64().is_some_and(|n| n > 0)
        });
        summary.replace(read);
        if !ready {
            std::thread::sleep(Duration::from_millis(1100));
        }
        ready
    });
    summary.into_inner()
}

/// The sample lines of family `name` whose labels include every one of `labels`.
pub(crate) fn samples<'t>(text: &'t str, name: &str, labels: &[(&str, &str)]) -> Vec<&'t str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .collect()
}

/// A sample line's value and timestamp.
fn value_and_time(line: &str) -> (f64, Option<i64>) {
    let mut fields = line.rsplit('}').next().unwrap_or_default().split_whitespace();
    let value = fields.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    (value, fields.next().and_then(|t| t.parse().ok()))
}

#[needs(pods)]
#[test]
fn n2_stats_and_metrics_endpoints_serve_a_running_pods_figures() {
    let node = Node::new();
    let healthz = free_port();
    let mut args = node.args();
    args.extend(["--healthz-port".into(), healthz.to_string().into()]);
    let agent = Agent::start_pods(&node.manifests(), &args);
    agent.poll_within("/readyz", LONG, |status, _| status == 200);
    node.put("stats.yaml", &manifest());

    let summary = summary_with_rates(&agent);
    let node_stats = &summary["node"];
    assert_eq!(node_stats["nodeName"], "edge-1");
    assert!(
        node_stats["cpu"]["usageCoreNanoSeconds"].as_u64().is_some_and(|n| n > 0),
        "{node_stats}"
    );
    assert!(
        node_stats["memory"]["workingSetBytes"].as_u64().is_some_and(|n| n > 0),
        "{node_stats}"
    );
    assert!(node_stats["memory"]["availableBytes"].is_u64(), "{node_stats}");
    assert!(node_stats["fs"]["capacityBytes"].as_u64().is_some_and(|n| n > 0), "{node_stats}");
    assert!(node_stats["runtime"]["imageFs"]["capacityBytes"].is_u64(), "{node_stats}");
    assert!(node_stats["rlimit"]["maxpid"].is_i64(), "{node_stats}");
    let pod = pod_stats(&summary).expect("the pod");
    assert_eq!(pod["podRef"]["namespace"], "default");
    assert!(pod["podRef"]["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(pod["cpu"]["usageCoreNanoSeconds"].as_u64().is_some_and(|n| n > 0), "{pod}");
    assert!(pod["memory"]["workingSetBytes"].as_u64().is_some_and(|n| n > 0), "{pod}");
    let container = &pod["containers"][0];
    assert_eq!(container["name"], "main");
    assert!(container["logs"]["usedBytes"].as_u64().is_some_and(|n| n > 0), "it logged: {pod}");
    assert!(container["rootfs"]["usedBytes"].is_u64(), "{pod}");
    assert!(pod["ephemeral-storage"]["usedBytes"].as_u64().is_some_and(|n| n > 0), "{pod}");
    assert!(pod["network"]["interfaces"].as_array().is_some_and(|i| !i.is_empty()), "{pod}");
    assert!(pod["process_stats"]["process_count"].as_u64().is_some_and(|n| n >= 1), "{pod}");

    // What metrics-server asks for.
    let (_, body) = agent.get("/stats/summary?only_cpu_and_memory=true");
    let only: Value = serde_json::from_str(&body).expect("JSON");
    assert!(only["node"].get("fs").is_none() && only["node"]["cpu"].is_object(), "{body}");
    let pod = pod_stats(&only).expect("the pod");
    assert!(pod.get("network").is_none() && pod["containers"][0].get("logs").is_none());

    let uid = pod_stats(&summary).unwrap()["podRef"]["uid"].as_str().unwrap().to_owned();
    let (status, cadvisor) = agent.get("/metrics/cadvisor");
    assert_eq!(status, 200);
    let labels = [("container", "main"), ("namespace", "default"), ("pod", POD)];
    let cpu = samples(&cadvisor, "container_cpu_usage_seconds_total", &labels);
    assert_eq!(cpu.len(), 1, "{cadvisor}");
    assert!(cpu[0].contains("cpu=\"total\"") && cpu[0].contains(BUSYBOX_IMAGE), "{}", cpu[0]);
    assert!(cpu[0].contains(&uid), "its id is its cgroup, under the pod's: {}", cpu[0]);
    let (seconds, at) = value_and_time(cpu[0]);
    assert!(seconds > 0.0 && at.is_some_and(|t| t > 0), "{}", cpu[0]);
    for family in [
        "container_memory_working_set_bytes",
        "container_memory_rss",
        "container_memory_usage_bytes",
    ] {
        let lines = samples(&cadvisor, family, &labels);
        assert!(lines.len() == 1 && value_and_time(lines[0]).0 > 0.0, "{family}: {cadvisor}");
    }
    let pod_level = [("container", ""), ("namespace", "default"), ("pod", POD), ("image", "")];
    assert_eq!(
        samples(&cadvisor, "container_memory_working_set_bytes", &pod_level).len(),
        1,
        "{cadvisor}"
    );
    assert!(
        !samples(&cadvisor, "container_network_receive_bytes_total", &pod_level).is_empty(),
        "{cadvisor}"
    );
    assert_eq!(samples(&cadvisor, "container_last_seen", &labels).len(), 1);
    assert_eq!(samples(&cadvisor, "container_spec_cpu_period", &labels).len(), 1);
    assert_eq!(samples(&cadvisor, "container_memory_working_set_bytes", &[("id", "/")]).len(), 1);

    let (status, resource) = agent.get("/metrics/resource");
    assert_eq!(status, 200);
    let labels = [("container", "main"), ("pod", POD), ("namespace", "default")];
    for family in ["container_cpu_usage_seconds_total", "container_memory_working_set_bytes"] {
        let lines = samples(&resource, family, &labels);
        assert_eq!(lines.len(), 1, "{family}: {resource}");
        let (value, at) = value_and_time(lines[0]);
        assert!(value > 0.0 && at.is_some(), "kubelet's timestamps: {}", lines[0]);
    }
    assert!(resource.lines().any(|l| l == "resource_scrape_error 0"), "{resource}");
    assert!(resource.lines().any(|l| l.starts_with("node_cpu_usage_seconds_total ")), "{resource}");

    let probe =
        [("probe_type", "Readiness"), ("result", "successful"), ("pod", POD), ("pod_uid", &uid)];
    eventually("the readiness probe is counted", LONG, || {
        let (_, probes) = agent.get("/metrics/probes");
        samples(&probes, "prober_probe_total", &probe).len() == 1
    });

    let (_, running) = agent.get("/runningpods/");
    let running: Value = serde_json::from_str(&running).expect("JSON");
    assert_eq!(running["kind"], "PodList");
    let item =
        running["items"].as_array().and_then(|i| i.iter().find(|p| p["metadata"]["name"] == POD));
    assert_eq!(
        item.map(|p| &p["spec"]["containers"][0]["name"]),
        Some(&Value::from("main")),
        "{running}"
    );

    let (_, configz) = agent.get("/configz");
    let configz: Value = serde_json::from_str(&configz).expect("JSON");
    assert_eq!(configz["kubeletconfig"]["healthzPort"], healthz, "{configz}");

    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", healthz)).expect("the healthz port");
    use std::io::{Read, Write};
    stream.write_all(request_head("GET", "/healthz", &[], 0).as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    assert_eq!(split_response(&response), (200, "ok".to_owned()));
}

#[test]
fn n2_a_taken_healthz_port_does_not_stop_the_agent() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").port();
    let manifests = tempfile::tempdir().expect("temp dir");
    let agent = Agent::start_args(manifests.path(), &["--healthz-port", &port.to_string()]);
    let line = agent.wait_for_log("cannot serve /healthz on the healthz port");
    assert!(line.contains(&port.to_string()), "{line}");
    agent.poll_within("/readyz", LONG, |status, _| status == 200);
    assert_eq!(agent.get("/healthz").0, 200);
}
