//! End to end: liveness, readiness and startup probes of real containers (SEMANTICS.md
//! P1–P5), one pod per handler, each carrying all three probe types, shaped as
//! kubernetes.io's probe examples ("Configure Liveness, Readiness and Startup Probes":
//! `exec-liveness`, `http-liveness`, `tcp-liveness-readiness`, `grpc-liveness`, and the
//! startup probe's `liveness-port`) with their fields and values; busybox stands in for
//! images we do not have (agnhost, goproxy) and periods and thresholds are small.
//!
//! | handler   | passes                       | fails                                   |
//! |-----------|------------------------------|-----------------------------------------|
//! | exec      | startup, liveness            | readiness (then passes, then fails)     |
//! | httpGet   | startup (late), readiness    | startup (at first), liveness (restart)  |
//! | tcpSocket | startup, liveness, readiness | startup of a second container (restart) |
//! | grpc      | startup, liveness, readiness | readiness of an unknown service         |
//!
//! The tests control a probe's outcome through files in hostPath volumes they own, so
//! they depend on nothing but the probes themselves.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::containerd::{BUSYBOX_IMAGE, ETCD_IMAGE, ETCD_OCI};
use outpost_tests::pods::{Node, eventually, pod, wait_pod};
use outpost_tests::workload::{
    Workload, condition, container_id, delete_and_wait, event_count, find_event, host_dir, import,
    is_running, lines, pretty, restarts, status_of,
};

const LONG: Duration = Duration::from_secs(60);

/// P1, P4, P5 (exec): `successThreshold` consecutive successes make a container ready;
/// one failure (`failureThreshold: 1`) makes it unready again, without a restart. The
/// startup and liveness probes (exec, passing) start it and leave it running.
#[needs(pods)]
#[test]
fn exec_readiness_needs_its_success_threshold_and_flips_back_without_a_restart() {
    let node = Node::new();
    let probe = host_dir(&node, "probe");
    let w = Workload::start(&node);
    // kubernetes.io's exec-liveness pod (its `cat /tmp/healthy`) with the readiness probe
    // of "Define readiness probes"; the readiness file is on a hostPath the test owns, and
    // each readiness run is logged there.
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  labels:
    test: liveness
  name: liveness-exec
spec:
  containers:
  - name: liveness
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "touch /tmp/healthy; trap 'exit 0' TERM; while true; do sleep 1; done"
    startupProbe:
      exec:
        command: [cat, /tmp/healthy]
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec:
        command: [cat, /tmp/healthy]
      initialDelaySeconds: 1
      periodSeconds: 1
    readinessProbe:
      exec:
        command:
        - sh
        - -c
        - "if cat /probe/ready; then echo ok >> /probe/runs; else echo fail >> /probe/runs; exit 1; fi"
      periodSeconds: 1
      successThreshold: 2
      failureThreshold: 1
    volumeMounts:
    - name: probe
      mountPath: /probe
  volumes:
  - name: probe
    hostPath:
      path: {probe}
      type: Directory
"#,
        probe = probe.display()
    );
    node.put("liveness-exec.yaml", &yaml);
    let name = "liveness-exec-edge-1";
    let c = |p: &serde_json::Value| status_of(p, "liveness").clone();

    // Started (the startup probe passed), running, and not ready: readiness fails.
    let p = wait_pod(&w.agent, name, LONG, |p| is_running(&c(p)) && c(p)["started"] == true);
    let runs = probe.join("runs");
    eventually("the readiness probe runs and fails twice", LONG, || {
        lines(&runs).iter().filter(|l| *l == "fail").count() >= 2
    });
    let p2 = pod(&w.agent, name).unwrap();
    assert_eq!(c(&p2)["ready"], false, "readiness fails: {}", pretty(&p2));
    assert_eq!(condition(&p2, "ContainersReady"), Some("False"), "{}", pretty(&p2));
    assert_eq!(condition(&p2, "Ready"), Some("False"), "{}", pretty(&p2));
    let id = container_id(&c(&p));

    // Ready after two consecutive successes (successThreshold: 2), not after one.
    std::fs::write(probe.join("ready"), "yes\n").unwrap();
    let ready = wait_pod(&w.agent, name, LONG, |p| c(p)["ready"] == true);
    let log = lines(&runs);
    let trailing_ok = log.iter().rev().take_while(|l| *l == "ok").count();
    assert!(
        trailing_ok >= 2,
        "ready after {trailing_ok} success(es); successThreshold is 2; runs: {log:?}"
    );
    assert_eq!(condition(&ready, "ContainersReady"), Some("True"), "{}", pretty(&ready));
    assert_eq!(condition(&ready, "Ready"), Some("True"), "{}", pretty(&ready));

    // One failure (failureThreshold: 1): unready again; the container keeps running.
    std::fs::remove_file(probe.join("ready")).unwrap();
    let unready = wait_pod(&w.agent, name, LONG, |p| c(p)["ready"] == false);
    assert_eq!(condition(&unready, "Ready"), Some("False"), "{}", pretty(&unready));
    assert!(is_running(&c(&unready)), "readiness never stops a container: {}", pretty(&unready));
    assert_eq!(restarts(&c(&unready)), 0, "readiness never restarts: {}", pretty(&unready));
    assert_eq!(container_id(&c(&unready)), id, "the same container: {}", pretty(&unready));
    let events = w.events("default", name);
    assert!(
        find_event(&events, "Unhealthy", "Readiness probe failed:").is_some(),
        "an Unhealthy event for the readiness failures: {}",
        pretty(&events)
    );
    assert!(
        find_event(&events, "Killing", "").is_none(),
        "nothing was killed: {}",
        pretty(&events)
    );
    delete_and_wait(&node, &w.agent, &[("liveness-exec.yaml", name)]);
}

/// P1, P2, P3, P5 (httpGet): until the startup probe passes the container is neither
/// started nor ready, and neither liveness nor readiness runs (a liveness probe with
/// `failureThreshold: 1` on the same failing URL would otherwise kill it); then a failing
/// liveness probe restarts it, with the Events `Unhealthy` and `Killing`; the new
/// container waits for its startup probe again. The readiness probe carries
/// http-liveness's `Custom-Header: Awesome`, and answers 200 only when it arrives.
#[needs(pods)]
#[test]
fn http_startup_gates_liveness_and_readiness_and_a_failing_liveness_restarts() {
    let node = Node::new();
    let www = host_dir(&node, "www");
    std::fs::create_dir_all(www.join("cgi-bin")).unwrap();
    // Ready when the probe's header arrives; each request is logged.
    let ready_cgi = "#!/bin/sh\n\
        echo \"$HTTP_CUSTOM_HEADER $HTTP_USER_AGENT\" >> /www/requests\n\
        if [ \"$HTTP_CUSTOM_HEADER\" = Awesome ]; then echo 'Status: 200 OK'; else echo 'Status: 400 Bad Request'; fi\n\
        echo 'Content-Type: text/plain'\necho\necho ready\n";
    std::fs::write(www.join("cgi-bin/ready"), ready_cgi).unwrap();
    set_executable(&www.join("cgi-bin/ready"));
    let w = Workload::start(&node);
    // http-liveness (agnhost's `/healthz` on 8080 with Custom-Header: Awesome) with the
    // startup probe of "Protect slow starting containers" (`liveness-port`,
    // failureThreshold 30, the liveness probe's failureThreshold 1), busybox's httpd
    // serving a hostPath the test owns.
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  labels:
    test: liveness
  name: liveness-http
spec:
  containers:
  - name: liveness
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'exit 0' TERM; httpd -f -p 8080 -h /www & while true; do sleep 1; done"
    ports:
    - name: liveness-port
      containerPort: 8080
    livenessProbe:
      httpGet:
        path: /healthz
        port: liveness-port
        httpHeaders:
        - name: Custom-Header
          value: Awesome
      failureThreshold: 1
      periodSeconds: 1
    readinessProbe:
      httpGet:
        path: /cgi-bin/ready
        port: 8080
        httpHeaders:
        - name: Custom-Header
          value: Awesome
      periodSeconds: 1
    startupProbe:
      httpGet:
        path: /healthz
        port: liveness-port
      failureThreshold: 30
      periodSeconds: 1
    volumeMounts:
    - name: www
      mountPath: /www
  volumes:
  - name: www
    hostPath:
      path: {www}
      type: Directory
"#,
        www = www.display()
    );
    node.put("liveness-http.yaml", &yaml);
    let name = "liveness-http-edge-1";
    let c = |p: &serde_json::Value| status_of(p, "liveness").clone();

    // No /healthz yet: the startup probe fails (404), a few times.
    wait_pod(&w.agent, name, LONG, |p| is_running(&c(p)));
    eventually("the startup probe fails three times", LONG, || {
        event_count(&w.events("default", name), "Unhealthy", "Startup probe failed:") >= 3
    });
    let p = pod(&w.agent, name).unwrap();
    let events = w.events("default", name);
    assert_eq!(c(&p)["started"], false, "{}", pretty(&p));
    assert_eq!(c(&p)["ready"], false, "{}", pretty(&p));
    assert_eq!(condition(&p, "Ready"), Some("False"), "{}", pretty(&p));
    assert_eq!(restarts(&c(&p)), 0, "liveness does not run before startup passed: {}", pretty(&p));
    assert!(
        find_event(&events, "Unhealthy", "Liveness probe failed:").is_none(),
        "liveness does not run before startup passed: {}",
        pretty(&events)
    );
    assert!(
        lines(&www.join("requests")).is_empty(),
        "readiness does not run before startup passed: {:?}",
        lines(&www.join("requests"))
    );
    let first = container_id(&c(&p));

    // /healthz appears: started, then ready (the readiness probe sent its header).
    std::fs::write(www.join("healthz"), "ok\n").unwrap();
    let p = wait_pod(&w.agent, name, LONG, |p| c(p)["started"] == true && c(p)["ready"] == true);
    assert_eq!(condition(&p, "Ready"), Some("True"), "{}", pretty(&p));
    assert_eq!(restarts(&c(&p)), 0, "{}", pretty(&p));
    let requests = lines(&www.join("requests"));
    assert!(
        requests.iter().any(|r| r.starts_with("Awesome kube-probe/")),
        "the readiness probe sends its httpHeaders and kube-probe's User-Agent: {requests:?}"
    );

    // /healthz is gone: liveness fails once (failureThreshold 1) and the container is
    // killed and started again, as a new container that waits for its startup probe.
    std::fs::remove_file(www.join("healthz")).unwrap();
    let p = wait_pod(&w.agent, name, LONG, |p| restarts(&c(p)) == 1 && is_running(&c(p)));
    assert_ne!(container_id(&c(&p)), first, "a new container: {}", pretty(&p));
    assert_eq!(c(&p)["started"], false, "the new container has not started: {}", pretty(&p));
    assert_eq!(c(&p)["ready"], false, "{}", pretty(&p));
    let events = w.events("default", name);
    let unhealthy = find_event(&events, "Unhealthy", "Liveness probe failed:");
    assert!(
        unhealthy
            .is_some_and(|e| e["type"] == "Warning"
                && e["message"].as_str().is_some_and(|m| m.contains("404"))),
        "Unhealthy (Warning): Liveness probe failed: ... 404: {}",
        pretty(&events)
    );
    assert!(
        find_event(
            &events,
            "Killing",
            "Container liveness failed liveness probe, will be restarted"
        )
        .is_some(),
        "Killing: Container liveness failed liveness probe, will be restarted: {}",
        pretty(&events)
    );
    std::fs::write(www.join("healthz"), "ok\n").unwrap();
    let p = wait_pod(&w.agent, name, LONG, |p| c(p)["started"] == true && c(p)["ready"] == true);
    assert_eq!(restarts(&c(&p)), 1, "{}", pretty(&p));
    delete_and_wait(&node, &w.agent, &[("liveness-http.yaml", name)]);
}

/// P2, P4, P5 (tcpSocket): tcp-liveness-readiness (goproxy's TCP port 8080, readiness and
/// liveness, with a startup probe on it too) passes all three; a second container whose
/// startup probe connects to a port nobody listens on is killed and restarted like a
/// failed liveness (P2), and keeps the pod from being Ready (P4).
#[needs(pods)]
#[test]
fn tcp_probes_pass_on_a_listening_port_and_a_failed_startup_probe_restarts() {
    let node = Node::new();
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: goproxy
  labels:
    app.kubernetes.io/name: goproxy
spec:
  containers:
  - name: goproxy
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'exit 0' TERM; mkdir -p /www; httpd -f -p 8080 -h /www & while true; do sleep 1; done"
    ports:
    - containerPort: 8080
    startupProbe:
      tcpSocket:
        port: 8080
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      tcpSocket:
        port: 8080
      initialDelaySeconds: 1
      periodSeconds: 1
    livenessProbe:
      tcpSocket:
        port: 8080
      initialDelaySeconds: 1
      periodSeconds: 1
  - name: silent
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'exit 0' TERM; while true; do sleep 1; done"
    startupProbe:
      tcpSocket:
        port: 8081
      periodSeconds: 1
      failureThreshold: 2
"#
    );
    node.put("goproxy.yaml", &yaml);
    let name = "goproxy-edge-1";
    let p = wait_pod(&w.agent, name, LONG, |p| {
        status_of(p, "goproxy")["ready"] == true && restarts(status_of(p, "silent")) >= 1
    });
    let goproxy = status_of(&p, "goproxy");
    assert_eq!(goproxy["started"], true, "{}", pretty(&p));
    assert_eq!(restarts(goproxy), 0, "its liveness probe passes: {}", pretty(&p));
    assert_eq!(status_of(&p, "silent")["ready"], false, "{}", pretty(&p));
    assert_eq!(condition(&p, "ContainersReady"), Some("False"), "{}", pretty(&p));
    assert_eq!(condition(&p, "Ready"), Some("False"), "{}", pretty(&p));
    let events = w.events("default", name);
    assert!(
        find_event(&events, "Unhealthy", "Startup probe failed:").is_some(),
        "Unhealthy: Startup probe failed: {}",
        pretty(&events)
    );
    assert!(
        find_event(&events, "Killing", "Container silent failed startup probe, will be restarted")
            .is_some(),
        "Killing: Container silent failed startup probe, will be restarted: {}",
        pretty(&events)
    );
    assert!(
        !failed_after_startup(&events, "goproxy"),
        "goproxy's liveness and readiness probes pass: {}",
        pretty(&events)
    );
    delete_and_wait(&node, &w.agent, &[("goproxy.yaml", name)]);
}

/// P5 (grpc): kubernetes.io's grpc-liveness pod (etcd serving grpc.health.v1 on its
/// client port 2379) with startup and readiness probes on the same port: started, ready,
/// never restarted. A second container asks the same server about a service it does not
/// know (NOT_FOUND): that readiness probe fails, and the pod is not Ready.
#[needs(pods)]
#[test]
fn grpc_probes_ask_etcd_for_its_health() {
    let node = Node::new();
    import(&node, ETCD_OCI);
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: etcd-with-grpc
spec:
  containers:
  - name: etcd
    image: {ETCD_IMAGE}
    imagePullPolicy: IfNotPresent
    command: [/usr/local/bin/etcd, --data-dir, /var/lib/etcd, --listen-client-urls, "http://0.0.0.0:2379", --advertise-client-urls, "http://127.0.0.1:2379", --log-level, debug]
    ports:
    - containerPort: 2379
    startupProbe:
      grpc:
        port: 2379
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      grpc:
        port: 2379
      initialDelaySeconds: 1
      periodSeconds: 1
    readinessProbe:
      grpc:
        port: 2379
      periodSeconds: 1
  - name: unknown-service
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'exit 0' TERM; while true; do sleep 1; done"
    readinessProbe:
      grpc:
        port: 2379
        service: no-such-service
      periodSeconds: 1
"#
    );
    node.put("etcd-with-grpc.yaml", &yaml);
    let name = "etcd-with-grpc-edge-1";
    let p = wait_pod(&w.agent, name, LONG, |p| status_of(p, "etcd")["ready"] == true);
    assert_eq!(status_of(&p, "etcd")["started"], true, "{}", pretty(&p));
    // The server answers NOT_FOUND (earlier failures may be "connection refused", before
    // etcd listened).
    let not_found = |events: &[serde_json::Value]| {
        events.iter().any(|e| {
            e["reason"] == "Unhealthy"
                && e["involvedObject"]["fieldPath"] == "spec.containers{unknown-service}"
                && e["message"].as_str().is_some_and(|m| {
                    m.starts_with("Readiness probe failed:") && m.contains("NotFound")
                })
        })
    };
    eventually("the unknown service's readiness probe fails with NotFound", LONG, || {
        not_found(&w.events("default", name))
    });
    let p = pod(&w.agent, name).unwrap();
    let events = w.events("default", name);
    assert_eq!(restarts(status_of(&p, "etcd")), 0, "its liveness probe passes: {}", pretty(&p));
    assert_eq!(status_of(&p, "etcd")["ready"], true, "{}", pretty(&p));
    assert_eq!(status_of(&p, "unknown-service")["ready"], false, "{}", pretty(&p));
    assert!(is_running(status_of(&p, "unknown-service")), "{}", pretty(&p));
    assert_eq!(condition(&p, "Ready"), Some("False"), "{}", pretty(&p));
    assert!(
        !failed_after_startup(&events, "etcd"),
        "etcd's liveness and readiness probes pass: {}",
        pretty(&events)
    );
    delete_and_wait(&node, &w.agent, &[("etcd-with-grpc.yaml", name)]);
}

/// Whether a liveness or readiness probe of `container` failed (they run only once its
/// startup probe passed; a startup probe may fail before the server listens).
fn failed_after_startup(events: &[serde_json::Value], container: &str) -> bool {
    let field_path = format!("spec.containers{{{container}}}");
    events.iter().any(|e| {
        e["reason"] == "Unhealthy"
            && e["involvedObject"]["fieldPath"] == field_path.as_str()
            && !e["message"].as_str().unwrap_or_default().starts_with("Startup probe failed:")
    })
}

fn set_executable(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
