//! N3 with real clients: kubectl 1.27 (SPDY/3.1) and 1.33 (WebSockets, and SPDY when told)
//! run `exec`, `exec -it`, `port-forward`, `cp`, `attach`, `attach -i` and `logs -f` against pods of an
//! Outpost node, and `get --raw` reads the node's `/stats/summary` (N2), through the test API server's upgrade-aware proxy, which copies the bytes of the
//! upgraded connection unchanged: the node sees each kubectl's own protocol. Each test
//! prints a line per client and result (`kubectl <command> | <version> <protocol> | ok`).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use outpost_tests::api_pods::api_pod;
use outpost_tests::kubectl::{Client, NodeApi, PortForward, clients};
use outpost_tests::needs;
use serde_json::json;

/// The body busybox's httpd serves in the `web` pod.
const PAGE: &str = "hello from an outpost pod";

/// A node running `web`: busybox's httpd on port 80 and 8080 serving [`PAGE`].
fn web() -> NodeApi {
    let api = NodeApi::start(&[]);
    let script = format!(
        "mkdir -p /www && echo '{PAGE}' > /www/index.html && httpd -p 8080 -h /www && exec httpd -f -p 80 -h /www"
    );
    api.cluster.create_pod(api_pod("web", json!({"command": ["sh", "-c", script]}), json!({})));
    api.cluster.wait_running("web");
    api
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The first `n` lines `command` prints (fewer if it stops printing for 30 s); then it
/// is killed.
fn first_lines(mut command: std::process::Command, n: usize) -> Vec<String> {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while seen.len() < n {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

fn report(command: &str, client: &Client, result: &str) {
    println!("kubectl {command} | {} | {result}", client.label());
}

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_exec_passes_output_stdin_and_the_exit_code() {
    let api = web();
    for client in clients() {
        let out = api.kubectl(&client, &["exec", "web", "--", "echo", "hi"], b"");
        assert_eq!(text(&out.stdout), "hi\n", "{}: {}", client.label(), text(&out.stderr));
        let out = api.kubectl(&client, &["exec", "-i", "web", "--", "cat"], b"from stdin\n");
        assert_eq!(text(&out.stdout), "from stdin\n", "{}: {}", client.label(), text(&out.stderr));
        // More than a stream window (64 KiB) each way.
        let big: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let out = api.kubectl(&client, &["exec", "-i", "web", "--", "cat"], &big);
        assert!(
            out.stdout == big,
            "{}: {} bytes back of {}: {}",
            client.label(),
            out.stdout.len(),
            big.len(),
            text(&out.stderr)
        );
        let out =
            api.kubectl(&client, &["exec", "web", "--", "sh", "-c", "echo oops >&2; exit 3"], b"");
        assert_eq!(out.status.code(), Some(3), "{}: {}", client.label(), text(&out.stderr));
        assert!(text(&out.stderr).contains("oops"), "{}: {}", client.label(), text(&out.stderr));
        report("exec (stdout, stdin, stderr, exit code)", &client, "ok");
    }
}

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_exec_it_gets_a_terminal() {
    let api = web();
    for client in clients() {
        // kubectl wants a terminal of its own for -t: `script` gives it one.
        let mut kubectl = client
            .command(api.kubeconfig(), &["exec", "-it", "web", "--", "sh", "-c", "tty; stty size"]);
        let line = format!("{kubectl:?}");
        kubectl.stdin(Stdio::null());
        let mut command = std::process::Command::new("script");
        command.args(["-qec", &shell_line(&kubectl), "/dev/null"]);
        let out = outpost_tests::kubectl::run(command, b"");
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("/dev/pts/"),
            "{}: {line}: {stdout} {}",
            client.label(),
            text(&out.stderr)
        );
        report("exec -it", &client, "ok");
    }
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

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_port_forward_carries_http_on_several_ports() {
    let api = web();
    for client in clients() {
        let forward = PortForward::start(&api, &client, "web", &[80, 8080]);
        let response = forward.get("/index.html");
        assert!(response.contains(PAGE), "{}: {response}", client.label());
        drop(forward);
        let forward = PortForward::start(&api, &client, "web", &[8080]);
        let response = forward.get("/index.html");
        assert!(response.contains(PAGE), "{}: {response}", client.label());
        report("port-forward pod/web :80 :8080, then GET", &client, "ok");
    }
}

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_cp_copies_both_ways() {
    let api = web();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("notes.txt");
    std::fs::write(&local, "copied in and out\n").unwrap();
    for (i, client) in clients().into_iter().enumerate() {
        let remote = format!("web:/tmp/notes-{i}.txt");
        let out = api.kubectl(&client, &["cp", local.to_str().unwrap(), &remote], b"");
        assert!(out.status.success(), "{}: cp in: {}", client.label(), text(&out.stderr));
        let back = dir.path().join(format!("back-{i}.txt"));
        let out = api.kubectl(&client, &["cp", &remote, back.to_str().unwrap()], b"");
        assert!(out.status.success(), "{}: cp out: {}", client.label(), text(&out.stderr));
        assert_eq!(
            std::fs::read_to_string(&back).unwrap(),
            "copied in and out\n",
            "{}",
            client.label()
        );
        report("cp (in and out)", &client, "ok");
    }
}

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_logs_follow_streams_new_lines() {
    let api = NodeApi::start(&[]);
    let script =
        "i=0; trap 'exit 0' TERM; while true; do echo line-$i; i=$((i+1)); sleep 0.2; done";
    api.cluster.create_pod(api_pod("talker", json!({"command": ["sh", "-c", script]}), json!({})));
    api.cluster.wait_running("talker");
    for client in clients() {
        // The last line, then the new ones as they are written.
        let seen =
            first_lines(client.command(api.kubeconfig(), &["logs", "-f", "--tail=1", "talker"]), 6);
        assert!(seen.len() >= 6, "{}: kubectl logs -f gave {seen:?}", client.label());
        let numbers: Vec<u64> =
            seen.iter().map(|l| l.trim_start_matches("line-").parse().unwrap()).collect();
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{}: {seen:?}", client.label());
        report("logs -f", &client, "ok");
    }
}

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_attach_streams_the_containers_output() {
    let api = NodeApi::start(&[]);
    let script =
        "i=0; trap 'exit 0' TERM; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done";
    api.cluster.create_pod(api_pod("ticker", json!({"command": ["sh", "-c", script]}), json!({})));
    api.cluster.wait_running("ticker");
    for client in clients() {
        let seen = first_lines(client.command(api.kubeconfig(), &["attach", "ticker"]), 4);
        let ticks: Vec<&String> = seen.iter().filter(|l| l.starts_with("tick-")).collect();
        assert!(ticks.len() >= 3, "{}: kubectl attach gave {seen:?}", client.label());
        report("attach (output)", &client, "ok");
    }
}

/// A running `kubectl attach -i`: its input, and its output's lines as they come.
struct Attach {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    /// Every line seen so far, for failure messages.
    seen: Vec<String>,
}

impl Attach {
    fn start(api: &NodeApi, client: &Client, pod: &str) -> Attach {
        let mut command = client.command(api.kubeconfig(), &["attach", "-i", pod]);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Attach { child, lines, seen: Vec::new() }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        std::io::Write::write_all(stdin, format!("{line}\n").as_bytes()).unwrap();
    }

    /// kubectl's end of input.
    fn close_input(&mut self) {
        drop(self.child.stdin.take());
    }

    /// Waits (up to 30 s) for the line `wanted`; whether it came.
    fn expect(&mut self, wanted: &str) -> bool {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(30)) {
            self.seen.push(line.clone());
            // A TTY ends its lines with CR LF.
            if line.trim_end_matches('\r') == wanted {
                return true;
            }
        }
        false
    }
}

impl Drop for Attach {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A container that answers each line of its stdin, and says when its stdin ends.
fn stdin_reader(name: &str, once: bool) -> serde_json::Value {
    stdin_reader_with(name, json!({"stdin": true, "stdinOnce": once}))
}

fn stdin_reader_with(name: &str, flags: serde_json::Value) -> serde_json::Value {
    let script = "while read line; do echo got-$line; done; echo stdin-closed; exec sleep 3600";
    let mut container = json!({"command": ["sh", "-c", script]});
    container.as_object_mut().unwrap().extend(flags.as_object().unwrap().clone());
    api_pod(name, container, json!({}))
}

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_attach_i_writes_to_the_containers_stdin_across_attaches_and_agent_restarts() {
    let mut api = NodeApi::start(&[]);
    api.cluster.create_pod(stdin_reader("reader", false));
    api.cluster.wait_running("reader");
    for (i, client) in clients().into_iter().enumerate() {
        // Each attach ends with kubectl's end of input; the container's stdin stays open
        // for the next one.
        let mut attach = Attach::start(&api, &client, "reader");
        attach.send(&format!("hello-{i}"));
        let answered = attach.expect(&format!("got-hello-{i}"));
        assert!(answered, "{}: kubectl attach -i gave {:?}", client.label(), attach.seen);
        attach.close_input();
        drop(attach);
        report("attach -i", &client, "ok");
    }
    // The shim holds the container's stdin, not the agent.
    api.restart_agent();
    let client = &clients()[1];
    let mut attach = Attach::start(&api, client, "reader");
    attach.send("after-restart");
    let answered = attach.expect("got-after-restart");
    assert!(answered, "after the agent's restart: {:?}", attach.seen);
    drop(attach);
    report("attach -i after the agent restarted", client, "ok");

    // `kubectl run -it`'s shape: stdin and a TTY, whose output is the terminal's.
    api.cluster.create_pod(stdin_reader_with("terminal", json!({"stdin": true, "tty": true})));
    api.cluster.wait_running("terminal");
    let mut attach = Attach::start(&api, client, "terminal");
    attach.send("typed");
    let answered = attach.expect("got-typed");
    assert!(answered, "with a TTY: {:?}", attach.seen);
    report("attach -i to a container with a TTY", client, "ok");
}

#[needs(pods, kubectl)]
#[test]
fn n3_kubectl_attach_i_with_stdin_once_closes_the_containers_stdin_at_the_end_of_input() {
    let api = NodeApi::start(&[]);
    for (i, client) in clients().into_iter().enumerate() {
        let pod = format!("once-{i}");
        api.cluster.create_pod(stdin_reader(&pod, true));
        api.cluster.wait_running(&pod);
        let mut attach = Attach::start(&api, &client, &pod);
        attach.send("only");
        let answered = attach.expect("got-only");
        assert!(answered, "{}: kubectl attach -i gave {:?}", client.label(), attach.seen);
        attach.close_input();
        let closed = attach.expect("stdin-closed");
        assert!(closed, "{}: stdinOnce: {:?}", client.label(), attach.seen);
        drop(attach);
        // A second attach with input has nothing to write to, and is told why.
        let again = api.kubectl(&client, &["attach", "-i", &pod], b"late\n");
        let stderr = text(&again.stderr);
        assert!(!again.status.success(), "{}: {stderr}", client.label());
        assert!(stderr.contains("stdinOnce closed it"), "{}: {stderr}", client.label());
        report("attach -i (stdinOnce)", &client, "ok");
    }
}

#[needs(pods, kubectl)]
#[test]
fn n2_kubectl_get_raw_node_proxy_stats_summary() {
    let api = web();
    let client = &clients()[1];
    let path = format!("/api/v1/nodes/{}/proxy/stats/summary", outpost_tests::api_pods::NODE);
    let out = api.kubectl(client, &["get", "--raw", &path], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["node"]["nodeName"], outpost_tests::api_pods::NODE);
    let pods = summary["pods"].as_array().unwrap();
    assert!(pods.iter().any(|p| p["podRef"]["name"] == "web"), "{summary}");
    report("get --raw /api/v1/nodes/edge-1/proxy/stats/summary", client, "ok");
}
