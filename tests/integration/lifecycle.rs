//! End to end: lifecycle hooks (SEMANTICS.md L1, L2) with each handler (exec, httpGet,
//! sleep), starting from kubernetes.io's "Attach Handlers to Container Lifecycle Events"
//! (`lifecycle-events.yaml`: a postStart that writes `/usr/share/message`, a preStop that
//! stops the server gracefully and waits for it), busybox's httpd standing in for nginx.
//! What the hooks and the containers' SIGTERM traps do is written to hostPath files the
//! tests own, so the order of hook and stop signal is seen from outside.

use outpost_tests::needs;
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, eventually, pod, wait_pod};
use outpost_tests::workload::{
    Workload, delete_and_wait, find_event, host_dir, is_running, lines, pretty, restarts, shims,
    status_of, text,
};

const LONG: Duration = Duration::from_secs(60);

/// Whether `first` and then `second` are among `lines`, in that order.
fn in_order(lines: &[String], first: &str, second: &str) -> bool {
    let at = |line: &str| lines.iter().position(|l| l == line);
    matches!((at(first), at(second)), (Some(a), Some(b)) if a < b)
}

/// L1, L2 (exec): the example's postStart file is there (read with `outpost exec`); on
/// delete its preStop stops the server and waits for it to be gone, and only then does the
/// container get SIGTERM; nothing is left behind.
#[needs(pods)]
#[test]
fn the_lifecycle_example_writes_its_message_and_stops_gracefully_before_sigterm() {
    let node = Node::new();
    let hooks = host_dir(&node, "hooks");
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: lifecycle-demo
spec:
  containers:
  - name: lifecycle-demo-container
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'echo TERM >> /hooks/order; exit 0' TERM; mkdir -p /www; httpd -f -p 80 -h /www & while true; do sleep 1; done"
    lifecycle:
      postStart:
        exec:
          command: ["/bin/sh", "-c", "echo Hello from the postStart handler > /usr/share/message"]
      preStop:
        exec:
          command: ["/bin/sh", "-c", "echo preStop >> /hooks/order; killall httpd; while killall -0 httpd; do sleep 1; done; echo httpd-gone >> /hooks/order"]
    volumeMounts:
    - name: hooks
      mountPath: /hooks
  volumes:
  - name: hooks
    hostPath:
      path: {hooks}
      type: Directory
"#,
        hooks = hooks.display()
    );
    node.put("lifecycle-events.yaml", &yaml);
    let name = "lifecycle-demo-edge-1";
    let p =
        wait_pod(&w.agent, name, LONG, |p| is_running(status_of(p, "lifecycle-demo-container")));
    let uid = p["metadata"]["uid"].as_str().unwrap().to_owned();

    let out = w.exec("default/lifecycle-demo-edge-1", None, &["cat", "/usr/share/message"]);
    assert!(out.status.success(), "outpost exec: {}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello from the postStart handler\n",
        "the postStart handler's file: {}",
        text(&out)
    );

    node.remove("lifecycle-events.yaml");
    eventually("the pod is gone", LONG, || pod(&w.agent, name).is_none());
    eventually("containerd has no container left", LONG, || node.containers().is_empty());
    eventually("no shim is left", LONG, || shims(&node.namespace).is_empty());
    let order = lines(&hooks.join("order"));
    assert!(
        in_order(&order, "preStop", "httpd-gone") && in_order(&order, "httpd-gone", "TERM"),
        "expected preStop, httpd-gone (the hook's end), then TERM (the trap); seen {order:?}"
    );
    eventually("nothing is left on the host", LONG, || node.leftovers(&uid).is_empty());
}

/// L1: a postStart hook runs right after the container started, and the container is not
/// `Running` until it returns (here it waits for a file the test writes); a failing
/// postStart (httpGet to a port nobody listens on) kills the container, with the Event
/// `FailedPostStartHook`, and it is restarted by its restartPolicy.
#[needs(pods)]
#[test]
fn post_start_holds_running_until_it_returns_and_a_failing_one_kills_the_container() {
    let node = Node::new();
    let hooks = host_dir(&node, "hooks");
    let w = Workload::start(&node);
    let waits = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: post-start-waits
spec:
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'exit 0' TERM; while true; do sleep 1; done"
    lifecycle:
      postStart:
        exec:
          command: ["/bin/sh", "-c", "echo running > /hooks/post-start; while [ ! -e /hooks/go ]; do sleep 0.2; done"]
    volumeMounts:
    - name: hooks
      mountPath: /hooks
  volumes:
  - name: hooks
    hostPath:
      path: {hooks}
      type: Directory
"#,
        hooks = hooks.display()
    );
    let fails = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: post-start-fails
spec:
  containers:
  - name: main
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'exit 0' TERM; while true; do sleep 1; done"
    lifecycle:
      postStart:
        httpGet:
          path: /started
          port: 8081
"#
    );
    node.put("post-start-waits.yaml", &waits);
    node.put("post-start-fails.yaml", &fails);

    let waiting = "post-start-waits-edge-1";
    eventually("the postStart hook runs", LONG, || hooks.join("post-start").exists());
    let p = pod(&w.agent, waiting).unwrap();
    let main = status_of(&p, "main");
    assert!(!is_running(main), "not Running while postStart runs: {}", pretty(&p));
    assert_eq!(main["ready"], false, "{}", pretty(&p));
    std::fs::write(hooks.join("go"), "").unwrap();
    let p = wait_pod(&w.agent, waiting, LONG, |p| is_running(status_of(p, "main")));
    assert_eq!(restarts(status_of(&p, "main")), 0, "{}", pretty(&p));

    let failing = "post-start-fails-edge-1";
    let p = wait_pod(&w.agent, failing, LONG, |p| restarts(status_of(p, "main")) >= 1);
    let events = w.events("default", failing);
    let hook = find_event(&events, "FailedPostStartHook", "");
    assert!(
        hook.is_some_and(|e| e["type"] == "Warning"
            && e["involvedObject"]["fieldPath"] == "spec.containers{main}"),
        "a Warning FailedPostStartHook about the container: {}",
        pretty(&events)
    );
    assert!(
        status_of(&p, "main")["lastState"]["terminated"].is_object(),
        "the container was killed: {}",
        pretty(&p)
    );
    let pods = [("post-start-fails.yaml", failing), ("post-start-waits.yaml", waiting)];
    delete_and_wait(&node, &w.agent, &pods);
}

/// L2 (httpGet, sleep, exec): each container's preStop runs before its SIGTERM; one that
/// hangs (an exec sleeping an hour) does not hold the pod past its grace period: it is cut
/// off, and the container still gets SIGTERM, as kubelet's `killContainer` gives every
/// container a last window (`minimumGracePeriodInSeconds`, 2 s) to act on SIGTERM when
/// its preStop hook used up the grace period; then the pod is removed.
#[needs(pods)]
#[test]
fn pre_stop_runs_before_sigterm_and_a_hanging_one_is_cut_at_the_grace_period() {
    let node = Node::new();
    let hooks = host_dir(&node, "hooks");
    let www = host_dir(&node, "www");
    std::fs::create_dir_all(www.join("cgi-bin")).unwrap();
    let cgi = "#!/bin/sh\necho \"$QUERY_STRING\" >> /hooks/web\n\
               echo 'Content-Type: text/plain'\necho\necho ok\n";
    std::fs::write(www.join("cgi-bin/hook"), cgi).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let executable = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(www.join("cgi-bin/hook"), executable).unwrap();
    }
    let w = Workload::start(&node);
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: pre-stop
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: web
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'echo TERM >> /hooks/web; exit 0' TERM; httpd -f -p 8080 -h /www & while true; do sleep 1; done"
    readinessProbe:
      httpGet:
        path: /cgi-bin/hook?ready
        port: 8080
      periodSeconds: 1
    lifecycle:
      preStop:
        httpGet:
          path: /cgi-bin/hook?preStop
          port: 8080
    volumeMounts:
    - name: hooks
      mountPath: /hooks
    - name: www
      mountPath: /www
  - name: sleeper
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'echo TERM >> /hooks/sleeper; exit 0' TERM; echo started >> /hooks/sleeper; while true; do sleep 1; done"
    lifecycle:
      preStop:
        sleep:
          seconds: 1
    volumeMounts:
    - name: hooks
      mountPath: /hooks
  - name: hangs
    image: {BUSYBOX_IMAGE}
    imagePullPolicy: IfNotPresent
    args:
    - /bin/sh
    - -c
    - "trap 'echo TERM >> /hooks/hangs; exit 0' TERM; while true; do sleep 1; done"
    lifecycle:
      preStop:
        exec:
          command: ["/bin/sh", "-c", "echo preStop >> /hooks/hangs; sleep 3600; echo preStop-ended >> /hooks/hangs"]
    volumeMounts:
    - name: hooks
      mountPath: /hooks
  volumes:
  - name: hooks
    hostPath:
      path: {hooks}
      type: Directory
  - name: www
    hostPath:
      path: {www}
      type: Directory
"#,
        hooks = hooks.display(),
        www = www.display()
    );
    node.put("pre-stop.yaml", &yaml);
    let name = "pre-stop-edge-1";
    // Running, and the web container's server answers (its readiness probe passed).
    let p = wait_pod(&w.agent, name, LONG, |p| {
        ["web", "sleeper", "hangs"].iter().all(|c| is_running(status_of(p, c)))
            && status_of(p, "web")["ready"] == true
    });
    let uid = p["metadata"]["uid"].as_str().unwrap().to_owned();

    node.remove("pre-stop.yaml");
    eventually("the pod is gone", LONG, || pod(&w.agent, name).is_none());
    eventually("containerd has no container left", LONG, || node.containers().is_empty());
    eventually("no shim is left", LONG, || shims(&node.namespace).is_empty());
    let web = lines(&hooks.join("web"));
    assert!(
        in_order(&web, "preStop", "TERM"),
        "web: expected its httpGet preStop, then TERM; seen {web:?}"
    );
    let sleeper = lines(&hooks.join("sleeper"));
    assert!(
        sleeper.contains(&"TERM".to_owned()),
        "sleeper got SIGTERM after its sleep hook: {sleeper:?}"
    );
    let hangs = lines(&hooks.join("hangs"));
    assert!(
        hangs.first().is_some_and(|l| l == "preStop") && !hangs.contains(&"preStop-ended".into()),
        "hangs: its preStop started and was cut off, not waited for: {hangs:?}"
    );
    eventually("nothing is left on the host", LONG, || node.leftovers(&uid).is_empty());
    // Last, as it is about the signal rather than the pod's removal.
    assert!(
        in_order(&hangs, "preStop", "TERM"),
        "hangs: expected its exec preStop to start, then SIGTERM once the grace period cut \
         it off (kubelet's 2 s minimum window), not a bare SIGKILL; seen {hangs:?}"
    );
}
