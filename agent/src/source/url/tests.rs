use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use outpost_core::merge::Op;
use outpost_core::pod::SourcePod;
use outpost_core::source::url::hash;

use super::*;
use crate::source::Freshness;

const NODE: &str = "node-a";
/// Guards against hangs only; nothing here is timed.
const HANG: Duration = Duration::from_secs(30);

fn pod_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: busybox\n"
    )
}

fn config(url: &str, state: &std::path::Path) -> Config {
    Config {
        url: url.to_owned(),
        headers: Vec::new(),
        interval: Duration::from_secs(3600),
        ca_file: None,
        node_name: NODE.to_owned(),
        checkpoints: Checkpoints::new(state),
        refresh: Refresh::default(),
    }
}

fn new_error(config: Config) -> String {
    match UrlSource::new(config) {
        Ok(_) => panic!("accepted a bad configuration"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn headers_are_checked_by_name_and_value() {
    let ok = client::header_map(&[
        ("Authorization".into(), "Bearer abc".into()),
        ("X-Node".into(), "edge-1".into()),
        ("X-Node".into(), "edge-2".into()),
    ])
    .unwrap();
    assert_eq!(ok.get_all("x-node").iter().count(), 2, "repeated headers are all sent");
    assert!(ok.get("authorization").unwrap().is_sensitive());
    assert!(!format!("{ok:?}").contains("abc"), "values never show in debug output");

    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("Bad Name", "x", "\"Bad Name\": not a valid HTTP header name"),
        ("X-Ok", "line\nbreak", "\"X-Ok\": the value has characters not allowed"),
        ("If-None-Match", "*", "\"If-None-Match\": set by the agent itself"),
        ("Content-Length", "3", "\"Content-Length\": set by the agent itself"),
    ];
    for (name, value, want) in cases {
        let mut c = config("http://127.0.0.1:1/pods", dir.path());
        c.headers = vec![(name.into(), value.into())];
        let message = new_error(c);
        assert!(message.starts_with("--manifest-url-header "), "{message}");
        assert!(message.contains(want), "{message}");
    }
}

#[test]
fn only_http_and_https_urls_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    for url in ["http://example.com/pods.yaml", "https://user:pw@example.com:8443/p?node=a"] {
        UrlSource::new(config(url, dir.path())).unwrap();
    }
    let cases = [
        ("ftp://example.com/pods", "scheme \"ftp\" is not supported; use http:// or https://"),
        ("file:///etc/outpost/pods.yaml", "scheme \"file\" is not supported"),
        ("example.com/pods", "is not a valid URL"),
        ("http://", "is not a valid URL"),
    ];
    for (url, want) in cases {
        let message = new_error(config(url, dir.path()));
        assert!(message.starts_with("--manifest-url "), "{message}");
        assert!(message.contains(want), "{url}: {message}");
    }
}

#[test]
fn manifest_url_hosts_are_ascii_and_an_international_one_is_taken_in_punycode() {
    let dir = tempfile::tempdir().unwrap();
    UrlSource::new(config("http://xn--bcher-kva.example/pods.yaml", dir.path())).unwrap();
    let message = new_error(config("http://b\u{fc}cher.example/pods.yaml", dir.path()));
    assert!(message.contains("is not a valid URL"), "{message}");
    assert!(
        message.contains("write an international one in its xn-- (Punycode) form"),
        "{message}"
    );
}

#[test]
fn passwords_in_urls_are_hidden() {
    assert_eq!(client::redact("https://me:secret@h/p"), "https://me:***@h/p");
    assert_eq!(client::redact("http://h:8080/p?q=1"), "http://h:8080/p?q=1");
    assert_eq!(client::redact("not a url"), "not a url");
}

#[test]
fn a_ca_file_must_hold_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config("https://127.0.0.1:1/pods", dir.path());
    c.ca_file = Some(dir.path().join("missing.pem"));
    let message = new_error(c.clone());
    assert!(message.starts_with("cannot read --manifest-url-ca-file "), "{message}");

    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "just text\n").unwrap();
    c.ca_file = Some(empty);
    let message = new_error(c.clone());
    assert!(message.contains("no certificate found"), "{message}");
    assert!(message.contains("-----BEGIN CERTIFICATE-----"), "{message}");

    let broken = dir.path().join("broken.pem");
    std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap();
    c.ca_file = Some(broken);
    let message = new_error(c);
    assert!(message.contains("cannot parse PEM"), "{message}");
}

#[test]
fn the_checkpoint_record_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = Checkpoints::new(dir.path());
    let url = "http://h/pods.yaml";
    let body = format!(
        "apiVersion: v1\nkind: PodList\nitems:\n- {}",
        pod_yaml("web").replace('\n', "\n  ")
    );
    let pods = manifest::decode(body.as_bytes(), Origin::Url(url), NODE).unwrap();
    let record = Record {
        url: url.into(),
        node_name: NODE.into(),
        etag: Some("\"v1\"".into()),
        last_modified: None,
        body_hash: hash(body.as_bytes()),
        pods: pods.into_iter().map(Arc::new).collect(),
    };
    checkpoints.write(CHECKPOINT, &record).unwrap();
    let back: Record = checkpoints.read(CHECKPOINT).unwrap().unwrap();
    assert_eq!(back, record);
    // What the merge looks at survives the trip: same UID, same fingerprint.
    let (a, b) = (SourcePod::new(record.pods[0].clone()), SourcePod::new(back.pods[0].clone()));
    assert_eq!((a.uid(), a.fingerprint), (b.uid(), b.fingerprint));
    assert_eq!(hash(b"x").len(), 32);
}

/// A server for the state machine's tests: serves `doc` with an ETag, answers 304 to
/// a matching `If-None-Match`, and counts requests.
#[derive(Clone)]
struct Doc {
    body: Arc<std::sync::Mutex<String>>,
    requests: Arc<AtomicUsize>,
}

async fn serve(doc: Doc) -> String {
    let app = Router::new().route(
        "/pods",
        get(
            |axum::extract::State(doc): axum::extract::State<Doc>, headers: HeaderMap| async move {
                doc.requests.fetch_add(1, Ordering::SeqCst);
                let body = doc.body.lock().unwrap().clone();
                let etag = format!("\"{}\"", hash(body.as_bytes()));
                if headers
                    .get(header::IF_NONE_MATCH)
                    .is_some_and(|v| v.as_bytes() == etag.as_bytes())
                {
                    return StatusCode::NOT_MODIFIED.into_response();
                }
                ([(header::ETAG, etag)], body).into_response()
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app.with_state(doc)).await });
    format!("http://{addr}/pods")
}

/// The next event but the lists of manifests with problems (the state machine's tests
/// follow those).
async fn next(source: &mut UrlSource) -> SourceEvent {
    loop {
        match tokio::time::timeout(HANG, source.next()).await.expect("the URL source hung") {
            SourceEvent::Problems(_) => continue,
            event => return event,
        }
    }
}

fn names(event: &SourceEvent) -> Vec<String> {
    match event {
        SourceEvent::Update(update, _) => {
            assert_eq!((update.source, update.op), (Source::Url, Op::Set));
            update.pods.iter().map(|p| p.pod.metadata.name.clone().unwrap_or_default()).collect()
        }
        other => panic!("expected a SET, got {other:?}"),
    }
}

#[tokio::test]
async fn o1_a_failed_checkpoint_write_still_applies_the_update_and_is_retried() {
    let doc = Doc { body: Arc::new(pod_yaml("web").into()), requests: Arc::default() };
    let url = serve(doc.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    // `checkpoints` is a file, so the checkpoint directory cannot be made.
    std::fs::write(dir.path().join("checkpoints"), "").unwrap();
    let c = config(&url, dir.path());
    let refresh = c.refresh.clone();
    let mut source = UrlSource::new(c).unwrap();

    match next(&mut source).await {
        SourceEvent::Failed(e) => assert!(e.to_string().contains("cannot read checkpoint"), "{e}"),
        other => panic!("expected the checkpoint read failure, got {other:?}"),
    }
    let first = next(&mut source).await;
    assert!(matches!(first, SourceEvent::Update(_, Freshness::Live)));
    assert_eq!(names(&first), ["web-node-a"]);
    match next(&mut source).await {
        SourceEvent::Failed(e) => assert!(e.to_string().contains("cannot write checkpoint"), "{e}"),
        other => panic!("expected the checkpoint failure, got {other:?}"),
    }
    // Unchanged document (304), checkpoint still not writable: reported again.
    refresh.request();
    assert!(matches!(next(&mut source).await, SourceEvent::Failed(_)));
    // Writable again: the retry writes it, and the source confirms.
    std::fs::remove_file(dir.path().join("checkpoints")).unwrap();
    refresh.request();
    assert!(matches!(next(&mut source).await, SourceEvent::Confirmed));
    let record: Record = Checkpoints::new(dir.path()).read(CHECKPOINT).unwrap().unwrap();
    assert_eq!(record.pods.len(), 1);
    assert_eq!(doc.requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn o2_the_checkpoint_is_replayed_first_and_a_304_confirms_it() {
    let doc = Doc { body: Arc::new(pod_yaml("web").into()), requests: Arc::default() };
    let url = serve(doc.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut source = UrlSource::new(config(&url, dir.path())).unwrap();
    let live = next(&mut source).await;
    assert!(matches!(live, SourceEvent::Update(_, Freshness::Live)));
    drop(source);

    let mut source = UrlSource::new(config(&url, dir.path())).unwrap();
    let replayed = next(&mut source).await;
    assert!(matches!(replayed, SourceEvent::Update(_, Freshness::Checkpoint)));
    assert_eq!(names(&replayed), names(&live));
    assert!(matches!(next(&mut source).await, SourceEvent::Confirmed), "304 to the stored ETag");
    drop(source);

    // Another node's (or URL's) checkpoint is not replayed.
    let mut c = config(&url, dir.path());
    c.node_name = "node-b".into();
    let mut source = UrlSource::new(c).unwrap();
    let first = next(&mut source).await;
    assert!(matches!(first, SourceEvent::Update(_, Freshness::Live)));
    assert_eq!(names(&first), ["web-node-b"]);
}

#[tokio::test]
async fn a_corrupt_checkpoint_is_reported_and_ignored() {
    let doc = Doc { body: Arc::new(pod_yaml("web").into()), requests: Arc::default() };
    let url = serve(doc).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
    std::fs::write(dir.path().join("checkpoints/url.json"), "garbage").unwrap();
    let mut source = UrlSource::new(config(&url, dir.path())).unwrap();
    match next(&mut source).await {
        SourceEvent::Failed(e) => assert!(e.to_string().contains("is corrupt"), "{e}"),
        other => panic!("expected the corrupt checkpoint, got {other:?}"),
    }
    assert!(matches!(next(&mut source).await, SourceEvent::Update(_, Freshness::Live)));
}

#[tokio::test]
async fn failures_keep_the_pods_and_an_unchanged_body_is_confirmed() {
    let doc = Doc { body: Arc::new(pod_yaml("web").into()), requests: Arc::default() };
    let url = serve(doc.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let c = config(&url, dir.path());
    let refresh = c.refresh.clone();
    let mut source = UrlSource::new(c).unwrap();
    assert_eq!(names(&next(&mut source).await), ["web-node-a"]);

    for (body, want) in [
        ("kind: [", "cannot decode YAML"),
        ("  \n", "the document is empty"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "metadata.name: missing"),
    ] {
        *doc.body.lock().unwrap() = body.into();
        refresh.request();
        match next(&mut source).await {
            SourceEvent::Failed(e) => {
                let message = e.to_string();
                assert!(message.starts_with(&url), "names the URL: {message}");
                assert!(message.contains(want), "{message}");
            }
            other => panic!("expected a failure for {body:?}, got {other:?}"),
        }
    }
    // The good document again: the same bytes as the last good one, nothing to merge.
    *doc.body.lock().unwrap() = pod_yaml("web");
    refresh.request();
    assert!(matches!(next(&mut source).await, SourceEvent::Confirmed));
}

#[tokio::test]
async fn an_unreachable_server_fails_with_a_clear_message() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/pods", listener.local_addr().unwrap());
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let mut source = UrlSource::new(config(&url, dir.path())).unwrap();
    match next(&mut source).await {
        SourceEvent::Failed(e) => {
            let message = e.to_string();
            assert!(message.starts_with(&format!("cannot fetch {url}: ")), "{message}");
            assert!(message.contains("refused"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}
