//! A running `outpost run --dry-run` for tests: its printed deltas, its log, and plain
//! HTTP/1.1 requests to its local API. Agents start with `--anonymous-loopback-reads`
//! (tests read `/pods` and `/metrics` without a token) unless started through
//! [`Agent::start_strict`].

// Test support fails by panicking, with a message saying what went wrong.
#![allow(clippy::expect_used)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::outpost_bin;

/// Lets the tests read the local API from loopback without a token.
const ANONYMOUS_READS: &str = "--anonymous-loopback-reads";

/// A running agent, killed (SIGKILL) on drop.
#[derive(Debug)]
pub struct Agent {
    child: Child,
    deltas: mpsc::Receiver<serde_json::Value>,
    /// `host:port` of the local API.
    pub addr: String,
    log: Arc<Mutex<Vec<String>>>,
    /// D1, D4: the kubelet root directory made for an agent whose test named none (so no
    /// test's agent serves its sockets in the machine's `/var/lib/kubelet`).
    _root_dir: Option<tempfile::TempDir>,
}

impl Agent {
    /// `outpost run --dry-run --node-name Edge-1 --listen 127.0.0.1:0 --manifest-dir DIR`.
    pub fn start(manifests: &Path) -> Agent {
        Agent::start_with(Command::new(outpost_bin()), manifests, &[] as &[&str])
    }

    /// As [`Agent::start`], with more arguments for `run`.
    pub fn start_args<S: AsRef<OsStr>>(manifests: &Path, extra: &[S]) -> Agent {
        Agent::start_with(Command::new(outpost_bin()), manifests, extra)
    }

    /// Starts the agent through `command` (the binary itself, or a wrapper running it).
    pub fn start_with<S: AsRef<OsStr>>(command: Command, manifests: &Path, extra: &[S]) -> Agent {
        Agent::spawn(command, &["--dry-run", ANONYMOUS_READS], manifests, extra)
    }

    /// As [`Agent::start_args`], without `--anonymous-loopback-reads`: every read needs
    /// credentials.
    pub fn start_strict<S: AsRef<OsStr>>(manifests: &Path, extra: &[S]) -> Agent {
        Agent::spawn(Command::new(outpost_bin()), &["--dry-run"], manifests, extra)
    }

    /// `outpost run` without `--dry-run`: pods really run (`extra` says where: containerd
    /// socket and namespace, state, run, log and CNI dirs; see [`crate::pods::Node`]).
    /// It starts once no other test has swap on ([`crate::swap`]), with
    /// `--fail-swap-on=false` where the machine's own swap is on.
    /// With `OUTPOST_TEST_EBPF=off` in the environment the agent runs with `--ebpf=false`
    /// (CI runs the pod tests that way too: containerd's events alone must do), unless
    /// `extra` says `--ebpf=...` itself.
    pub fn start_pods<S: AsRef<OsStr>>(manifests: &Path, extra: &[S]) -> Agent {
        Agent::start_pods_with(Command::new(outpost_bin()), manifests, extra)
    }

    /// As [`Agent::start_pods`], through `command` (a wrapper running the binary, or the
    /// binary with an environment of its own: `OUTPOST_LOG`...).
    pub fn start_pods_with<S: AsRef<OsStr>>(
        command: Command,
        manifests: &Path,
        extra: &[S],
    ) -> Agent {
        let given =
            |flag: &str| extra.iter().any(|a| a.as_ref().to_string_lossy().starts_with(flag));
        let mut mode = vec![ANONYMOUS_READS.to_owned()];
        if ebpf_off() && !given("--ebpf") {
            mode.push("--ebpf=false".to_owned());
        }
        if let Some(runtime) = oci_runtime()
            && !given("--runtime")
        {
            mode.extend(["--runtime".to_owned(), runtime]);
        }
        if let Some(logger) = container_logger()
            && !given("--container-logger")
        {
            mode.extend(["--container-logger".to_owned(), logger]);
        }
        // D6: not while another test has swap on (the agent would refuse to start); on a
        // machine whose own swap is on, with failSwapOn false (kubelet's default would
        // refuse every test's agent).
        let swap = crate::swap::starting();
        if swap.is_some() && crate::swap::is_on() && !given("--fail-swap-on") {
            mode.push("--fail-swap-on=false".to_owned());
        }
        let root_dir = (!given("--root-dir")).then(|| {
            let dir = tempfile::Builder::new().prefix("opr").tempdir().expect("a root dir");
            mode.extend(["--root-dir".to_owned(), dir.path().display().to_string()]);
            dir
        });
        let mut agent = Agent::spawn(command, &mode, manifests, extra);
        agent._root_dir = root_dir;
        agent
    }

    fn spawn<S: AsRef<OsStr>, M: AsRef<OsStr>>(
        mut command: Command,
        mode: &[M],
        manifests: &Path,
        extra: &[S],
    ) -> Agent {
        // A test may ask for another log level.
        if !command.get_envs().any(|(key, _)| key == "OUTPOST_LOG") {
            command.env("OUTPOST_LOG", "info");
        }
        // Any free loopback port, unless the test names one.
        let listen = extra.iter().any(|a| a.as_ref() == "--listen");
        let default_listen: &[&str] = if listen { &[] } else { &["--listen", "127.0.0.1:0"] };
        let mut child = command
            .arg("run")
            .args(mode)
            .args(["--node-name", "Edge-1"])
            .args(default_listen)
            .arg("--manifest-dir")
            .arg(manifests)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start the agent");
        let (tx, deltas) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        // The log line that announces the API address.
        let (addr_tx, addr_rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("agent: {line}");
                lines.lock().expect("log lock").push(line.clone());
                if line.contains("local API listening")
                    && let Some(addr) = line.split("addr=").nth(1)
                {
                    let _ =
                        addr_tx.send(addr.split_whitespace().next().unwrap_or_default().to_owned());
                }
            }
        });
        let addr = match addr_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("the agent never listened (exit: {status:?})");
            }
        };
        Agent { child, deltas, addr, log, _root_dir: None }
    }

    /// The next printed delta (panics after 30 s without one).
    pub fn delta(&self) -> serde_json::Value {
        self.deltas.recv_timeout(Duration::from_secs(30)).expect("no delta printed")
    }

    /// The next printed delta, if one comes within `timeout`.
    pub fn delta_within(&self, timeout: Duration) -> Option<serde_json::Value> {
        self.deltas.recv_timeout(timeout).ok()
    }

    /// Everything the agent logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").join("\n")
    }

    /// Waits up to 30 s for a log line containing `needle`.
    pub fn wait_for_log(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(line) =
                self.log.lock().expect("log lock").iter().find(|l| l.contains(needle))
            {
                return line.clone();
            }
            assert!(Instant::now() < deadline, "no log line with {needle:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `GET path` → (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        self.request("GET", path, &[], b"")
    }

    /// One HTTP/1.1 request over a fresh connection → (status, body).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect to the local API");
        s.write_all(request_head(method, path, headers, body.len()).as_bytes())
            .expect("send request head");
        s.write_all(body).expect("send request body");
        let mut response = String::new();
        s.read_to_string(&mut response).expect("read response");
        split_response(&response)
    }

    /// Polls `GET path` until `done(status, body)` (30 s at most); returns the last answer.
    pub fn poll(&self, path: &str, done: impl Fn(u16, &str) -> bool) -> (u16, String) {
        self.poll_within(path, Duration::from_secs(30), done)
    }

    /// As [`Agent::poll`], giving up after `timeout`.
    pub fn poll_within(
        &self,
        path: &str,
        timeout: Duration,
        done: impl Fn(u16, &str) -> bool,
    ) -> (u16, String) {
        let deadline = Instant::now() + timeout;
        loop {
            let (status, body) = self.get(path);
            if done(status, &body) {
                return (status, body);
            }
            assert!(Instant::now() < deadline, "GET {path} never got there: {status} {body}");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The agent's process id (to send it signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends the agent a signal by name (`HUP`, `USR1`, ...), as `kill -<name>` does.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill -{name} failed: {status}");
    }

    /// Sends SIGTERM and waits up to `patience` for the agent to exit: its exit status
    /// (`None`: still running at the end, then killed by the drop) and how long it took.
    pub fn terminate(
        &mut self,
        patience: Duration,
    ) -> (Option<std::process::ExitStatus>, Duration) {
        let sent = Instant::now();
        self.signal("TERM");
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return (Some(status), sent.elapsed());
            }
            if sent.elapsed() > patience {
                return (None, sent.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the agent with SIGTERM and waits for it to exit.
    pub fn stop(mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

/// The environment variable that turns BPF off in [`Agent::start_pods`] agents.
pub const EBPF_ENV: &str = "OUTPOST_TEST_EBPF";

/// Whether `OUTPOST_TEST_EBPF=off`.
pub fn ebpf_off() -> bool {
    std::env::var(EBPF_ENV).is_ok_and(|v| v == "off")
}

/// The environment variable that gives [`Agent::start_pods`] agents another OCI runtime
/// (`OUTPOST_TEST_RUNTIME=crun`: the benchmarks' figures under crun).
pub const RUNTIME_ENV: &str = "OUTPOST_TEST_RUNTIME";

/// The runtime `OUTPOST_TEST_RUNTIME` names, if any.
pub fn oci_runtime() -> Option<String> {
    std::env::var(RUNTIME_ENV).ok().filter(|v| !v.is_empty())
}

/// The environment variable that gives [`Agent::start_pods`] agents another container
/// logger (`OUTPOST_TEST_CONTAINER_LOGGER=container`: B2 with a logger per container
/// beside the node's).
pub const CONTAINER_LOGGER_ENV: &str = "OUTPOST_TEST_CONTAINER_LOGGER";

/// The container logger `OUTPOST_TEST_CONTAINER_LOGGER` names, if any.
pub fn container_logger() -> Option<String> {
    std::env::var(CONTAINER_LOGGER_ENV).ok().filter(|v| !v.is_empty())
}

/// An HTTP/1.1 request head for one request on its own connection.
pub fn request_head(method: &str, path: &str, headers: &[(&str, &str)], body_len: usize) -> String {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {body_len}\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// A whole HTTP/1.1 response (read to the end) → (status, body); status 0 if unreadable.
/// A chunked body (a streamed one, such as `/containerLogs`) is put back together.
pub fn split_response(response: &str) -> (u16, String) {
    let status = response.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        return (status, String::new());
    };
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().replace(' ', "") == "transfer-encoding:chunked");
    (status, if chunked { dechunk(body) } else { body.to_owned() })
}

/// The content of a chunked body: `<hex size>\r\n<data>\r\n`..., ending with size 0.
fn dechunk(mut body: &str) -> String {
    let mut content = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap_or_default().trim(), 16)
            .unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        content.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    content
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
