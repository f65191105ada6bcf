use std::collections::HashMap;
use std::sync::Arc;

use outpost_core::source::short_sha256;

use super::writer::{Status, identify, parse_cmdline, passwd_name, quoted};
use super::*;
use crate::config::Backend;

/// A PID that cannot exist (above any `pid_max`).
const GONE: i32 = i32::MAX;

/// An exec history holding fixed records: a stand-in for the eBPF loader's map.
#[derive(Debug, Default)]
struct Execs(HashMap<u32, ExecRecord>);

impl ExecHistory for Execs {
    fn exec_of(&self, tgid: u32) -> Option<ExecRecord> {
        self.0.get(&tgid).cloned()
    }
}

fn event(pid: i32) -> Origin {
    Origin::Event { pid: Some(pid), backend: Backend::Fanotify }
}

fn entry(file: &str, action: Action) -> Entry {
    Entry {
        time: "2026-01-01T00:00:00Z".into(),
        source: ManifestSource::File,
        file: file.into(),
        path: format!("/etc/outpost/manifests/{file}"),
        action,
        cause: Cause::Event,
        pods: vec!["default/web-edge-1".into()],
        sha256: Some(short_sha256(b"x")),
        error: None,
        writer: identify(Origin::Rescan, None),
    }
}

#[test]
fn a_running_writer_is_read_from_proc() {
    let me = std::process::id() as i32;
    let writer = identify(event(me), None);
    assert_eq!(writer.pid, Some(me));
    assert_eq!(writer.source, Some(DataSource::Proc));
    assert_eq!(writer.uid, Some(nix::unistd::getuid().as_raw()));
    assert_eq!(writer.gid, Some(nix::unistd::getgid().as_raw()));
    let argv: Vec<String> = std::env::args().collect();
    assert_eq!(writer.argv, argv);
    let exe = std::env::current_exe().unwrap();
    assert_eq!(writer.exe.as_deref(), Some(exe.to_str().unwrap()));
    assert!(writer.comm.as_deref().is_some_and(|c| !c.is_empty()), "{writer:?}");
    assert!(writer.summary.starts_with(&format!("pid {me} uid ")), "{}", writer.summary);
    assert!(writer.summary.contains(&argv[0]), "{}", writer.summary);
}

#[test]
fn a_writer_gone_before_it_was_read_says_so() {
    let writer = identify(event(GONE), None);
    assert_eq!(writer.pid, Some(GONE));
    assert_eq!(writer.source, None);
    assert_eq!((writer.uid, writer.argv.len()), (None, 0));
    assert_eq!(writer.summary, format!("pid {GONE} exited before it could be identified"));
}

#[test]
fn a_gone_writer_is_filled_in_from_the_exec_history() {
    let record = ExecRecord {
        filename: "/usr/bin/cp".into(),
        argv: vec!["cp".into(), "/tmp/a.yaml".into(), "/etc/outpost/manifests/".into()],
        uid: 1000,
        at: jiff::Timestamp::UNIX_EPOCH,
    };
    let execs = Execs(HashMap::from([(GONE as u32, record.clone())]));
    let audit = ManifestAudit::new(10, Some(Arc::new(execs)));
    let writer = audit.writer(event(GONE));
    assert_eq!(writer.source, Some(DataSource::Ebpf));
    assert_eq!(writer.argv, record.argv);
    assert_eq!(writer.uid, Some(1000));
    assert_eq!(writer.exe.as_deref(), Some("/usr/bin/cp"));
    assert_eq!(writer.comm.as_deref(), Some("cp"));
    assert!(
        writer.summary.contains("cp /tmp/a.yaml /etc/outpost/manifests/"),
        "{}",
        writer.summary
    );
    assert!(writer.summary.contains("eBPF exec history"), "{}", writer.summary);

    let exec = writer.exec.expect("the kernel's record rides along");
    assert_eq!((exec.filename.as_str(), exec.uid), ("/usr/bin/cp", 1000));

    // A running process is still read from /proc; the kernel's record of its exec is
    // added when the history has one, with its time.
    let me = std::process::id() as i32;
    assert_eq!(audit.writer(event(me)).source, Some(DataSource::Proc));
    assert_eq!(audit.writer(event(me)).exec, None);
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let mine = ExecRecord { at, ..record.clone() };
    audit.set_exec_history(Some(Arc::new(Execs(HashMap::from([(me as u32, mine)])))));
    let writer = audit.writer(event(me));
    assert_eq!(writer.source, Some(DataSource::Proc));
    let exec = writer.exec.expect("exec data when eBPF is on");
    assert_eq!(exec.argv, record.argv);
    assert_eq!(exec.at, at.to_string());
    // The history knows nothing of this one: exited.
    audit.set_exec_history(Some(Arc::new(Execs::default())));
    assert!(audit.writer(event(GONE)).summary.contains("exited before it could be identified"));
}

#[test]
fn writers_without_a_pid_say_why() {
    let inotify = identify(Origin::Event { pid: None, backend: Backend::Inotify }, None);
    assert_eq!(inotify.summary, "unknown (inotify backend)");
    assert_eq!(inotify.pid, None);
    let elsewhere = identify(Origin::Event { pid: None, backend: Backend::Fanotify }, None);
    assert!(elsewhere.summary.contains("outside the agent's PID namespace"));
    let rescan = identify(Origin::Rescan, None);
    assert!(rescan.summary.starts_with("unknown (found by a rescan"), "{}", rescan.summary);
}

#[test]
fn cmdline_is_split_at_nul_bytes() {
    assert_eq!(parse_cmdline(b"sh\0-c\0cat > a.yaml\0"), ["sh", "-c", "cat > a.yaml"]);
    assert_eq!(parse_cmdline(b"no-trailing-nul"), ["no-trailing-nul"]);
    assert_eq!(parse_cmdline(b"a\0\0b\0"), ["a", "", "b"]);
    assert!(parse_cmdline(b"").is_empty());
    assert_eq!(parse_cmdline(b"bad\xff\0"), ["bad\u{fffd}"]);
}

#[test]
fn status_gives_name_ids_and_zombies() {
    let text = "Name:\tcat\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t7\n\
                Uid:\t1000\t0\t0\t0\nGid:\t100\t100\t100\t100\n";
    let status = Status::parse(text);
    assert_eq!(status.name.as_deref(), Some("cat"));
    assert_eq!((status.uid, status.euid, status.gid), (Some(1000), Some(0), Some(100)));
    assert!(!status.zombie);
    assert!(Status::parse("State:\tZ (zombie)\n").zombie);
    assert_eq!(Status::parse("garbage"), Status::default());
}

#[test]
fn passwd_names_the_first_matching_uid() {
    let passwd = "root:x:0:0:root:/root:/bin/bash\n# comment\nbroken\n\
                  edge:x:1000:1000::/home/edge:/bin/sh\nalias:x:1000:1000::/:/bin/sh\n";
    assert_eq!(passwd_name(passwd, 0).as_deref(), Some("root"));
    assert_eq!(passwd_name(passwd, 1000).as_deref(), Some("edge"));
    assert_eq!(passwd_name(passwd, 7), None);
}

#[test]
fn listing_filters_by_file_and_keeps_the_newest_last() {
    let audit = ManifestAudit::new(3, None);
    for (file, action) in [
        ("a.yaml", Action::Added),
        ("b.yaml", Action::Added),
        ("a.yaml", Action::Changed),
        ("a.yaml", Action::Removed),
    ] {
        audit.record(entry(file, action));
    }
    let all = audit.list(&Filter::default());
    assert_eq!((all.capacity, all.dropped, all.items.len()), (3, 1, 3));
    let actions: Vec<Action> = all.items.iter().map(|e| e.action).collect();
    assert_eq!(actions, [Action::Added, Action::Changed, Action::Removed]);

    let a = audit.list(&Filter { file: Some("a.yaml".into()), limit: None });
    assert_eq!(a.items.len(), 2);
    let by_path =
        audit.list(&Filter { file: Some("/etc/outpost/manifests/b.yaml".into()), limit: None });
    assert_eq!(by_path.items.len(), 1);
    let newest = audit.list(&Filter { file: Some("a.yaml".into()), limit: Some(1) });
    assert_eq!(newest.items.iter().map(|e| e.action).collect::<Vec<_>>(), [Action::Removed]);
    assert!(audit.list(&Filter { file: None, limit: Some(0) }).items.is_empty());
}

#[test]
fn an_entry_serializes_with_its_writer() {
    let mut e = entry("a.yaml", Action::Rejected);
    e.error = Some("a.yaml:1:1: bad".into());
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["action"], "rejected");
    assert_eq!(json["cause"], "event");
    assert_eq!(json["error"], "a.yaml:1:1: bad");
    assert_eq!(json["writer"]["pid"], serde_json::Value::Null);
    assert!(json["writer"].get("source").is_none());
    assert!(json["writer"]["summary"].as_str().unwrap().starts_with("unknown"));
}

#[test]
fn a_command_line_is_shown_on_one_line() {
    assert_eq!(quoted("/usr/bin/cp"), "/usr/bin/cp");
    assert_eq!(quoted("a b"), "\"a b\"");
    assert_eq!(quoted("kind: Pod\nmetadata: {}"), "\"kind: Pod\\nmetadata: {}\"");
    assert_eq!(quoted(""), "\"\"");
    assert_eq!(quoted("say \"hi\""), "\"say \\\"hi\\\"\"");
}

fn pod_json(name: &str, spec: serde_json::Value) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    });
    for (key, value) in spec.as_object().into_iter().flatten() {
        pod["spec"][key] = value.clone();
    }
    serde_json::from_value(pod).unwrap()
}

#[test]
fn refusals_follow_the_policy_of_the_manifests_source() {
    let audit = ManifestAudit::default();
    let plain = pod_json("plain", serde_json::json!({}));
    let host = pod_json("host", serde_json::json!({"hostNetwork": true, "hostPID": true}));
    let pods = [&plain, &host];
    let refused = audit.refusals(ManifestSource::Push, pods);
    assert_eq!(refused.pods, ["default/host"]);
    assert_eq!(refused.lines.len(), 2, "{refused:?}");
    assert!(refused.lines[0].starts_with("pod default/host: spec.hostNetwork: "), "{refused:?}");
    assert!(audit.refusals(ManifestSource::File, pods).is_empty());

    let mut policy = outpost_core::admission::Policy::default();
    policy.push.host_network = true;
    policy.push.host_pid = true;
    audit.set_policy(policy);
    assert!(audit.refusals(ManifestSource::Push, pods).is_empty());
    assert_eq!(audit.refusals(ManifestSource::Url, pods).pods, ["default/host"]);
}

#[test]
fn a_refused_manifest_is_recorded_with_its_source_and_every_refused_field() {
    let audit = ManifestAudit::default();
    let host = pod_json("host", serde_json::json!({"hostIPC": true}));
    let manifest = || admission::Manifest {
        source: ManifestSource::Push,
        file: "web".into(),
        path: "/manifests/web".into(),
        cause: Cause::Push,
        sha256: Some(short_sha256(b"x")),
        writer: Writer::remote("PUT from 127.0.0.1:1 with the bearer token"),
    };
    // Nothing refused: nothing recorded.
    let plain = pod_json("plain", serde_json::json!({}));
    audit.refused(manifest(), &audit.refusals(ManifestSource::Push, [&plain]));
    assert!(audit.list(&Filter::default()).items.is_empty());

    audit.refused(manifest(), &audit.refusals(ManifestSource::Push, [&plain, &host]));
    let listing = audit.list(&Filter { file: Some("/manifests/web".into()), limit: None });
    let [entry] = &listing.items[..] else { panic!("one entry: {listing:?}") };
    assert_eq!(entry.action, Action::Refused);
    assert_eq!(entry.pods, ["default/host"]);
    let json = serde_json::to_value(&**entry).unwrap();
    assert_eq!(json["source"], "push");
    assert_eq!(json["action"], "refused");
    assert_eq!(json["cause"], "push");
    assert_eq!(json["writer"]["summary"], "PUT from 127.0.0.1:1 with the bearer token");
    let error = json["error"].as_str().unwrap();
    assert!(error.contains("admissionPolicy.push.hostIPC: true"), "{error}");
    // Entries from before `source` existed read as the file source's.
    let mut old = json.clone();
    old.as_object_mut().unwrap().remove("source");
    let old: Entry = serde_json::from_value(old).unwrap();
    assert_eq!(old.source, ManifestSource::File);
}
