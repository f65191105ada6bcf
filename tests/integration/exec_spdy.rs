//! End to end (N3): kubelet's `/exec` over SPDY/3.1 on the real agent, into a running
//! busybox container: the upgrade's `101` with the negotiated `v4.channel.k8s.io`, then
//! a SPDY client written on the agent's frame codec (`outpost_formats::spdy`) opens the
//! error, stdin, stdout and stderr streams as kubectl 1.27 does: `echo`'s output, stdin
//! through `cat`, and the exit code in the error stream's `metav1.Status`. Real kubectl
//! over the test API server's proxy is the acceptance, elsewhere.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use outpost_formats::spdy::frame::Frame;
use outpost_formats::spdy::{Decoder, Deflater, Headers};
use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::needs;
use outpost_tests::pods::{Node, container, wait_pod};
use outpost_tests::write_private;

const LONG: Duration = Duration::from_secs(60);
const TOKEN: &str = "spdy-exec-token";

/// What a session's client read: each stream's bytes, by type.
struct Session {
    output: BTreeMap<String, String>,
}

/// Execs `command` in `default/talk-edge-1`'s `main` over SPDY/3.1, sending `input`
/// on stdin (then FIN).
fn exec(agent: &Agent, command: &[&str], input: &[u8]) -> Session {
    let mut query: Vec<String> = command
        .iter()
        .map(|arg| {
            format!(
                "command={}",
                form_urlencoded::byte_serialize(arg.as_bytes()).collect::<String>()
            )
        })
        .collect();
    query.push("input=1&output=1&error=1".into());
    let mut socket = TcpStream::connect(&agent.addr).unwrap();
    socket.set_read_timeout(Some(LONG)).unwrap();
    let head = format!(
        "GET /exec/default/talk-edge-1/main?{} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: channel.k8s.io\r\n\r\n",
        query.join("&")
    );
    socket.write_all(head.as_bytes()).unwrap();
    let mut response = Vec::new();
    let mut byte = [0u8; 1];
    while !response.ends_with(b"\r\n\r\n") {
        assert_eq!(socket.read(&mut byte).unwrap(), 1, "the response ended in its head");
        response.push(byte[0]);
    }
    let response = String::from_utf8_lossy(&response).to_ascii_lowercase();
    assert!(response.starts_with("http/1.1 101"), "{response}");
    assert!(response.contains("upgrade: spdy/3.1"), "{response}");
    assert!(response.contains("x-stream-protocol-version: v4.channel.k8s.io"), "{response}");

    let mut deflater = Deflater::new();
    let mut ids = BTreeMap::new();
    let mut frames = Vec::new();
    for (id, kind) in [(1u32, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")] {
        let headers = Headers::from([("streamtype", kind)]);
        let header_block = deflater.deflate(&headers);
        Frame::syn_stream(id, header_block).encode(&mut frames);
        ids.insert(id, kind.to_owned());
    }
    Frame::Data { stream_id: 3, fin: true, data: input.to_vec() }.encode(&mut frames);
    socket.write_all(&frames).unwrap();

    let mut decoder = Decoder::default();
    let mut output: BTreeMap<String, String> = BTreeMap::new();
    let mut buffer = vec![0u8; 64 * 1024];
    'read: loop {
        while let Some(frame) = decoder.next_frame().unwrap() {
            match frame {
                Frame::Data { stream_id, data, .. } => {
                    let kind = ids.get(&stream_id).cloned().unwrap_or_default();
                    output.entry(kind).or_default().push_str(&String::from_utf8_lossy(&data));
                }
                Frame::GoAway { .. } => break 'read,
                _ => {}
            }
        }
        let n = socket.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        decoder.extend(&buffer[..n]);
    }
    Session { output }
}

impl Session {
    fn text(&self, kind: &str) -> &str {
        self.output.get(kind).map_or("", String::as_str)
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(self.text("error"))
            .unwrap_or_else(|e| panic!("{e}: {:?}", self.text("error")))
    }
}

/// N3: exec over SPDY/3.1 as kubectl 1.27 speaks it: output, stdin and the exit code.
#[needs(pods)]
#[test]
fn n3_spdy_exec_passes_output_stdin_and_the_exit_code() {
    let node = Node::new();
    let token = node.path("token");
    write_private(&token, format!("{TOKEN}\n"));
    let mut args = node.args();
    args.extend(["--token-file".into(), token.into_os_string()]);
    let agent = Agent::start_pods(&node.manifests(), &args);
    node.put(
        "talk.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: talk\nspec:\n  containers:\n  - name: main\n    image: {BUSYBOX_IMAGE}\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"trap 'exit 0' TERM; while true; do sleep 0.1; done\"]\n"
        ),
    );
    wait_pod(&agent, "talk-edge-1", LONG, |p| container(p)["state"]["running"].is_object());

    let echo = exec(&agent, &["echo", "hello over spdy"], b"");
    assert_eq!(echo.text("stdout"), "hello over spdy\n");
    assert_eq!(echo.status()["status"], "Success");

    let cat = exec(&agent, &["cat"], b"line one\nline two\n");
    assert_eq!(cat.text("stdout"), "line one\nline two\n");

    let failed = exec(&agent, &["sh", "-c", "echo out; echo err >&2; exit 3"], b"");
    assert_eq!(failed.text("stdout"), "out\n");
    assert_eq!(failed.text("stderr"), "err\n");
    let status = failed.status();
    assert_eq!(status["reason"], "NonZeroExitCode");
    assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
}
