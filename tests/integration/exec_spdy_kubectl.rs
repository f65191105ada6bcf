//! End to end (N3): real kubectl 1.27 (SPDY only) runs `kubectl exec` against the agent's
//! SPDY/3.1 `/exec`, through a stand-in for the API server: it answers kubectl's
//! discovery and the pod, and for `pods/exec` rewrites the request as kube-apiserver's
//! proxy does (kubelet's path and `input`/`output`/`error` parameters, the node's
//! credentials) and then copies bytes both ways, as API servers before 1.30 did. The
//! issue's acceptance runs kubectl through the test API server's own proxy. Checked:
//! `-it` under a pseudo-terminal (a TTY, its size through the resize stream), stdin,
//! stdout, stderr and exit codes, and more than a window's worth of data each way.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::containerd::BUSYBOX_IMAGE;
use outpost_tests::needs;
use outpost_tests::pods::{Node, container, wait_pod};
use outpost_tests::write_private;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LONG: Duration = Duration::from_secs(60);
const TOKEN: &str = "spdy-kubectl-token";

async fn proxy(listener: tokio::net::TcpListener, agent: String) {
    loop {
        let Ok((mut client, _)) = listener.accept().await else { return };
        let agent = agent.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if client.read(&mut byte).await.unwrap_or(0) == 0 {
                    return;
                }
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let mut lines = head.split("\r\n");
            let first = lines.next().unwrap_or_default().to_owned();
            let target = first.split(' ').nth(1).unwrap_or_default().to_owned();
            let path = target.split('?').next().unwrap_or_default();
            let discovery = match path {
                "/api" => Some(
                    serde_json::json!({"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}),
                ),
                "/apis" => {
                    Some(serde_json::json!({"kind":"APIGroupList","apiVersion":"v1","groups":[]}))
                }
                "/api/v1" => Some(
                    serde_json::json!({"kind":"APIResourceList","groupVersion":"v1","resources":[
                    {"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"],"shortNames":["po"]},
                    {"name":"pods/exec","singularName":"","namespaced":true,"kind":"PodExecOptions","verbs":["create","get"]}]}),
                ),
                _ => None,
            };
            if let Some(body) = discovery {
                let body = body.to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = client.write_all(response.as_bytes()).await;
                return;
            }
            if !target.contains("/exec") {
                let pod = serde_json::json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"talk-edge-1","namespace":"default"},"spec":{"containers":[{"name":"main","image":"busybox"}]},"status":{"phase":"Running"}}).to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{pod}",
                    pod.len()
                );
                let _ = client.write_all(response.as_bytes()).await;
                return;
            }
            let query = target.split_once('?').map(|(_, q)| q).unwrap_or_default();
            let mut params = Vec::new();
            for (k, v) in form_urlencoded::parse(query.as_bytes()) {
                let k = match &*k {
                    "stdin" => "input",
                    "stdout" => "output",
                    "stderr" => "error",
                    "tty" => "tty",
                    "command" => "command",
                    _ => continue,
                };
                let v = if k == "command" {
                    v.into_owned()
                } else if v == "true" {
                    "1".into()
                } else {
                    "0".into()
                };
                params.push(format!(
                    "{k}={}",
                    form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()
                ));
            }
            let mut out = format!(
                "GET /exec/default/talk-edge-1/main?{} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n",
                params.join("&")
            );
            for line in lines {
                let lower = line.to_ascii_lowercase();
                if lower.starts_with("connection:")
                    || lower.starts_with("upgrade:")
                    || lower.starts_with("x-stream-protocol-version:")
                {
                    out.push_str(line);
                    out.push_str("\r\n");
                }
            }
            out.push_str("\r\n");
            let Ok(mut upstream) = tokio::net::TcpStream::connect(&agent).await else { return };
            if upstream.write_all(out.as_bytes()).await.is_err() {
                return;
            }
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        });
    }
}

#[needs(pods)]
#[test]
fn n3_kubectl_1_27_exec_over_spdy_through_a_copying_proxy() {
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
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    runtime.spawn(proxy(listener, agent.addr.clone()));
    let kubeconfig = node.path("kubeconfig");
    std::fs::write(&kubeconfig, format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\ncurrent-context: c\n")).unwrap();
    let kubectl = std::path::Path::new(
        &String::from_utf8(
            Command::new("sh")
                .args(["-c", "dirname $(readlink -f $(which kubectl))"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .to_owned(),
    )
    .join("kubectl.1.27");
    let kubectl_exec = |script: &str, input: &[u8]| {
        let mut child = Command::new(&kubectl)
            .env("KUBECONFIG", &kubeconfig)
            .args(["exec", "-i", "talk-edge-1", "-c", "main", "--", "sh", "-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // kubectl may end before it read all of stdin: not a failure.
        let _ = child.stdin.take().unwrap().write_all(input);
        child.wait_with_output().unwrap()
    };
    let script = format!(
        "stty rows 30 cols 100; {} exec -it talk-edge-1 -c main -- sh -c 'i=0; until [ \"$(stty size)\" = \"30 100\" ] || [ $i -ge 100 ]; do sleep 0.1; i=$((i+1)); done; stty size; exit 4'",
        kubectl.display()
    );
    let tty = Command::new("script")
        .env("KUBECONFIG", &kubeconfig)
        .args(["-qec", &script, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // -it under a pseudo-terminal (util-linux's script) of 30 rows and 100 columns: the
    // command gets a terminal, kubectl's resize stream gives it that size, the exit code
    // comes back.
    let screen = String::from_utf8_lossy(&tty.stdout);
    assert_eq!(tty.status.code(), Some(4), "{screen}");
    assert!(screen.contains("30 100\r\n"), "{screen}");
    let out = kubectl_exec("cat; echo err >&2; exit 3", b"hello from kubectl\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from kubectl\n");
    assert!(stderr.starts_with("err\n"), "{stderr}");
    assert!(stderr.contains("command terminated with exit code 3"), "{stderr}");

    // More than SPDY/3.1's 64 KiB windows each way: Go's client keeps none, nothing stalls.
    let out = kubectl_exec("wc -c; head -c 200000 /dev/zero | tr '\\0' 'y'", &vec![b'z'; 300_000]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.starts_with(b"300000\n"));
    assert_eq!(out.stdout.len(), "300000\n".len() + 200_000);
}
