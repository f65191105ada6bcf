//! Flow control (B13's throttling: API Priority and Fairness as a client sees it) and the
//! counts of requests and bytes the fleet figures are read from.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::apiserver::flow::{Bucket, Throttle};
use crate::apiserver::{TestApiServer, Transferred};

#[test]
fn a_token_bucket_serves_its_burst_then_its_rate() {
    let start = Instant::now();
    let mut bucket = Bucket::new(Throttle::per_second(2.0).burst(3), start);
    for _ in 0..3 {
        assert_eq!(bucket.take(start), Ok(()));
    }
    // Empty: the next token comes after 1/rate.
    assert_eq!(bucket.take(start), Err(Duration::from_millis(500)));
    let later = start + Duration::from_millis(500);
    assert_eq!(bucket.take(later), Ok(()));
    assert!(bucket.take(later).is_err());
    // A long pause refills no more than the burst.
    let much_later = later + Duration::from_secs(60);
    for _ in 0..3 {
        assert_eq!(bucket.take(much_later), Ok(()));
    }
    assert!(bucket.take(much_later).is_err());
    // A clock read before the last one (two requests racing) takes nothing back.
    assert!(bucket.take(later).is_err());
}

#[test]
fn the_default_burst_is_a_seconds_worth_and_at_least_one() {
    let start = Instant::now();
    let mut fast = Bucket::new(Throttle::per_second(5.0), start);
    assert_eq!((0..6).filter(|_| fast.take(start).is_ok()).count(), 5);
    let mut slow = Bucket::new(Throttle::per_second(0.1), start);
    assert_eq!((0..3).filter(|_| slow.take(start).is_ok()).count(), 1);
    assert_eq!(slow.take(start), Err(Duration::from_secs(10)));
}

/// A plain HTTP client (reqwest needs a TLS provider installed to be built).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// The raw answer to `GET path`: code, `Retry-After`, body.
async fn raw_get(server: &TestApiServer, path: &str) -> (u16, Option<String>, String) {
    let response = http().get(format!("{}{path}", server.url())).send().await.unwrap();
    let code = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (code, retry_after, response.text().await.unwrap())
}

#[tokio::test]
async fn past_the_rate_requests_get_429_too_many_requests_with_retry_after() {
    // One request an hour, a burst of 2: the third is refused whatever the timing.
    let throttle = Throttle::per_second(1.0 / 3600.0).burst(2);
    let server = TestApiServer::builder().throttle(throttle).start().await.unwrap();
    assert_eq!(server.throttle(), Some(throttle));
    let pods = "/api/v1/namespaces/default/pods";
    for _ in 0..2 {
        assert_eq!(raw_get(&server, pods).await.0, 200);
    }
    let (code, retry_after, body) = raw_get(&server, pods).await;
    assert_eq!(code, 429);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["code"], 429);
    let seconds: u64 = retry_after.expect("a Retry-After header").parse().unwrap();
    assert!((3599..=3600).contains(&seconds), "Retry-After: {seconds}");
    assert_eq!(body["details"]["retryAfterSeconds"], seconds);
    // Refused requests are counted as received, and apart as throttled.
    assert_eq!(server.count("list", "pods"), 3);
    assert_eq!(server.throttled_requests(), 1);

    // Changed while running: off, then a fresh burst.
    server.set_throttle(None);
    assert_eq!(raw_get(&server, pods).await.0, 200);
    server.set_throttle(Some(Throttle::per_second(1.0 / 3600.0).burst(1)));
    assert_eq!(raw_get(&server, pods).await.0, 200);
    assert_eq!(raw_get(&server, pods).await.0, 429);
    assert_eq!(server.throttled_requests(), 2);
}

#[tokio::test]
async fn requests_are_counted_by_verb_and_resource_with_their_bytes_each_way() {
    let server = TestApiServer::start().await.unwrap();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web", "namespace": "default" },
        "spec": { "containers": [{ "name": "main", "image": "busybox" }] },
    })
    .to_string();
    let http = http();
    let created = http
        .post(format!("{}/api/v1/namespaces/default/pods", server.url()))
        .header("content-type", "application/json")
        .body(pod.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let created = created.bytes().await.unwrap();
    let status = r#"{"status":{"phase":"Running"}}"#;
    let patched = http
        .patch(format!("{}/api/v1/namespaces/default/pods/web/status", server.url()))
        .header("content-type", "application/merge-patch+json")
        .body(status)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let (_, _, listed) = raw_get(&server, "/api/v1/namespaces/default/pods").await;

    let key = |verb: &str, resource: &str| (verb.to_owned(), resource.to_owned());
    let requests = server.requests();
    assert_eq!(requests[&key("create", "pods")], 1);
    assert_eq!(requests[&key("patch", "pods/status")], 1);
    assert_eq!(requests[&key("list", "pods")], 1);
    let bytes = server.bytes();
    let sent = |n: usize, m: usize| Transferred { received: n as u64, sent: m as u64 };
    assert_eq!(bytes[&key("create", "pods")], sent(pod.len(), created.len()));
    assert_eq!(bytes[&key("patch", "pods/status")], sent(status.len(), patched.len()));
    assert_eq!(bytes[&key("list", "pods")], sent(0, listed.len()));
    let total = server.total_bytes();
    assert_eq!(total.received, (pod.len() + status.len()) as u64);
    assert_eq!(total.sent, bytes.values().map(|t| t.sent).sum::<u64>());

    server.reset_requests();
    assert!(server.bytes().is_empty());
    assert_eq!(server.total_requests(), 0);
}
