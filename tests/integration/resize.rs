//! K6 with real kubectl 1.33: `kubectl patch pod --subresource resize` changes a running
//! API pod's cpu and memory in place. The agent allocates the resize against the node,
//! updates the container's cgroup through containerd (cgroup v1 here:
//! `cpu.cfs_quota_us`, `cpu.shares`, `memory.limit_in_bytes`) and the pod's, keeps the
//! process (same PID, no restart) where `resizePolicy` allows and restarts the container
//! where it asks, reports `resources` and `allocatedResources`, says `Infeasible` of a
//! resize the node cannot hold, and keeps a resize across its own restart.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use outpost_tests::api_pods::{api_pod, state};
use outpost_tests::kubectl::{Client, NodeApi, clients};
use outpost_tests::needs;
use serde_json::{Value, json};

/// `web`: `app` (cpu in place, memory by restart) and `log` (both in
/// place), Burstable, as kubernetes.io's resize task shapes its pods.
fn web() -> Value {
    let mut pod = api_pod(
        "web",
        json!({
            "name": "app",
            "resizePolicy": [
                {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                {"resourceName": "memory", "restartPolicy": "RestartContainer"}
            ],
            "resources": {"requests": {"cpu": "100m", "memory": "32Mi"},
                          "limits": {"cpu": "200m", "memory": "64Mi"}}
        }),
        json!({}),
    );
    let mut log = pod["spec"]["containers"][0].clone();
    log["name"] = json!("log");
    log["resizePolicy"] = json!([{"resourceName": "memory", "restartPolicy": "NotRequired"}]);
    pod["spec"]["containers"].as_array_mut().unwrap().push(log);
    pod
}

/// kubectl 1.33 (the first with `--subresource resize` out of alpha).
fn kubectl_133() -> Client {
    clients().into_iter().find(|c| c.version == "1.33" && !c.spdy).unwrap()
}

fn resize(api: &NodeApi, client: &Client, patch: Value) {
    let patch = patch.to_string();
    let args = ["patch", "pod", "web", "--subresource", "resize", "--patch", &patch];
    let out = api.kubectl(client, &args, b"");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl patch --subresource resize: {said}");
}

/// One container's resources for a strategic merge patch.
fn patch(container: &str, requests: Value, limits: Value) -> Value {
    json!({"spec": {"containers": [{"name": container,
        "resources": {"requests": requests, "limits": limits}}]}})
}

/// The cgroup v1 directory of `controller` that process `pid` is in.
fn cgroup_dir(pid: i32, controller: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = text
        .lines()
        .filter_map(|line| line.split_once(':').and_then(|(_, rest)| rest.split_once(':')))
        .find(|(controllers, _)| controllers.split(',').any(|c| c == controller))
        .map(|(_, path)| path.to_owned())
        .unwrap_or_else(|| panic!("process {pid} has no {controller} cgroup: {text}"));
    let mount = if controller == "memory" { "memory" } else { "cpu" };
    format!("/sys/fs/cgroup/{mount}{path}")
}

fn number(dir: &str, file: &str) -> i64 {
    let path = format!("{dir}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.trim().parse().unwrap_or_else(|e| panic!("{path}: {text:?}: {e}"))
}

/// The container's CFS quota, cpu shares and memory limit, read from its process's cgroups.
fn limits(pid: i32) -> (i64, i64, i64) {
    let (cpu, memory) = (cgroup_dir(pid, "cpu"), cgroup_dir(pid, "memory"));
    (
        number(&cpu, "cpu.cfs_quota_us"),
        number(&cpu, "cpu.shares"),
        number(&memory, "memory.limit_in_bytes"),
    )
}

/// The pod's cgroup: the parent of a container's.
fn pod_memory_limit(pid: i32) -> i64 {
    let dir = cgroup_dir(pid, "memory");
    let parent = dir.rsplit_once('/').unwrap().0;
    number(parent, "memory.limit_in_bytes")
}

fn status_of(pod: &Pod, container: &str) -> Value {
    let pod = serde_json::to_value(pod).unwrap();
    let statuses = pod.pointer("/status/containerStatuses").and_then(Value::as_array).cloned();
    statuses.into_iter().flatten().find(|s| s["name"] == container).unwrap_or_default()
}

fn condition(pod: &Pod, kind: &str) -> Option<Value> {
    let pod = serde_json::to_value(pod).unwrap();
    let conditions = pod.pointer("/status/conditions").and_then(Value::as_array).cloned();
    conditions.into_iter().flatten().find(|c| c["type"] == kind)
}

const MI: i64 = 1 << 20;

fn running_web() -> NodeApi {
    let api = NodeApi::start(&[]);
    api.cluster.create_pod(web());
    for container in ["app", "log"] {
        api.cluster.wait("web", "running", |p| state(p, container)["running"].is_object());
    }
    api
}

#[needs(pods, kubectl)]
#[test]
fn k6_kubectl_resize_updates_the_cgroups_in_place_or_restarts_as_the_policy_says() {
    let mut api = running_web();
    let client = kubectl_133();
    let (app, log) =
        (api.cluster.pid_of("default", "web", "app"), api.cluster.pid_of("default", "web", "log"));
    assert_eq!(limits(app), (20_000, 102, 64 * MI));

    // cpu only, NotRequired: in place, the same process.
    resize(&api, &client, patch("app", json!({"cpu": "150m"}), json!({"cpu": "300m"})));
    let pod = api.cluster.wait("web", "app's cpu resized", |p| {
        status_of(p, "app")["resources"]["limits"]["cpu"] == "300m"
            && condition(p, "PodResizeInProgress").is_none()
    });
    assert_eq!(limits(app), (30_000, 153, 64 * MI), "cpu.cfs_quota_us and cpu.shares");
    assert_eq!(api.cluster.pid_of("default", "web", "app"), app, "the same process");
    let status = status_of(&pod, "app");
    assert_eq!(status["restartCount"], 0);
    assert_eq!(status["allocatedResources"]["cpu"], "150m");
    assert_eq!(status["resources"]["requests"]["cpu"], "150m");
    assert_eq!(pod.status.as_ref().unwrap().qos_class.as_deref(), Some("Burstable"));

    // memory on `log`, NotRequired: in place; the pod's cgroup grows first.
    resize(&api, &client, patch("log", json!({"memory": "48Mi"}), json!({"memory": "96Mi"})));
    api.cluster.wait("web", "log's memory resized", |p| {
        status_of(p, "log")["resources"]["limits"]["memory"] == "96Mi"
    });
    assert_eq!(limits(log).2, 96 * MI, "memory.limit_in_bytes");
    assert_eq!(api.cluster.pid_of("default", "web", "log"), log);
    assert_eq!(pod_memory_limit(log), (64 + 96) * MI, "the pod's cgroup holds both limits");

    // memory on `app`, RestartContainer: lowered, by a restart with the new limit.
    resize(&api, &client, patch("app", json!({"memory": "16Mi"}), json!({"memory": "48Mi"})));
    let pod = api.cluster.wait("web", "app restarted with its new memory", |p| {
        status_of(p, "app")["restartCount"] == 1 && state(p, "app")["running"].is_object()
    });
    let restarted = api.cluster.pid_of("default", "web", "app");
    assert_ne!(restarted, app, "a new process");
    assert_eq!(limits(restarted).2, 48 * MI);
    assert_eq!(status_of(&pod, "app")["resources"]["limits"]["memory"], "48Mi");

    // The agent restarts: what it allocated is kept, nothing is restarted or undone.
    api.restart_agent();
    let pod = api.cluster.wait("web", "reported by the new agent", |p| {
        status_of(p, "log")["resources"]["limits"]["memory"] == "96Mi"
    });
    assert_eq!(api.cluster.pid_of("default", "web", "log"), log);
    assert_eq!(api.cluster.pid_of("default", "web", "app"), restarted);
    assert_eq!(limits(log).2, 96 * MI);
    assert_eq!(status_of(&pod, "app")["restartCount"], 1);
}

#[needs(pods, kubectl)]
#[test]
fn k6_a_resize_beyond_the_node_is_infeasible_and_the_containers_keep_their_limits() {
    let api = running_web();
    let client = kubectl_133();
    let app = api.cluster.pid_of("default", "web", "app");
    resize(&api, &client, patch("app", json!({"cpu": "1000"}), json!({"cpu": "1000"})));
    let pod = api.cluster.wait("web", "the resize is pending", |p| {
        condition(p, "PodResizePending").is_some_and(|c| c["reason"] == "Infeasible")
    });
    let pending = condition(&pod, "PodResizePending").unwrap();
    let message = pending["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Node didn't have enough capacity: cpu"), "{message}");
    assert_eq!(limits(app), (20_000, 102, 64 * MI), "nothing changed");
    let status = status_of(&pod, "app");
    assert_eq!(status["allocatedResources"]["cpu"], "100m");
    assert_eq!(status["resources"]["limits"]["cpu"], "200m");
    assert_eq!(api.cluster.pid_of("default", "web", "app"), app);
}

/// Not a pass/fail test: a resize request (a patch of `pods/resize`) to the new CFS
/// quota in the container's cgroup, a few times, and the median (the figure issue 50
/// asks for). Run with `--ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn k6_resize_request_to_the_new_limit_in_the_cgroup_p50() {
    let api = running_web();
    let app = api.cluster.pid_of("default", "web", "app");
    let cpu = cgroup_dir(app, "cpu");
    let server = api.cluster.server();
    let mut times = Vec::new();
    for round in 0..7i64 {
        let millis = 300 + 100 * round;
        let body = patch("app", json!({}), json!({"cpu": format!("{millis}m")}));
        let start = Instant::now();
        server.resize_pod("default", "web", body).unwrap();
        while number(&cpu, "cpu.cfs_quota_us") != millis * 100 {
            std::thread::sleep(Duration::from_micros(500));
            assert!(start.elapsed() < Duration::from_secs(30), "the quota never changed");
        }
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "resize request -> new cpu.cfs_quota_us, p50 of {}: {:?}",
        times.len(),
        times[times.len() / 2]
    );
}
