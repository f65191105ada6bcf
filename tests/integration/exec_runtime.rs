//! `outpost::runtime::exec` against the test containerd: commands run in a running
//! busybox container through containerd's task exec, with their output and exit code,
//! bounded in size and time; interactive sessions with stdin, a TTY and its size; every
//! exec process and FIFO removed afterwards; clear errors where the container does not run.
//!
//! The containers are made with `ctr run` in a namespace of this file's own, and removed
//! by a guard even when a test fails.

use outpost_tests::needs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use containerd_client::services::v1::GetRequest;
use outpost::runtime::Containerd;
use outpost::runtime::exec::{self, Execs, MAX_OUTPUT, Request};
use outpost_tests::containerd::{
    BUSYBOX_IMAGE, BUSYBOX_OCI, CtrCgroupParent, test_containerd, test_image,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAMESPACE: &str = "outpost-test-exec";

fn ctr(socket: &Path, args: &[&str]) -> std::process::Output {
    Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["--namespace", NAMESPACE])
        .args(args)
        .output()
        .expect("cannot run ctr")
}

fn ctr_ok(socket: &Path, args: &[&str]) -> String {
    let out = ctr(socket, args);
    assert!(
        out.status.success(),
        "ctr {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The busybox image in this file's namespace (imported once per test process).
fn import_image(socket: &Path) {
    static IMPORTED: Mutex<bool> = Mutex::new(false);
    let mut imported = IMPORTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !*imported {
        let tarball = test_image(BUSYBOX_OCI);
        ctr_ok(socket, &["images", "import", tarball.to_str().unwrap()]);
        *imported = true;
    }
}

/// A busybox container of the test's, removed (task and record) when dropped.
struct Container {
    socket: PathBuf,
    id: String,
}

impl Container {
    /// `ctr run -d` with `args` before the image (flags) and `command` after the ID.
    fn run(socket: &Path, name: &str, flags: &[&str], command: &[&str]) -> Container {
        import_image(socket);
        let id = format!("exec-{name}-{}-{}", std::process::id(), fastrand::u32(..));
        let container = Container { socket: socket.to_owned(), id };
        let mut args = vec!["run", "-d", "--null-io"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&[BUSYBOX_IMAGE, &container.id]);
        args.extend_from_slice(command);
        ctr_ok(socket, &args);
        container
    }

    /// A container whose task sleeps (PID 1 the only process in it).
    fn sleeping(socket: &Path, name: &str) -> Container {
        Container::run(
            socket,
            name,
            &["--cwd", "/tmp", "--env", "GREETING=hello"],
            &["sleep", "3600"],
        )
    }

    /// The PIDs in the container (`ctr task ps`).
    fn pids(&self) -> Vec<String> {
        ctr_ok(&self.socket, &["tasks", "ps", &self.id])
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    }

    /// Waits until the task's status is `status` (`ctr task ls`).
    fn wait_status(&self, status: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let tasks = ctr_ok(&self.socket, &["tasks", "ls"]);
            let line = tasks.lines().find(|l| l.starts_with(&self.id)).unwrap_or_default();
            if line.trim_end().ends_with(status) {
                return;
            }
            assert!(Instant::now() < deadline, "{} never got {status}: {tasks}", self.id);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = ctr(&self.socket, &["tasks", "kill", "--signal", "SIGKILL", &self.id]);
        let _ = ctr(&self.socket, &["tasks", "delete", "--force", &self.id]);
        let _ = ctr(&self.socket, &["containers", "delete", &self.id]);
        drop(CtrCgroupParent(NAMESPACE));
    }
}

/// An `Execs` on the test containerd, its exec directory in a temporary directory.
struct Setup {
    socket: PathBuf,
    containerd: Containerd,
    execs: Execs,
    tmp: tempfile::TempDir,
}

impl Setup {
    async fn new() -> Setup {
        let socket = test_containerd();
        let containerd =
            Containerd::connect(&socket).await.unwrap().with_namespace(NAMESPACE).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let execs = Execs::new(containerd.clone(), tmp.path().join("exec"));
        Setup { socket, containerd, execs, tmp }
    }

    /// What is left in the exec directory (nothing, once every exec is done).
    fn leftovers(&self) -> Vec<String> {
        match std::fs::read_dir(self.tmp.path().join("exec")) {
            Ok(entries) => {
                entries.map(|e| e.unwrap().file_name().to_string_lossy().into()).collect()
            }
            Err(_) => Vec::new(),
        }
    }

    /// Whether containerd still knows the exec process.
    async fn knows(&self, id: &str, exec_id: &str) -> bool {
        let request = GetRequest { container_id: id.to_owned(), exec_id: exec_id.to_owned() };
        match self.containerd.tasks().get(request).await {
            Ok(_) => true,
            Err(s) if s.code() == tonic::Code::NotFound => false,
            Err(s) => panic!("Tasks.Get {id}/{exec_id}: {s}"),
        }
    }
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// Reads `reader` until what it gave contains `needle`; everything it gave.
async fn read_until(reader: &mut tokio::net::unix::pipe::Receiver, needle: &str) -> String {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let n = reader.read(&mut buf).await.unwrap();
            assert!(n > 0, "end of output before {needle:?}: {:?}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    let seen = String::from_utf8_lossy(&seen).into_owned();
    assert!(read.is_ok(), "no {needle:?} within 10 s: {seen:?}");
    seen
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_run_returns_the_output_and_exit_code_with_the_containers_process_spec() {
    let setup = Setup::new().await;
    let container = Container::sleeping(&setup.socket, "run");
    let timeout = Duration::from_secs(10);

    let out = setup
        .execs
        .run(&container.id, &args(&["sh", "-c", "echo out; echo err >&2; exit 3"]), timeout)
        .await
        .unwrap();
    assert_eq!(out.exit_code, 3);
    // Each stream has its own pipe up to the shim: their order is the shim's.
    let text = String::from_utf8_lossy(&out.output);
    assert!(text == "out\nerr\n" || text == "err\nout\n", "{text:?}");

    // The container's cwd and env, the container's namespaces (PID 1 is its sleep).
    let out = setup
        .execs
        .run(
            &container.id,
            &args(&["sh", "-c", "pwd; echo $GREETING; cat /proc/1/cmdline | tr '\\0' ' '"]),
            timeout,
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0);
    assert_eq!(String::from_utf8_lossy(&out.output), "/tmp\nhello\nsleep 3600 ");

    // The container's cgroup, capabilities and seccomp mode, as its PID 1 has them.
    let compare = "for f in cgroup; do cmp /proc/1/$f /proc/self/$f || exit 9; done; \
        for k in CapEff CapBnd Seccomp NoNewPrivs; do \
          [ \"$(grep ^$k: /proc/1/status)\" = \"$(grep ^$k: /proc/self/status)\" ] || exit 8; \
        done";
    let out = setup.execs.run(&container.id, &args(&["sh", "-c", compare]), timeout).await.unwrap();
    assert_eq!(out.exit_code, 0, "{}", String::from_utf8_lossy(&out.output));

    let out = setup.execs.run(&container.id, &args(&["true"]), timeout).await.unwrap();
    assert_eq!(out, exec::ExecOutput { exit_code: 0, output: Vec::new() });
    let out = setup.execs.run(&container.id, &args(&["false"]), timeout).await.unwrap();
    assert_eq!(out.exit_code, 1);

    // A command that is not there: an error that says so, nothing left behind.
    let error =
        setup.execs.run(&container.id, &args(&["no-such-command"]), timeout).await.unwrap_err();
    let text = outpost::error_chain::describe(&error);
    // runc runs a runc-shim container's commands itself (B8): its own failure, told
    // apart from the command's exit code.
    assert!(matches!(error, exec::Error::Runc { .. }), "{text}");
    assert!(text.contains(&container.id) && text.contains("no-such-command"), "{text}");

    assert_eq!(setup.leftovers(), Vec::<String>::new());
    assert_eq!(container.pids().len(), 1, "{:?}", container.pids());

    // How long a probe's exec takes (printed, not asserted).
    let mut took = Vec::new();
    for _ in 0..21 {
        let began = Instant::now();
        let out = setup.execs.run(&container.id, &args(&["true"]), timeout).await.unwrap();
        took.push(began.elapsed());
        assert_eq!(out.exit_code, 0);
    }
    took.sort();
    eprintln!(
        "Execs::run(true): min {:?}, p50 {:?}, max {:?} over {} runs",
        took[0],
        took[took.len() / 2],
        took[took.len() - 1],
        took.len()
    );
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_run_keeps_the_first_bytes_of_a_long_output_and_reads_the_rest() {
    let setup = Setup::new().await;
    let container = Container::sleeping(&setup.socket, "cap");
    // 1 MB on stdout, far past MAX_OUTPUT and the pipes' buffers: it only ends if the
    // rest is read too.
    let command = args(&["sh", "-c", "yes abcdefgh | head -c 1000000; echo done >&2; exit 4"]);
    let out = setup.execs.run(&container.id, &command, Duration::from_secs(20)).await.unwrap();
    assert_eq!(out.exit_code, 4);
    assert_eq!(out.output.len(), MAX_OUTPUT);
    assert!(out.output.starts_with(b"abcdefgh\nabcdefgh\n"), "{:?}", &out.output[..32]);
    assert_eq!(setup.leftovers(), Vec::<String>::new());
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_run_past_its_timeout_is_killed_and_removed() {
    let setup = Setup::new().await;
    let container = Container::sleeping(&setup.socket, "timeout");
    let began = Instant::now();
    let error = setup
        .execs
        .run(&container.id, &args(&["sleep", "300"]), Duration::from_millis(500))
        .await
        .unwrap_err();
    let took = began.elapsed();
    assert!(matches!(error, exec::Error::TimedOut { .. }), "{error:?}");
    assert!(
        error.to_string().contains(&container.id) && error.to_string().contains("500ms"),
        "{error}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Killed and reaped: the sleep of PID 1 alone is left; the FIFOs are gone.
    assert_eq!(container.pids().len(), 1, "{:?}", container.pids());
    assert_eq!(setup.leftovers(), Vec::<String>::new());

    // Output so far does not count: the timeout is about the exit.
    let error = setup
        .execs
        .run(
            &container.id,
            &args(&["sh", "-c", "echo started; exec sleep 300"]),
            Duration::from_millis(500),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, exec::Error::TimedOut { .. }), "{error:?}");
    assert_eq!(container.pids().len(), 1, "{:?}", container.pids());
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_a_dropped_run_is_killed_and_removed() {
    let setup = Setup::new().await;
    let container = Container::sleeping(&setup.socket, "cancel");
    let command = args(&["sleep", "300"]);
    let run = setup.execs.run(&container.id, &command, Duration::from_secs(60));
    // Cancelled once the command runs (a probe whose pod is going away).
    let cancelled = tokio::time::timeout(Duration::from_millis(800), run).await;
    assert!(cancelled.is_err(), "{cancelled:?}");
    eventually("the abandoned exec is removed", || {
        container.pids().len() == 1 && setup.leftovers().is_empty()
    })
    .await;
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n3_a_session_passes_stdin_and_its_end() {
    let setup = Setup::new().await;
    let container = Container::sleeping(&setup.socket, "stdin");
    let request = Request {
        command: args(&["sh", "-c", "cat; echo bye >&2; exit 5"]),
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
    };
    let mut session = setup.execs.start(&container.id, &request).await.unwrap();
    let exec_id = session.exec_id().to_owned();
    let mut stdin = session.stdin.take().unwrap();
    let mut stdout = session.stdout.take().unwrap();
    let mut stderr = session.stderr.take().unwrap();

    stdin.write_all(b"hello\n").await.unwrap();
    assert_eq!(read_until(&mut stdout, "hello\n").await, "hello\n");
    stdin.write_all(b"again\n").await.unwrap();
    assert_eq!(read_until(&mut stdout, "again\n").await, "again\n");
    // The end of input ends cat.
    drop(stdin);
    assert_eq!(read_until(&mut stderr, "bye\n").await, "bye\n");
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stdout.read_to_end(&mut rest))
        .await
        .expect("stdout did not end")
        .unwrap();
    assert!(rest.is_empty(), "{rest:?}");

    assert!(setup.knows(&container.id, &exec_id).await);
    let code =
        tokio::time::timeout(Duration::from_secs(10), session.wait()).await.unwrap().unwrap();
    assert_eq!(code, 5);
    assert!(!setup.knows(&container.id, &exec_id).await, "the exec process is still in containerd");
    assert_eq!(setup.leftovers(), Vec::<String>::new());
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n3_a_session_with_a_tty_has_its_size() {
    let setup = Setup::new().await;
    let container = Container::sleeping(&setup.socket, "tty");
    let request =
        Request { command: args(&["sh"]), stdin: true, stdout: true, stderr: true, tty: true };
    let mut session = setup.execs.start(&container.id, &request).await.unwrap();
    assert!(session.stderr.is_none(), "a TTY has one output");
    let mut stdin = session.stdin.take().unwrap();
    let mut stdout = session.stdout.take().unwrap();

    stdin.write_all(b"tty; echo TERM=$TERM\n").await.unwrap();
    let seen = read_until(&mut stdout, "TERM=xterm").await;
    assert!(seen.contains("/dev/pts/"), "{seen:?}");

    session.resize(123, 45).await.unwrap();
    stdin.write_all(b"echo SIZE=$(stty size)\n").await.unwrap();
    read_until(&mut stdout, "SIZE=45 123").await;

    stdin.write_all(b"exit 7\n").await.unwrap();
    let code =
        tokio::time::timeout(Duration::from_secs(10), session.wait()).await.unwrap().unwrap();
    assert_eq!(code, 7);
    assert_eq!(setup.leftovers(), Vec::<String>::new());
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n3_a_session_dropped_without_wait_is_killed_and_removed() {
    let setup = Setup::new().await;
    let container = Container::sleeping(&setup.socket, "drop");
    // Nothing asked for but the command: its output is read and dropped meanwhile.
    let request = Request {
        command: args(&["sh", "-c", "yes | head -c 200000; exec sleep 300"]),
        stdin: false,
        stdout: false,
        stderr: false,
        tty: false,
    };
    let session = setup.execs.start(&container.id, &request).await.unwrap();
    assert!(session.stdin.is_none() && session.stdout.is_none() && session.stderr.is_none());
    let exec_id = session.exec_id().to_owned();
    eventually("the command runs", || container.pids().len() == 2).await;
    drop(session);
    eventually("the dropped session's process is killed", || container.pids().len() == 1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while setup.knows(&container.id, &exec_id).await {
        assert!(Instant::now() < deadline, "the exec process stays in containerd");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eventually("its FIFOs are removed", || setup.leftovers().is_empty()).await;
}

#[needs(containerd)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_exec_where_nothing_runs_is_a_clear_error() {
    let setup = Setup::new().await;
    let timeout = Duration::from_secs(10);
    let not_running = |error: exec::Error, state: &str| {
        let text = outpost::error_chain::describe(&error);
        assert!(matches!(error, exec::Error::NotRunning { .. }), "{text}");
        assert!(text.contains(state) && text.contains("only run in a running container"), "{text}");
    };

    // Its task exited (and was not deleted).
    let exited = Container::run(&setup.socket, "exited", &[], &["true"]);
    exited.wait_status("STOPPED");
    let error = setup.execs.run(&exited.id, &args(&["true"]), timeout).await.unwrap_err();
    not_running(error, &format!("container {}: its task has exited", exited.id));
    let request =
        Request { command: args(&["sh"]), stdin: true, stdout: true, stderr: true, tty: true };
    let error = setup.execs.start(&exited.id, &request).await.unwrap_err();
    not_running(error, "its task has exited");

    // No task at all.
    import_image(&setup.socket);
    let bare =
        Container { socket: setup.socket.clone(), id: format!("exec-bare-{}", std::process::id()) };
    ctr_ok(&setup.socket, &["containers", "create", BUSYBOX_IMAGE, &bare.id, "true"]);
    let error = setup.execs.run(&bare.id, &args(&["true"]), timeout).await.unwrap_err();
    not_running(error, "it has no task");

    // No container.
    let error =
        setup.execs.run("exec-no-such-container", &args(&["true"]), timeout).await.unwrap_err();
    not_running(error, "container exec-no-such-container: no such container");

    assert_eq!(setup.leftovers(), Vec::<String>::new());
}

/// Waits (10 s at most) until `done`.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
