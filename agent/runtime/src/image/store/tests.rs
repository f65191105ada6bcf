use super::{holder, holder_runs};

/// G1: a lease this process holds is live; one of a pid that is gone, of another boot,
/// or without a holder's shape is an earlier run's.
#[test]
fn a_lease_is_held_while_its_holder_runs_in_this_boot() {
    assert!(holder_runs(&holder()));
    let (pid, boot) = holder().split_once('@').map(|(p, b)| (p.to_owned(), b.to_owned())).unwrap();
    assert!(!holder_runs(&format!("{pid}@another-boot")));
    // Above the kernel's pid_max (4194304 at most): never a running process.
    assert!(!holder_runs(&format!("999999999@{boot}")));
    assert!(!holder_runs("not a holder"));
}
