//! containerd 1.6's default Linux spec (`oci.populateDefaultUnixSpec`), the base every
//! container spec starts from: its mounts, capabilities, masked and read-only paths,
//! and device rules. (Its `RLIMIT_NOFILE` of 1024 is `oci_spec`'s default
//! process's too.)

use oci_spec::runtime::{Capability, LinuxDeviceCgroup, Mount};

/// The capabilities a container has unless its security context says otherwise.
pub(super) const CAPABILITIES: [Capability; 14] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::Fsetid,
    Capability::Fowner,
    Capability::Mknod,
    Capability::NetRaw,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::NetBindService,
    Capability::SysChroot,
    Capability::Kill,
    Capability::AuditWrite,
];

/// Every capability, in the kernel's numbering (`ALL_CAPABILITIES[n]` is bit `n`).
pub(super) const ALL_CAPABILITIES: [Capability; 41] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::DacReadSearch,
    Capability::Fowner,
    Capability::Fsetid,
    Capability::Kill,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setpcap,
    Capability::LinuxImmutable,
    Capability::NetBindService,
    Capability::NetBroadcast,
    Capability::NetAdmin,
    Capability::NetRaw,
    Capability::IpcLock,
    Capability::IpcOwner,
    Capability::SysModule,
    Capability::SysRawio,
    Capability::SysChroot,
    Capability::SysPtrace,
    Capability::SysPacct,
    Capability::SysAdmin,
    Capability::SysBoot,
    Capability::SysNice,
    Capability::SysResource,
    Capability::SysTime,
    Capability::SysTtyConfig,
    Capability::Mknod,
    Capability::Lease,
    Capability::AuditWrite,
    Capability::AuditControl,
    Capability::Setfcap,
    Capability::MacOverride,
    Capability::MacAdmin,
    Capability::Syslog,
    Capability::WakeAlarm,
    Capability::BlockSuspend,
    Capability::AuditRead,
    Capability::Perfmon,
    Capability::Bpf,
    Capability::CheckpointRestore,
];

/// Paths hidden from unprivileged containers.
pub(super) fn masked_paths() -> Vec<String> {
    [
        "/proc/acpi",
        "/proc/asound",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/sys/firmware",
        "/proc/scsi",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Paths read-only in unprivileged containers.
pub(super) fn readonly_paths() -> Vec<String> {
    ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
        .map(str::to_owned)
        .to_vec()
}

/// The device cgroup rules: deny everything (runc adds its default devices, `/dev/null`,
/// `/dev/zero`, ..., on top); a privileged container is then allowed every device.
pub(super) fn device_rules(privileged: bool) -> Vec<LinuxDeviceCgroup> {
    let rule = |allow: bool| {
        let mut rule = LinuxDeviceCgroup::default();
        rule.set_allow(allow).set_access(Some("rwm".to_owned()));
        rule
    };
    let mut rules = vec![rule(false)];
    if privileged {
        rules.push(rule(true));
    }
    rules
}

/// The default mounts; `/sys` and `/sys/fs/cgroup` are writable in a privileged
/// container.
pub(super) fn mounts(privileged: bool) -> Vec<Mount> {
    let sys_access = if privileged { "rw" } else { "ro" };
    vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
        mount("/dev", "tmpfs", "tmpfs", &["nosuid", "strictatime", "mode=755", "size=65536k"]),
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
        ),
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        ),
        mount("/dev/mqueue", "mqueue", "mqueue", &["nosuid", "noexec", "nodev"]),
        mount("/sys", "sysfs", "sysfs", &["nosuid", "noexec", "nodev", sys_access]),
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            &["nosuid", "noexec", "nodev", "relatime", sys_access],
        ),
    ]
}

/// A mount of `typ` from `source` at `destination`.
pub(super) fn mount(destination: &str, typ: &str, source: &str, options: &[&str]) -> Mount {
    let mut mount = Mount::default();
    mount
        .set_destination(destination.into())
        .set_typ(Some(typ.to_owned()))
        .set_source(Some(source.into()))
        .set_options(Some(options.iter().map(|o| (*o).to_owned()).collect()));
    mount
}
