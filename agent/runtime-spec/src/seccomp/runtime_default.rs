//! containerd's default seccomp profile (`RuntimeDefault`), as Rust data: an allowlist
//! whose default action is `SCMP_ACT_ERRNO` (EPERM), with rules that depend on the
//! architecture and on the container's capabilities (its bounding set).
//!
//! Syscall names the host's libseccomp does not know are skipped by runc, so the list
//! may name syscalls newer than the host's kernel.

use oci_spec::runtime::{
    Arch, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder,
    LinuxSeccompOperator, LinuxSyscall,
};

/// Allowed to every container.
const ALLOWED: &[&str] = &[
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_adjtime",
    "clock_adjtime64",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "get_robust_list",
    "get_thread_area",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "io_setup",
    "io_submit",
    "ioctl",
    "ioprio_get",
    "ioprio_set",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "_llseek",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "lstat64",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mmap2",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "_newselect",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pselect6_time64",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "send",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "set_robust_list",
    "set_thread_area",
    "set_tid_address",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "setsid",
    "setsockopt",
    "setuid",
    "setuid32",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socket",
    "socketcall",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
    // Since kernel 4.8 seccomp filters run after ptrace's, so tracing cannot bypass them.
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
];

/// Allowed on this architecture only.
#[cfg(target_arch = "x86_64")]
const ALLOWED_ON_ARCH: &[&str] = &["arch_prctl", "modify_ldt"];
#[cfg(target_arch = "aarch64")]
const ALLOWED_ON_ARCH: &[&str] = &[
    "arm_fadvise64_64",
    "arm_sync_file_range",
    "sync_file_range2",
    "breakpoint",
    "cacheflush",
    "set_tls",
];
#[cfg(target_arch = "riscv64")]
const ALLOWED_ON_ARCH: &[&str] = &["riscv_flush_icache"];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
const ALLOWED_ON_ARCH: &[&str] = &[];

/// The seccomp architectures of this machine's (its native one and the compat ones).
#[cfg(target_arch = "x86_64")]
const ARCHITECTURES: &[Arch] = &[Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32];
#[cfg(target_arch = "aarch64")]
const ARCHITECTURES: &[Arch] = &[Arch::ScmpArchArm, Arch::ScmpArchAarch64];
#[cfg(target_arch = "riscv64")]
const ARCHITECTURES: &[Arch] = &[Arch::ScmpArchRiscv64];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
const ARCHITECTURES: &[Arch] = &[];

/// Allowed to a container whose bounding set holds the capability.
const BY_CAPABILITY: &[(Capability, &[&str])] = &[
    (Capability::DacReadSearch, &["open_by_handle_at"]),
    (
        Capability::SysAdmin,
        &[
            "bpf",
            "clone",
            "clone3",
            "fanotify_init",
            "fsconfig",
            "fsmount",
            "fsopen",
            "fspick",
            "lookup_dcookie",
            "mount",
            "mount_setattr",
            "move_mount",
            "open_tree",
            "perf_event_open",
            "quotactl",
            "quotactl_fd",
            "setdomainname",
            "sethostname",
            "setns",
            "syslog",
            "umount",
            "umount2",
            "unshare",
        ],
    ),
    (Capability::SysBoot, &["reboot"]),
    (Capability::SysChroot, &["chroot"]),
    (Capability::SysModule, &["delete_module", "init_module", "finit_module"]),
    (Capability::SysPacct, &["acct"]),
    (
        Capability::SysPtrace,
        &[
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "process_vm_readv",
            "process_vm_writev",
            "ptrace",
        ],
    ),
    (Capability::SysRawio, &["iopl", "ioperm"]),
    (Capability::SysTime, &["settimeofday", "stime", "clock_settime", "clock_settime64"]),
    (Capability::SysTtyConfig, &["vhangup"]),
    (Capability::SysNice, &["get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"]),
    (Capability::Syslog, &["syslog"]),
    (Capability::Bpf, &["bpf"]),
    (Capability::Perfmon, &["perf_event_open"]),
];

/// The `personality(2)` personas allowed: Linux, its 32-bit variant, without address-space
/// randomisation, both, and the query (0xffffffff).
const PERSONALITIES: [u64; 5] = [0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// The namespace flags of `clone(2)` that only `CAP_SYS_ADMIN` may pass: CLONE_NEWNS,
/// CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET.
const CLONE_NAMESPACES: u64 =
    0x0002_0000 | 0x0200_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000;

/// The argument of `clone(2)` that holds the flags (s390 swaps the first two).
const CLONE_FLAGS_INDEX: usize = if cfg!(target_arch = "s390x") { 1 } else { 0 };

/// `ENOSYS`: what `clone3(2)` returns without `CAP_SYS_ADMIN`, so that libc falls back to
/// `clone(2)`, whose flags the filter can see.
const ENOSYS: u32 = 38;

/// The profile for a container with `capabilities` in its bounding set.
pub(super) fn profile(capabilities: &[Capability]) -> LinuxSeccomp {
    let mut syscalls = vec![allow(ALLOWED.iter().chain(ALLOWED_ON_ARCH))];
    syscalls.extend(PERSONALITIES.iter().map(|persona| {
        let mut rule = allow(["personality"].iter());
        rule.set_args(Some(vec![arg(0, *persona, LinuxSeccompOperator::ScmpCmpEq)]));
        rule
    }));
    syscalls.extend(
        BY_CAPABILITY
            .iter()
            .filter(|(capability, _)| capabilities.contains(capability))
            .map(|(_, names)| allow(names.iter())),
    );
    if !capabilities.contains(&Capability::SysAdmin) {
        let mut clone = allow(["clone"].iter());
        let no_namespaces =
            arg(CLONE_FLAGS_INDEX, CLONE_NAMESPACES, LinuxSeccompOperator::ScmpCmpMaskedEq);
        clone.set_args(Some(vec![no_namespaces]));
        syscalls.push(clone);
        let mut clone3 = allow(["clone3"].iter());
        clone3.set_action(LinuxSeccompAction::ScmpActErrno).set_errno_ret(Some(ENOSYS));
        syscalls.push(clone3);
    }
    let mut seccomp = LinuxSeccomp::default();
    seccomp
        .set_default_action(LinuxSeccompAction::ScmpActErrno)
        .set_architectures(Some(ARCHITECTURES.to_vec()))
        .set_syscalls(Some(syscalls));
    seccomp
}

fn allow<'a>(names: impl Iterator<Item = &'a &'a str>) -> LinuxSyscall {
    let mut rule = LinuxSyscall::default();
    rule.set_names(names.map(|name| (*name).to_owned()).collect())
        .set_action(LinuxSeccompAction::ScmpActAllow);
    rule
}

/// Argument `index` compared with `value` (masked-equal: `arg & value == 0`).
fn arg(index: usize, value: u64, op: LinuxSeccompOperator) -> LinuxSeccompArg {
    let builder = LinuxSeccompArgBuilder::default().index(index).value(value).op(op);
    let builder =
        if op == LinuxSeccompOperator::ScmpCmpMaskedEq { builder.value_two(0u64) } else { builder };
    // Every field is given: the builder has nothing left to refuse.
    builder.build().unwrap_or_default()
}
