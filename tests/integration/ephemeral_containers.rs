//! X1-X3 with real kubectl 1.33 (WebSockets) through the test API server's
//! upgrade-aware proxy: `kubectl debug` adds an ephemeral container to a running API pod
//! through `pods/ephemeralcontainers`, the agent starts it in the pod's sandbox beside
//! its target, and kubectl attaches to it (N3); `--profile=general` and
//! `--profile=sysadmin` give it their security contexts.

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use outpost_tests::api_pods::{api_pod, state};
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::kubectl::{Client, NodeApi, clients};
use outpost_tests::needs;
use serde_json::json;

/// The target's process, recognisable in `ps`.
const APP: &str = "sleep 31337";

/// A node running `web`, whose container `app` runs [`APP`] as its pid 1.
fn web() -> NodeApi {
    let api = NodeApi::start(&[]);
    let app = json!({"name": "app", "command": ["sh", "-c", format!("exec {APP}")]});
    api.cluster.create_pod(api_pod("web", app, json!({})));
    api.cluster.wait("web", "app running", |p| state(p, "app")["running"].is_object());
    api
}

/// kubectl 1.33 over WebSockets.
fn kubectl_133() -> Client {
    clients().into_iter().find(|c| c.version == "1.33" && !c.spdy).unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `kubectl debug -i web` with `args`, whose shell runs `script` from its stdin; what
/// it printed.
fn debug(api: &NodeApi, client: &Client, args: &[&str], script: &str) -> (String, String) {
    let mut all =
        vec!["debug", "-i", "web", "--image", BUSYBOX_IMAGE, "--image-pull-policy", "IfNotPresent"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "sh"]);
    let out = api.kubectl(client, &all, format!("{script}\nexit\n").as_bytes());
    (text(&out.stdout), text(&out.stderr))
}

/// The ephemeral containers' statuses the agent reported.
fn ephemeral_statuses(api: &NodeApi) -> Vec<serde_json::Value> {
    let pod = api.cluster.pod("web");
    let pod = serde_json::to_value(pod).unwrap();
    pod.pointer("/status/ephemeralContainerStatuses")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default()
}

#[needs(pods, kubectl)]
#[test]
fn x1_x3_kubectl_debug_target_reaches_a_shell_that_sees_the_targets_processes() {
    let api = web();
    let client = kubectl_133();
    let app_before = api.cluster.pid_of("default", "web", "app");
    let (out, err) =
        debug(&api, &client, &["--target", "app"], "cat /proc/1/cmdline | tr '\\0' ' '; echo; ps");
    assert!(out.contains(APP), "the target's pid 1 and ps: {out}\n{err}");
    // X2: the app was neither restarted nor recreated; X3: the status says how the
    // debugger ended, and the pod stays Running and Ready.
    assert_eq!(api.cluster.pid_of("default", "web", "app"), app_before);
    let pod = api.cluster.wait("web", "the debugger terminated", |p| {
        let p = serde_json::to_value(p).unwrap();
        p.pointer("/status/ephemeralContainerStatuses/0/state/terminated").is_some()
    });
    let status = pod.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let statuses = ephemeral_statuses(&api);
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert_eq!(statuses[0]["image"], BUSYBOX_IMAGE);
    assert_eq!(statuses[0]["ready"], false);
    assert_eq!(statuses[0]["restartCount"], 0);
    println!("kubectl debug --target | {} | ok", client.label());
}

/// The effective capabilities (`CapEff`) of the debugger's shell.
fn capabilities(out: &str) -> u64 {
    let line = out.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap_or_default();
    u64::from_str_radix(line.trim(), 16).unwrap_or(0)
}

#[needs(pods, kubectl)]
#[test]
fn x1_kubectl_debug_profiles_general_and_sysadmin_set_the_security_context() {
    let api = web();
    let client = kubectl_133();
    const SYS_PTRACE: u64 = 1 << 19;
    const SYS_ADMIN: u64 = 1 << 21;
    let read = "grep CapEff /proc/self/status";
    let (out, err) = debug(&api, &client, &["--target", "app", "--profile", "general"], read);
    let general = capabilities(&out);
    assert!(general & SYS_PTRACE != 0, "general adds SYS_PTRACE: {out}\n{err}");
    assert!(general & SYS_ADMIN == 0, "general is not privileged: {out}");
    let (out, err) = debug(&api, &client, &["--profile", "sysadmin"], read);
    let sysadmin = capabilities(&out);
    assert!(sysadmin & SYS_ADMIN != 0, "sysadmin is privileged: {out}\n{err}");
    let statuses = ephemeral_statuses(&api);
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    println!("kubectl debug --profile general, sysadmin | {} | ok", client.label());
}

/// Not a pass/fail test: `kubectl debug -it` to its shell's first prompt, a few times,
/// and the median (the figure issue 50 asks for). Run with `--ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn x1_kubectl_debug_it_to_a_prompt_p50() {
    let api = web();
    let client = kubectl_133();
    let mut times = Vec::new();
    for _ in 0..5 {
        let mut kubectl = client.command(
            api.kubeconfig(),
            &[
                "debug",
                "-it",
                "web",
                "--image",
                BUSYBOX_IMAGE,
                "--image-pull-policy",
                "IfNotPresent",
                "--target",
                "app",
                "--",
                "sh",
            ],
        );
        kubectl.stdin(Stdio::null());
        let line = shell_line(&kubectl);
        let started = Instant::now();
        let mut script = std::process::Command::new("script")
            .args(["-qfc", &line, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = script.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut byte = [0u8; 1];
            let mut hinted = false;
            while let Ok(1) = stdout.read(&mut byte) {
                seen.push(byte[0]);
                // kubectl attaches after the shell printed its first prompt, and says so.
                if !hinted && text(&seen).contains("If you don't see a command prompt") {
                    hinted = true;
                    let _ = tx.send("hint");
                }
                if hinted && seen.ends_with(b"# ") {
                    let _ = tx.send("prompt");
                    return;
                }
            }
        });
        let hint = rx.recv_timeout(Duration::from_secs(60));
        let _ = script.stdin.as_mut().unwrap().write_all(b"\n");
        let prompt = rx.recv_timeout(Duration::from_secs(60));
        let took = started.elapsed();
        let _ = script.stdin.as_mut().unwrap().write_all(b"exit\n");
        let _ = script.kill();
        let _ = script.wait();
        assert_eq!((hint, prompt), (Ok("hint"), Ok("prompt")));
        times.push(took);
    }
    times.sort();
    println!("kubectl debug -it to a prompt: {times:?}, p50 {:?}", times[times.len() / 2]);
}

/// `command` as one shell line (for `script -c`), its environment included.
fn shell_line(command: &std::process::Command) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut words: Vec<String> = command
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, quote(v?.to_str()?))))
        .collect();
    words.push(quote(command.get_program().to_str().unwrap()));
    words.extend(command.get_args().map(|a| quote(a.to_str().unwrap())));
    words.join(" ")
}
