use outpost_host::{Pid, Recording};

use super::holder_runs;

const BOOT: &str = "0f5b7c2e-1111-4222-8333-944455556666";

/// G1: a lease whose holder runs in this boot is live; one of a pid that is gone, of
/// another boot, or without a holder's shape is an earlier run's.
#[test]
fn a_lease_is_held_while_its_holder_runs_in_this_boot() {
    let host = Recording::new();
    host.file("/proc/sys/kernel/random/boot_id", format!("{BOOT}\n"));
    host.file(Pid::Id(4242).path("stat"), "4242 (outpost) S 1");
    assert!(holder_runs(&host, &format!("4242@{BOOT}")));
    assert!(!holder_runs(&host, "4242@another-boot"));
    assert!(!holder_runs(&host, &format!("4243@{BOOT}")), "its pid is gone");
    assert!(!holder_runs(&host, "not a holder"));
    assert!(!holder_runs(&host, &format!("x@{BOOT}")));
}

/// This process holds what it labels, on the real kernel.
#[test]
fn this_process_is_a_running_holder() {
    assert!(holder_runs(&outpost_host::Kernel, &super::holder()));
}
