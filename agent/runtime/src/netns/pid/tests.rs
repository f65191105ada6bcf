use outpost_host::Recording;

use super::*;

#[test]
fn the_recorded_init_counts_only_while_it_is_in_the_namespace_the_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    let host = Recording::new();
    assert_eq!(live_init(&host, dir.path()).unwrap(), None, "nothing recorded");
    fs::write(dir.path().join(FILE), "").unwrap();
    fs::write(dir.path().join(PID_FILE), "4242\n").unwrap();
    assert_eq!(live_init(&host, dir.path()).unwrap(), None, "the init is gone");
    let held = Namespace::of(&fs::metadata(dir.path().join(FILE)).unwrap());
    host.namespace("/proc/4242/ns/pid", held);
    assert_eq!(live_init(&host, dir.path()).unwrap(), Some(Pid::from_raw(4242)));
    // The pid reused by a process of another namespace is not the init.
    host.namespace("/proc/4242/ns/pid", Namespace { dev: held.dev, ino: held.ino + 1 });
    assert_eq!(live_init(&host, dir.path()).unwrap(), None);
    // Nor is the host's pid 1, whatever it is in.
    fs::write(dir.path().join(PID_FILE), "1").unwrap();
    host.namespace("/proc/1/ns/pid", held);
    assert_eq!(live_init(&host, dir.path()).unwrap(), None);
}
