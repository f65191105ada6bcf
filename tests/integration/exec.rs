//! End to end: commands in a running busybox container through the agent's local API:
//! `outpost exec` with stdin, with a terminal (under a pseudo-terminal) and with an exit
//! code; refused without credentials; Python's `websockets` (a client that is not ours)
//! driving kubelet's `/exec` with `v5.channel.k8s.io` and `v4.channel.k8s.io`; and `/run`.

use outpost_tests::needs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::pods::Node;
use outpost_tests::{outpost_bin, write_private};

const LONG: Duration = Duration::from_secs(60);
const TOKEN: &str = "exec-test-token";
const POD: &str = "default/talk-edge-1";

/// A node running the pod `talk` (`talk-edge-1`, container `main`) under an agent with a
/// token (and anonymous loopback reads, which must not let anyone exec).
struct Running {
    agent: Agent,
    token: PathBuf,
    node: Node,
}

fn running() -> Running {
    let node = Node::new();
    let (agent, token) = node.start_with_token(TOKEN);
    node.run_script_pod(&agent, "talk", "", "trap 'exit 0' TERM; while true; do sleep 0.1; done");
    Running { agent, token, node }
}

impl Running {
    /// `outpost exec <args>` against this agent, with the token unless `token` is false,
    /// `input` on its stdin.
    fn exec(&self, args: &[&str], token: bool, input: &[u8]) -> Output {
        // The flags go before `--`: what follows it is the command.
        let mut command = Command::new(outpost_bin());
        command.args(["exec", "--server", &format!("http://{}", self.agent.addr)]);
        if token {
            command.arg("--token-file").arg(&self.token);
        }
        command.args(args);
        run_with_input(command, input)
    }

    fn post(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            bearer.iter().map(|b| ("Authorization", b.as_str())).collect();
        self.agent.request("POST", path, &headers, b"")
    }
}

fn run_with_input(mut command: Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start outpost exec");
    let mut stdin = child.stdin.take().unwrap();
    // `outpost exec` may end before it read everything (its command ended): a closed
    // pipe is its answer, not a failure.
    if let Err(e) = stdin.write_all(input) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "writing to outpost exec: {e}");
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Splits `outpost exec`'s arguments: `[flags..., "--", command...]`.
fn args<'a>(flags: &[&'a str], command: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec![POD];
    all.extend_from_slice(flags);
    all.push("--");
    all.extend_from_slice(command);
    all
}

#[needs(pods)]
#[test]
fn outpost_exec_passes_stdin_output_and_the_exit_code() {
    let pod = running();
    let out = pod.exec(&args(&["-i"], &["cat"]), true, b"hello\nworld\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\nworld\n");

    let out = pod.exec(
        &args(&["-c", "main"], &["sh", "-c", "echo out; echo err >&2; exit 3"]),
        true,
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "the command's exit code: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "out\n");
    assert_eq!(text(&out.stderr), "err\n");

    // A command that reads no stdin ends while more is still coming: no hang.
    let out = pod.exec(&args(&["-i"], &["true"]), true, &vec![b'x'; 4 << 20]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // No -i: the command's stdin is closed at once.
    let out = pod.exec(&args(&[], &["sh", "-c", "cat; echo after"]), true, b"ignored\n");
    assert_eq!((out.status.code(), text(&out.stdout)), (Some(0), "after\n".to_owned()));
}

#[needs(pods)]
#[test]
fn a_command_whose_client_went_away_is_killed() {
    let pod = running();
    let mut client = Command::new(outpost_bin())
        .args(["exec", "--server", &format!("http://{}", pod.agent.addr)])
        .arg("--token-file")
        .arg(&pod.token)
        .args([POD, "--", "sh", "-c", "echo started; exec sleep 7777"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut started = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(client.stdout.take().unwrap()),
        &mut started,
    )
    .unwrap();
    assert_eq!(started, "started\n");
    client.kill().unwrap();
    client.wait().unwrap();
    outpost_tests::pods::eventually("the command is killed", LONG, || {
        let out = pod.exec(&args(&[], &["ps"]), true, b"");
        out.status.success() && !text(&out.stdout).contains("sleep 7777")
    });
    pod.agent.wait_for_log("the exec client went away; the command is killed");
}

#[needs(pods)]
#[test]
fn outpost_exec_errors_are_clear() {
    let pod = running();
    let out = pod.exec(&args(&["-c", "nope"], &["true"]), true, b"");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("container \"nope\" not found in pod default/talk-edge-1"), "{err}");
    assert!(err.contains("its containers: main"), "{err}");

    let out = pod.exec(&["default/nobody", "--", "true"], true, b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("pods \"nobody\" not found"), "{}", text(&out.stderr));

    let out = pod.exec(&args(&[], &["/no/such/binary"]), true, b"");
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[needs(pods)]
#[test]
fn an_unauthenticated_exec_or_run_is_refused() {
    let pod = running();
    // Anonymous loopback reads are on, yet exec is a write.
    let out = pod.exec(&args(&[], &["touch", "/tmp/pwned"]), false, b"");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("refused the request (401)"), "{err}");
    assert!(err.contains("authentication required"), "{err}");

    let wrong = pod.node.path("wrong-token");
    write_private(&wrong, "not-the-token\n");
    let out = Command::new(outpost_bin())
        .args(["exec", POD, "--server", &format!("http://{}", pod.agent.addr)])
        .arg("--token-file")
        .arg(&wrong)
        .args(["--", "touch", "/tmp/pwned"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("(401)"), "{}", text(&out.stderr));

    let (status, body) = pod.post("/run/default/talk-edge-1/main?cmd=touch%20/tmp/pwned", None);
    assert_eq!(status, 401, "{body}");
    // A GET upgrade is no read either.
    let (status, body) = pod.agent.get("/exec/default/talk-edge-1/main?command=true&output=1");
    assert_eq!(status, 401, "{body}");

    // Nothing ran.
    let out = pod.exec(&args(&[], &["test", "-e", "/tmp/pwned"]), true, b"");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[needs(pods)]
#[test]
fn outpost_exec_with_a_tty_gets_a_terminal_of_the_local_size() {
    let pod = running();
    let driver = pod.node.path("pty.py");
    std::fs::write(&driver, PTY_DRIVER).unwrap();
    let out = Command::new("/usr/bin/python3")
        .arg(&driver)
        .arg(outpost_bin())
        .args(["exec", POD, "-i", "-t", "--server", &format!("http://{}", pod.agent.addr)])
        .arg("--token-file")
        .arg(&pod.token)
        // `read` waits for the driver's line, which the client sends after the size.
        .args(["--", "sh", "-c", "read line; echo \"got $line\"; stty size; tty; exit 5"])
        .output()
        .unwrap();
    let screen = text(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{screen}{}", text(&out.stderr));
    assert!(screen.contains("got go\r\n"), "{screen:?}");
    assert!(screen.contains("33 101\r\n"), "the local window's size: {screen:?}");
    assert!(screen.contains("/dev/pts/"), "a terminal: {screen:?}");
    assert!(screen.ends_with("terminal restored\n"), "{screen:?}");
}

/// Runs its arguments on a pseudo-terminal of 33 rows and 101 columns, types `go`, and
/// prints what the terminal showed, then whether the terminal's settings came back;
/// exits with the command's exit code.
const PTY_DRIVER: &str = r#"
import fcntl, os, select, struct, subprocess, sys, termios, time

master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
before = termios.tcgetattr(slave)
child = subprocess.Popen(sys.argv[1:], stdin=slave, stdout=slave, stderr=slave)
os.write(master, b"go\n")
screen = b""
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    ready, _, _ = select.select([master], [], [], 0.1)
    if ready:
        screen += os.read(master, 4096)
    elif child.poll() is not None:
        break
else:
    child.kill()
code = child.wait()
sys.stdout.write(screen.decode(errors="replace"))
if termios.tcgetattr(slave) == before:
    sys.stdout.write("terminal restored\n")
sys.exit(code)
"#;

/// N3: a WebSocket client that is not ours drives `/exec` with kubelet's parameter names
/// (`input`, `output`, `error`), as an API server passes them on.
#[needs(pods, python_websockets)]
#[test]
fn n3_python_websockets_drives_exec_with_v5_and_v4() {
    let pod = running();
    let client = pod.node.path("ws.py");
    std::fs::write(&client, WS_CLIENT).unwrap();
    let out = Command::new("/usr/bin/python3")
        .arg(&client)
        .arg(&pod.agent.addr)
        .arg(TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // v5: stdin, closed by the close-stream message, then a non-zero exit.
    let cat = &report["cat"];
    assert_eq!(cat["protocol"], "v5.channel.k8s.io");
    assert_eq!(cat["stdout"], "hello\n");
    assert_eq!(cat["stderr"], "done\n");
    assert_eq!(
        cat["status"],
        serde_json::json!({
            "metadata": {},
            "status": "Failure",
            "message": "command terminated with non-zero exit code: error executing command [sh -c cat; echo done >&2; exit 4], exit code 4",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "4"}]}
        })
    );
    assert_eq!(cat["close_code"], 1000);

    let ok = &report["true"];
    assert_eq!(ok["status"], serde_json::json!({"metadata": {}, "status": "Success"}));
    assert_eq!(ok["stdout"], "");

    // v4 (no close-stream): output and the status all the same.
    let v4 = &report["v4"];
    assert_eq!(v4["protocol"], "v4.channel.k8s.io");
    assert_eq!(v4["stdout"], "hi\n");
    assert_eq!(v4["status"]["status"], "Success");

    // What is refused before the upgrade, and why.
    assert_eq!(report["no_token"], 401);
    assert_eq!(report["base64_protocol"], 400);
    assert_eq!(report["unknown_container"], 404);
    // N3: the streams go by kubelet's names; `stdout`/`stderr` ask for none.
    assert_eq!(report["outposts_old_names"], 400);
}

/// Drives `/exec` with Python's `websockets`; prints what each session got, as JSON.
const WS_CLIENT: &str = r#"
import asyncio, json, sys, urllib.parse
import websockets

addr, token = sys.argv[1], sys.argv[2]
auth = {"Authorization": "Bearer " + token}

def url(container, command, **streams):
    query = [("command", c) for c in command] + list(streams.items())
    return f"ws://{addr}/exec/default/talk-edge-1/{container}?" + urllib.parse.urlencode(query)

async def session(target, protocols, send=(), headers=auth):
    try:
        ws = await websockets.connect(target, subprotocols=protocols, extra_headers=headers)
    except websockets.exceptions.InvalidStatusCode as refused:
        return refused.status_code
    try:
        for message in send:
            await ws.send(message)
        got = {1: b"", 2: b"", 3: b""}
        async for message in ws:
            if isinstance(message, str):
                message = message.encode()
            if message:
                got[message[0]] = got.get(message[0], b"") + message[1:]
    finally:
        await ws.close()
    return {
        "protocol": ws.subprotocol,
        "stdout": got[1].decode(),
        "stderr": got[2].decode(),
        "status": json.loads(got[3]) if got[3] else None,
        "close_code": ws.close_code,
    }

async def main():
    v5 = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
    report = {
        "cat": await session(
            url("main", ["sh", "-c", "cat; echo done >&2; exit 4"], input="1", output="1", error="1"),
            v5,
            send=[b"\x00hello\n", b"\xff\x00"],
        ),
        "true": await session(url("main", ["true"], output="true", error="true"), v5),
        "v4": await session(url("main", ["echo", "hi"], output="1"), ["v4.channel.k8s.io"]),
        "no_token": await session(url("main", ["true"], output="1"), v5, headers={}),
        "base64_protocol": await session(url("main", ["true"], output="1"), ["base64.channel.k8s.io"]),
        "unknown_container": await session(url("nope", ["true"], output="1"), v5),
        "outposts_old_names": await session(url("main", ["true"], stdout="1", stderr="1"), v5),
    }
    print(json.dumps(report))

asyncio.run(main())
"#;

#[needs(pods)]
#[test]
fn run_answers_the_output_of_a_command() {
    let pod = running();
    let (status, body) =
        pod.post("/run/default/talk-edge-1/main?cmd=echo%20hello%20run", Some(TOKEN));
    assert_eq!((status, body.as_str()), (200, "hello run\n"));

    let p = outpost_tests::pods::pod(&pod.agent, "talk-edge-1").unwrap();
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let (status, body) =
        pod.post(&format!("/run/default/talk-edge-1/{uid}/main?cmd=echo%20by%20uid"), Some(TOKEN));
    assert_eq!((status, body.as_str()), (200, "by uid\n"));

    // kubelet's split: `sh -c exit 7` would be `sh` `-c` `exit` `7`.
    let (status, body) =
        pod.post("/run/default/talk-edge-1/main?cmd=cat%20/nonexistent", Some(TOKEN));
    assert_eq!(status, 500, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["kind"], "Status");
    let message = answer["message"].as_str().unwrap();
    assert!(message.starts_with("command 'cat /nonexistent' exited with 1: "), "{message}");
    assert!(message.contains("No such file or directory"), "the output: {message}");

    let (status, _) = pod.post("/run/default/talk-edge-1/nope?cmd=true", Some(TOKEN));
    assert_eq!(status, 404);
    let (status, _) = pod.post("/run/default/talk-edge-1/wrong-uid/main?cmd=true", Some(TOKEN));
    assert_eq!(status, 404);
    let (status, body) = pod.post("/run/default/talk-edge-1/main", Some(TOKEN));
    assert_eq!(status, 400, "{body}");
}

/// Sends a WebSocket upgrade to `/exec` of `sleep 600` with the token; the connection
/// and the answer's head (status line and headers, up to the blank line), the body not
/// read.
fn upgrade_exec(pod: &Running) -> (std::net::TcpStream, String) {
    use std::io::Read;
    let mut tcp = std::net::TcpStream::connect(&pod.agent.addr).unwrap();
    tcp.set_read_timeout(Some(LONG)).unwrap();
    let request = format!(
        "GET /exec/{POD}/main?command=sleep&command=600&output=1 HTTP/1.1\r\nHost: agent\r\n\
         Authorization: Bearer {TOKEN}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") && tcp.read(&mut byte).unwrap() == 1 {
        answer.push(byte[0]);
    }
    (tcp, text(&answer))
}

/// N3: one authenticated user holds at most 16 stream sessions at once (an API server
/// relays every kubectl's as one user); the 17th is a 429 whose Status names the limit,
/// and a session that ends gives its place back.
#[needs(pods)]
#[test]
fn n3_one_user_holds_at_most_16_stream_sessions() {
    use std::io::Read;
    let pod = running();
    let mut held: Vec<_> = (0..16)
        .map(|i| {
            let (tcp, head) = upgrade_exec(&pod);
            assert!(head.starts_with("HTTP/1.1 101"), "session {i}: {head}");
            tcp
        })
        .collect();
    let (mut refused, head) = upgrade_exec(&pod);
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    // Closed after the refusal: a client that keeps asking holds no connection.
    assert!(head.to_ascii_lowercase().contains("connection: close"), "{head}");
    let mut body = vec![0u8; 4096];
    let n = refused.read(&mut body).unwrap();
    let body = text(&body[..n]);
    assert!(body.contains("TooManyRequests"), "{body}");
    assert!(body.contains("holds 16 stream sessions"), "{body}");
    assert!(body.contains("the most one user may hold at once"), "{body}");
    // A client that goes away ends its session: its command is killed, its place freed.
    drop(held.pop());
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let (tcp, head) = upgrade_exec(&pod);
        if head.starts_with("HTTP/1.1 101") {
            held.push(tcp);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no place came free: {head}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(held);
    outpost_tests::pods::eventually("every session's command is killed", LONG, || {
        let out = pod.exec(&args(&[], &["ps"]), true, b"");
        out.status.success() && !text(&out.stdout).contains("sleep 600")
    });
}
