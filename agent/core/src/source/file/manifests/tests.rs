use std::ffi::OsStr;

use super::*;
use crate::pod;
use crate::source::problems::Severity;

const NGINX: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx:1\n";

fn manifests() -> Manifests {
    Manifests::new("/etc/outpost/manifests".into(), "node-a".into())
}

fn name(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// A read an hour after the epoch (the core has no clock: the time comes with each read).
fn later() -> Timestamp {
    Timestamp::from_second(3600).expect("a valid time")
}

#[test]
fn s5_path_is_the_configured_one_and_content_decides_the_uid() {
    let mut m = manifests();
    assert!(matches!(
        m.offer(name("web.yaml"), NGINX.as_bytes(), Timestamp::UNIX_EPOCH),
        Outcome::Changed
    ));
    let pods = m.pods();
    assert_eq!(pods.len(), 1);
    let uid = pods[0].uid().to_owned();
    let mut other = manifests();
    other.offer(name("web.yaml"), NGINX.as_bytes(), later());
    assert_eq!(other.pods()[0].uid(), uid, "same content, path and node: same UID");
    let mut renamed = manifests();
    renamed.offer(name("web2.yaml"), NGINX.as_bytes(), later());
    assert_ne!(renamed.pods()[0].uid(), uid, "another path: another UID");
}

#[test]
fn m3_pods_carry_the_time_they_were_first_read() {
    let mut m = manifests();
    m.offer(name("web.yaml"), NGINX.as_bytes(), Timestamp::UNIX_EPOCH);
    assert_eq!(
        pod::annotation(&m.pods()[0].pod, pod::CONFIG_SEEN),
        Some(Timestamp::UNIX_EPOCH.to_string().as_str())
    );
}

#[test]
fn same_bytes_or_same_pods_are_unchanged_and_keep_the_arc() {
    let mut m = manifests();
    m.offer(name("web.yaml"), NGINX.as_bytes(), Timestamp::UNIX_EPOCH);
    let before = m.pods()[0].pod.clone();
    assert!(matches!(m.offer(name("web.yaml"), NGINX.as_bytes(), later()), Outcome::Unchanged));
    let commented = format!("# a comment\n{NGINX}");
    assert!(matches!(m.offer(name("web.yaml"), commented.as_bytes(), later()), Outcome::SamePods));
    assert!(std::sync::Arc::ptr_eq(&before, &m.pods()[0].pod));
}

#[test]
fn a_half_written_file_keeps_the_last_good_pods() {
    let mut m = manifests();
    m.offer(name("web.yaml"), NGINX.as_bytes(), Timestamp::UNIX_EPOCH);
    let uid = m.pods()[0].uid().to_owned();
    // Truncated: the writer has emptied the file and not written yet.
    assert!(matches!(m.offer(name("web.yaml"), b"", later()), Outcome::Empty));
    // Half written: does not parse.
    let half = &NGINX[..NGINX.len() - 12];
    assert!(matches!(m.offer(name("web.yaml"), half.as_bytes(), later()), Outcome::Rejected(_)));
    assert_eq!(m.pods()[0].uid(), uid);
    assert_eq!(m.errors().count(), 1);
    // Complete again: the error clears.
    m.offer(name("web.yaml"), NGINX.as_bytes(), later());
    assert_eq!(m.errors().count(), 0);
    assert_eq!(m.pods()[0].uid(), uid);
}

#[test]
fn s1_rejections_name_the_file_line_and_column() {
    let mut m = manifests();
    let Outcome::Rejected(report) =
        m.offer(name("bad.yaml"), b"apiVersion: v1\nkind: Pod\nmetadata: {}\n", later())
    else {
        panic!("a pod without a name must be rejected");
    };
    assert!(report.starts_with("/etc/outpost/manifests/bad.yaml:"), "{report}");
    assert!(report.contains("metadata.name"), "{report}");
    assert!(m.pods().is_empty());
}

#[test]
fn forget_and_retain_remove_files() {
    let mut m = manifests();
    m.offer(name("a.yaml"), NGINX.as_bytes(), later());
    m.offer(name("b.yaml"), NGINX.replace("web", "api").as_bytes(), later());
    assert!(m.forget(name("a.yaml")));
    assert!(!m.forget(name("a.yaml")));
    assert_eq!(m.pods().len(), 1);
    assert!(m.retain(&BTreeSet::new()));
    assert!(m.pods().is_empty());
}

#[test]
fn s9_pods_of_a_stream_are_listed_in_file_then_document_order() {
    let mut m = manifests();
    let stream = format!("{}---\n{}", NGINX.replace("web", "b"), NGINX.replace("web", "a"));
    m.offer(name("z.yaml"), stream.as_bytes(), later());
    m.offer(name("a.yaml"), NGINX.as_bytes(), later());
    let names: Vec<_> =
        m.pods().iter().map(|p| p.pod.metadata.name.clone().unwrap_or_default()).collect();
    assert_eq!(names, vec!["web-node-a", "b-node-a", "a-node-a"]);
}

#[test]
fn problems_list_rejected_and_warned_files_with_their_first_problem() {
    let mut m = manifests();
    let warned = NGINX.replace("spec:\n", "spec:\n  priorityClassName: gold\n");
    m.offer(name("web.yaml"), warned.as_bytes(), later());
    m.offer(name("ok.yaml"), NGINX.replace("web", "ok").as_bytes(), later());
    m.offer(name("bad.yaml"), b"apiVersion: v1\nkind: Pod\nmetadata: {}\n", later());
    let problems = m.problems();
    let listed: Vec<(&str, Severity)> =
        problems.iter().map(|p| (p.manifest.as_str(), p.severity)).collect();
    assert_eq!(
        listed,
        [
            ("/etc/outpost/manifests/bad.yaml", Severity::Rejected),
            ("/etc/outpost/manifests/web.yaml", Severity::Warned),
        ]
    );
    assert!(problems[0].first.starts_with("/etc/outpost/manifests/bad.yaml:"), "{problems:?}");
    assert!(problems[1].first.contains(": warning: spec.priorityClassName: "), "{problems:?}");
    assert_eq!(m.warnings_of(name("web.yaml")).len(), 1);
    // A rejection replaces the warnings of the content before it.
    m.offer(name("web.yaml"), b"kind: Pod\n", later());
    assert_eq!(m.problems()[1].severity, Severity::Rejected);
    assert!(m.warnings_of(name("web.yaml")).is_empty());
    m.forget(name("web.yaml"));
    m.offer(name("bad.yaml"), NGINX.replace("web", "bad").as_bytes(), later());
    assert!(m.problems().is_empty(), "fixed or gone: no longer listed");
}
