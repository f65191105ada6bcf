use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::stat::Mode;

use super::protocol::Registration;
use super::*;
use crate::cri::{Joiner, Line, Stream, decode};
use crate::rotation::Limits;

struct Node {
    tmp: tempfile::TempDir,
    fifos: PathBuf,
    log: PathBuf,
}

impl Node {
    /// A state directory, and a container's FIFO directory as the agent makes it.
    fn new(stderr: bool) -> Node {
        let tmp = tempfile::tempdir().unwrap();
        let fifos = tmp.path().join("io/c1");
        std::fs::create_dir_all(&fifos).unwrap();
        let names: &[&str] = if stderr { &[STDIN, STDOUT, STDERR] } else { &[STDIN, STDOUT] };
        for name in names {
            nix::unistd::mkfifo(&fifos.join(name), Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
        }
        let log = tmp.path().join("pods/ns_pod_uid/c/0.log");
        Node { tmp, fifos, log }
    }

    fn state(&self) -> StateDir {
        StateDir::new(&self.tmp.path().join("state"))
    }

    /// A node logger on this state directory (what `run` does after taking the lock).
    fn start(&self, socket: &str) -> NodeLogger {
        let state = self.state();
        std::fs::create_dir_all(state.containers()).unwrap();
        let socket = self.tmp.path().join(socket);
        let listener = UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut logger = NodeLogger::new(state, listener).unwrap();
        logger.reload();
        logger
    }

    fn registration(&self) -> Registration {
        Registration {
            id: "c1".into(),
            fifos: self.fifos.clone(),
            log: self.log.clone(),
            limits: Limits::default(),
        }
    }

    /// Sends `request` on a new connection and returns the answer and the connection.
    fn request(
        &self,
        logger: &mut NodeLogger,
        socket: &str,
        request: &str,
    ) -> (String, UnixStream) {
        let mut client = UnixStream::connect(self.tmp.path().join(socket)).unwrap();
        client.write_all(format!("{request}\n").as_bytes()).unwrap();
        client.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut reader = BufReader::new(client.try_clone().unwrap());
        let mut answer = String::new();
        for _ in 0..100 {
            logger.turn(EpollTimeout::from(20u16)).unwrap();
            if reader.read_line(&mut answer).is_ok_and(|n| n > 0) {
                return (answer.trim_end().to_owned(), client);
            }
        }
        panic!("no answer to {request}");
    }

    /// The lines of the log file, per stream.
    fn lines(&self) -> Vec<Line> {
        let content = std::fs::read(&self.log).unwrap_or_default();
        let mut joiner = Joiner::new();
        let mut lines: Vec<Line> = content
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| joiner.push(decode(l).unwrap()))
            .collect();
        lines.extend(joiner.finish());
        lines
    }

    fn contents(&self, stream: Stream) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.stream == stream)
            .map(|l| String::from_utf8(l.content).unwrap())
            .collect()
    }
}

/// What containerd's shim holds on an output FIFO (`copyPipes`): a writer and a reader of
/// its own; one read-write fd is both.
fn shim_side(dir: &Path, name: &str) -> File {
    OpenOptions::new().read(true).write(true).open(dir.join(name)).unwrap()
}

fn turn_until(logger: &mut NodeLogger, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        logger.turn(EpollTimeout::from(10u16)).unwrap();
    }
    panic!("the node logger did not get there");
}

#[test]
fn protocol_lines_round_trip() {
    let node = Node::new(true);
    let registration = node.registration();
    let line = registration.to_request().unwrap();
    assert_eq!(Request::parse(&line), Ok(Request::Register(registration.clone())));
    assert_eq!(Request::parse("ping"), Ok(Request::Ping));
    assert!(Request::parse("register\tc1\t/x").is_err());
    let tabbed = Registration { log: "/a\tb".into(), ..registration };
    assert!(tabbed.to_request().is_err());
}

/// No line lost or duplicated across a `kill -9` of the node logger (issue 38): the
/// registration is persisted, a new logger re-opens the FIFOs, and what the first one
/// had not written (a partial line included) is still in them.
#[test]
fn a_restarted_logger_goes_on_without_losing_or_repeating_a_line() {
    let node = Node::new(true);
    let mut first = node.start("a.sock");
    let request = node.registration().to_request().unwrap();
    let (answer, agent) = node.request(&mut first, "a.sock", &request);
    assert_eq!(answer, OK);
    let state_file = node.state().containers().join("c1");
    assert!(state_file.exists(), "the registration is persisted");
    let (mut stdout, mut stderr) = (shim_side(&node.fifos, STDOUT), shim_side(&node.fifos, STDERR));
    drop(agent);
    stdout.write_all(b"0\n1\n2\npart").unwrap();
    turn_until(&mut first, || node.contents(Stream::Stdout).len() == 3);
    // kill -9: every fd closes, nothing else happens.
    drop(first);
    stdout.write_all(b"ial\n3\n").unwrap();
    stderr.write_all(b"e0\n").unwrap();
    let mut second = node.start("b.sock");
    turn_until(&mut second, || node.contents(Stream::Stdout).len() == 5);
    assert_eq!(node.contents(Stream::Stdout), ["0", "1", "2", "partial", "3"]);
    assert_eq!(node.contents(Stream::Stderr), ["e0"]);
    assert!(node.lines().iter().all(|l| l.newline));
    // The container's output ends: forgotten, FIFOs removed.
    drop((stdout, stderr));
    turn_until(&mut second, || !state_file.exists());
    assert!(!node.fifos.exists());
    assert_eq!(node.contents(Stream::Stdout).len(), 5);
}

/// The end of a stream without a newline is a last `P` record.
#[test]
fn a_partial_line_is_written_when_the_stream_ends() {
    let node = Node::new(false);
    let mut logger = node.start("a.sock");
    let request = node.registration().to_request().unwrap();
    let (answer, agent) = node.request(&mut logger, "a.sock", &request);
    assert_eq!(answer, OK);
    let mut stdout = shim_side(&node.fifos, STDOUT);
    drop(agent);
    stdout.write_all(b"done\nno newline").unwrap();
    drop(stdout);
    turn_until(&mut logger, || !node.fifos.exists());
    let lines = node.lines();
    let contents: Vec<_> = lines.iter().map(|l| (l.content.as_slice(), l.newline)).collect();
    assert_eq!(contents, [(&b"done"[..], true), (&b"no newline"[..], false)]);
}

/// Until the agent releases a container (its connection ends), the FIFO's end cannot be
/// told from a shim that has not opened it yet: the logger holds it. Released with no
/// shim (`Tasks.Create` failed), the container is forgotten.
#[test]
fn a_container_is_held_until_its_registration_is_released() {
    let node = Node::new(true);
    let mut logger = node.start("a.sock");
    let request = node.registration().to_request().unwrap();
    let (answer, agent) = node.request(&mut logger, "a.sock", &request);
    assert_eq!(answer, OK);
    for _ in 0..5 {
        logger.turn(EpollTimeout::from(10u16)).unwrap();
    }
    assert!(node.state().containers().join("c1").exists(), "held while registering");
    let (again, _second) = node.request(&mut logger, "a.sock", &request);
    assert!(again.starts_with(ERROR), "{again}");
    drop(agent);
    turn_until(&mut logger, || !node.fifos.exists());
    assert!(!node.state().containers().join("c1").exists());
}

#[test]
fn a_registration_that_cannot_open_is_refused_and_not_recorded() {
    let node = Node::new(true);
    let mut logger = node.start("a.sock");
    let missing = Registration { fifos: node.tmp.path().join("io/none"), ..node.registration() };
    let (answer, _agent) = node.request(&mut logger, "a.sock", &missing.to_request().unwrap());
    assert!(answer.starts_with(&format!("{ERROR}\tcontainer c1: cannot open its stdout FIFO")));
    assert!(node.state().load().unwrap().is_empty());
    let (pong, _agent) = node.request(&mut logger, "a.sock", "ping");
    assert_eq!(pong, format!("{PONG}\t{}", std::process::id()));
}

#[test]
fn state_files_that_are_not_registrations_are_removed() {
    let node = Node::new(true);
    let state = node.state();
    std::fs::create_dir_all(state.containers()).unwrap();
    let registration = node.registration();
    state.save(&registration, &registration.to_fields().unwrap()).unwrap();
    std::fs::write(state.containers().join("junk"), "not\ta registration").unwrap();
    assert_eq!(state.load().unwrap(), [registration]);
    assert!(!state.containers().join("junk").exists());
}
