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
