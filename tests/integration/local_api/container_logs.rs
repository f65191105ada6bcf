//! `/containerLogs`: kubelet's parameters on hand-written CRI files of a dry-run agent's
//! pod, following (and stopping when the client goes away), and a real pod's output.

use outpost_tests::needs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use outpost_tests::agent::{Agent, request_head};
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::pods::{Node, container, eventually, wait_pod};

use super::{Dirs, PATIENCE, json};

/// Writes a CRI log file for the pod `web-edge-1`'s container `main`, run `run`.
fn write_log(dirs: &Dirs, uid: &str, run: u32, records: &str) -> PathBuf {
    let dir = dirs.path("logs").join(format!("default_web-edge-1_{uid}/main"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{run}.log"));
    std::fs::write(&path, records).unwrap();
    path
}

fn web_uid(agent: &Agent) -> String {
    let (_, body) = agent.get("/pods");
    json(&body)["items"][0]["metadata"]["uid"].as_str().unwrap().to_owned()
}

#[test]
fn container_logs_read_the_pods_current_files_with_kubelets_parameters() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let base = "/containerLogs/default/web-edge-1/main";
    // Known, but nothing logged yet (a dry run starts no container).
    let (status, body) = agent.get(base);
    assert_eq!(status, 400, "{body}");
    assert!(json(&body)["message"].as_str().unwrap().contains("waiting to start"), "{body}");

    let uid = web_uid(&agent);
    // A directory of an earlier pod of the same name (another UID) is not read.
    let old = dirs.path("logs").join("default_web-edge-1_old-uid/main");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("0.log"), "2024-05-01T09:00:00.000000000Z stdout F stale\n").unwrap();
    write_log(&dirs, &uid, 0, "2024-05-01T10:00:00.000000000Z stdout F first run\n");
    write_log(
        &dirs,
        &uid,
        1,
        "2024-05-01T11:00:00.000000000Z stdout F one\n\
         2024-05-01T11:00:01.000000000Z stderr P tw\n\
         2024-05-01T11:00:02.000000000Z stderr F o\n\
         2024-05-01T11:00:03.000000000Z stdout F three\n",
    );
    assert_eq!(agent.get(base), (200, "one\ntwo\nthree\n".into()));
    assert_eq!(agent.get(&format!("{base}?tailLines=1")).1, "three\n");
    assert_eq!(agent.get(&format!("{base}?limitBytes=6")).1, "one\ntw");
    assert_eq!(agent.get(&format!("{base}?previous=true")).1, "first run\n");
    assert_eq!(
        agent.get(&format!("{base}?sinceTime=2024-05-01T11:00:02Z&timestamps=true")).1,
        "2024-05-01T11:00:03.000000000Z three\n"
    );
    // sinceSeconds counts back from now: these records are older.
    assert_eq!(agent.get(&format!("{base}?sinceSeconds=60")), (200, String::new()));

    for (path, status, reason, named) in [
        ("/containerLogs/default/nope/main".to_owned(), 404, "NotFound", "default/nope"),
        ("/containerLogs/apps/web-edge-1/main".to_owned(), 404, "NotFound", "apps/web-edge-1"),
        ("/containerLogs/default/web-edge-1/other".to_owned(), 404, "NotFound", "other"),
        (format!("{base}?tailLines=ten"), 400, "BadRequest", "tailLines"),
        (format!("{base}?follow=true&previous=true"), 400, "BadRequest", "previous"),
    ] {
        let (got, body) = agent.get(&path);
        assert_eq!(got, status, "{path}: {body}");
        let answer = json(&body);
        assert_eq!(
            (answer["kind"].as_str(), answer["reason"].as_str()),
            (Some("Status"), Some(reason)),
            "{body}"
        );
        assert_eq!(answer["code"], status);
        assert!(answer["message"].as_str().unwrap().contains(named), "{path}: {body}");
    }
}

/// The agent's open inotify instances.
fn inotify_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains("inotify"))
        .count()
}

/// Reads from `stream` until what arrived contains `needle` (a hang fails the test). A
/// read with a timeout is not restarted after a signal: EINTR is retried.
fn read_until(stream: &mut TcpStream, seen: &mut Vec<u8>, needle: &str) {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(seen).contains(needle) {
        let n = match stream.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            read => read.unwrap_or_else(|e| panic!("waiting for {needle:?}: {e}")),
        };
        assert!(n > 0, "closed before {needle:?}: {}", String::from_utf8_lossy(seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn following_container_logs_streams_until_the_client_goes_away() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let uid = web_uid(&agent);
    let log = write_log(&dirs, &uid, 0, "2024-05-01T11:00:00.000000000Z stdout F before\n");
    let before = inotify_fds(agent.pid());

    let mut stream = TcpStream::connect(&agent.addr).unwrap();
    let path = "/containerLogs/default/web-edge-1/main?follow=true";
    stream.write_all(request_head("GET", path, &[], 0).as_bytes()).unwrap();
    let mut seen = Vec::new();
    read_until(&mut stream, &mut seen, "before\n");
    assert!(
        String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    assert!(inotify_fds(agent.pid()) > before, "following watches the directory");
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(b"2024-05-01T11:00:01.000000000Z stdout F after\n").unwrap();
    read_until(&mut stream, &mut seen, "after\n");
    // A restart: the next run's file is followed too.
    write_log(&dirs, &uid, 1, "2024-05-01T11:00:02.000000000Z stdout F restarted\n");
    read_until(&mut stream, &mut seen, "restarted\n");

    drop(stream);
    eventually("the reader stops and its inotify watch goes", PATIENCE, || {
        inotify_fds(agent.pid()) == before
    });
    assert_eq!(agent.get("/healthz").0, 200);
    assert_eq!(agent.get("/containerLogs/default/web-edge-1/main?tailLines=1").1, "restarted\n");
}

#[needs(pods)]
#[test]
fn container_logs_of_a_real_pod_follow_its_output() {
    let node = Node::new();
    let agent = node.start();
    let script = "i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.2; done";
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: talk\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {}]\n",
        serde_json::to_string(script).unwrap()
    );
    node.put("talk.yaml", &manifest);
    wait_pod(&agent, "talk-edge-1", PATIENCE, |p| container(p)["state"]["running"].is_object());
    let path = "/containerLogs/default/talk-edge-1/main";
    let (_, body) = agent
        .poll_within(path, PATIENCE, |status, body| status == 200 && body.contains("line-2\n"));
    assert!(body.starts_with("line-0\nline-1\n"), "{body}");

    let mut stream = TcpStream::connect(&agent.addr).unwrap();
    let head =
        request_head("GET", &format!("{path}?follow=true&tailLines=1&timestamps=true"), &[], 0);
    stream.write_all(head.as_bytes()).unwrap();
    let mut seen = Vec::new();
    // Lines written after the request arrive on it.
    let (_, now) = agent.get(path);
    let next = now.lines().count() + 3;
    read_until(&mut stream, &mut seen, &format!(" line-{next}\n"));
    drop(stream);
    assert_eq!(agent.get("/healthz").0, 200);
}

/// Issue 31: through a crash loop, `previous=true` reads the run the status names as
/// `lastState.terminated` (kubelet's `validateContainerLogStatus`), and the plain read the
/// running run or, during the back-off, the run that ended; the container GC, which runs
/// on every exit, never removes the run the status still names. Both reads are polled
/// as fast as they answer, through restarts 1 to 4 and the back-offs between them, and
/// each must answer 200 with one run's line.
#[needs(pods)]
#[test]
fn previous_follows_the_status_through_a_crash_loop() {
    let node = Node::new();
    let agent = node.start();
    // Each run prints its number (kept in an emptyDir, which outlives the container's
    // runs) and fails.
    let script =
        "n=$(cat /data/n 2>/dev/null || echo 0); echo $((n+1)) > /data/n; echo run-$n; exit 1";
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crash\nspec:\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: data\n    emptyDir: {{}}\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {}]\n    volumeMounts:\n    - name: data\n      mountPath: /data\n",
        serde_json::to_string(script).unwrap()
    );
    node.put("crash.yaml", &manifest);
    let base = "/containerLogs/default/crash-edge-1/main";
    let run_of = |body: &str| -> Option<u32> { body.strip_prefix("run-")?.trim_end().parse().ok() };
    let (mut reads, mut in_back_off, mut last_previous) = (0, 0, 0);
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        assert!(std::time::Instant::now() < deadline, "the pod did not restart 4 times");
        let Some(p) = outpost_tests::pods::pod(&agent, "crash-edge-1") else { continue };
        let c = container(&p);
        let restarts = c["restartCount"].as_i64().unwrap_or(0);
        if !c["lastState"]["terminated"].is_object() {
            continue;
        }
        let waiting = c["state"]["waiting"]["reason"] == "CrashLoopBackOff";
        let (status, previous) = agent.get(&format!("{base}?previous=true"));
        assert_eq!(status, 200, "previous, restart count {restarts}: {previous}");
        let run = run_of(&previous).unwrap_or_else(|| panic!("previous: {previous:?}"));
        assert!(run >= last_previous, "previous went back from run {last_previous} to {run}");
        last_previous = run;
        let (status, current) = agent.get(base);
        assert_eq!(status, 200, "current, restart count {restarts}: {current}");
        // A run that has just started may not have printed yet.
        assert!(current.is_empty() || run_of(&current).is_some(), "current: {current:?}");
        reads += 1;
        in_back_off += usize::from(waiting);
        if restarts >= 4 && in_back_off > 0 {
            break;
        }
    }
    eprintln!(
        "{reads} reads of both, {in_back_off} during a back-off; previous reached run {last_previous}"
    );
    assert!(last_previous >= 2, "previous followed the restarts");
}
