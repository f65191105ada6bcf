//! End to end (N3): `/portForward` over a WebSocket, as kubelet serves it, into a real
//! pod's network namespace: Python's `websockets` (a client that is not ours) forwards
//! two ports of busybox `httpd` servers that listen on the pod's loopback only, and a
//! third port where nothing listens, whose error channel says so.

use outpost_tests::needs;
use std::path::PathBuf;
use std::process::Command;

use outpost_tests::agent::Agent;
use outpost_tests::pods::Node;

const TOKEN: &str = "port-forward-test-token";

/// A node running the pod `web` (`web-edge-1`): `httpd` on 127.0.0.1:8080 and on
/// 127.0.0.1:8081 of the pod's own loopback, each serving its own page.
struct Running {
    agent: Agent,
    node: Node,
    _token: PathBuf,
}

fn running() -> Running {
    let node = Node::new();
    let (agent, token) = node.start_with_token(TOKEN);
    let script = "mkdir -p /a /b && echo page-a > /a/index.html && echo page-b > /b/index.html \
        && httpd -p 127.0.0.1:8080 -h /a && httpd -p 127.0.0.1:8081 -h /b \
        && trap 'exit 0' TERM; while true; do sleep 0.1; done";
    node.run_script_pod(&agent, "web", "", script);
    Running { agent, node, _token: token }
}

/// N3: two ports and a closed one through one WebSocket, kubelet's framing: each
/// channel's first message is its port (little-endian), port `i` answers on channel `2i`,
/// and the closed port's error channel (`2i+1`) carries kubelet's message.
#[needs(pods, python_websockets)]
#[test]
fn n3_python_websockets_forwards_two_ports_and_reports_a_closed_one() {
    let pod = running();
    let uid = outpost_tests::pods::pod(&pod.agent, "web-edge-1").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = pod.node.path("forward.py");
    std::fs::write(&client, WS_CLIENT).unwrap();
    let out = Command::new("/usr/bin/python3")
        .arg(&client)
        .arg(&pod.agent.addr)
        .arg(TOKEN)
        .arg(&uid)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let forward = &report["forward"];
    assert_eq!(forward["protocol"], "v4.channel.k8s.io");
    // Every channel first says its port: 8080 is 0x1f90, little-endian [0x90, 0x1f].
    let prefixes = serde_json::json!({
        "0": [0x90, 0x1f], "1": [0x90, 0x1f],
        "2": [0x91, 0x1f], "3": [0x91, 0x1f],
        "4": [9, 0], "5": [9, 0],
    });
    assert_eq!(forward["prefixes"], prefixes);
    let a = forward["data"]["0"].as_str().unwrap();
    assert!(a.starts_with("HTTP/1.") && a.contains(" 200 "), "{a}");
    assert!(a.ends_with("page-a\n"), "{a}");
    let b = forward["data"]["2"].as_str().unwrap();
    assert!(b.ends_with("page-b\n"), "{b}");
    assert_eq!(forward["data"]["4"], "", "nothing listens on port 9");
    let error = forward["data"]["5"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("error forwarding port 9 to pod web-edge-1, uid {uid}: ")),
        "{error}"
    );
    assert!(error.contains("refused"), "{error}");
    // No error for the ports that answered.
    assert_eq!(forward["data"]["1"], "");
    assert_eq!(forward["data"]["3"], "");
    // Once every connection ended, the session closed normally.
    assert_eq!(forward["close_code"], 1000);

    // The same by the pod's UID, and with no subprotocol (kubelet's binary framing too).
    assert_eq!(report["by_uid"]["data"]["0"].as_str().map(|a| a.ends_with("page-a\n")), Some(true));
    assert_eq!(
        report["no_protocol"]["data"]["2"].as_str().map(|b| b.ends_with("page-b\n")),
        Some(true)
    );

    // What is refused before the upgrade.
    assert_eq!(report["no_token"], 401);
    assert_eq!(report["no_port"], 400);
    assert_eq!(report["port_zero"], 400);
    assert_eq!(report["unknown_pod"], 404);
    assert_eq!(report["exec_protocol_only"], 400);
}

/// Forwards with Python's `websockets`; prints what each session got, as JSON.
const WS_CLIENT: &str = r#"
import asyncio, json, sys, urllib.parse
import websockets

addr, token, uid = sys.argv[1], sys.argv[2], sys.argv[3]
auth = {"Authorization": "Bearer " + token}
REQUEST = b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"

def url(ports, path="default/web-edge-1"):
    query = urllib.parse.urlencode([("port", p) for p in ports])
    return f"ws://{addr}/portForward/{path}?{query}"

async def forward(target, ports, protocols=("v4.channel.k8s.io",), headers=auth):
    try:
        ws = await websockets.connect(target, subprotocols=list(protocols) or None, extra_headers=headers)
    except websockets.exceptions.InvalidStatusCode as refused:
        return refused.status_code
    prefixes, data = {}, {}
    try:
        # Each port's data channel gets the request once both its prefixes came.
        sent = set()
        async for message in asyncio_timeout(ws):
            if isinstance(message, str):
                message = message.encode()
            channel, payload = message[0], message[1:]
            if channel not in prefixes:
                prefixes[channel] = list(payload)
                data[channel] = b""
            else:
                data[channel] += payload
            for i in range(len(ports)):
                if 2 * i in prefixes and 2 * i + 1 in prefixes and i not in sent:
                    sent.add(i)
                    await ws.send(bytes([2 * i]) + REQUEST)
    finally:
        await ws.close()
    return {
        "protocol": ws.subprotocol,
        "prefixes": {str(c): p for c, p in sorted(prefixes.items())},
        "data": {str(c): d.decode(errors="replace") for c, d in sorted(data.items())},
        "close_code": ws.close_code,
    }

async def asyncio_timeout(ws):
    while True:
        try:
            message = await asyncio.wait_for(ws.recv(), 30)
        except websockets.exceptions.ConnectionClosed:
            return
        yield message

async def main():
    report = {
        "forward": await forward(url([8080, 8081, 9]), [8080, 8081, 9]),
        "by_uid": await forward(url([8080], path=f"default/web-edge-1/{uid}"), [8080]),
        "no_protocol": await forward(url([8080, 8081]), [8080, 8081], protocols=()),
        "no_token": await forward(url([8080]), [8080], headers={}),
        "no_port": await forward(url([]), []),
        "port_zero": await forward(url([0]), [0]),
        "unknown_pod": await forward(url([8080], path="default/nobody"), [8080]),
        "exec_protocol_only": await forward(url([8080]), [8080], protocols=("v5.channel.k8s.io",)),
    }
    print(json.dumps(report))

asyncio.run(main())
"#;
