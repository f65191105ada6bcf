//! The manifest audit (`GET /manifests/audit`) against the real kernel: a dry-run agent
//! watches a manifest directory, processes started here write into it, and the audit
//! names each one (PID, uid, command line) for every change the file source acted on.

use outpost_tests::needs;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use outpost_tests::agent::Agent;
use outpost_tests::{is_root, outpost_bin, pod_yaml, prerequisite};
use serde_json::Value;

/// The writer's script: write `$1` into `$2` with a shell builtin (so that this shell,
/// not a child of it, is the writer), then wait for stdin to close. It stays alive until
/// the test has seen the entry, so the agent can read it from /proc.
const WRITER: &str = "printf '%s' \"$1\" > \"$2\" || exit 1; read _; exit 0";

/// A process writing one manifest, alive until [`Writer::finish`].
struct Writer {
    child: Child,
    argv: Vec<String>,
}

impl Writer {
    fn write(path: &Path, content: &str) -> Writer {
        let argv: Vec<String> = ["sh", "-c", WRITER, "audit-writer", content]
            .into_iter()
            .map(str::to_owned)
            .chain([path.display().to_string()])
            .collect();
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .spawn()
            .expect("cannot start the writer");
        Writer { child, argv }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes its stdin and waits for it: it must have written successfully.
    fn finish(mut self) {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the writer failed: {status}");
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The audit entries of `file`, once there are at least `count` of them.
fn entries(agent: &Agent, file: &str, count: usize) -> Vec<Value> {
    let path = format!("/manifests/audit?file={file}");
    let (_, body) = agent.poll(&path, |status, body| {
        status == 200
            && serde_json::from_str::<Value>(body)
                .is_ok_and(|v| v["items"].as_array().is_some_and(|i| i.len() >= count))
    });
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "ManifestAuditList", "{list}");
    list["items"].as_array().unwrap().clone()
}

fn manifest_dir() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("manifests");
    fs::create_dir(&dir).unwrap();
    (root, dir)
}

/// The writer named in `entry` is `writer`: its PID, uid 0 (the tests run as root),
/// its command line, read from /proc.
fn assert_written_by(entry: &Value, writer: &Writer) {
    let w = &entry["writer"];
    assert_eq!(w["pid"], writer.pid(), "{entry}");
    assert_eq!(w["source"], "proc", "{entry}");
    assert_eq!(w["uid"], 0, "{entry}");
    assert_eq!(w["user"], "root", "{entry}");
    assert_eq!(w["argv"], serde_json::json!(writer.argv), "{entry}");
    assert_eq!(w["comm"], "sh", "{entry}");
    assert!(w["exe"].as_str().is_some_and(|e| e.ends_with("sh")), "{entry}");
    assert_eq!(entry["cause"], "event", "{entry}");
}

#[needs(root)]
#[test]
fn fanotify_names_who_added_changed_broke_and_removed_a_manifest() {
    prerequisite(is_root(), "root (fanotify needs CAP_SYS_ADMIN)");
    let (_root, dir) = manifest_dir();
    // There before the agent: found by the first scan, with no writer to name.
    fs::write(dir.join("early.yaml"), pod_yaml("early", "busybox")).unwrap();
    let agent = Agent::start_args(&dir, &["--watcher", "fanotify"]);
    agent.poll("/readyz", |status, _| status == 200);
    let early = entries(&agent, "early.yaml", 1);
    assert_eq!(early[0]["action"], "added", "{early:?}");
    assert_eq!(early[0]["cause"], "rescan", "{early:?}");
    assert_eq!(early[0]["pods"], serde_json::json!(["default/early-edge-1"]), "{early:?}");
    assert!(early[0]["writer"]["summary"].as_str().unwrap().contains("rescan"), "{early:?}");

    let a = dir.join("a.yaml");
    let writer = Writer::write(&a, &pod_yaml("web", "busybox"));
    let added = entries(&agent, "a.yaml", 1);
    assert_eq!(added.len(), 1, "one change, one entry: {added:?}");
    let entry = &added[0];
    assert_eq!(entry["action"], "added", "{entry}");
    assert_eq!(entry["file"], "a.yaml", "{entry}");
    assert_eq!(entry["path"], a.display().to_string(), "{entry}");
    assert_eq!(entry["pods"], serde_json::json!(["default/web-edge-1"]), "{entry}");
    assert!(entry["sha256"].as_str().is_some_and(|s| s.starts_with("sha256:")), "{entry}");
    assert_written_by(entry, &writer);
    writer.finish();
    let line = agent.wait_for_log("manifest added file=a.yaml");
    assert!(
        line.contains("a.yaml") && line.contains("audit-writer"),
        "logged once with the writer: {line}"
    );

    // The same bytes again: not a change, not audited.
    Writer::write(&a, &pod_yaml("web", "busybox")).finish();
    let writer = Writer::write(&a, &pod_yaml("web", "busybox:2"));
    let changed = entries(&agent, "a.yaml", 2);
    assert_eq!(changed.len(), 2, "an unchanged rewrite is no change: {changed:?}");
    assert_eq!(changed[1]["action"], "changed", "{changed:?}");
    assert_ne!(changed[1]["sha256"], changed[0]["sha256"]);
    assert_written_by(&changed[1], &writer);
    writer.finish();

    let writer = Writer::write(&a, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [broken\n");
    let rejected = entries(&agent, "a.yaml", 3);
    let entry = &rejected[2];
    assert_eq!(entry["action"], "rejected", "{entry}");
    assert!(entry["error"].as_str().is_some_and(|e| e.contains("a.yaml")), "{entry}");
    assert_eq!(
        entry["pods"],
        serde_json::json!(["default/web-edge-1"]),
        "the last good pods stay: {entry}"
    );
    assert_written_by(entry, &writer);
    writer.finish();

    // Removed by this test process itself.
    fs::remove_file(&a).unwrap();
    let removed = entries(&agent, "a.yaml", 4);
    let entry = &removed[3];
    assert_eq!(entry["action"], "removed", "{entry}");
    assert_eq!(entry["pods"], serde_json::json!(["default/web-edge-1"]), "{entry}");
    assert_eq!(entry["writer"]["pid"], std::process::id(), "{entry}");
    let me: Vec<String> = std::env::args().collect();
    assert_eq!(entry["writer"]["argv"], serde_json::json!(me), "{entry}");

    // Newest last; `limit` keeps the newest; the filter matches a full path too.
    let (_, body) = agent.get(&format!("/manifests/audit?file={}&limit=1", a.display()));
    let newest: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(newest["items"].as_array().map(Vec::len), Some(1), "{newest}");
    assert_eq!(newest["items"][0]["action"], "removed", "{newest}");
    let (_, body) = agent.get("/manifests/audit");
    let all: Value = serde_json::from_str(&body).unwrap();
    let files: Vec<&str> =
        all["items"].as_array().unwrap().iter().map(|e| e["file"].as_str().unwrap()).collect();
    assert_eq!(files, ["early.yaml", "a.yaml", "a.yaml", "a.yaml", "a.yaml"], "{all}");
    let (status, body) = agent.get("/manifests/audit?limit=many");
    assert_eq!(status, 400, "{body}");

    // The operator's view: `outpost manifests audit FILE`, a table oldest first.
    let out = Command::new(outpost_bin())
        .args(["manifests", "audit", "a.yaml", "--server", &format!("http://{}", agent.addr)])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 5, "a header and four changes: {table}");
    assert!(rows[0].starts_with("TIME") && rows[0].contains("WRITER"), "{table}");
    for (row, action) in rows[1..].iter().zip(["added", "changed", "rejected", "removed"]) {
        assert!(row.contains(action) && row.contains("a.yaml"), "{action}: {table}");
    }
    assert!(rows[1].contains("audit-writer") && rows[1].contains("uid 0 (root)"), "{table}");
}

/// With inotify (fanotify blocked by seccomp, as in a container with the default
/// profile) there is no PID: the entry says the writer is unknown, and why.
#[needs(seccomp)]
#[test]
fn inotify_entries_say_the_writer_is_unknown() {
    let command = outpost_tests::without_fanotify();
    let (_root, dir) = manifest_dir();
    let agent = Agent::start_with(command, &dir, &[] as &[&str]);
    agent.poll("/readyz", |status, _| status == 200);
    let writer = Writer::write(&dir.join("a.yaml"), &pod_yaml("web", "busybox"));
    let added = entries(&agent, "a.yaml", 1);
    writer.finish();
    let entry = &added[0];
    assert_eq!(entry["action"], "added", "{entry}");
    assert_eq!(entry["cause"], "event", "{entry}");
    assert_eq!(entry["writer"]["pid"], Value::Null, "{entry}");
    assert_eq!(entry["writer"]["summary"], "unknown (inotify backend)", "{entry}");
    assert!(entry["writer"].get("source").is_none(), "{entry}");
}
