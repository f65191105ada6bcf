//! End to end: manifests in a directory become real containers under the test
//! containerd, with runc and the CNI plugins (each test on its own [`Node`]).

use outpost_tests::needs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, container, eventually, pod, wait_pod};

const LONG: Duration = Duration::from_secs(60);

/// A static pod manifest: one busybox container running `script` with `sh -c`.
fn manifest(name: &str, script: &str, spec: &str) -> String {
    let script = serde_json::to_string(script).unwrap();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec}  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {script}]\n"
    )
}

/// A shell script that runs until SIGTERM (as PID 1, sh only dies of a trapped signal).
const SERVE: &str = "trap 'echo bye; exit 0' TERM; echo hello; while true; do sleep 0.1; done";

fn http_get(addr: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET / HTTP/1.0\r\nHost: pod\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

fn running(p: &serde_json::Value) -> bool {
    p["status"]["phase"] == "Running" && container(p)["state"]["running"].is_object()
}

fn uid(p: &serde_json::Value) -> String {
    p["metadata"]["uid"].as_str().unwrap().to_owned()
}

fn container_id(p: &serde_json::Value) -> String {
    let id = container(p)["containerID"].as_str().unwrap();
    id.trim_start_matches("containerd://").to_owned()
}

#[needs(pods)]
#[test]
fn a_dropped_manifest_runs_and_serves_on_its_pod_ip() {
    let node = Node::new();
    let agent = node.start();
    let script = "mkdir -p /www && echo hello-from-the-pod > /www/index.html && echo serving; exec httpd -f -p 8080 -h /www";
    node.put("web.yaml", &manifest("web", script, ""));
    let p = wait_pod(&agent, "web-edge-1", LONG, running);
    let ip = p["status"]["podIP"].as_str().expect("a pod IP").to_owned();
    assert!(ip.starts_with(node.subnet.trim_end_matches("0/24")), "{ip} in {}", node.subnet);
    assert_eq!(container(&p)["ready"], true);
    assert_eq!(container(&p)["restartCount"], 0);
    eventually("the pod serves on its IP", LONG, || {
        http_get(&format!("{ip}:8080")).is_some_and(|r| r.contains("hello-from-the-pod"))
    });
    // Its log, CRI format, where kubelet puts it.
    let log = node.path("logs").join(format!("default_web-edge-1_{}", uid(&p))).join("main/0.log");
    eventually("the container log is written", LONG, || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains(" stdout F serving"))
    });
    // Written by the node logger, the small binary beside the agent: one process for the
    // node, none per container, not the agent's own binary (issue 38).
    assert!(loggers_of(&log).is_empty(), "{:?}", loggers_of(&log));
    let state = node.path("run/logger");
    let loggers: Vec<Vec<String>> = node.node_loggers().into_iter().map(|(_, args)| args).collect();
    assert_eq!(
        loggers,
        [vec![
            outpost_tests::container_log_bin().display().to_string(),
            "node".to_owned(),
            "--state-dir".to_owned(),
            state.display().to_string(),
            "--socket".to_owned(),
            state.join("logger.sock").display().to_string(),
        ]]
    );
}

/// The command lines of the processes whose arguments name `log`.
fn loggers_of(log: &Path) -> Vec<Vec<String>> {
    outpost_leaks::processes()
        .into_iter()
        .filter(|p| p.args.iter().any(|a| Path::new(a) == log))
        .map(|p| p.args)
        .collect()
}

#[needs(pods)]
#[test]
fn a_deleted_manifest_stops_the_pod_and_leaves_nothing_behind() {
    let node = Node::new();
    let agent = node.start();
    node.put("gone.yaml", &manifest("gone", SERVE, ""));
    let p = wait_pod(&agent, "gone-edge-1", LONG, running);
    let uid = uid(&p);
    assert_eq!(node.containers().len(), 1);
    node.remove("gone.yaml");
    eventually("the pod is gone from /pods", LONG, || pod(&agent, "gone-edge-1").is_none());
    eventually("containerd has no container left", LONG, || node.containers().is_empty());
    agent.wait_for_log(&format!("pod sandbox removed pod.uid=\"{uid}\""));
    assert!(node.tasks().is_empty(), "tasks: {:?}", node.tasks());
    let snapshots = node.ctr(&["snapshots", "list"]);
    assert!(!snapshots.contains("Active"), "no active snapshot is left: {snapshots}");
    assert_eq!(node.leftovers(&uid), Vec::<String>::new());
    let logs = std::fs::read_to_string(
        node.path("logs").join(format!("default_gone-edge-1_{uid}")).join("main/0.log"),
    )
    .unwrap();
    assert!(logs.contains(" stdout F bye"), "SIGTERM reached the container first: {logs}");
}

#[needs(pods)]
#[test]
fn an_edited_manifest_replaces_the_pod_only_after_the_old_one_stopped() {
    let node = Node::new();
    let agent = node.start();
    node.put("app.yaml", &manifest("app", SERVE, ""));
    let old = wait_pod(&agent, "app-edge-1", LONG, running);
    let old_id = container_id(&old);
    node.put("app.yaml", &manifest("app", &format!("echo v2; {SERVE}"), ""));
    let new = wait_pod(&agent, "app-edge-1", LONG, |p| running(p) && uid(p) != uid(&old));
    assert_ne!(container_id(&new), old_id);
    // M10: the old pod was stopped and its sandbox removed before the new one's
    // container started.
    let removed = format!("pod sandbox removed pod.uid=\"{}\"", uid(&old));
    agent.wait_for_log(&removed);
    let log = agent.log();
    let stopped = log.find(&removed);
    let started = log.rfind("container started");
    assert!(
        stopped.is_some() && started.is_some() && stopped < started,
        "M10 order in the log:\n{log}"
    );
    eventually("only the new container is left", LONG, || {
        node.containers() == [container_id(&new)]
    });
    assert_eq!(node.leftovers(&uid(&old)), Vec::<String>::new());
}

#[needs(pods)]
#[test]
fn a_crashing_container_is_restarted_with_backoff_and_counted() {
    let node = Node::new();
    let agent = node.start();
    node.put("crash.yaml", &manifest("crash", "echo attempt; exit 3", ""));
    let p = wait_pod(&agent, "crash-edge-1", LONG, |p| {
        container(p)["restartCount"].as_i64().unwrap_or(0) >= 2
    });
    let last = &container(&p)["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 3);
    assert_eq!(last["reason"], "Error");
    assert_eq!(p["status"]["phase"], "Running", "restartPolicy Always keeps the pod Running");
    let p = wait_pod(&agent, "crash-edge-1", LONG, |p| {
        container(p)["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    });
    assert!(container(&p)["state"]["waiting"]["message"].as_str().unwrap().contains("back-off"));
    // One log file per run, with that run's output; those of runs older than the last
    // dead one go with their containers (G1: kubelet keeps one dead container).
    let dir = node.path("logs").join(format!("default_crash-edge-1_{}", uid(&p))).join("main");
    let runs = || -> Vec<String> {
        let names = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name());
        names.map(|n| n.into_string().unwrap()).collect()
    };
    eventually("the first run's log goes with its container", LONG, || {
        !runs().contains(&"0.log".to_owned())
    });
    // The loop goes on meanwhile: a file listed may be collected before it is read (its
    // run is two behind by then), and the newest run may not have printed yet.
    let mut names = runs();
    names.sort_by_key(|n| n.trim_end_matches(".log").parse::<u32>().unwrap());
    let newest = names.pop();
    for name in names {
        let Ok(log) = std::fs::read_to_string(dir.join(&name)) else { continue };
        assert!(log.contains("stdout F attempt"), "{name}: {log}");
    }
    if let Some(name) = newest
        && let Ok(log) = std::fs::read_to_string(dir.join(&name))
    {
        assert!(log.is_empty() || log.contains("stdout F attempt"), "{name}: {log}");
    }
    // Exited containers are replaced, not piled up.
    eventually("one container per restart is kept at most", LONG, || node.containers().len() <= 1);
}

#[needs(pods)]
#[test]
fn restart_policies_on_failure_and_never_end_the_pod() {
    let node = Node::new();
    let agent = node.start();
    node.put("ok.yaml", &manifest("ok", "echo done", "  restartPolicy: OnFailure\n"));
    node.put("fail.yaml", &manifest("fail", "exit 1", "  restartPolicy: Never\n"));
    node.put("retry.yaml", &manifest("retry", "exit 2", "  restartPolicy: OnFailure\n"));
    let ok = wait_pod(&agent, "ok-edge-1", LONG, |p| p["status"]["phase"] == "Succeeded");
    let done = &container(&ok)["state"]["terminated"];
    assert_eq!((done["exitCode"].as_i64(), done["reason"].as_str()), (Some(0), Some("Completed")));
    assert_eq!(container(&ok)["restartCount"], 0);
    let fail = wait_pod(&agent, "fail-edge-1", LONG, |p| p["status"]["phase"] == "Failed");
    assert_eq!(container(&fail)["state"]["terminated"]["exitCode"], 1);
    assert_eq!(container(&fail)["restartCount"], 0);
    let retry = wait_pod(&agent, "retry-edge-1", LONG, |p| {
        container(p)["restartCount"].as_i64().unwrap_or(0) >= 1
    });
    assert_eq!(retry["status"]["phase"], "Running", "OnFailure restarts a failed container");
}

#[needs(pods)]
#[test]
fn an_oom_killed_container_is_reported_as_oomkilled() {
    let node = Node::new();
    let agent = node.start();
    let hog = "a=xxxxxxxxxxxxxxxx; while true; do a=\"$a$a\"; done";
    let yaml = manifest("hog", hog, "  restartPolicy: Never\n")
        + "    resources:\n      limits:\n        memory: 24Mi\n";
    node.put("hog.yaml", &yaml);
    let p = wait_pod(&agent, "hog-edge-1", LONG, |p| p["status"]["phase"] == "Failed");
    let t = &container(&p)["state"]["terminated"];
    assert_eq!(t["reason"], "OOMKilled", "{p:#}");
    assert_eq!(t["exitCode"], 137);
}

#[needs(pods)]
#[test]
fn a_missing_image_is_err_image_pull_and_other_pods_still_run() {
    let node = Node::new();
    let agent = node.start();
    let yaml = manifest("lost", "true", "").replace(BUSYBOX_IMAGE, "127.0.0.1:9/nowhere/image:1");
    node.put("lost.yaml", &yaml);
    node.put("fine.yaml", &manifest("fine", SERVE, ""));
    let lost = wait_pod(&agent, "lost-edge-1", LONG, |p| {
        container(p)["state"]["waiting"]["reason"] == "ErrImagePull"
    });
    assert!(
        container(&lost)["state"]["waiting"]["message"].as_str().unwrap().contains("127.0.0.1:9"),
        "the reason names the registry: {lost:#}"
    );
    wait_pod(&agent, "lost-edge-1", LONG, |p| {
        container(p)["state"]["waiting"]["reason"] == "ImagePullBackOff"
    });
    wait_pod(&agent, "fine-edge-1", LONG, running);
}

#[needs(pods)]
#[test]
fn a_bad_cni_config_is_a_clear_pod_status_and_host_network_pods_still_run() {
    let node = Node::new();
    node.write_cni(
        r#"{"cniVersion":"1.0.0","name":"broken","plugins":[{"type":"no-such-plugin"}]}"#,
    );
    let agent = node.start();
    node.put("net.yaml", &manifest("net", SERVE, ""));
    node.put("host.yaml", &manifest("host", SERVE, "  hostNetwork: true\n"));
    let p = wait_pod(&agent, "net-edge-1", LONG, |p| {
        p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "PodReadyToStartContainers" && c["status"] == "False")
    });
    let condition = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodReadyToStartContainers")
        .unwrap()
        .clone();
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("no-such-plugin") && message.contains("10-test.conflist"),
        "{message}"
    );
    assert_eq!(container(&p)["state"]["waiting"]["reason"], "ContainerCreating");
    let host = wait_pod(&agent, "host-edge-1", LONG, running);
    assert!(host["status"]["podIP"].is_string(), "a hostNetwork pod has the node's IP");
    // Fixed config: the waiting pod starts on its next retry.
    node.write_cni(&node.bridge_conflist());
    wait_pod(&agent, "net-edge-1", LONG, running);
}

#[needs(pods)]
#[test]
fn after_kill_9_running_containers_are_adopted_not_restarted() {
    let node = Node::new();
    let agent = node.start();
    node.put("keep.yaml", &manifest("keep", SERVE, ""));
    let before = wait_pod(&agent, "keep-edge-1", LONG, running);
    agent.signal("KILL");
    drop(agent);
    let agent = node.start();
    agent.wait_for_log("adopted running container");
    let after = wait_pod(&agent, "keep-edge-1", LONG, running);
    assert_eq!(container_id(&after), container_id(&before), "the same container, adopted");
    assert_eq!(container(&after)["restartCount"], 0);
    assert_eq!(after["status"]["podIP"], before["status"]["podIP"], "the same network");
    assert_eq!(node.containers(), [container_id(&before)], "no duplicate");
}

#[needs(pods)]
#[test]
fn kill_9_mid_start_then_restart_leaves_one_pod_and_no_leaks() {
    let node = Node::new();
    let agent = node.start();
    node.put("mid.yaml", &manifest("mid", SERVE, ""));
    agent.wait_for_log("attached pod to CNI network");
    agent.signal("KILL");
    drop(agent);
    let agent = node.start();
    let p = wait_pod(&agent, "mid-edge-1", LONG, running);
    // One task runs. A container the killed agent had created but not started is adopted
    // as exited and replaced; it stays as the container's one dead container (G1's
    // per-container limit), so there are one or two containers, never more.
    eventually("one running task", LONG, || {
        let tasks = node.tasks();
        tasks.len() == 1 && tasks[0].1 == "RUNNING"
    });
    let containers = node.containers();
    assert!((1..=2).contains(&containers.len()), "{containers:?}");
    // A pod removed while the agent is down is cleaned up once the sources are seen (M9).
    agent.signal("KILL");
    drop(agent);
    node.remove("mid.yaml");
    let agent = node.start();
    eventually("the leftover pod is removed", LONG, || node.containers().is_empty());
    agent.wait_for_log("removed a pod left by an earlier run");
    eventually("nothing is left on the host", LONG, || node.leftovers(&uid(&p)).is_empty());
}

/// The agent killed (SIGKILL) while it stops a pod, then started again: the pod's
/// container is gone and so is its shim. (containerd 1.6 leaves a shim running when the
/// caller of its task's deletion goes away mid-call; the next start ends such shims.)
#[needs(pods)]
#[test]
fn kill_9_mid_stop_then_restart_leaves_no_container_and_no_shim() {
    let node = Node::new();
    let agent = node.start();
    node.put("stop.yaml", &manifest("stop", SERVE, ""));
    let p = wait_pod(&agent, "stop-edge-1", LONG, running);
    node.remove("stop.yaml");
    agent.wait_for_log("stopping pod");
    agent.signal("KILL");
    drop(agent);
    let agent = node.start();
    eventually("the pod's containers are removed", LONG, || node.containers().is_empty());
    eventually("no shim is left for the node's namespace", LONG, || {
        outpost_tests::workload::shims(&node.namespace).is_empty()
    });
    eventually("nothing is left on the host", LONG, || node.leftovers(&uid(&p)).is_empty());
    drop(agent);
}

/// `--containerd managed`: the agent's own containerd is killed under it; the agent
/// restarts it, reconnects, and the pod keeps running (the same container; its exits are
/// still seen afterwards). A shim the killed containerd had started but the new one does
/// not know (a task deletion or creation cut short by the kill) is ended on reconnect.
#[needs(pods)]
#[test]
fn containerd_restarted_under_the_agent_is_reconnected_and_pods_keep_running() {
    let node = Node::new();
    let mut args = node.args();
    let at = args.iter().position(|a| a == "--containerd-socket").unwrap();
    args.drain(at..at + 2);
    let mode = args.iter().position(|a| a == "external").unwrap();
    args[mode] = "managed".into();
    let agent = outpost_tests::agent::Agent::start_pods(&node.manifests(), &args);
    agent.wait_for_log("started the managed containerd");
    let socket = node.path("run/containerd/containerd.sock");
    let ctr = |args: &[&str]| {
        let out = std::process::Command::new("ctr")
            .arg("--address")
            .arg(&socket)
            .args(["--namespace", &node.namespace])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "ctr {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let image = outpost_tests::containerd::test_image(outpost_tests::containerd::BUSYBOX_OCI);
    let imported = std::process::Command::new(outpost_tests::outpost_bin())
        .args([
            "images",
            "import",
            "--containerd-namespace",
            &node.namespace,
            "--containerd-socket",
        ])
        .arg(&socket)
        .arg(&image)
        .status()
        .unwrap();
    assert!(imported.success());
    node.put("steady.yaml", &manifest("steady", SERVE, ""));
    let before = wait_pod(&agent, "steady-edge-1", LONG, running);

    let (lost_shim, lost_socket, _log) = start_lost_shim(&node, &socket);
    let pid_file = node.path("run/containerd/containerd.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
    assert!(killed.success());
    agent.wait_for_log("containerd event stream subscribed again");
    let tasks = ctr(&["tasks", "list"]);
    assert!(tasks.contains(&container_id(&before)) && tasks.contains("RUNNING"), "{tasks}");
    let after = wait_pod(&agent, "steady-edge-1", LONG, running);
    assert_eq!(container_id(&after), container_id(&before), "the pod kept running");
    eventually("the shim the new containerd does not know has ended", LONG, || {
        !outpost_tests::workload::shims(&node.namespace).contains(&lost_shim)
    });
    agent.wait_for_log("ended a shim left serving no task");
    assert!(!lost_socket.exists(), "a shim ended by SIGTERM removes its socket");

    // Exits still reach the agent through the new event stream.
    ctr(&["tasks", "kill", "--signal", "SIGKILL", &container_id(&before)]);
    wait_pod(&agent, "steady-edge-1", LONG, |p| running(p) && container(p)["restartCount"] == 1);
    // Leave nothing in the managed containerd.
    node.remove("steady.yaml");
    eventually("the pod is removed", LONG, || ctr(&["containers", "list", "--quiet"]).is_empty());
    // A graceful stop stops the managed containerd too; a SIGKILL (the harness's drop)
    // would leave it running after the test, its state dir gone.
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    agent.stop();
    let alive = || nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    eventually("the managed containerd has exited", LONG, || !alive());
}

/// Starts a runc shim for the node's namespace at containerd `socket` the way containerd
/// does (`start` in a bundle dir holding a spec and the `log` fifo), but with no task: what a
/// containerd killed mid-delete or mid-create leaves. Returns its pid, its socket, and
/// the fifo's reading end (kept open for the shim's writes).
fn start_lost_shim(node: &Node, socket: &Path) -> (u32, PathBuf, std::fs::File) {
    let bundle = node.path("lost-shim");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(bundle.join("config.json"), "{}").unwrap();
    nix::unistd::mkfifo(&bundle.join("log"), nix::sys::stat::Mode::from_bits_truncate(0o600))
        .unwrap();
    let log = std::fs::OpenOptions::new().read(true).write(true).open(bundle.join("log")).unwrap();
    let out = std::process::Command::new("containerd-shim-runc-v2")
        .args(["-namespace", &node.namespace, "-id", "lost-shim", "-address"])
        .arg(socket)
        .args(["-publish-binary", "containerd", "start"])
        .current_dir(&bundle)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "containerd-shim-runc-v2 start: {out:?}");
    let address = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let lost_socket = PathBuf::from(address.trim_start_matches("unix://"));
    assert!(lost_socket.exists(), "{address}");
    let shims = outpost_tests::workload::shims(&node.namespace);
    let pid = shims.into_iter().find(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains("\0lost-shim\0")
    });
    (pid.expect("the lost shim runs"), lost_socket, log)
}

/// Node shutdown: by default SIGTERM ends the agent and leaves its pods
/// running for the next agent to adopt; with `--stop-pods-on-shutdown` each pod's
/// containers get SIGTERM first, as kubelet's graceful node shutdown does.
#[needs(pods)]
#[test]
fn sigterm_leaves_pods_running_unless_told_to_stop_them() {
    let node = Node::new();
    let agent = node.start();
    node.put("stay.yaml", &manifest("stay", SERVE, ""));
    let p = wait_pod(&agent, "stay-edge-1", LONG, running);
    agent.stop();
    let id = container_id(&p);
    assert_eq!(
        node.tasks(),
        [(id.clone(), "RUNNING".to_owned())],
        "the agent's exit is not the pod's"
    );

    let mut args = node.args();
    args.push("--stop-pods-on-shutdown".into());
    let agent = outpost_tests::agent::Agent::start_pods(&node.manifests(), &args);
    agent.wait_for_log("adopted running container");
    agent.signal("TERM");
    agent.wait_for_log("node shutdown: every pod is stopped");
    agent.stop();
    assert_eq!(node.tasks(), [(id, "STOPPED".to_owned())], "stopped, left for the next agent");
    let logs = std::fs::read_to_string(
        node.path("logs").join(format!("default_stay-edge-1_{}", uid(&p))).join("main/0.log"),
    )
    .unwrap();
    assert!(logs.contains(" stdout F bye"), "SIGTERM reached the container: {logs}");

    // The next agent restarts it (restartPolicy Always).
    let agent = node.start();
    eventually("the pod runs again", LONG, || {
        pod(&agent, "stay-edge-1")
            .is_some_and(|p| running(&p) && container(&p)["restartCount"] == 1)
    });
}
