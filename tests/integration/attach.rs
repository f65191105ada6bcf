//! End to end (N3): `/attach` over a WebSocket to a running busybox container: its
//! output as it is written, stdout and stderr on their own channels, until the container
//! exits (then `Success` and a normal close, as kubelet's attach ends); input to a
//! container without `stdin: true` is refused. Input itself is checked with real kubectl
//! (`kubectl.rs`).

use outpost_tests::needs;
use std::process::Command;

use outpost_tests::pods::Node;

const TOKEN: &str = "attach-test-token";

/// N3: Python's `websockets` attaches with kubelet's parameters, reads the container's
/// output split by stream, and gets the end when the container exits.
#[needs(pods, python_websockets)]
#[test]
fn n3_python_websockets_attaches_to_a_containers_output_until_it_exits() {
    let node = Node::new();
    let (agent, _token) = node.start_with_token(TOKEN);
    // Ticks until told to stop (a file), then says goodbye on both streams and exits.
    let script = "i=0; while [ ! -e /tmp/go ]; do echo tick-$i; echo tock-$i >&2; \
        i=$((i+1)); sleep 0.1; done; echo bye; echo oops >&2; exit 3";
    node.run_script_pod(&agent, "chatty", "  restartPolicy: Never\n", script);
    let client = node.path("attach.py");
    std::fs::write(&client, WS_CLIENT).unwrap();
    let out =
        Command::new("/usr/bin/python3").arg(&client).arg(&agent.addr).arg(TOKEN).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let attach = &report["attach"];
    assert_eq!(attach["timed_out"], false, "{attach}");
    assert_eq!(attach["protocol"], "v5.channel.k8s.io");
    let stdout = attach["stdout"].as_str().unwrap();
    let stderr = attach["stderr"].as_str().unwrap();
    // Whole lines from the moment of the attach, each stream on its own channel.
    let ticks: Vec<&str> = stdout.lines().collect();
    assert!(ticks.len() >= 2, "a tick, then the goodbye: {stdout:?}");
    assert_eq!(ticks.last(), Some(&"bye"), "{stdout:?}");
    let first: u32 = ticks[0].strip_prefix("tick-").unwrap().parse().unwrap();
    for (n, tick) in ticks[..ticks.len() - 1].iter().enumerate() {
        assert_eq!(*tick, format!("tick-{}", first + n as u32), "{stdout:?}");
    }
    assert!(stderr.lines().all(|l| l.starts_with("tock-") || l == "oops"), "{stderr:?}");
    assert_eq!(stderr.lines().last(), Some("oops"), "{stderr:?}");
    // kubelet's attach ends with Success whatever the exit code, then a normal close.
    assert_eq!(attach["status"], serde_json::json!({"metadata": {}, "status": "Success"}));
    assert_eq!(attach["close_code"], 1000);

    assert_eq!(report["with_input"], 400);
    assert_eq!(report["no_token"], 401);
    assert_eq!(report["unknown_container"], 404);
}

/// Attaches with Python's `websockets`; once a tick came (the attach follows the output),
/// tells the container to finish through `/run`; prints what each session got, as JSON.
const WS_CLIENT: &str = r#"
import asyncio, json, sys, urllib.parse, urllib.request
import websockets

addr, token = sys.argv[1], sys.argv[2]
auth = {"Authorization": "Bearer " + token}
V5 = ["v5.channel.k8s.io", "v4.channel.k8s.io"]

def url(container, **streams):
    return f"ws://{addr}/attach/default/chatty-edge-1/{container}?" + urllib.parse.urlencode(streams)

def finish():
    request = urllib.request.Request(
        f"http://{addr}/run/default/chatty-edge-1/main?cmd=touch%20/tmp/go", method="POST", headers=auth)
    urllib.request.urlopen(request).read()

async def session(target, headers=auth, tell=False):
    try:
        ws = await websockets.connect(target, subprotocols=V5, extra_headers=headers)
    except websockets.exceptions.InvalidStatusCode as refused:
        return refused.status_code
    got = {1: b"", 2: b"", 3: b""}
    told = timed_out = False
    try:
        while True:
            try:
                message = await asyncio.wait_for(ws.recv(), 60)
            except websockets.exceptions.ConnectionClosed:
                break
            except asyncio.TimeoutError:
                timed_out = True
                break
            if message:
                got[message[0]] = got.get(message[0], b"") + message[1:]
            if tell and not told and b"\n" in got[1]:
                told = True
                await asyncio.to_thread(finish)
    finally:
        await ws.close()
    return {
        "protocol": ws.subprotocol,
        "stdout": got[1].decode(),
        "stderr": got[2].decode(),
        "status": json.loads(got[3]) if got[3] else None,
        "close_code": ws.close_code,
        "told": told,
        "timed_out": timed_out,
    }

async def main():
    report = {
        "with_input": await session(url("main", input="1", output="1")),
        "no_token": await session(url("main", output="1"), headers={}),
        "unknown_container": await session(url("nope", output="1")),
        "attach": await session(url("main", output="1", error="1"), tell=True),
    }
    print(json.dumps(report))

asyncio.run(main())
"#;
