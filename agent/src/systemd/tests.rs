use std::os::unix::net::UnixDatagram;

use proptest::prelude::*;

use super::*;

#[test]
fn socket_paths_and_abstract_names() {
    assert_eq!(
        parse_socket(Some(OsStr::new("/run/systemd/notify"))),
        Some(NotifyAddr::Path(PathBuf::from("/run/systemd/notify")))
    );
    assert_eq!(
        parse_socket(Some(OsStr::new("@/org/freedesktop/systemd1/notify/1"))),
        Some(NotifyAddr::Abstract(b"/org/freedesktop/systemd1/notify/1".to_vec()))
    );
}

#[test]
fn unusable_sockets_mean_no_notifications() {
    for value in ["", "@", "relative/notify", "vsock:2:1234"] {
        assert_eq!(parse_socket(Some(OsStr::new(value))), None, "{value:?}");
    }
    assert_eq!(parse_socket(None), None);
}

#[test]
fn watchdog_for_this_process_only() {
    let thirty = Some(Duration::from_secs(30));
    assert_eq!(parse_watchdog(Some("30000000"), None, 42), thirty);
    assert_eq!(parse_watchdog(Some("30000000"), Some("42"), 42), thirty);
    assert_eq!(parse_watchdog(Some("30000000"), Some("41"), 42), None, "another process's");
    assert_eq!(parse_watchdog(Some("30000000"), Some("x"), 42), None, "a garbled PID");
    assert_eq!(parse_watchdog(Some("0"), None, 42), None, "0 disables it");
    assert_eq!(parse_watchdog(Some("-5"), None, 42), None);
    assert_eq!(parse_watchdog(Some("soon"), None, 42), None);
    assert_eq!(parse_watchdog(None, Some("42"), 42), None);
}

#[test]
fn threads_from_proc_status() {
    assert!(single_threaded("Name:\toutpost\nThreads:\t1\nSigQ:\t0/1\n"));
    assert!(!single_threaded("Name:\toutpost\nThreads:\t3\n"));
    assert!(!single_threaded("Name:\toutpost\nThreads:\t11\n"));
    assert!(!single_threaded(""), "unknown: not proven single-threaded");
}

#[test]
fn pings_at_half_the_interval() {
    assert_eq!(ping_interval(Duration::from_secs(30)), Duration::from_secs(15));
    assert_eq!(ping_interval(Duration::from_micros(1)), Duration::from_millis(1));
}

#[test]
fn messages() {
    assert_eq!(
        Message::Ready { status: "all pod sources seen".into() }.encode(),
        "READY=1\nSTATUS=all pod sources seen"
    );
    assert_eq!(
        Message::Stopping { status: "SIGTERM".into() }.encode(),
        "STOPPING=1\nSTATUS=SIGTERM"
    );
    assert_eq!(Message::Watchdog.encode(), "WATCHDOG=1");
}

proptest! {
    /// Whatever the status says, it stays one assignment: it cannot inject `READY=1`,
    /// `MAINPID=` or any other variable.
    #[test]
    fn a_status_is_one_assignment(status in ".*") {
        let encoded = Message::Stopping { status: status.clone() }.encode();
        let lines: Vec<&str> = encoded.split('\n').collect();
        prop_assert_eq!(lines.len(), 2);
        prop_assert_eq!(lines[0], "STOPPING=1");
        prop_assert!(lines[1].starts_with("STATUS="));
        prop_assert!(!lines[1].contains('\r'));
    }
}

#[test]
fn datagrams_reach_a_path_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let receiver = UnixDatagram::bind(&path).unwrap();
    let env = Env { notify_socket: Some(NotifyAddr::Path(path)), watchdog: None };
    let notifier = Notifier::open(&env).unwrap().unwrap();
    notifier.notify(&Message::Watchdog).unwrap();
    let mut buf = [0u8; 64];
    let n = receiver.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"WATCHDOG=1");
}

#[test]
fn datagrams_reach_an_abstract_socket() {
    let name = format!("outpost-test-notify-{}", std::process::id()).into_bytes();
    let receiver =
        UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
    let env = Env { notify_socket: Some(NotifyAddr::Abstract(name)), watchdog: None };
    let notifier = Notifier::open(&env).unwrap().unwrap();
    notifier.notify(&Message::Ready { status: "up".into() }).unwrap();
    let mut buf = [0u8; 64];
    let n = receiver.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1\nSTATUS=up");
}

#[test]
fn no_socket_no_notifier() {
    assert!(Notifier::open(&Env::default()).unwrap().is_none());
}

#[test]
fn a_vanished_socket_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone");
    let env = Env { notify_socket: Some(NotifyAddr::Path(path.clone())), watchdog: None };
    let notifier = Notifier::open(&env).unwrap().unwrap();
    let e = notifier.notify(&Message::Watchdog).unwrap_err();
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}
