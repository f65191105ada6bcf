use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::thread;

use nix::sys::stat::Mode;

use super::*;

/// A FIFO directory as the agent makes it; `stderr`: without a TTY.
fn fifos(stderr: bool) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("io/abc");
    std::fs::create_dir_all(&dir).unwrap();
    let names: &[&str] = if stderr { &[STDIN, STDOUT, STDERR] } else { &[STDIN, STDOUT] };
    for name in names {
        nix::unistd::mkfifo(&dir.join(name), Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    }
    let log = tmp.path().join("ns_pod_uid/c/0.log");
    (tmp, dir, log)
}

/// Runs the logger in a thread; returns its announcement, the release pipe's write end
/// and the thread.
fn start(dir: &Path, log: &Path) -> (String, File, thread::JoinHandle<Result<()>>) {
    let (release_r, release_w) = nix::unistd::pipe().unwrap();
    let (announce_r, announce_w) = nix::unistd::pipe().unwrap();
    let (dir, log) = (dir.to_owned(), log.to_owned());
    let logger = thread::spawn(move || {
        let (release, announce) = (File::from(release_r), File::from(announce_w));
        container_log_with(&dir, &log, Limits::default(), release, announce)
    });
    let mut line = String::new();
    io::BufRead::read_line(&mut io::BufReader::new(File::from(announce_r)), &mut line).unwrap();
    (line, File::from(release_w), logger)
}

fn records(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.to_owned())
        .collect()
}

/// The shim's blocking write-only open of an output FIFO.
fn writer(dir: &Path, name: &str) -> File {
    OpenOptions::new().write(true).open(dir.join(name)).unwrap()
}

#[test]
fn output_written_before_and_after_the_release_is_logged_then_the_directory_goes() {
    let (_tmp, dir, log) = fifos(true);
    let (line, release, logger) = start(&dir, &log);
    assert_eq!(line, "ready\n");
    let (mut out, mut err) = (writer(&dir, STDOUT), writer(&dir, STDERR));
    out.write_all(b"before\n").unwrap();
    drop(release);
    err.write_all(b"warning\n").unwrap();
    out.write_all(b"after\n").unwrap();
    drop((out, err));
    logger.join().unwrap().unwrap();
    let mut got = records(&log);
    got.sort();
    assert_eq!(got, ["stderr F warning", "stdout F after", "stdout F before"]);
    assert!(!dir.exists(), "the FIFO directory is removed at the end");
}

#[test]
fn a_release_with_no_writer_ever_ends_the_logger() {
    // The task's creation failed: the shim never opened its writers.
    let (_tmp, dir, log) = fifos(false);
    let (line, release, logger) = start(&dir, &log);
    assert_eq!(line, "ready\n");
    drop(release);
    logger.join().unwrap().unwrap();
    assert!(records(&log).is_empty());
    assert!(!dir.exists());
}

#[test]
fn with_a_tty_there_is_no_stderr_fifo() {
    let (_tmp, dir, log) = fifos(false);
    let (line, release, logger) = start(&dir, &log);
    assert_eq!(line, "ready\n");
    let mut out = writer(&dir, STDOUT);
    drop(release);
    out.write_all(b"$ prompt").unwrap();
    drop(out);
    logger.join().unwrap().unwrap();
    assert_eq!(records(&log), ["stdout P $ prompt"]);
}

#[test]
fn a_missing_fifo_is_announced_with_its_path() {
    let (_tmp, dir, log) = fifos(true);
    std::fs::remove_file(dir.join(STDOUT)).unwrap();
    let (line, _release, logger) = start(&dir, &log);
    assert!(line.starts_with("cannot open the container's stdout FIFO "), "{line}");
    assert!(line.contains("io/abc/stdout: No such file"), "{line}");
    assert!(logger.join().unwrap().is_err());
}

#[test]
fn the_stdin_fifo_is_left_to_the_shim() {
    // The logger never opens stdin: a writer it held would keep a stdinOnce container's
    // input open.
    let (_tmp, dir, log) = fifos(true);
    let (_line, release, logger) = start(&dir, &log);
    let open = OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(dir.join(STDIN));
    assert_eq!(
        open.unwrap_err().raw_os_error(),
        Some(nix::errno::Errno::ENXIO as i32),
        "no reader on stdin"
    );
    drop(release);
    logger.join().unwrap().unwrap();
}
