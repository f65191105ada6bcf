//! The manifest URL source end to end: the real `outpost run --dry-run` against a test
//! manifest server that changes, fails, goes away and comes back.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use outpost_tests::agent::Agent;
use outpost_tests::manifest_server::{ManifestServer, Mode, Validators};
use outpost_tests::pod_yaml;
use serde_json::Value;

/// Long enough that only a hang hits it; nothing is timed.
const WAIT: Duration = Duration::from_secs(60);
/// How long to look for deltas that must not come. Absence checks only: a slow machine
/// makes them weaker, never wrong.
const QUIET: Duration = Duration::from_secs(2);

/// A PodList of busybox pods with these names.
fn pod_list(names: &[&str]) -> String {
    let mut doc = String::from("apiVersion: v1\nkind: PodList\nitems:\n");
    for name in names {
        let pod = pod_yaml(name, "busybox:1.36");
        doc.push_str(&format!("- {}\n", pod.trim_end().replace('\n', "\n  ")));
    }
    doc
}

/// A running agent with the URL source, its manifest directory (empty) and state directory.
struct Run {
    agent: Agent,
    _manifests: tempfile::TempDir,
}

fn start(url: &str, state: &Path, extra: &[&str]) -> Run {
    let manifests = tempfile::tempdir().unwrap();
    let mut args = vec!["--manifest-url", url, "--state-dir", state.to_str().unwrap()];
    args.extend_from_slice(extra);
    Run { agent: Agent::start_args(manifests.path(), &args), _manifests: manifests }
}

/// The next `n` deltas as (op, name, uid); each must come from the URL source.
fn deltas(agent: &Agent, n: usize) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = (0..n)
        .map(|_| {
            let d = agent.delta();
            assert_eq!(d["source"], "url", "{d}");
            (str(&d["op"]), str(&d["name"]), str(&d["uid"]))
        })
        .collect();
    out.sort();
    out
}

fn str(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn no_more_deltas(agent: &Agent) {
    if let Some(d) = agent.delta_within(QUIET) {
        panic!("unexpected delta: {d}");
    }
}

/// name → uid of ADDs.
fn added(deltas: &[(String, String, String)]) -> BTreeMap<String, String> {
    deltas
        .iter()
        .map(|(op, name, uid)| {
            assert_eq!(op, "ADD");
            (name.clone(), uid.clone())
        })
        .collect()
}

/// `/readyz`'s line for the URL source.
fn url_line(body: &str) -> &str {
    body.lines().find(|l| l.contains("source-url")).unwrap_or_default()
}

/// Waits until the URL source's `/readyz` line reports a failure containing `needle`.
fn wait_failing(agent: &Agent, needle: &str) -> String {
    let (_, body) = agent.poll_within("/readyz?verbose", Duration::from_secs(90), |_, body| {
        let line = url_line(body);
        line.contains("(failing: ") && line.contains(needle)
    });
    url_line(&body).to_owned()
}

/// Waits until the URL source is live with no failure.
fn wait_live(agent: &Agent) {
    agent.poll_within("/readyz?verbose", WAIT, |status, body| {
        status == 200 && url_line(body) == "[+]source-url ok: live"
    });
}

// Sources table, M3, M10: the URL's pods are ADDed as source "url", config.source
// "http"; an edit changes the UID (REMOVE + ADD); configured headers are sent.
#[test]
fn pods_from_the_url_appear_and_an_edit_replaces_them() {
    let server = ManifestServer::start(&pod_list(&["web", "db"]));
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-header", "X-Node: edge-1"]);
    let first = added(&deltas(&run.agent, 2));
    assert_eq!(first.keys().collect::<Vec<_>>(), ["db-edge-1", "web-edge-1"]);
    wait_live(&run.agent);

    let (_, pods) = run.agent.get("/pods");
    let pods: Value = serde_json::from_str(&pods).unwrap();
    for pod in pods["items"].as_array().unwrap() {
        assert_eq!(pod["metadata"]["annotations"]["kubernetes.io/config.source"], "http");
    }
    assert_eq!(server.last_header("x-node").as_deref(), Some("edge-1"));
    let agent = server.last_header("user-agent").unwrap_or_default();
    assert!(agent.starts_with("outpost/"), "User-Agent {agent:?}");

    // M10: the web pod's image changes.
    server.set(&pod_list(&["web", "db"]).replacen("busybox:1.36", "busybox:1.37", 1));
    run.agent.signal("HUP");
    let edit = deltas(&run.agent, 2);
    assert_eq!(edit[0], ("ADD".into(), "web-edge-1".into(), edit[0].2.clone()));
    assert_eq!(edit[1], ("REMOVE".into(), "web-edge-1".into(), first["web-edge-1"].clone()));
    assert_ne!(edit[0].2, first["web-edge-1"], "M10: a new UID");
    no_more_deltas(&run.agent);
}

// Conditional GET: an unchanged document costs one 304 per poll and is not merged
// again, with ETag/If-None-Match and with Last-Modified/If-Modified-Since alone.
#[test]
fn an_unchanged_document_costs_a_304_and_no_deltas() {
    let server = ManifestServer::start(&pod_list(&["web"]));
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "200ms"]);
    deltas(&run.agent, 1);
    wait_until(|| server.not_modified() >= 5, "five 304s");
    assert_eq!(server.oks(), 1, "only the first fetch had a body");

    // Last-Modified only; the same bytes with new validators are one 200, then 304s.
    server.set_validators(Validators::LastModified);
    server.touch();
    let before = server.not_modified();
    wait_until(|| server.not_modified() >= before + 5, "five more 304s");
    assert_eq!(server.oks(), 2);
    assert!(server.last_header("if-modified-since").is_some());
    assert!(server.last_header("if-none-match").is_none());
    no_more_deltas(&run.agent);
    wait_live(&run.agent);
}

// An unchanged body from a server without validators is not merged again.
#[test]
fn an_unchanged_body_without_validators_produces_no_deltas() {
    let server = ManifestServer::start(&pod_list(&["web"]));
    server.set_validators(Validators::None);
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "200ms"]);
    deltas(&run.agent, 1);
    wait_until(|| server.oks() >= 5, "five fetches");
    assert_eq!(server.not_modified(), 0);
    assert!(server.last_header("if-none-match").is_none());
    no_more_deltas(&run.agent);
    wait_live(&run.agent);
}

// Offline first: a server that goes down, comes back, sends garbage or error statuses
// (404 included, as kubelet) never removes the pods; /readyz says what failed and
// recovers.
#[test]
fn a_flapping_server_never_removes_the_pods() {
    let mut server = ManifestServer::start(&pod_list(&["web", "db"]));
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "200ms"]);
    deltas(&run.agent, 2);
    wait_live(&run.agent);

    server.down();
    let line = wait_failing(&run.agent, "cannot fetch");
    assert!(line.contains(&server.url()), "names the URL: {line}");
    assert!(line.contains("refused"), "{line}");
    let (status, _) = run.agent.get("/readyz?verbose");
    assert_eq!(status, 200, "the source was seen; a failure does not unready the agent");
    server.up();
    wait_live(&run.agent);

    for (mode, needle) in [
        (Mode::Garbage, "document rejected"),
        (Mode::Status(500), "500 Internal Server Error"),
        (Mode::Status(404), "404 Not Found"),
        (Mode::Hang, "timed out"),
    ] {
        server.set_mode(mode);
        let line = wait_failing(&run.agent, needle);
        assert!(line.contains(&server.url()), "names the URL: {line}");
        server.set_mode(Mode::Serve);
        wait_live(&run.agent);
    }
    let (_, pods) = run.agent.get("/pods");
    assert_eq!(serde_json::from_str::<Value>(&pods).unwrap()["items"].as_array().unwrap().len(), 2);
    no_more_deltas(&run.agent);

    // The failures are counted for monitoring, and the pods kept show up by source.
    let (status, metrics) = run.agent.get("/metrics");
    assert_eq!(status, 200);
    let errors = metrics
        .lines()
        .find_map(|l| l.strip_prefix("outpost_source_errors_total{source=\"url\"} "))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(errors.is_some_and(|n| n >= 5), "one per failure at least: {metrics}");
    assert!(metrics.lines().any(|l| l == "outpost_pods{source=\"url\"} 2"), "{metrics}");
    assert!(
        metrics.lines().any(|l| l == "outpost_source_state{source=\"url\",state=\"live\"} 1"),
        "{metrics}"
    );
}

// S8: a document over 10 MiB is rejected, with or without a Content-Length, and
// changes nothing.
#[test]
fn s8_an_oversize_document_is_rejected_and_the_pods_kept() {
    let server = ManifestServer::start(&pod_list(&["web"]));
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "200ms"]);
    deltas(&run.agent, 1);
    server.set_mode(Mode::Oversize);
    let line = wait_failing(&run.agent, "over the limit of 10485760 bytes");
    assert!(line.contains("10485761 bytes"), "{line}");
    run.agent.wait_for_log("over the limit of 10485760 bytes");
    server.set_mode(Mode::Serve);
    wait_live(&run.agent);
    server.set_mode(Mode::OversizeChunked);
    let line = wait_failing(&run.agent, "over the limit of 10485760 bytes");
    assert!(line.contains("is larger"), "{line}");
    server.set_mode(Mode::Serve);
    wait_live(&run.agent);
    no_more_deltas(&run.agent);
}

// TLS: a server whose certificate chains to --manifest-url-ca-file is trusted; without
// that CA the fetch fails with a certificate error and nothing appears.
#[test]
fn https_with_a_custom_ca() {
    let server = ManifestServer::start_tls(&pod_list(&["web"]));
    let state = tempfile::tempdir().unwrap();
    let ca = state.path().join("ca.pem");
    std::fs::write(&ca, server.ca_pem.as_deref().unwrap()).unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-ca-file", ca.to_str().unwrap()]);
    assert_eq!(added(&deltas(&run.agent, 1)).keys().collect::<Vec<_>>(), ["web-edge-1"]);
    wait_live(&run.agent);
    drop(run);

    let other = tempfile::tempdir().unwrap();
    let run = start(&server.url(), other.path(), &["--manifest-url-interval", "200ms"]);
    let line = wait_failing(&run.agent, "certificate is not trusted");
    assert!(line.starts_with("[-]source-url failed: never seen"), "{line}");
    assert!(line.contains("--manifest-url-ca-file"), "says what to do: {line}");
    let (status, _) = run.agent.get("/readyz?verbose");
    assert_eq!(status, 503, "M9: never seen");
    no_more_deltas(&run.agent);
}

// Redirects are followed, at most five.
#[test]
fn redirects_are_followed_up_to_a_limit() {
    let server = ManifestServer::start(&pod_list(&["web"]));
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.redirect_url(3), state.path(), &[]);
    deltas(&run.agent, 1);
    drop(run);

    let other = tempfile::tempdir().unwrap();
    let run = start(&server.redirect_url(6), other.path(), &["--manifest-url-interval", "200ms"]);
    let line = wait_failing(&run.agent, "more than 5 redirects");
    assert!(line.starts_with("[-]source-url failed: never seen"), "{line}");
    no_more_deltas(&run.agent);
}

// M9: with no checkpoint and the server unreachable, the source stays "never seen"
// (no empty SET), and its pods appear once the server answers.
#[test]
fn m9_an_unreachable_server_at_first_start_holds_readiness() {
    let mut server = ManifestServer::start(&pod_list(&["web"]));
    server.down();
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "200ms"]);
    let line = wait_failing(&run.agent, "refused");
    assert!(line.starts_with("[-]source-url failed: never seen"), "{line}");
    assert_eq!(run.agent.get("/readyz?verbose").0, 503);
    assert!(run.agent.delta_within(QUIET).is_none(), "no SET was sent for the URL");
    server.up();
    deltas(&run.agent, 1);
    wait_live(&run.agent);
}

// SIGHUP fetches at once, whatever the interval.
#[test]
fn sighup_fetches_at_once() {
    let server = ManifestServer::start(&pod_list(&["web"]));
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "1h"]);
    deltas(&run.agent, 1);
    server.set(&pod_list(&["web", "db"]));
    run.agent.signal("HUP");
    let added = added(&deltas(&run.agent, 1));
    assert_eq!(added.keys().collect::<Vec<_>>(), ["db-edge-1"]);
    assert_eq!(server.requests(), 2);
}

// `POST /refresh` (authenticated) fetches at once, whatever the interval.
#[test]
fn post_refresh_fetches_at_once() {
    let server = ManifestServer::start(&pod_list(&["web"]));
    let state = tempfile::tempdir().unwrap();
    let token = state.path().join("token");
    outpost_tests::write_private(&token, "s3cret\n");
    let run = start(
        &server.url(),
        state.path(),
        &["--manifest-url-interval", "1h", "--token-file", token.to_str().unwrap()],
    );
    deltas(&run.agent, 1);
    server.set(&pod_list(&["web", "db"]));
    let (status, body) = run.agent.request("POST", "/refresh", &[], b"");
    assert_eq!(status, 401, "unauthenticated: {body}");
    let (status, body) =
        run.agent.request("POST", "/refresh", &[("Authorization", "Bearer s3cret")], b"");
    assert!((200..300).contains(&status), "{status} {body}");
    let added = added(&deltas(&run.agent, 1));
    assert_eq!(added.keys().collect::<Vec<_>>(), ["db-edge-1"]);
}

// O1, O2, O4, M6: the last good document is checkpointed; started again with the server
// down, the agent replays it (same UIDs, "from checkpoint" on /readyz); when the server
// comes back without one pod, only that pod is removed.
#[test]
fn o2_the_checkpoint_brings_the_pods_back_when_the_server_is_down() {
    let mut server = ManifestServer::start(&pod_list(&["web", "db", "cache"]));
    let state = tempfile::tempdir().unwrap();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "200ms"]);
    let first = added(&deltas(&run.agent, 3));
    wait_live(&run.agent);
    run.agent.stop();

    server.down();
    let run = start(&server.url(), state.path(), &["--manifest-url-interval", "200ms"]);
    let replayed = added(&deltas(&run.agent, 3));
    assert_eq!(replayed, first, "the same pods with the same UIDs");
    let line = wait_failing(&run.agent, "refused");
    assert!(line.starts_with("[+]source-url ok: from checkpoint"), "{line}");
    assert_eq!(run.agent.get("/readyz?verbose").0, 200, "M9: the checkpoint counts as seen");

    // O4/M6: the last item goes (the others keep their index, so their UIDs).
    server.set(&pod_list(&["web", "db"]));
    server.up();
    let gone = deltas(&run.agent, 1);
    assert_eq!(gone, [("REMOVE".into(), "cache-edge-1".into(), first["cache-edge-1"].clone())]);
    wait_live(&run.agent);
    no_more_deltas(&run.agent);
}

// O2: a corrupt checkpoint is reported clearly and ignored; the agent carries on and
// the next good document replaces it.
#[test]
fn a_corrupt_checkpoint_is_reported_and_ignored() {
    let server = ManifestServer::start(&pod_list(&["web"]));
    let state = tempfile::tempdir().unwrap();
    let checkpoint = state.path().join("checkpoints/url.json");
    std::fs::create_dir_all(checkpoint.parent().unwrap()).unwrap();
    std::fs::write(&checkpoint, "garbage, not a checkpoint").unwrap();
    let run = start(&server.url(), state.path(), &[]);
    let line = run.agent.wait_for_log("is corrupt");
    assert!(line.contains(checkpoint.to_str().unwrap()), "names the file: {line}");
    deltas(&run.agent, 1);
    wait_live(&run.agent);
    let written = std::fs::read_to_string(&checkpoint).unwrap();
    assert!(written.starts_with("outpost-checkpoint v1 "), "replaced: {written:.80}");
}

fn wait_until(done: impl Fn() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never got {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
