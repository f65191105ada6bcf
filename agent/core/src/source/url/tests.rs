//! The URL source's state machine on plain values and a fake clock: every action is
//! answered by hand, as the executor would after fetching, decoding or writing.

use std::path::PathBuf;

use super::*;
use crate::manifest::Origin;

const URL: &str = "http://h/pods";
const NODE: &str = "node-a";
const INTERVAL: Duration = Duration::from_secs(20);

fn pod_yaml(name: &str, image: &str) -> Vec<u8> {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
    .into_bytes()
}

fn etag(tag: &str) -> Validators {
    Validators { etag: Some(format!("\"{tag}\"")), last_modified: None }
}

fn document(body: Vec<u8>, validators: Validators) -> Input {
    Input::Fetched(Ok(Fetched::Document { body, validators }))
}

fn not_modified() -> Input {
    Input::Fetched(Ok(Fetched::NotModified))
}

fn write_error() -> checkpoint::Error {
    checkpoint::Error::Write {
        path: PathBuf::from("/var/lib/outpost/checkpoints/url.json"),
        reason: "No space left on device (os error 28)".into(),
    }
}

fn record(url: &str, node: &str, body: &[u8], validators: Validators) -> Record {
    let pods = manifest::decode(body, Origin::Url(url), node).expect("a good document");
    Record {
        url: url.into(),
        node_name: node.into(),
        etag: validators.etag,
        last_modified: validators.last_modified,
        body_hash: hash(body),
        pods: pods.into_iter().map(Arc::new).collect(),
    }
}

/// A machine, a fake clock (milliseconds since the start) and the last actions.
struct Harness {
    machine: Machine,
    start: Instant,
    /// The fake clock: time since `start`.
    elapsed: Duration,
    last: Vec<Action>,
    wake: Option<Instant>,
    /// Every list of manifests with problems sent so far (not among the step's actions).
    problems: Vec<Vec<ManifestProblem>>,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            machine: Machine::new(URL.into(), NODE.into(), INTERVAL, 7),
            start: Instant::now(),
            elapsed: Duration::ZERO,
            last: Vec::new(),
            wake: None,
            problems: Vec::new(),
        }
    }

    /// Started with no checkpoint; the first fetch is asked for.
    fn fetching() -> Harness {
        let mut h = Harness::new();
        assert_eq!(h.step(Input::Start), ["read checkpoint"]);
        assert!(h.step(Input::CheckpointRead(Ok(None))).is_empty());
        assert_eq!(h.wake_ms(), Some(0), "the first fetch at once");
        assert_eq!(h.tick(0), ["fetch"]);
        h
    }

    /// Holding `body` (fetched with `validators`, checkpointed), waiting for the next fetch.
    fn holding(body: Vec<u8>, validators: Validators) -> Harness {
        let mut h = Harness::fetching();
        h.step(document(body, validators));
        h.decode();
        let actions = h.step(Input::Written(Ok(())));
        assert!(actions[0].starts_with("set live"), "{actions:?}");
        h
    }

    fn step(&mut self, input: Input) -> Vec<String> {
        let now = self.start + self.elapsed;
        let step = self.machine.step(input, now);
        self.wake = step.wake;
        self.last = step.actions;
        let mut described = Vec::new();
        for action in &self.last {
            match action {
                Action::Emit(SourceEvent::Problems(problems)) => {
                    self.problems.push(problems.clone())
                }
                other => described.push(describe(other)),
            }
        }
        described
    }

    /// The manifests with problems as last sent: `severity: first problem`.
    fn problems(&self) -> Vec<String> {
        let last = self.problems.last().map(Vec::as_slice).unwrap_or_default();
        last.iter().map(|p| format!("{}: {p}", p.severity)).collect()
    }

    fn tick(&mut self, ms: u64) -> Vec<String> {
        self.elapsed = Duration::from_millis(ms);
        self.step(Input::Tick)
    }

    /// Ticks at the wake-up time.
    fn tick_when_due(&mut self) -> Vec<String> {
        let due = self.wake.expect("a wake-up");
        self.elapsed = due.duration_since(self.start);
        self.step(Input::Tick)
    }

    /// Answers the last [`Action::Decode`] as the executor does.
    fn decode(&mut self) -> Vec<String> {
        let Some(Action::Decode(body)) = self.last.iter().find(|a| matches!(a, Action::Decode(_)))
        else {
            panic!("no decode asked for: {:?}", self.last);
        };
        let decoded = manifest::decode_with_warnings(body, Origin::Url(URL), NODE)
            .map_err(|errors| Error::Manifest { url: URL.into(), errors });
        self.step(Input::Decoded(decoded))
    }

    fn wake_ms(&self) -> Option<u64> {
        self.wake.map(|at| at.duration_since(self.start).as_millis() as u64)
    }

    /// The record the last step asked to write.
    fn written(&self) -> &Record {
        self.last
            .iter()
            .find_map(|a| match a {
                Action::WriteCheckpoint(record) => Some(record),
                _ => None,
            })
            .expect("a checkpoint write")
    }
}

/// One action in words, to compare whole steps at a glance.
fn describe(action: &Action) -> String {
    match action {
        Action::ReadCheckpoint => "read checkpoint".into(),
        Action::Fetch(None) => "fetch".into(),
        Action::Fetch(Some(v)) => format!(
            "fetch if-none-match={} if-modified-since={}",
            v.etag.as_deref().unwrap_or("-"),
            v.last_modified.as_deref().unwrap_or("-")
        ),
        Action::Decode(_) => "decode".into(),
        Action::Audit { pods, .. } => format!("audit {} pods", pods.len()),
        Action::WriteCheckpoint(record) => format!("write checkpoint {} pods", record.pods.len()),
        Action::CountRejected => "count rejected".into(),
        Action::Emit(SourceEvent::Update(update, freshness)) => {
            assert_eq!((update.source, update.op), (Source::Url, Op::Set));
            let pods: Vec<&str> =
                update.pods.iter().map(|p| p.pod.metadata.name.as_deref().unwrap_or("?")).collect();
            let freshness = match freshness {
                Freshness::Live => "live",
                Freshness::Checkpoint => "checkpoint",
            };
            format!("set {freshness} [{}]", pods.join(" "))
        }
        Action::Emit(SourceEvent::Confirmed) => "confirmed".into(),
        Action::Emit(SourceEvent::Failed(e)) => format!("failed: {e}"),
        Action::Emit(SourceEvent::Problems(problems)) => format!("problems {}", problems.len()),
    }
}

/// `actions` are these, the failures matched by what their message contains.
#[track_caller]
fn assert_actions(actions: &[String], want: &[&str]) {
    assert_eq!(actions.len(), want.len(), "{actions:#?}");
    for (got, want) in actions.iter().zip(want) {
        match want.strip_prefix("failed: ") {
            Some(part) => {
                assert!(got.starts_with("failed: ") && got.contains(part), "{got} ≠ {want}")
            }
            None => assert_eq!(got, want),
        }
    }
}

#[test]
fn jitter_stays_within_ten_percent_above_the_interval() {
    let interval = Duration::from_secs(20);
    assert_eq!(jittered(interval, 0.0), interval);
    assert_eq!(jittered(interval, 1.0), Duration::from_secs(22));
    for _ in 0..1000 {
        let wait = jittered(interval, fastrand::f64());
        assert!(wait >= interval && wait <= Duration::from_secs(22), "{wait:?}");
    }
    // Out-of-range draws are clamped; tiny intervals are raised; huge ones do not panic.
    assert_eq!(jittered(interval, 7.0), Duration::from_secs(22));
    assert_eq!(jittered(interval, -1.0), interval);
    assert_eq!(jittered(Duration::ZERO, 0.0), MIN_INTERVAL);
    assert_eq!(jittered(Duration::MAX, 1.0), Duration::MAX);
    let now = Instant::now();
    assert!(after(now, Duration::MAX) > now + Duration::from_secs(86_400 * 365));
    assert_eq!(hash(b"x").len(), 32);
}

#[test]
fn o1_a_new_document_is_decoded_audited_and_checkpointed_before_its_set() {
    let mut h = Harness::fetching();
    assert_eq!(h.step(document(pod_yaml("web", "i"), etag("v1"))), ["decode"]);
    assert_eq!(h.wake, None, "busy: the result comes first");
    assert_eq!(h.decode(), ["audit 1 pods", "write checkpoint 1 pods"], "no SET before the write");
    let record = h.written().clone();
    assert_eq!(record, self::record(URL, NODE, &pod_yaml("web", "i"), etag("v1")));
    assert_eq!(h.step(Input::Written(Ok(()))), ["set live [web-node-a]"]);
    let wake = h.wake_ms().expect("the next fetch");
    assert!((20_000..=22_000).contains(&wake), "an interval, jittered: {wake}");
    assert!(h.tick(wake - 1).is_empty(), "not due yet");
    assert_eq!(h.tick_when_due(), ["fetch if-none-match=\"v1\" if-modified-since=-"]);
}

#[test]
fn not_modified_and_an_unchanged_body_confirm_without_a_set() {
    let mut h = Harness::holding(pod_yaml("web", "i"), etag("v1"));
    h.tick_when_due();
    assert_eq!(h.step(not_modified()), ["confirmed"]);
    // The same bytes under new validators: confirmed, and asked with the new ones next.
    h.tick_when_due();
    let validators =
        Validators { etag: None, last_modified: Some("Tue, 1 Dec 2026 00:00:00 GMT".into()) };
    assert_eq!(h.step(document(pod_yaml("web", "i"), validators)), ["confirmed"]);
    assert_eq!(
        h.tick_when_due(),
        ["fetch if-none-match=- if-modified-since=Tue, 1 Dec 2026 00:00:00 GMT"]
    );
}

#[test]
fn a_changed_document_replaces_the_set() {
    let mut h = Harness::holding(pod_yaml("web", "img:1"), etag("v1"));
    h.tick_when_due();
    h.step(document(pod_yaml("web", "img:2"), etag("v2")));
    h.decode();
    assert_eq!(h.step(Input::Written(Ok(()))), ["set live [web-node-a]"]);
    assert_eq!(h.tick_when_due(), ["fetch if-none-match=\"v2\" if-modified-since=-"]);
}

#[test]
fn a_bad_document_among_good_ones_keeps_the_pods_and_fails() {
    let mut h = Harness::holding(pod_yaml("web", "i"), etag("v1"));
    for (body, want) in [
        ("kind: [", "cannot decode YAML"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "metadata.name: missing"),
    ] {
        h.tick_when_due();
        assert_eq!(h.step(document(body.into(), etag("bad"))), ["decode"]);
        let actions = h.decode();
        assert_actions(&actions, &["count rejected", &format!("failed: {want}")]);
        assert!(actions[1].contains(URL), "names the URL: {actions:?}");
        assert!(h.wake_ms().is_some(), "retried at the next interval");
    }
    // Empty: rejected without decoding.
    h.tick_when_due();
    let actions = h.step(document(b"  \n".to_vec(), etag("empty")));
    assert_actions(&actions, &["count rejected", "failed: the document is empty"]);
    // The server still holds the bad one, and the source the good one: asked with the
    // good one's validators, the same good bytes are only a confirmation.
    assert_eq!(h.tick_when_due(), ["fetch if-none-match=\"v1\" if-modified-since=-"]);
    assert_eq!(h.step(document(pod_yaml("web", "i"), etag("v1"))), ["confirmed"]);
}

#[test]
fn a_rejected_document_is_listed_until_the_server_serves_a_good_one() {
    let mut h = Harness::holding(pod_yaml("web", "i"), etag("v1"));
    assert!(h.problems.is_empty(), "a good document: nothing to list");
    h.tick_when_due();
    h.step(document(b"apiVersion: v1\nkind: Pod\nmetadata: {}\n".to_vec(), etag("bad")));
    h.decode();
    let problems = h.problems();
    assert_eq!(problems.len(), 1);
    assert!(problems[0].starts_with(&format!("rejected: {URL}:")), "{problems:?}");
    assert!(problems[0].contains("metadata.name: missing"), "{problems:?}");
    // The same bad document again: the list is the same, not sent again.
    h.tick_when_due();
    h.step(document(b"apiVersion: v1\nkind: Pod\nmetadata: {}\n".to_vec(), etag("bad")));
    h.decode();
    // A fetch that fails says nothing about the document.
    h.tick_when_due();
    h.step(Input::Fetched(Err(Error::Status {
        url: URL.into(),
        code: 502,
        reason: "Bad Gateway".into(),
    })));
    assert_eq!(h.problems.len(), 1);
    // The held document served again: no longer rejected.
    h.tick_when_due();
    assert_eq!(h.step(not_modified()), ["confirmed"]);
    assert_eq!((h.problems.len(), h.problems()), (2, Vec::<String>::new()));
}

#[test]
fn a_document_with_warnings_is_listed_while_it_is_held() {
    let mut h = Harness::fetching();
    let warned = String::from_utf8(pod_yaml("web", "i"))
        .unwrap_or_default()
        .replace("spec:\n", "spec:\n  priorityClassName: gold\n");
    h.step(document(warned.clone().into_bytes(), etag("v1")));
    let actions = h.decode();
    assert_eq!(actions, ["audit 1 pods", "write checkpoint 1 pods"], "its pods run");
    h.step(Input::Written(Ok(())));
    let problems = h.problems();
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with(&format!("warned: {URL}:"))
            && problems[0].contains("priorityClassName"),
        "{problems:?}"
    );
    // Confirmed again and again: still listed, not sent again.
    for _ in 0..2 {
        h.tick_when_due();
        h.step(document(warned.clone().into_bytes(), etag("v1")));
    }
    assert_eq!(h.problems.len(), 1);
    // A rejected document shows first; the held one's warnings show again once it is
    // served again.
    h.tick_when_due();
    h.step(document(b"kind: [".to_vec(), etag("bad")));
    h.decode();
    assert!(h.problems()[0].starts_with("rejected: "), "{:?}", h.problems());
    h.tick_when_due();
    h.step(not_modified());
    assert!(h.problems()[0].starts_with("warned: "), "{:?}", h.problems());
    // A new document without warnings: nothing listed.
    h.tick_when_due();
    h.step(document(pod_yaml("web", "i"), etag("v2")));
    h.decode();
    h.step(Input::Written(Ok(())));
    assert!(h.problems().is_empty());
    assert_eq!(h.problems.len(), 4);
}

#[test]
fn fetch_failures_keep_the_pods_and_retry_at_the_next_interval() {
    let mut h = Harness::holding(pod_yaml("web", "i"), etag("v1"));
    for _ in 0..3 {
        h.tick_when_due();
        let at = h.elapsed.as_millis() as u64;
        let failure = Error::Status { url: URL.into(), code: 404, reason: "Not Found".into() };
        let actions = h.step(Input::Fetched(Err(failure)));
        assert_actions(&actions, &["failed: the server answered 404 Not Found"]);
        let next = h.wake_ms().expect("the next fetch");
        assert!((at + 20_000..=at + 22_000).contains(&next), "no faster, no slower: {next}");
    }
    h.tick_when_due();
    assert_eq!(h.step(not_modified()), ["confirmed"], "back: nothing to merge again");
}

#[test]
fn m9_a_source_that_never_got_a_good_document_sends_no_set() {
    let mut h = Harness::fetching();
    let failure = Error::Fetch { url: URL.into(), detail: "connection refused".into() };
    assert_actions(&h.step(Input::Fetched(Err(failure))), &["failed: connection refused"]);
    assert_eq!(h.tick_when_due(), ["fetch"], "nothing held: an unconditional GET");
    let actions = h.step(document(b"".to_vec(), Validators::default()));
    assert_actions(&actions, &["count rejected", "failed: the document is empty"]);
}

#[test]
fn a_refresh_fetches_at_once_and_only_while_waiting() {
    let mut h = Harness::holding(pod_yaml("web", "i"), etag("v1"));
    h.elapsed = Duration::from_secs(1);
    assert_eq!(h.step(Input::Refresh), ["fetch if-none-match=\"v1\" if-modified-since=-"]);
    assert!(h.step(Input::Refresh).is_empty(), "a fetch is under way");
    assert_eq!(h.step(not_modified()), ["confirmed"]);
    let wake = h.wake_ms().expect("the next fetch");
    assert!((21_000..=23_000).contains(&wake), "an interval after the refresh: {wake}");
}

#[test]
fn o1_a_failed_checkpoint_write_still_applies_the_update_and_is_retried() {
    let mut h = Harness::fetching();
    h.step(document(pod_yaml("web", "i"), etag("v1")));
    h.decode();
    let actions = h.step(Input::Written(Err(write_error())));
    assert_actions(&actions, &["set live [web-node-a]", "failed: cannot write checkpoint"]);
    // Confirmed by a 304: the write is retried before confirming; it fails again.
    h.tick_when_due();
    assert_eq!(h.step(not_modified()), ["write checkpoint 1 pods"]);
    assert_eq!(h.wake, None);
    assert_actions(
        &h.step(Input::Written(Err(write_error()))),
        &["failed: cannot write checkpoint"],
    );
    // The same bytes again (a server without validators): retried, and now it works.
    h.tick_when_due();
    assert_eq!(h.step(document(pod_yaml("web", "i"), etag("v1"))), ["write checkpoint 1 pods"]);
    assert_eq!(h.step(Input::Written(Ok(()))), ["confirmed"]);
    // Written: the next confirmation writes nothing.
    h.tick_when_due();
    assert_eq!(h.step(not_modified()), ["confirmed"]);
}

#[test]
fn an_unsaved_document_replaced_by_a_new_one_is_not_written_again() {
    let mut h = Harness::fetching();
    h.step(document(pod_yaml("web", "img:1"), etag("v1")));
    h.decode();
    h.step(Input::Written(Err(write_error())));
    h.tick_when_due();
    h.step(document(pod_yaml("web", "img:2"), etag("v2")));
    h.decode();
    assert_eq!(h.written().etag.as_deref(), Some("\"v2\""));
    assert_eq!(h.step(Input::Written(Ok(()))), ["set live [web-node-a]"]);
    h.tick_when_due();
    assert_eq!(h.step(not_modified()), ["confirmed"]);
}

#[test]
fn o2_the_checkpoint_is_replayed_first_then_the_live_document_replaces_it() {
    let mut h = Harness::new();
    h.step(Input::Start);
    let saved = record(URL, NODE, &pod_yaml("web", "img:1"), etag("v1"));
    assert_eq!(h.step(Input::CheckpointRead(Ok(Some(saved)))), ["set checkpoint [web-node-a]"]);
    assert_eq!(h.tick(0), ["fetch if-none-match=\"v1\" if-modified-since=-"]);
    // The server has moved on while the node was offline.
    h.step(document(pod_yaml("api", "i"), etag("v2")));
    assert_eq!(h.decode(), ["audit 1 pods", "write checkpoint 1 pods"]);
    assert_eq!(h.step(Input::Written(Ok(()))), ["set live [api-node-a]"]);
}

#[test]
fn o2_a_replayed_checkpoint_is_confirmed_by_a_304() {
    let mut h = Harness::new();
    h.step(Input::Start);
    let saved = record(URL, NODE, &pod_yaml("web", "i"), etag("v1"));
    h.step(Input::CheckpointRead(Ok(Some(saved))));
    h.tick(0);
    assert_eq!(h.step(not_modified()), ["confirmed"]);
}

#[test]
fn o2_the_checkpoint_replayed_while_the_server_is_unreachable_stays() {
    let mut h = Harness::new();
    h.step(Input::Start);
    let saved = record(URL, NODE, &pod_yaml("web", "i"), etag("v1"));
    h.step(Input::CheckpointRead(Ok(Some(saved))));
    for _ in 0..2 {
        h.tick_when_due();
        let failure = Error::Fetch { url: URL.into(), detail: "timed out".into() };
        assert_actions(&h.step(Input::Fetched(Err(failure))), &["failed: timed out"]);
    }
}

#[test]
fn another_url_s_or_node_s_checkpoint_is_not_replayed() {
    for (url, node) in [("http://other/pods", NODE), (URL, "node-b")] {
        let mut h = Harness::new();
        h.step(Input::Start);
        let saved = record(url, node, &pod_yaml("web", "i"), etag("v1"));
        assert!(h.step(Input::CheckpointRead(Ok(Some(saved)))).is_empty());
        assert_eq!(h.tick(0), ["fetch"], "nothing held");
    }
}

#[test]
fn an_unreadable_checkpoint_is_reported_and_the_source_goes_on() {
    let mut h = Harness::new();
    h.step(Input::Start);
    let corrupt =
        checkpoint::Error::Corrupt { path: "/x/url.json".into(), reason: "garbage".into() };
    assert_actions(&h.step(Input::CheckpointRead(Err(corrupt))), &["failed: is corrupt"]);
    assert_eq!(h.tick(0), ["fetch"]);
}

#[test]
fn stray_inputs_are_ignored() {
    let mut h = Harness::holding(pod_yaml("web", "i"), etag("v1"));
    let wake = h.wake;
    assert!(h.step(Input::Written(Ok(()))).is_empty());
    assert!(h.step(not_modified()).is_empty());
    assert!(h.step(Input::Start).is_empty());
    assert_eq!(h.wake, wake, "still waiting for the same fetch");
}

#[test]
fn manifest_errors_name_the_url_and_position() {
    let url = "http://h/pods.yaml";
    let errors =
        manifest::decode(b"apiVersion: v1\nkind: Pod\nmetadata: {}\n", Origin::Url(url), NODE)
            .unwrap_err();
    let message = Error::Manifest { url: url.into(), errors }.to_string();
    assert!(message.starts_with("http://h/pods.yaml:"), "{message}");
    assert!(message.contains("metadata.name: missing"), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");
}
