//! Real kubectl binaries as the clients of the node's API (N3): this machine's image has
//! `kubectl` on PATH and, beside its real file, `kubectl.1.27` … `kubectl.1.33`. A
//! [`Client`] is one version speaking one protocol: 1.27 speaks only SPDY/3.1 for exec,
//! attach and port-forward; 1.33 speaks WebSockets unless
//! `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` and `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`.
//!
//! [`NodeApi`] is the setting they run in: a test API server whose upgrade-aware proxy
//! reaches an agent serving its API over TLS on a fixed loopback port, trusting the
//! server's kubelet-client certificate, with the node reporting that port and
//! `127.0.0.1` as its `daemonEndpoints` and `InternalIP`.

// A harness fails the test by panicking.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::api_pods::{Cluster, LONG, NODE};
use crate::cluster::ApiNode;
use crate::pods::eventually;
use crate::write_private;

/// One kubectl version and the protocol it is made to speak.
#[derive(Debug, Clone)]
pub struct Client {
    pub version: &'static str,
    /// SPDY/3.1 rather than WebSockets.
    pub spdy: bool,
    path: PathBuf,
}

impl Client {
    /// `1.27 SPDY`, `1.33 WebSocket`.
    pub fn label(&self) -> String {
        format!("{} {}", self.version, if self.spdy { "SPDY" } else { "WebSocket" })
    }

    /// kubectl with `args` against the server of `kubeconfig`.
    pub fn command(&self, kubeconfig: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(&self.path);
        command.arg("--kubeconfig").arg(kubeconfig).args(args);
        if self.spdy {
            command.env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false");
            command.env("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false");
        }
        command
    }
}

/// kubectl 1.27 over SPDY, 1.33 over WebSockets and 1.33 over SPDY.
pub fn clients() -> Vec<Client> {
    let dir = versions_dir();
    let client = |version: &'static str, spdy: bool| Client {
        version,
        spdy,
        path: dir.join(format!("kubectl.{version}")),
    };
    vec![client("1.27", true), client("1.33", false), client("1.33", true)]
}

/// The folder of the real file of the `kubectl` on PATH.
fn versions_dir() -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    let kubectl = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl is not on PATH (this machine's image has it)");
    let real = std::fs::canonicalize(&kubectl).expect("kubectl's real file");
    real.parent().expect("kubectl's folder").to_path_buf()
}

/// Runs `command` with `input` on its stdin, to its end.
pub fn run(mut command: Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kubectl");
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// A test API server and an agent whose API it reaches as kube-apiserver reaches a
/// kubelet.
#[derive(Debug)]
pub struct NodeApi {
    pub cluster: Cluster,
    /// The agent's API port on 127.0.0.1.
    pub port: u16,
    /// The agent's serving certificate (self-signed: a client's CA for it).
    pub serving_cert: PathBuf,
    /// The agent's flags, for [`NodeApi::restart_agent`].
    flags: Vec<String>,
}

impl NodeApi {
    /// The agent serving TLS on a free loopback port, with `extra` flags.
    pub fn start(extra: &[&str]) -> NodeApi {
        NodeApi::start_on(ApiNode::new(), extra)
    }

    /// [`NodeApi::start`] on `api`.
    pub fn start_on(api: ApiNode, extra: &[&str]) -> NodeApi {
        let port = free_port();
        let dir = api.node.dir.path().to_path_buf();
        let (cert, key) = serving_certificate(&dir);
        let client_ca = dir.join("kubelet-client-ca.pem");
        std::fs::write(&client_ca, &api.server.kubelet_client_identity().ca_pem).unwrap();
        let listen = format!("127.0.0.1:{port}");
        let mut flags: Vec<&str> = vec![
            "--listen",
            &listen,
            "--node-ip",
            "127.0.0.1",
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-private-key-file",
            key.to_str().unwrap(),
            "--client-ca-file",
            client_ca.to_str().unwrap(),
        ];
        flags.extend_from_slice(extra);
        let cluster = Cluster::with(api, &flags);
        // The proxy finds the node by its Node object: wait for the agent to register
        // it with its endpoint (its pods may run before that).
        let registered = |node: &serde_json::Value| {
            node.pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
                .and_then(serde_json::Value::as_u64)
                == Some(u64::from(port))
        };
        eventually("the Node is registered with its kubelet endpoint", LONG, || {
            cluster.server().get("nodes", None, NODE).is_ok_and(|node| registered(&node))
        });
        let flags = flags.iter().map(|f| (*f).to_owned()).collect();
        NodeApi { cluster, port, serving_cert: cert, flags }
    }

    /// Stops the agent (SIGTERM: its pods run on) and starts it again with the same
    /// flags, once it watches its pods again.
    pub fn restart_agent(&mut self) {
        if let Some(agent) = self.cluster.agent.take() {
            agent.stop();
        }
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        self.cluster.agent = Some(self.cluster.api.start(&flags));
        let api = &self.cluster.api;
        api.rt.block_on(async {
            let watching = api.server.wait_for_watchers("pods", 1);
            tokio::time::timeout(LONG, watching).await.unwrap();
        });
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.cluster.api.kubeconfig
    }

    /// Runs `client` with `args` and `input`, to its end.
    pub fn kubectl(&self, client: &Client, args: &[&str], input: &[u8]) -> Output {
        run(client.command(self.kubeconfig(), args), input)
    }
}

/// A port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A self-signed serving certificate for 127.0.0.1 and its private key, in `dir`.
fn serving_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.join("serving.crt"), dir.join("serving.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    write_private(&key_path, key.serialize_pem());
    (cert_path, key_path)
}

/// `kubectl port-forward` running: the local port it listens on, and the process
/// (killed when dropped).
#[derive(Debug)]
pub struct PortForward {
    pub local: u16,
    child: Child,
}

impl PortForward {
    /// Starts `kubectl port-forward pod/<pod> :<remote>...` and waits for its first
    /// `Forwarding from 127.0.0.1:N -> R` line.
    pub fn start(api: &NodeApi, client: &Client, pod: &str, remote: &[u16]) -> PortForward {
        let mut args = vec!["port-forward".to_owned(), format!("pod/{pod}")];
        args.extend(remote.iter().map(|r| format!(":{r}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = client
            .command(api.kubeconfig(), &args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kubectl port-forward");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(local) = line
                        .strip_prefix("Forwarding from 127.0.0.1:")
                        .and_then(|rest| rest.split_whitespace().next())
                        .and_then(|port| port.parse().ok())
                    {
                        return PortForward { local, child };
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let mut err = String::new();
                    if let Some(mut stderr) = child.stderr.take() {
                        let _ = stderr.read_to_string(&mut err);
                    }
                    panic!("{}: kubectl port-forward never forwarded: {err}", client.label());
                }
            }
        }
    }

    /// `GET path` over the forwarded port: the whole response.
    pub fn get(&self, path: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.local)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
