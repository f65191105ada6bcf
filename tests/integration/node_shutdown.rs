//! J3: graceful node shutdown against a real `dbus-daemon` carrying a stand-in
//! systemd-logind (`outpost_tests::logind`): systemd is not PID 1 here, so the real logind
//! cannot run. The agent takes a delay inhibitor lock on shutdown, and only at logind's
//! `PrepareForShutdown(true)` stops the pods, lowest priority group first, reports them
//! and the Node, and releases the lock; `PrepareForShutdown(false)` takes it again; a
//! SIGTERM alone (an agent restart) leaves the pods running.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Node as KubeNode, NodeCondition, Pod};
use outpost_tests::agent::Agent;
use outpost_tests::api_pods::{Cluster, LONG, NODE, api_pod};
use outpost_tests::apiserver::TestApiServer;
use outpost_tests::cluster::ApiNode;
use outpost_tests::logind::{Bus, Lock, LoginManager};
use outpost_tests::outpost_bin;
use outpost_tests::pods::eventually;
use outpost_tests_needs::needs;
use serde_json::json;

/// The agent, on the test bus for its system bus.
fn agent_on(bus: &Bus, manifests: &Path, args: &[OsString]) -> Agent {
    let mut command = Command::new(outpost_bin());
    command.env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address);
    Agent::start_pods_with(command, manifests, args)
}

fn ready(server: &TestApiServer) -> Option<NodeCondition> {
    let node: KubeNode = server.get_typed(None, NODE).ok()?;
    node.status?.conditions?.into_iter().find(|c| c.type_ == "Ready")
}

fn shutting_down(server: &TestApiServer) -> bool {
    ready(server).is_some_and(|c| {
        c.status == "False" && c.message.as_deref() == Some("node is shutting down")
    })
}

fn is_shutdown_lock(lock: &Lock) -> bool {
    (lock.what.as_str(), lock.who.as_str(), lock.mode.as_str()) == ("shutdown", "outpost", "delay")
}

/// J3 without pods: the lock is taken at start (with a warning that logind's delay is
/// shorter than the grace periods), released at `PrepareForShutdown(true)` with the
/// Node not Ready "node is shutting down" while the agent keeps running, taken again at
/// `PrepareForShutdown(false)`, and released by the agent's exit.
#[needs(dbus)]
#[test]
fn j3_the_inhibitor_lock_follows_loginds_prepare_for_shutdown() {
    let bus = Bus::start();
    let logind = LoginManager::start(&bus, Duration::from_secs(5));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(TestApiServer::start()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // D6: the agent makes its state directory a shared mount (bound on itself here).
    let _mounts = outpost_tests::propagation::UnmountUnder::new(dir.path());
    let kubeconfig = server.node_kubeconfig(dir.path(), "edge-1").unwrap();
    for sub in ["manifests", "state", "run", "logs", "cni"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let path = |sub: &str| dir.path().join(sub).into_os_string();
    let args: Vec<OsString> = vec![
        "--containerd".into(),
        "external".into(),
        // No containerd: this test has no pods.
        "--containerd-socket".into(),
        path("no-containerd.sock"),
        "--state-dir".into(),
        path("state"),
        "--root-dir".into(),
        path("kubelet"),
        "--run-dir".into(),
        path("run"),
        "--pod-log-dir".into(),
        path("logs"),
        "--cni-conf-dir".into(),
        path("cni"),
        "--kubeconfig".into(),
        kubeconfig.into_os_string(),
        "--ebpf=false".into(),
        "--healthz-port".into(),
        "0".into(),
        "--shutdown-grace-period".into(),
        "30s".into(),
        "--shutdown-grace-period-critical-pods".into(),
        "10s".into(),
    ];
    let agent = agent_on(&bus, &dir.path().join("manifests"), &args);
    logind.wait_locks("the shutdown lock", LONG, |locks| locks.iter().any(is_shutdown_lock));
    agent.wait_for_log("InhibitDelayMaxSec=30");
    // Not Ready for want of containerd, not for a shutdown.
    eventually("the Node's Ready condition", LONG, || ready(&server).is_some());
    assert!(!shutting_down(&server), "{:?}", ready(&server));

    logind.prepare_for_shutdown(true);
    logind.wait_locks("the lock's release", LONG, |locks| locks[0].released.is_some());
    // Released only once the API server had the Node not Ready.
    assert!(shutting_down(&server), "{:?}", ready(&server));
    agent.wait_for_log("released logind's inhibitor lock");

    logind.prepare_for_shutdown(false);
    logind.wait_locks("the lock taken again", LONG, |locks| {
        locks.len() == 2 && is_shutdown_lock(&locks[1]) && locks[1].released.is_none()
    });
    agent.stop();
    logind.wait_locks("the lock released at the agent's exit", LONG, |locks| {
        locks.iter().all(|l| l.released.is_some())
    });
}

/// The CRI log line's time (RFC 3339) of the first line of `container_log` containing
/// `needle`.
fn logged_at(container_log: &Path, needle: &str) -> Option<SystemTime> {
    let text = std::fs::read_to_string(container_log).ok()?;
    let line = text.lines().find(|l| l.contains(needle))?;
    let at: jiff::Timestamp = line.split_whitespace().next()?.parse().ok()?;
    Some(SystemTime::from(at))
}

/// The only log file of pod `name`'s container `main` under the node's log dir.
fn container_log(logs: &Path, name: &str) -> std::path::PathBuf {
    let prefix = format!("default_{name}_");
    let dir = std::fs::read_dir(logs)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .unwrap_or_else(|| panic!("no log dir for {name} in {}", logs.display()));
    dir.path().join("main/0.log")
}

/// Says when it gets SIGTERM, takes a second, and exits.
const TERM_SLOW: &str =
    "trap 'echo got SIGTERM; sleep 1; exit 0' TERM; echo up; while true; do sleep 0.1; done";

fn failed_by_shutdown(p: &Pod) -> bool {
    let Some(status) = &p.status else { return false };
    let disruption = status.conditions.iter().flatten().find(|c| c.type_ == "DisruptionTarget");
    status.phase.as_deref() == Some("Failed")
        && status.reason.as_deref() == Some("Terminated")
        && status.message.as_deref()
            == Some("Pod was terminated in response to imminent node shutdown.")
        && disruption.is_some_and(|c| {
            c.status == "True" && c.reason.as_deref() == Some("TerminationByKubelet")
        })
}

/// J3 end to end: three pods in three priority groups (a low API pod, a normal API pod,
/// a system-node-critical static pod). A SIGTERM alone leaves them running; the next
/// agent adopts them and takes the lock; at `PrepareForShutdown(true)` they get SIGTERM
/// group by group, lowest first, each group once the one before it stopped; their
/// statuses (Failed, Terminated, DisruptionTarget) and the Node's Ready=False reach the
/// API server, and the lock is released within logind's delay. Prints the timeline.
#[needs(pods, dbus)]
#[test]
fn j3_a_machine_shutdown_stops_pods_by_priority_group() {
    let bus = Bus::start();
    let delay_max = Duration::from_secs(30);
    let logind = LoginManager::start(&bus, delay_max);
    let api = ApiNode::new();
    let config = api.node.dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "shutdownGracePeriodByPodPriority:\n\
         - priority: -10\n  shutdownGracePeriodSeconds: 4\n\
         - priority: 0\n  shutdownGracePeriodSeconds: 4\n\
         - priority: 2000000000\n  shutdownGracePeriodSeconds: 4\n",
    )
    .unwrap();
    let mut args = api.node.args();
    args.extend([
        OsString::from("--kubeconfig"),
        api.node_kubeconfig.clone().into_os_string(),
        "--config".into(),
        config.into_os_string(),
    ]);
    let script = serde_json::to_string(TERM_SLOW).unwrap();
    api.node.put(
        "critical.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: critical\nspec:\n  \
             priorityClassName: system-node-critical\n  terminationGracePeriodSeconds: 2\n  \
             containers:\n  - name: main\n    image: {}\n    imagePullPolicy: IfNotPresent\n    \
             command: [\"sh\", \"-c\", {script}]\n",
            outpost_tests::containerd::BUSYBOX_IMAGE
        ),
    );
    let agent = agent_on(&bus, &api.node.manifests(), &args);
    let mut c = Cluster { agent: Some(agent), api, env: Vec::new() };
    let command = json!({"command": ["sh", "-c", TERM_SLOW]});
    c.create_pod(api_pod("low", command.clone(), json!({"priority": -5})));
    c.create_pod(api_pod("web", command, json!({})));
    let critical = format!("critical-{NODE}");
    for name in ["low", "web", critical.as_str()] {
        c.wait(name, "running", |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
    }
    logind.wait_locks("the shutdown lock", LONG, |locks| locks.iter().any(is_shutdown_lock));

    // An agent restart is not a shutdown: the pods keep running.
    let tasks = |node: &outpost_tests::pods::Node| {
        let mut tasks = node.tasks();
        tasks.sort();
        tasks
    };
    let running = tasks(&c.api.node);
    assert_eq!(running.len(), 3, "{running:?}");
    assert!(running.iter().all(|(_, state)| state == "RUNNING"), "{running:?}");
    c.agent.take().unwrap().stop();
    assert_eq!(tasks(&c.api.node), running, "SIGTERM alone leaves every pod running");
    logind.wait_locks("the lock released at the agent's exit", LONG, |locks| {
        locks.iter().all(|l| l.released.is_some())
    });
    c.agent = Some(agent_on(&bus, &c.api.node.manifests(), &args));
    logind.wait_locks("the next agent's lock", LONG, |locks| {
        locks.iter().filter(|l| l.released.is_none()).count() == 1
    });
    c.agent.as_ref().unwrap().wait_for_log("adopted running container");

    let locks_before = logind.locks().len();
    let (start, start_wall) = (Instant::now(), SystemTime::now());
    logind.prepare_for_shutdown(true);
    logind
        .wait_locks("the lock's release", LONG, |locks| locks[locks_before - 1].released.is_some());
    let released = logind.locks()[locks_before - 1].released.unwrap() - start;
    // Released only once the API server had every pod's last status and the Node's.
    for name in ["low", "web", critical.as_str()] {
        let pod = c.pod(name);
        assert!(failed_by_shutdown(&pod), "{name}: {:?}", pod.status);
    }
    assert!(shutting_down(c.server()), "{:?}", ready(c.server()));
    let logs = c.api.node.path("logs");
    let term = |name: &str| {
        let at = logged_at(&container_log(&logs, name), "got SIGTERM")
            .unwrap_or_else(|| panic!("{name} never got SIGTERM"));
        at.duration_since(start_wall).unwrap_or_default()
    };
    let (low, web, node_critical) = (term("low"), term("web"), term(&critical));
    println!(
        "J3 shutdown timeline (from PrepareForShutdown(true)): priority -10 group SIGTERM at \
         {low:?}, priority 0 group at {web:?}, system-critical group at {node_critical:?}, lock \
         released at {released:?} (logind's delay max {delay_max:?})"
    );
    assert!(
        low < web && web < node_critical,
        "lowest priority first: {low:?} {web:?} {node_critical:?}"
    );
    assert!(node_critical < released, "the lock is released once the last group stopped");
    assert!(released < delay_max, "released within logind's InhibitDelayMaxUSec");
    // Stopped, not removed: the next boot's agent restarts them.
    let states: Vec<String> = c.api.node.tasks().into_iter().map(|(_, s)| s).collect();
    assert_eq!(states, ["STOPPED"; 3]);
}
