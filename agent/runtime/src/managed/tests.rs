use std::path::Path;

use proptest::prelude::*;

use super::process::{START_MARKER, is_ours, tail_of};
use super::*;

#[test]
fn auto_prefers_a_running_containerd_then_an_installed_one() {
    use Choice::{External, Managed};
    // (wanted, socket exists, binary found) → choice; every combination.
    let table = [
        (None, true, true, External),
        (None, true, false, External),
        (None, false, true, Managed),
        (None, false, false, External),
        (Some(Managed), true, true, Managed),
        (Some(Managed), true, false, Managed),
        (Some(Managed), false, true, Managed),
        (Some(Managed), false, false, Managed),
        (Some(External), true, true, External),
        (Some(External), true, false, External),
        (Some(External), false, true, External),
        (Some(External), false, false, External),
    ];
    for (wanted, socket, binary, expected) in table {
        assert_eq!(
            choose(wanted, socket, binary),
            expected,
            "{wanted:?} socket={socket} binary={binary}"
        );
    }
}

#[test]
fn default_layout_is_under_the_state_and_run_dirs() {
    let o = Options::new("/usr/bin/containerd".into(), Path::new("/var/lib/outpost"));
    assert_eq!(o.config(), Path::new("/var/lib/outpost/containerd/config.toml"));
    assert_eq!(o.log, Path::new("/var/lib/outpost/containerd/containerd.log"));
    assert_eq!(o.socket(), Path::new("/run/outpost/containerd/containerd.sock"));
    assert_eq!(o.pid_file(), Path::new("/run/outpost/containerd/containerd.pid"));
}

#[test]
fn a_socket_path_too_long_for_sun_path_is_refused_before_anything_is_written() {
    let mut o = Options::new("/usr/bin/containerd".into(), Path::new("/nonexistent/state"));
    o.run_dir = Path::new("/nonexistent").join("r".repeat(100));
    let err = o.prepare().unwrap_err();
    assert!(matches!(err, Error::SocketPath { .. }), "{err}");
    assert!(err.to_string().contains("shorter run directory"), "{err}");
}

#[test]
fn config_disables_cri_and_listens_only_on_its_own_sockets() {
    let text = config::render(config::Layout {
        root: Path::new("/s/containerd/root"),
        state: Path::new("/r/state"),
        opt: Path::new("/s/containerd/opt"),
        socket: Path::new("/r/containerd.sock"),
        ttrpc_socket: Path::new("/r/containerd.sock.ttrpc"),
    })
    .unwrap();
    for line in [
        "version = 2",
        r#"root = "/s/containerd/root""#,
        r#"state = "/r/state""#,
        r#"disabled_plugins = ["io.containerd.grpc.v1.cri"]"#,
        r#"  address = "/r/containerd.sock""#,
        r#"  address = "/r/containerd.sock.ttrpc""#,
        r#"  path = "/s/containerd/opt""#,
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    // The debug socket and the metrics listener are off.
    assert_eq!(text.matches(r#"address = """#).count(), 2, "{text}");
    // Every placeholder of the template (shared with the tests' containerd) is filled.
    assert!(!text.contains('{'), "{text}");
}

#[test]
fn config_refuses_a_path_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let bad = Path::new(std::ffi::OsStr::from_bytes(b"/s/\xff"));
    let layout = config::Layout {
        root: bad,
        state: Path::new("/r"),
        opt: Path::new("/o"),
        socket: Path::new("/r/s"),
        ttrpc_socket: Path::new("/r/t"),
    };
    assert_eq!(config::render(layout).unwrap_err(), config::NotUtf8(bad));
}

#[test]
fn toml_strings_escape_quotes_backslashes_and_controls() {
    assert_eq!(config::toml_string("/a b/c"), r#""/a b/c""#);
    assert_eq!(config::toml_string(r#"/a"b\c"#), r#""/a\"b\\c""#);
    assert_eq!(config::toml_string("/a\nb\u{7f}"), r#""/a\u000Ab\u007F""#);
}

proptest! {
    /// Whatever the path, the TOML string is one quoted line with nothing unescaped.
    #[test]
    fn toml_strings_are_always_one_closed_string(value in any::<String>()) {
        let quoted = config::toml_string(&value);
        prop_assert!(quoted.starts_with('"') && quoted.ends_with('"') && quoted.len() >= 2);
        let inner = &quoted[1..quoted.len() - 1];
        prop_assert!(!inner.chars().any(char::is_control));
        // Every quote inside is escaped: dropping escaped pairs leaves no quote.
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                prop_assert!(chars.next().is_some());
            } else {
                prop_assert_ne!(c, '"');
            }
        }
    }
}

#[test]
fn only_our_binary_with_our_config_is_taken_for_a_stale_instance() {
    let binary = Path::new("/usr/bin/containerd");
    let config = Path::new("/var/lib/outpost/containerd/config.toml");
    let ours = b"/usr/bin/containerd\0--config\0/var/lib/outpost/containerd/config.toml\0";
    assert!(is_ours(ours, binary, config));
    assert!(is_ours(
        b"containerd\0--config\0/var/lib/outpost/containerd/config.toml\0",
        binary,
        config
    ));
    // Another program mentioning the config, another containerd, an empty cmdline.
    assert!(!is_ours(b"vim\0/var/lib/outpost/containerd/config.toml\0", binary, config));
    assert!(!is_ours(
        b"/usr/bin/containerd\0--config\0/etc/containerd/config.toml\0",
        binary,
        config
    ));
    assert!(!is_ours(
        b"/usr/bin/containerd\0/var/lib/outpost/containerd/config.toml\0",
        binary,
        config
    ));
    assert!(!is_ours(b"", binary, config));
}

#[test]
fn the_log_tail_is_the_last_lines_since_the_last_start() {
    let old: String = (0..5).map(|i| format!("old {i}\n")).collect();
    let new: String = (0..30).map(|i| format!("line {i}\n\n")).collect();
    let text = format!("{old}{START_MARKER}\n{old}{START_MARKER}\n{new}");
    let tail = tail_of(&text);
    let lines: Vec<&str> = tail.lines().collect();
    assert_eq!(lines.len(), 20);
    assert_eq!(lines[0], "line 10");
    assert_eq!(lines[19], "line 29");
    assert_eq!(tail_of("no marker\n"), "no marker");
    assert_eq!(tail_of(""), "");
}
