use super::*;
use crate::pod::{self, CONFIG_SOURCE};

const NODE: &str = "edge-1";

fn pod(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}

fn list(names: &[&str]) -> String {
    let items: Vec<String> = names
        .iter()
        .map(|n| {
            format!(r#"{{"metadata":{{"name":"{n}"}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#)
        })
        .collect();
    format!(r#"{{"apiVersion":"v1","kind":"PodList","items":[{}]}}"#, items.join(","))
}

fn now() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

fn uids(pushed: &Pushed) -> Vec<String> {
    pushed.pods.iter().map(|p| p.uid().to_owned()).collect()
}

/// Pod name → UID of a SET.
fn names(update: &SourceUpdate) -> Vec<String> {
    update.pods.iter().map(|p| p.name.name.clone()).collect()
}

#[test]
fn keys_are_one_path_segment_of_safe_characters() {
    for good in
        ["web", "a", "A.b_c-1", "..a", "a..", "audit.yaml", "Audit", &"k".repeat(MAX_KEY_LEN)]
    {
        assert!(validate_key(good).is_ok(), "{good:?} should be a valid key");
    }
    let long = "k".repeat(MAX_KEY_LEN + 1);
    for bad in
        ["", ".", "..", "audit", "a/b", "a b", "a%2Fb", "ünïcode", "a\0", "a\\b", "a:b", &long]
    {
        let error = validate_key(bad).unwrap_err();
        assert!(matches!(error, Error::Key { .. }), "{bad:?}: {error}");
    }
    // The message repeats a long key only up to the limit.
    let huge = "k".repeat(100_000);
    assert!(validate_key(&huge).unwrap_err().to_string().len() < 300);
}

#[test]
fn the_same_body_under_the_same_key_always_gets_the_same_uid() {
    // S5: content + location (the push key) + node decide the UID.
    let body = pod("web", "busybox");
    let a = prepare("web", body.as_bytes(), NODE, now()).unwrap();
    let b = prepare("web", body.as_bytes(), NODE, Timestamp::MAX).unwrap();
    assert_eq!(uids(&a), uids(&b));
    assert_eq!(a.digest, b.digest);
    assert!(a.digest.starts_with("sha256:") && a.digest.len() == 7 + 64, "{}", a.digest);
    assert_eq!(a.size, body.len() as u64);
    let other_key = prepare("web2", body.as_bytes(), NODE, now()).unwrap();
    let other_node = prepare("web", body.as_bytes(), "edge-2", now()).unwrap();
    let other_body = prepare("web", pod("web", "busybox:2").as_bytes(), NODE, now()).unwrap();
    for other in [&other_key, &other_node, &other_body] {
        assert_ne!(uids(other), uids(&a));
    }
    // Static pods of source http, named for the node (S2, S3).
    let p = &a.pods[0];
    assert_eq!(pod::annotation(&p.pod, CONFIG_SOURCE), Some("http"));
    assert_eq!((p.name.namespace.as_str(), p.name.name.as_str()), ("default", "web-edge-1"));
}

#[test]
fn json_pod_lists_are_accepted_in_order() {
    let pushed = prepare("many", list(&["b", "a"]).as_bytes(), NODE, now()).unwrap();
    let names: Vec<_> = pushed.pods.iter().map(|p| p.name.name.as_str()).collect();
    assert_eq!(names, ["b-edge-1", "a-edge-1"]);
}

#[test]
fn bad_bodies_are_refused_with_key_line_and_column() {
    let error =
        prepare("web", b"apiVersion: v1\nkind: Pod\nmetadata: [\n", NODE, now()).unwrap_err();
    assert!(matches!(error, Error::Manifest { .. }), "{error}");
    let details = error.details();
    assert!(!details.is_empty());
    for line in &details {
        let mut parts = line.splitn(4, ':');
        assert_eq!(parts.next(), Some("web"), "{line}");
        assert!(parts.next().is_some_and(|l| l.parse::<usize>().is_ok()), "{line}");
        assert!(parts.next().is_some_and(|c| c.parse::<usize>().is_ok()), "{line}");
    }
    // S1: a pod without a name.
    let nameless = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    image: x\n";
    let error = prepare("web", nameless.as_bytes(), NODE, now()).unwrap_err();
    assert!(error.details().iter().any(|d| d.contains("metadata.name")), "{error}");

    assert!(matches!(prepare("web", b" \n", NODE, now()), Err(Error::Empty { .. })));
    let error = prepare("dup", list(&["a", "a"]).as_bytes(), NODE, now()).unwrap_err();
    assert!(matches!(error, Error::Duplicate { .. }), "{error}");
    assert!(error.to_string().contains("default/a-edge-1"), "{error}");
}

#[test]
fn problems_follow_each_key_s_last_push() {
    let mut problems = Problems::default();
    let bad = prepare("web", b"kind: [", NODE, now()).unwrap_err();
    assert!(problems.rejected("web", &bad));
    assert!(!problems.rejected("web", &bad), "the same rejection again changes nothing");
    let listed = problems.list();
    assert!(listed[0].first.starts_with("web:1:"), "{listed:?}");
    let key = Error::Key { key: "a/b".into(), reason: "is bad" };
    assert!(!problems.rejected("a/b", &key), "a bad key is no manifest");

    let good = prepare("web", pod("web", "busybox").as_bytes(), NODE, now()).unwrap();
    assert!(good.warnings.is_empty());
    assert!(problems.stored("web", &good), "fixed");
    assert!(problems.list().is_empty());

    let warned = prepare("db", warned("db").as_bytes(), NODE, now()).unwrap();
    assert_eq!(warned.warnings.len(), 1, "{:?}", warned.warnings);
    assert!(warned.warnings[0].starts_with("db:"), "{:?}", warned.warnings);
    assert!(problems.stored("db", &warned));
    assert!(!problems.stored("db", &warned));
    assert_eq!(problems.list()[0].severity, problems::Severity::Warned);
    let restored = Manifests::default().put("db", warned).unwrap();
    let Put::Created(restored) = restored else { panic!("expected Created") };
    assert_eq!(Problems::of(&restored).list(), problems.list(), "after a restart");
    assert!(problems.removed("db"));
    assert!(!problems.removed("db"));
    assert!(problems.list().is_empty());
}

#[test]
fn oversized_bodies_are_too_large() {
    let body = vec![b' '; manifest::MAX_MANIFEST_BYTES + 1];
    let mut body = body;
    body[0] = b'{';
    let error = prepare("big", &body, NODE, now()).unwrap_err();
    assert!(error.is_too_large(), "{error}");
}

#[test]
fn put_creates_replaces_or_leaves_unchanged() {
    let empty = Manifests::default();
    let web = || prepare("web", pod("web", "busybox").as_bytes(), NODE, now()).unwrap();
    let Put::Created(one) = empty.put("web", web()).unwrap() else { panic!("expected Created") };
    assert_eq!(one.len(), 1);
    assert!(matches!(one.put("web", web()).unwrap(), Put::Unchanged(_)));
    let changed = prepare("web", pod("web", "busybox:2").as_bytes(), NODE, now()).unwrap();
    let Put::Replaced(two) = one.put("web", changed).unwrap() else { panic!("expected Replaced") };
    assert_ne!(uids(two.get("web").unwrap()), uids(one.get("web").unwrap()));
    // Copy on write: the earlier state is untouched.
    assert_eq!(empty.len(), 0);
    assert_eq!(one.get("web").unwrap().digest, web().digest);
}

#[test]
fn a_pod_name_belongs_to_one_key() {
    let one = match Manifests::default()
        .put("a", prepare("a", pod("web", "busybox").as_bytes(), NODE, now()).unwrap())
        .unwrap()
    {
        Put::Created(m) => m,
        other => panic!("expected Created, got {other:?}"),
    };
    let clash = prepare("b", list(&["db", "web"]).as_bytes(), NODE, now()).unwrap();
    let error = one.put("b", clash).unwrap_err();
    assert!(matches!(&error, Error::Conflict { other, .. } if other == "a"), "{error}");
    assert!(error.to_string().contains("default/web-edge-1"), "{error}");
}

#[test]
fn the_set_lists_every_key_in_sorted_order_and_delete_removes_one() {
    let mut m = Manifests::default();
    for key in ["c", "a", "b"] {
        let body = list(&[&format!("{key}1"), &format!("{key}2")]);
        m = match m.put(key, prepare(key, body.as_bytes(), NODE, now()).unwrap()).unwrap() {
            Put::Created(next) => next,
            other => panic!("expected Created, got {other:?}"),
        };
    }
    let set = m.set();
    assert_eq!((set.source, set.op), (Source::Push, Op::Set));
    assert_eq!(
        names(&set),
        ["a1-edge-1", "a2-edge-1", "b1-edge-1", "b2-edge-1", "c1-edge-1", "c2-edge-1"]
    );
    let (rest, removed) = m.delete("b").unwrap();
    assert_eq!(removed.pods.len(), 2);
    assert_eq!(names(&rest.set()), ["a1-edge-1", "a2-edge-1", "c1-edge-1", "c2-edge-1"]);
    assert!(matches!(rest.delete("b"), Err(Error::NotFound { .. })));
}

#[test]
fn the_checkpoint_restores_the_same_pods() {
    let pushed = prepare("web", list(&["x", "y"]).as_bytes(), NODE, now()).unwrap();
    let Put::Created(m) = Manifests::default().put("web", pushed).unwrap() else {
        panic!("expected Created")
    };
    let json = serde_json::to_vec(&m.checkpoint(NODE)).unwrap();
    let restored = Manifests::from_checkpoint(serde_json::from_slice(&json).unwrap());
    let (a, b) = (m.get("web").unwrap(), restored.get("web").unwrap());
    assert_eq!(uids(a), uids(b));
    assert_eq!((&a.digest, a.size, a.pushed_at), (&b.digest, b.size, b.pushed_at));
    for (x, y) in a.pods.iter().zip(&b.pods) {
        assert_eq!(x.fingerprint, y.fingerprint);
        assert_eq!(x.pod, y.pod);
    }
}

/// A pod whose manifest decodes with a warning (its priority class is not known).
fn warned(name: &str) -> String {
    pod(name, "busybox").replace("spec:\n", "spec:\n  priorityClassName: gold\n")
}
