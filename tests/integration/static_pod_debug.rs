//! X4 end to end: `outpost debug` adds an ephemeral container to a static pod through the
//! agent's local API (the API server will not change a mirror pod): refused without write
//! credentials; with them, the debug container runs in the pod beside its target, sees
//! the target's processes, and its exit code is `outpost debug -i`'s; the pod's other
//! container is not restarted; the manifest audit records who added it; an agent restart
//! keeps it (its status comes back, and the name is taken).

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::needs;
use outpost_tests::outpost_bin;
use outpost_tests::pods::{Node, container, pod, wait_pod};
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);
const TOKEN: &str = "debug-test-token";
const POD: &str = "default/talk-edge-1";
/// The target's script, recognisable in its `/proc/1/cmdline`.
const SERVE: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";

/// `outpost debug <args>` against `addr`, with the token file unless `None`, `input` on
/// its stdin.
fn debug(addr: &str, token: Option<&std::path::Path>, args: &[&str], input: &[u8]) -> Output {
    let mut command = Command::new(outpost_bin());
    command.args(["debug", "--server", &format!("http://{addr}")]);
    if let Some(token) = token {
        command.arg("--token-file").arg(token);
    }
    command.args(args);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Err(e) = stdin.write_all(input) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "writing to outpost debug: {e}");
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ephemeral_status(p: &Value, name: &str) -> Value {
    let statuses = p["status"]["ephemeralContainerStatuses"].as_array().cloned();
    statuses.into_iter().flatten().find(|s| s["name"] == name).unwrap_or_default()
}

#[needs(pods)]
#[test]
fn x4_outpost_debug_runs_a_shell_beside_a_static_pods_container() {
    let node = Node::new();
    let (agent, token) = node.start_with_token(TOKEN);
    node.run_script_pod(&agent, "talk", "", SERVE);
    let main_id = container(&pod(&agent, "talk-edge-1").unwrap())["containerID"].clone();
    let flags = ["--image", BUSYBOX_IMAGE, "--image-pull-policy", "IfNotPresent"];

    // Without credentials: refused, and nothing is added.
    let mut args = vec![POD, "-c", "debugger-1", "--target", "main"];
    args.extend_from_slice(&flags);
    let out = debug(&agent.addr, None, &args, b"");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let spec = &pod(&agent, "talk-edge-1").unwrap()["spec"];
    assert!(spec.get("ephemeralContainers").is_none(), "{spec}");

    // With them: a shell in the target's PID namespace; its exit code is ours.
    args.extend_from_slice(&["-i", "--", "sh"]);
    let script = b"cat /proc/1/cmdline | tr '\\0' ' '; echo; exit 3\n";
    let out = debug(&agent.addr, Some(&token), &args, script);
    let said = format!("{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("while true; do sleep 0.1"), "the target's pid 1: {said}");
    assert_eq!(out.status.code(), Some(3), "{said}");
    let talk = wait_pod(&agent, "talk-edge-1", LONG, |p| {
        ephemeral_status(p, "debugger-1")["state"]["terminated"]["exitCode"] == 3
    });
    assert_eq!(talk["spec"]["ephemeralContainers"][0]["targetContainerName"], "main");
    assert_eq!(container(&talk)["containerID"], main_id, "main was not restarted");
    assert_eq!(talk["status"]["phase"], "Running");

    // The audit says who added it.
    let (code, body) = agent.get(&format!("/manifests/audit?file={POD}"));
    assert_eq!(code, 200, "{body}");
    let audit: Value = serde_json::from_str(&body).unwrap();
    let entry = audit["items"].as_array().and_then(|items| items.last()).cloned().unwrap();
    assert_eq!(entry["action"], "debugged", "{entry}");
    let writer = entry["writer"]["summary"].as_str().unwrap_or_default().to_owned();
    assert!(writer.contains("ephemeral container debugger-1"), "{entry}");

    // The agent restarts: the container is still the pod's, and its name is taken.
    let addr_before = agent.addr.clone();
    agent.stop();
    let (agent, token) = node.start_with_token(TOKEN);
    assert_ne!(agent.addr, "", "restarted (was {addr_before})");
    let talk = wait_pod(&agent, "talk-edge-1", LONG, |p| {
        ephemeral_status(p, "debugger-1")["state"]["terminated"]["exitCode"] == 3
            && container(p)["state"]["running"].is_object()
    });
    assert_eq!(container(&talk)["containerID"], main_id, "adopted, not restarted");
    let mut again = vec![POD, "-c", "debugger-1"];
    again.extend_from_slice(&flags);
    let out = debug(&agent.addr, Some(&token), &again, b"");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("Duplicate value: \"debugger-1\""), "{err}");
}
