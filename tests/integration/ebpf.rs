//! eBPF end to end: the real programs on the real kernel, with real containerd pods.
//! Exits seen by the kernel (exact codes and signals, attributed to the right pod), the
//! OOM killer's victim, per-pod traffic counters, the exec audit, and an agent with BPF
//! forced off. Under `CI=true` an agent that cannot load BPF fails these tests.

use outpost_tests::needs;
use std::process::Command;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, container, eventually, pod, wait_pod};
use outpost_tests::prerequisite;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// A static pod manifest: one busybox container `main` running `script` with `sh -c`.
fn manifest(name: &str, script: &str, spec: &str, container_extra: &str) -> String {
    let script = serde_json::to_string(script).unwrap();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec}  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n{container_extra}"
    )
}

const NEVER: &str = "  restartPolicy: Never\n";

/// An agent on `node` with BPF loaded; fails the test when the kernel refuses it (the
/// tests carry `outpost_has_bpf`).
fn start_with_bpf(node: &Node) -> Agent {
    let mut args = node.args();
    args.push("--ebpf=true".into());
    let agent = Agent::start_pods(&node.manifests(), &args);
    let line = agent.wait_for_log("eBPF");
    prerequisite(!line.contains("eBPF is unavailable"), &format!("BPF (the agent said: {line})"));
    assert!(line.contains("eBPF programs loaded"), "unexpected first eBPF line: {line}");
    agent
}

fn terminated(p: &Value) -> &Value {
    &container(p)["state"]["terminated"]
}

fn container_id(p: &Value) -> String {
    let id = container(p)["containerID"].as_str().unwrap_or_default();
    id.trim_start_matches("containerd://").to_owned()
}

/// `GET /pods/default/{name}/exec-audit` → its items.
fn audit(agent: &Agent, name: &str) -> Vec<Value> {
    let (status, body) = agent.get(&format!("/pods/default/{name}/exec-audit"));
    assert_eq!(status, 200, "exec-audit of {name}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

/// Polls `read` until `done` says yes to what it read (within [`LONG`]); panics with
/// the last reading otherwise.
fn eventually_with<T: std::fmt::Debug>(
    what: &str,
    read: impl Fn() -> T,
    done: impl Fn(&T) -> bool,
) {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let value = read();
        if done(&value) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never happened: {what}; last: {value:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The host pid of a container's task.
fn task_pid(node: &Node, id: &str) -> u32 {
    let list = node.ctr(&["tasks", "list"]);
    list.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&id)).then(|| f.get(1)?.parse().ok()).flatten()
        })
        .next()
        .unwrap_or_else(|| panic!("no task {id} in {list}"))
}

#[needs(bpf, pods)]
#[test]
fn kernel_exits_carry_exact_codes_and_signals_and_execs_are_audited() {
    let node = Node::new();
    let agent = start_with_bpf(&node);
    node.put("three.yaml", &manifest("three", "exit 3", NEVER, ""));
    // Full paths: busybox's sh runs a bare `ls` as an applet in a fork, without execve.
    node.put("audit.yaml", &manifest("audit", "/bin/ls /; exec /bin/sleep 3600", NEVER, ""));

    let three = wait_pod(&agent, "three-edge-1", LONG, |p| terminated(p).is_object());
    assert_eq!(terminated(&three)["exitCode"], 3, "{three:#}");
    assert_eq!(terminated(&three)["reason"], "Error");
    assert!(terminated(&three).get("signal").is_none(), "{three:#}");
    let three_id = container_id(&three);
    eventually("the exit of `three` is in its exec audit", LONG, || {
        audit(&agent, "three-edge-1").iter().any(|e| {
            e["kind"] == "exit" && e["exitCode"] == 3 && e["containerId"] == three_id.as_str()
        })
    });

    let running =
        wait_pod(&agent, "audit-edge-1", LONG, |p| container(p)["state"]["running"].is_object());
    let id = container_id(&running);
    // The execs: sh (the command), ls, then sleep replacing sh (busybox may run an
    // applet through /proc/self/exe: argv says which).
    eventually_with(
        "ls and sleep are in the exec audit",
        || audit(&agent, "audit-edge-1"),
        |items| {
            let ran = |file: &str, argv: &[&str]| {
                items.iter().any(|e| {
                    e["kind"] == "exec"
                        && e["container"] == "main"
                        && e["containerId"] == id.as_str()
                        && e["filename"]
                            .as_str()
                            .is_some_and(|f| f.ends_with(file) || f == "/proc/self/exe")
                        && e["argv"] == serde_json::json!(argv)
                })
            };
            ran("ls", &["/bin/ls", "/"]) && ran("sleep", &["/bin/sleep", "3600"])
        },
    );
    let items = audit(&agent, "audit-edge-1");
    assert!(
        items.iter().all(|e| e["time"].as_str().is_some_and(|t| t.ends_with('Z'))),
        "{items:#?}"
    );
    assert!(
        !items.iter().any(|e| e["containerId"] == three_id.as_str()),
        "another pod's processes are not in this pod's audit"
    );

    // SIGKILL from the host to the container's init: 137, signal 9.
    let pid = task_pid(&node, &id);
    let killed = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    let dead = wait_pod(&agent, "audit-edge-1", LONG, |p| terminated(p).is_object());
    assert_eq!(terminated(&dead)["exitCode"], 137, "{dead:#}");
    assert_eq!(terminated(&dead)["signal"], 9, "{dead:#}");
    eventually("the SIGKILL is in the exec audit", LONG, || {
        audit(&agent, "audit-edge-1").iter().any(|e| {
            e["kind"] == "exit" && e["nsPid"] == 1 && e["exitCode"] == 137 && e["signal"] == 9
        })
    });
    // The kernel saw both exits, and said so (its exit usually reaches the worker before
    // containerd's; on a busy machine both may be read at once, and either wins).
    let log = agent.log();
    for container_id in [&three_id, &id] {
        assert!(
            log.lines().any(|l| l.contains("container init exited")
                && l.contains(&format!("container_id=\"{container_id}\""))
                && l.contains("source=\"kernel\"")),
            "no kernel exit for {container_id}:\n{log}"
        );
    }
    // containerd's tasks of the exited containers are reaped even though the kernel's
    // exit came before containerd's.
    eventually("the exited tasks are deleted", LONG, || node.tasks().is_empty());
    // An unknown pod is a 404 Status.
    let (status, body) = agent.get("/pods/default/nope/exec-audit");
    assert_eq!(status, 404, "{body}");
}

#[needs(bpf, pods)]
#[test]
fn a_crash_looping_container_restarts_once_per_exit_and_leaks_no_task() {
    let node = Node::new();
    let agent = start_with_bpf(&node);
    node.put("crash.yaml", &manifest("crash", "echo attempt; exit 3", "", ""));
    let p = wait_pod(&agent, "crash-edge-1", LONG, |p| {
        container(p)["restartCount"].as_i64().unwrap_or(0) >= 2
    });
    assert_eq!(container(&p)["lastState"]["terminated"]["exitCode"], 3, "{p:#}");
    node.remove("crash.yaml");
    eventually("the pod is gone", LONG, || pod(&agent, "crash-edge-1").is_none());
    eventually("no container is left", LONG, || node.containers().is_empty());
    assert!(node.tasks().is_empty(), "tasks left: {:?}", node.tasks());
    let log = agent.log();
    let started = log.lines().filter(|l| l.contains("container started")).count();
    let exited = log
        .lines()
        .filter(|l| l.contains("container exited") && !l.contains("not restarted"))
        .count();
    let kernel = log
        .lines()
        .filter(|l| l.contains("container init exited") && l.contains("source=\"kernel\""))
        .count();
    // Each run ends once (the kernel's or containerd's exit, never both) and is followed
    // by at most one start.
    assert!(
        exited <= started && started <= exited + 1,
        "started {started}, exited {exited}:\n{log}"
    );
    assert!(kernel >= 2, "the kernel reported the exits:\n{log}");
}

#[needs(bpf, pods)]
#[test]
fn the_oom_killer_victim_is_named() {
    let node = Node::new();
    let agent = start_with_bpf(&node);
    let limits = "    resources:\n      limits:\n        memory: 16Mi\n";
    node.put("oom.yaml", &manifest("oom", "exec tail /dev/zero", NEVER, limits));
    let p = wait_pod(&agent, "oom-edge-1", LONG, |p| terminated(p).is_object());
    let t = terminated(&p);
    assert_eq!(t["reason"], "OOMKilled", "{p:#}");
    assert_eq!(t["exitCode"], 137, "{p:#}");
    let message = t["message"].as_str().unwrap_or_default();
    assert!(message.contains("(tail)") && message.contains("pid "), "{p:#}");
    let (_, events) = agent.get("/pods/default/oom-edge-1/events");
    assert!(events.contains("OOMKilled") && events.contains("(tail)"), "{events}");
}

/// The value of `family{namespace="default",pod="<pod>"}` in a /metrics text.
fn sample(metrics: &str, family: &str, pod: &str) -> Option<f64> {
    let prefix = format!("{family}{{namespace=\"default\",pod=\"{pod}\"}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
}

#[needs(bpf, pods)]
#[test]
fn traffic_between_two_pods_moves_both_pods_counters() {
    let node = Node::new();
    let agent = start_with_bpf(&node);
    node.put(
        "recv.yaml",
        &manifest("recv", "while true; do nc -l -p 5000 > /dev/null; done", "", ""),
    );
    let recv = wait_pod(&agent, "recv-edge-1", LONG, |p| {
        container(p)["state"]["running"].is_object() && p["status"]["podIP"].is_string()
    });
    let ip = recv["status"]["podIP"].as_str().unwrap().to_owned();
    let send = format!("while true; do echo hello-over-the-bridge | nc {ip} 5000; sleep 1; done");
    node.put("send.yaml", &manifest("send", &send, "", ""));
    let families = [
        "outpost_pod_network_receive_bytes_total",
        "outpost_pod_network_receive_packets_total",
        "outpost_pod_network_transmit_bytes_total",
        "outpost_pod_network_transmit_packets_total",
    ];
    // The last reading names the traffic samples and the pods: this failed once,
    // unexplained, under a full suite's load.
    let read = || {
        let (_, metrics) = agent.get("/metrics");
        let traffic: Vec<String> = metrics
            .lines()
            .filter(|l| l.starts_with("outpost_pod_network_"))
            .map(str::to_owned)
            .collect();
        (traffic, agent.get("/pods").1)
    };
    eventually_with("all four counters move on both pods", read, |(traffic, _)| {
        let metrics = traffic.join("\n");
        ["recv-edge-1", "send-edge-1"]
            .iter()
            .all(|pod| families.iter().all(|f| sample(&metrics, f, pod).is_some_and(|v| v > 0.0)))
    });
    let (_, metrics) = agent.get("/metrics");
    assert!(metrics.contains("outpost_ebpf_loaded 1"), "{metrics}");
    // The sender's execs (`nc`, `sleep`) are counted once the agent has taken their
    // events, which may come after its first packets were counted (CI saw the traffic
    // before any exec under a full suite's load): waited for, as the traffic is.
    let execs = "outpost_pod_process_execs_total{namespace=\"default\",pod=\"send-edge-1\",container=\"main\"}";
    let read = || agent.get("/metrics").1;
    eventually_with("the sender's execs are counted", read, |metrics| {
        metrics.lines().any(|l| l.starts_with(execs))
    });
}

#[needs(pods)]
#[test]
fn with_bpf_off_pods_still_restart_and_the_exec_audit_says_why_it_is_empty() {
    let node = Node::new();
    let mut args = node.args();
    args.push("--ebpf=false".into());
    let agent = Agent::start_pods(&node.manifests(), &args);
    agent.wait_for_log("eBPF disabled (--ebpf=false)");
    node.put("crash.yaml", &manifest("crash", "echo attempt; exit 3", "", ""));
    let p = wait_pod(&agent, "crash-edge-1", LONG, |p| {
        container(p)["restartCount"].as_i64().unwrap_or(0) >= 1
    });
    assert_eq!(container(&p)["lastState"]["terminated"]["exitCode"], 3, "{p:#}");
    let (status, body) = agent.get("/pods/default/crash-edge-1/exec-audit");
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["kind"], "Status", "{body}");
    assert!(v["message"].as_str().unwrap_or_default().contains("eBPF is not loaded"), "{body}");
    let (_, metrics) = agent.get("/metrics");
    assert!(metrics.contains("outpost_ebpf_loaded 0"), "{metrics}");
    let log = agent.log();
    assert!(!log.contains("source=\"kernel\""), "{log}");
}
