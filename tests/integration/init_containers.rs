//! End to end: init containers and native sidecars (SEMANTICS.md I1–I3), with pods shaped
//! as kubernetes.io's examples: the sidecar that writes the app's configuration and
//! holds the app back with its startup probe (the native sidecar example), and an init
//! container that waits on a service that never answers (the init container example;
//! here a loopback port nobody listens on).

use outpost_tests::needs;
use std::process::Command;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::outpost_bin;
use outpost_tests::pods::{Node, eventually, pod, wait_pod};
use outpost_tests::workload::{Workload, delete_and_wait, free_ports, is_running, status_of};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// The status of the init container `name` (`Value::Null` if it has none yet).
fn init_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == name))
        .unwrap_or(&Value::Null)
}

/// What the container wrote to its log.
fn logs(w: &Workload, pod: &str, container: &str) -> String {
    w.logs("default", pod, container)
}

/// The STATUS column `outpost pods` shows for `name`.
fn pods_status(w: &Workload, name: &str) -> Option<String> {
    let out = Command::new(outpost_bin())
        .args(["pods", "-n", "default", "--server", &format!("http://{}", w.agent.addr)])
        .output()
        .expect("run outpost pods");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = table.lines().find(|l| l.split_whitespace().next() == Some(name))?;
    row.split_whitespace().nth(2).map(str::to_owned)
}

/// I3: the sidecar writes the configuration and passes its startup probe before the app
/// container starts, so the app reads it (`greeting=hello`); the sidecar runs beside it
/// and the pod is Ready.
#[needs(pods)]
#[test]
fn i3_the_native_sidecar_example_configures_the_app_before_it_starts() {
    let node = Node::new();
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: myapp
  labels:
    app: myapp
spec:
  initContainers:
  - name: config-writer
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "sleep 2; echo greeting=hello > /config/app.conf.tmp; mv /config/app.conf.tmp /config/app.conf; exec sleep 3600"]
    startupProbe:
      exec:
        command: ["cat", "/config/app.conf"]
      periodSeconds: 1
      failureThreshold: 30
    volumeMounts:
    - name: config
      mountPath: /config
  containers:
  - name: myapp
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "cat /config/app.conf; exec sleep 3600"]
    volumeMounts:
    - name: config
      mountPath: /config
  volumes:
  - name: config
    emptyDir: {{}}
"#
    );
    node.put("sidecar-startup-coordination.yaml", &yaml);
    let name = "myapp-edge-1";
    let p = wait_pod(&w.agent, name, LONG, |p| is_running(status_of(p, "myapp")));
    let sidecar = init_status(&p, "config-writer");
    assert!(is_running(sidecar), "the sidecar keeps running: {sidecar}");
    assert_eq!(sidecar["started"], true, "{sidecar}");
    eventually("the app printed its configuration", LONG, || {
        logs(&w, name, "myapp").contains("greeting=hello")
    });
    let p = wait_pod(&w.agent, name, LONG, |p| {
        p["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    });
    assert_eq!(p["status"]["phase"], "Running");
    assert_eq!(pods_status(&w, name).as_deref(), Some("Running"));
    delete_and_wait(&node, &w.agent, &[("sidecar-startup-coordination.yaml", name)]);
}

/// I1, I2: an init container that cannot reach its service fails, is retried with
/// crash-loop backoff, and the app container never starts; `outpost pods` shows
/// `Init:CrashLoopBackOff` (then `Init:0/2` while it runs again), as kubectl does.
#[needs(pods)]
#[test]
fn i2_an_init_container_that_cannot_reach_its_service_holds_the_app_back() {
    let node = Node::new();
    let w = Workload::start(&node);
    let [port] = free_ports::<1>();
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: myapp-pod
  labels:
    app.kubernetes.io/name: MyApp
spec:
  containers:
  - name: myapp-container
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ['sh', '-c', 'echo The app is running! && sleep 3600']
  initContainers:
  - name: init-myservice
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ['sh', '-c', 'wget -q -T 2 -O /dev/null http://127.0.0.1:{port}/ || {{ echo waiting for myservice; exit 1; }}']
  - name: init-mydb
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ['sh', '-c', 'echo mydb is up']
"#
    );
    node.put("init-containers.yaml", &yaml);
    let name = "myapp-pod-edge-1";
    let p = wait_pod(&w.agent, name, LONG, |p| {
        init_status(p, "init-myservice")["restartCount"].as_i64() >= Some(2)
    });
    assert_eq!(p["status"]["phase"], "Pending");
    let app = status_of(&p, "myapp-container");
    assert_eq!(app["state"]["waiting"]["reason"], "PodInitializing", "{app}");
    assert!(init_status(&p, "init-mydb")["state"]["waiting"].is_object(), "init-mydb waits");
    let last = &init_status(&p, "init-myservice")["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 1, "{last}");
    // The run that ended (its successor may be running and not have printed yet).
    let path = format!("/containerLogs/default/{name}/init-myservice?previous=true");
    let (status, previous) = w.agent.get(&path);
    assert_eq!(status, 200, "GET {path}: {previous}");
    assert!(previous.contains("waiting for myservice"), "{previous}");
    let initialized = p["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Initialized").cloned())
        .unwrap_or_default();
    assert_eq!(initialized["status"], "False", "{initialized}");
    assert_eq!(
        initialized["message"],
        "containers with incomplete status: [init-myservice init-mydb]"
    );
    eventually("outpost pods shows Init:CrashLoopBackOff", LONG, || {
        pods_status(&w, name).as_deref() == Some("Init:CrashLoopBackOff")
    });
    // The app container was never created.
    let p = pod(&w.agent, name).expect("the pod");
    assert!(status_of(&p, "myapp-container")["containerID"].is_null());
    delete_and_wait(&node, &w.agent, &[("init-containers.yaml", name)]);
}

/// I1, I3: init containers run in order, each to success, the sidecar between them
/// started before the next; a job-shaped pod (restartPolicy Never) completes with
/// Succeeded while its sidecar still ran, and the sidecar is then stopped, not restarted.
#[needs(pods)]
#[test]
fn i1_i3_init_containers_run_in_order_and_a_pod_completes_past_its_sidecar() {
    let node = Node::new();
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: batch
spec:
  restartPolicy: Never
  initContainers:
  - name: first
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo first >> /work/order"]
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: logshipper
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "echo logshipper >> /work/order; trap 'exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: second
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo second >> /work/order"]
    volumeMounts: [{{name: work, mountPath: /work}}]
  containers:
  - name: job
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "cat /work/order; echo job done"]
    volumeMounts: [{{name: work, mountPath: /work}}]
  volumes:
  - name: work
    emptyDir: {{}}
"#
    );
    node.put("batch.yaml", &yaml);
    let name = "batch-edge-1";
    let p = wait_pod(&w.agent, name, LONG, |p| p["status"]["phase"] == "Succeeded");
    let job = status_of(&p, "job");
    assert_eq!(job["state"]["terminated"]["reason"], "Completed", "{job}");
    assert_eq!(logs(&w, name, "job"), "first\nlogshipper\nsecond\njob done\n");
    let p = wait_pod(&w.agent, name, LONG, |p| {
        init_status(p, "logshipper")["state"]["terminated"].is_object()
    });
    let sidecar = init_status(&p, "logshipper");
    assert_eq!(sidecar["restartCount"], 0, "stopped for good: {sidecar}");
    assert_eq!(p["status"]["phase"], "Succeeded");
    assert_eq!(pods_status(&w, name).as_deref(), Some("Completed"));
    delete_and_wait(&node, &w.agent, &[("batch.yaml", name)]);
}

/// `activeDeadlineSeconds`: past it the pod fails with DeadlineExceeded and its
/// containers are stopped, not restarted.
#[needs(pods)]
#[test]
fn the_active_deadline_fails_the_pod_and_stops_it() {
    let node = Node::new();
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: deadline
spec:
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
"#
    );
    node.put("deadline.yaml", &yaml);
    let name = "deadline-edge-1";
    let p = wait_pod(&w.agent, name, LONG, |p| {
        p["status"]["phase"] == "Failed" && status_of(p, "main")["state"]["terminated"].is_object()
    });
    assert_eq!(p["status"]["reason"], "DeadlineExceeded");
    assert_eq!(
        p["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    assert_eq!(status_of(&p, "main")["restartCount"], 0);
    let events = w.events("default", name);
    assert!(events.iter().any(|e| e["reason"] == "DeadlineExceeded"), "{events:?}");
    delete_and_wait(&node, &w.agent, &[("deadline.yaml", name)]);
}
