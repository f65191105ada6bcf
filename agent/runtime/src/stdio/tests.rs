use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};

use tokio::io::AsyncWriteExt;

use super::*;

#[test]
fn a_logged_container_has_no_stdin_and_with_a_tty_no_stderr() {
    let uri = "binary:///usr/bin/outpost-container-log?container-log=/x/0.log";
    let plain = Stdio::logged(uri, false);
    assert_eq!(
        (plain.stdin.as_str(), plain.stdout.as_str(), plain.stderr.as_str()),
        ("", uri, uri)
    );
    let tty = Stdio::logged(uri, true);
    assert_eq!((tty.stdout.as_str(), tty.stderr.as_str()), (uri, ""));
}

#[test]
fn fifos_are_private_and_a_tty_has_no_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fifo_dir(tmp.path(), "abc");
    let stdio = make_fifos(&dir, "abc", false, true).unwrap();
    for path in [&stdio.stdin, &stdio.stdout, &stdio.stderr] {
        let meta = std::fs::metadata(path).unwrap();
        assert!(meta.file_type().is_fifo(), "{path}");
        assert_eq!(meta.permissions().mode() & 0o077, 0, "{path}");
    }
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    let tty = make_fifos(&fifo_dir(tmp.path(), "tty"), "tty", true, true).unwrap();
    assert_eq!(tty.stderr, "");
    assert!(!tmp.path().join("tty").join(STDERR).exists());
    let no_stdin = make_fifos(&fifo_dir(tmp.path(), "out"), "out", false, false).unwrap();
    assert_eq!(no_stdin.stdin, "");
    assert!(!tmp.path().join("out").join(STDIN).exists());
}

#[tokio::test]
async fn stdin_opens_only_while_something_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let stdio = make_fifos(&fifo_dir(tmp.path(), "abc"), "abc", true, true).unwrap();
    let error = open_stdin(tmp.path(), "abc").unwrap_err();
    assert!(error.to_string().contains("has no open stdin"), "{error}");
    // The shim's reader.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&stdio.stdin)
        .unwrap();
    let mut sender = open_stdin(tmp.path(), "abc").unwrap();
    sender.write_all(b"hello\n").await.unwrap();
    let mut got = [0u8; 6];
    std::io::Read::read_exact(&mut &reader, &mut got).unwrap();
    assert_eq!(&got, b"hello\n");
    let error = open_stdin(tmp.path(), "nope").unwrap_err();
    assert!(error.to_string().starts_with("container nope has no open stdin"), "{error}");
}
