use std::os::fd::AsRawFd;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};

use super::*;

#[test]
fn only_open_fds_without_close_on_exec_count_as_inherited() {
    let file = std::fs::File::open("/proc/self/status").unwrap();
    assert!(!inherited(file.as_raw_fd()), "std opens with close-on-exec");
    fcntl(&file, FcntlArg::F_SETFD(FdFlag::empty())).unwrap();
    assert!(inherited(file.as_raw_fd()));
    let fd = file.as_raw_fd();
    drop(file);
    assert!(!inherited(fd), "closed");
}

fn parse(args: &[&str]) -> Result<Args, String> {
    parse_args(args.iter().map(std::ffi::OsString::from)).map_err(|e| e.to_string())
}

#[test]
fn the_shims_arguments_are_the_uris_query() {
    let args = parse(&["container-log", "/var/log/pods/ns_p_u/c/0.log"]).unwrap();
    assert_eq!(args.path, PathBuf::from("/var/log/pods/ns_p_u/c/0.log"));
    assert_eq!(args.limits, Limits::default());
    assert_eq!(parse(&["/x/0.log"]).unwrap().path, PathBuf::from("/x/0.log"));
}

#[test]
fn limits_may_be_given_before_or_after_the_path() {
    let args = parse(&["container-log", "--max-size", "20000", "/x/0.log", "--max-files", "3"]);
    assert_eq!(
        args.unwrap(),
        Args { path: "/x/0.log".into(), limits: Limits { max_size: 20000, max_files: 3 } }
    );
}

#[test]
fn wrong_arguments_are_refused_with_a_reason() {
    assert_eq!(parse(&[]).unwrap_err(), "no PATH: the live log file to write");
    assert_eq!(parse(&["container-log"]).unwrap_err(), "no PATH: the live log file to write");
    assert_eq!(parse(&["a", "b"]).unwrap_err(), "more than one PATH");
    assert_eq!(parse(&["--max-size", "x", "a"]).unwrap_err(), "--max-size needs a whole number");
    assert_eq!(parse(&["a", "--max-files"]).unwrap_err(), "--max-files needs a whole number");
    assert_eq!(parse(&["--max-files", "0", "a"]).unwrap_err(), "--max-files must be at least 1");
    assert_eq!(parse(&["--follow", "a"]).unwrap_err(), "unknown flag --follow");
}
