//! The watcher driven by the scripted [`FakeListWatch`] on tokio's paused clock: backoffs
//! pass in no real time, and their length is read off the clock.

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::time::Instant;

use super::fake::{Call, FakeListWatch, bookmark, error_event, gone, refused, status};
use super::*;

const SELECTOR: &str = "spec.nodeName=edge-1";

fn config() -> Config {
    Config {
        field_selector: Some(SELECTOR.to_owned()),
        page_size: Some(2),
        watch_timeout_secs: MIN_WATCH_TIMEOUT_SECS,
        backoff: Backoff::WATCH,
        pacer: None,
    }
}

fn object(name: &str, version: &str) -> ConfigMap {
    let mut object = ConfigMap::default();
    object.metadata.name = Some(name.to_owned());
    object.metadata.resource_version = Some(version.to_owned());
    object
}

fn added(name: &str, version: &str) -> Result<WatchEvent<ConfigMap>, kube::Error> {
    Ok(WatchEvent::Added(object(name, version)))
}

fn list_call(continue_token: Option<&str>) -> Call {
    Call::List {
        fields: Some(SELECTOR.to_owned()),
        limit: Some(2),
        continue_token: continue_token.map(str::to_owned),
    }
}

fn watch_call(version: &str) -> Call {
    Call::Watch {
        fields: Some(SELECTOR.to_owned()),
        timeout: Some(MIN_WATCH_TIMEOUT_SECS),
        version: version.to_owned(),
    }
}

/// An event as a short line, to compare sequences.
fn label(event: &Event<ConfigMap>) -> String {
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
    match event {
        Event::Init => "Init".to_owned(),
        Event::InitApply(o) => format!("InitApply {}", name(o)),
        Event::InitDone => "InitDone".to_owned(),
        Event::Apply(o) => format!("Apply {}", name(o)),
        Event::Delete(o) => format!("Delete {}", name(o)),
        Event::Bookmark => "Bookmark".to_owned(),
        Event::Recovered => "Recovered".to_owned(),
        Event::Failed(Error::List { .. }) => "Failed list".to_owned(),
        Event::Failed(Error::Watch { .. }) => "Failed watch".to_owned(),
        Event::Failed(Error::WatchStatus { code, .. }) => format!("Failed status {code}"),
    }
}

type Events = std::pin::Pin<Box<dyn Stream<Item = Event<ConfigMap>> + Send>>;

fn start(fake: &FakeListWatch<ConfigMap>, connectivity: &Connectivity) -> Events {
    Box::pin(watcher(fake.clone(), config(), connectivity.clone()))
}

/// The next event (the watcher never ends; an hour of paused time means none comes).
async fn next(events: &mut Events) -> String {
    match tokio::time::timeout(Duration::from_secs(3600), events.next()).await {
        Ok(Some(event)) => label(&event),
        Ok(None) => panic!("the watcher ended"),
        Err(_) => panic!("no event"),
    }
}

async fn take(events: &mut Events, n: usize) -> Vec<String> {
    let mut taken = Vec::new();
    for _ in 0..n {
        taken.push(next(events).await);
    }
    taken
}

/// Nothing more comes (the fake's script has run out) for as long as a watch may last.
async fn quiet(events: &mut Events) {
    let watch = Duration::from_secs(u64::from(MIN_WATCH_TIMEOUT_SECS));
    if let Ok(event) = tokio::time::timeout(watch, events.next()).await {
        panic!("unexpected {:?}", event.as_ref().map(label));
    }
}

/// The next event, and how long it took on the paused clock.
async fn timed(events: &mut Events) -> (String, Duration) {
    let start = Instant::now();
    let event = next(events).await;
    (event, start.elapsed())
}

fn within(delay: Duration, nominal_ms: u64) -> bool {
    let nominal = Duration::from_millis(nominal_ms);
    delay >= nominal / 2 && delay <= nominal
}

#[tokio::test(start_paused = true)]
async fn lists_then_watches_from_the_lists_version() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![object("a", "3"), object("b", "5")], "10");
    let watch = fake.open_watch();
    let connectivity = Connectivity::default();
    let mut events = start(&fake, &connectivity);
    assert_eq!(take(&mut events, 4).await, ["Init", "InitApply a", "InitApply b", "InitDone"]);
    watch.unbounded_send(added("c", "11")).unwrap();
    watch.unbounded_send(Ok(WatchEvent::Modified(object("a", "12")))).unwrap();
    watch.unbounded_send(Ok(WatchEvent::Deleted(object("b", "13")))).unwrap();
    assert_eq!(take(&mut events, 3).await, ["Apply c", "Apply a", "Delete b"]);
    quiet(&mut events).await;
    assert_eq!(fake.calls(), [list_call(None), watch_call("10")]);
    assert!(connectivity.is_reachable());
}

#[tokio::test(start_paused = true)]
async fn pages_are_flattened_into_one_list() {
    let fake = FakeListWatch::default();
    fake.answer_page(vec![object("a", "1"), object("b", "2")], "t1");
    fake.answer_page(vec![], "t2");
    fake.answer_list(vec![object("c", "3")], "7");
    let mut events = start(&fake, &Connectivity::default());
    assert_eq!(
        take(&mut events, 5).await,
        ["Init", "InitApply a", "InitApply b", "InitApply c", "InitDone"]
    );
    quiet(&mut events).await;
    let calls = [list_call(None), list_call(Some("t1")), list_call(Some("t2")), watch_call("7")];
    assert_eq!(fake.calls(), calls);
}

#[tokio::test(start_paused = true)]
async fn a_list_that_fails_midway_starts_again_from_its_first_page() {
    let fake = FakeListWatch::default();
    fake.answer_page(vec![object("a", "1")], "t1");
    fake.fail_list(status(500));
    fake.answer_list(vec![object("b", "2")], "8");
    let mut events = start(&fake, &Connectivity::default());
    assert_eq!(
        take(&mut events, 6).await,
        ["Init", "InitApply a", "Failed list", "Init", "InitApply b", "InitDone"],
        "a new Init: what came before it is not the set"
    );
    quiet(&mut events).await;
    let calls = [list_call(None), list_call(Some("t1")), list_call(None), watch_call("8")];
    assert_eq!(fake.calls(), calls);
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_resumes_from_the_last_version_without_a_list() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![], "10");
    fake.answer_watch(vec![added("a", "11"), Ok(WatchEvent::Modified(object("a", "12")))]);
    fake.answer_watch(vec![]);
    let _open = fake.open_watch();
    let mut events = start(&fake, &Connectivity::default());
    let (events_seen, elapsed) = {
        let start = Instant::now();
        (take(&mut events, 4).await, start.elapsed())
    };
    assert_eq!(events_seen, ["Init", "InitDone", "Apply a", "Apply a"]);
    quiet(&mut events).await;
    assert_eq!(elapsed, Duration::ZERO, "the server's timeout is no failure: no backoff");
    let calls = [list_call(None), watch_call("10"), watch_call("12"), watch_call("12")];
    assert_eq!(fake.calls(), calls);
}

#[tokio::test(start_paused = true)]
async fn a_broken_watch_resumes_from_the_last_version_after_a_backoff() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![], "10");
    fake.answer_watch(vec![added("a", "11"), Err(refused()), added("ignored", "99")]);
    let watch = fake.open_watch();
    let connectivity = Connectivity::default();
    // The node's Lease probes for the server.
    connectivity.set_probed();
    let mut events = start(&fake, &connectivity);
    assert_eq!(take(&mut events, 4).await, ["Init", "InitDone", "Apply a", "Failed watch"]);
    assert!(!connectivity.is_reachable(), "a broken stream: the server is gone");
    let (event, delay) = timed(&mut events).await;
    assert_eq!(event, "Recovered");
    // The server is gone: the watcher leaves the probing to the node's Lease, and
    // retries on its own only after 30 to 60 s (unless woken: below).
    assert!(within(delay, 60_000), "{delay:?}");
    assert!(connectivity.is_reachable());
    watch.unbounded_send(added("b", "12")).unwrap();
    assert_eq!(next(&mut events).await, "Apply b");
    assert_eq!(fake.calls(), [list_call(None), watch_call("10"), watch_call("11")]);
}

/// An agent with no Lease (one that only reads its pods from the API server): the
/// watches are the probes, on their own backoff.
#[tokio::test(start_paused = true)]
async fn without_a_lease_a_broken_watch_is_its_own_probe() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![], "10");
    fake.answer_watch(vec![Err(refused())]);
    let _open = fake.open_watch();
    let connectivity = Connectivity::default();
    let mut events = start(&fake, &connectivity);
    assert_eq!(take(&mut events, 3).await, ["Init", "InitDone", "Failed watch"]);
    let (event, delay) = timed(&mut events).await;
    assert_eq!(event, "Recovered");
    assert!(within(delay, 800), "{delay:?}");
}

#[tokio::test(start_paused = true)]
async fn bookmarks_move_the_version_and_confirm_the_server() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![], "10");
    let first = fake.open_watch();
    let _second = fake.open_watch();
    let connectivity = Connectivity::default();
    let mut events = start(&fake, &connectivity);
    assert_eq!(take(&mut events, 2).await, ["Init", "InitDone"]);
    connectivity.unreachable("another request failed");
    first.unbounded_send(bookmark("20")).unwrap();
    assert_eq!(next(&mut events).await, "Bookmark");
    assert!(connectivity.is_reachable(), "a bookmark is an answer");
    drop(first);
    quiet(&mut events).await;
    assert_eq!(fake.calls(), [list_call(None), watch_call("10"), watch_call("20")]);
}

#[tokio::test(start_paused = true)]
async fn gone_lists_again_in_each_of_its_forms_without_a_backoff() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![object("a", "1")], "10");
    fake.fail_watch(gone());
    fake.answer_list(vec![object("b", "2")], "20");
    fake.answer_watch(vec![error_event(410)]);
    fake.answer_list(vec![object("c", "3")], "30");
    fake.answer_watch(vec![Err(gone())]);
    fake.answer_list(vec![], "40");
    let mut events = start(&fake, &Connectivity::default());
    let (lists, elapsed) = {
        let start = Instant::now();
        (take(&mut events, 11).await, start.elapsed())
    };
    assert_eq!(
        lists,
        [
            "Init",
            "InitApply a",
            "InitDone",
            "Init",
            "InitApply b",
            "InitDone",
            "Init",
            "InitApply c",
            "InitDone",
            "Init",
            "InitDone"
        ],
        "410 is no failure: a new list, whose InitDone replaces the set"
    );
    assert_eq!(elapsed, Duration::ZERO);
    quiet(&mut events).await;
    let calls = [
        list_call(None),
        watch_call("10"),
        list_call(None),
        watch_call("20"),
        list_call(None),
        watch_call("30"),
        list_call(None),
        watch_call("40"),
    ];
    assert_eq!(fake.calls(), calls);
}

#[tokio::test(start_paused = true)]
async fn the_backoff_grows_with_jitter_and_resets_after_a_success() {
    fastrand::seed(7);
    // The server answers, with errors (a transport failure waits for the Lease's
    // probe instead: below).
    let fake = FakeListWatch::default();
    for _ in 0..3 {
        fake.fail_list(status(500));
    }
    fake.answer_list(vec![], "10");
    fake.fail_watch(status(500));
    let _open = fake.open_watch();
    let mut events = start(&fake, &Connectivity::default());
    assert_eq!(take(&mut events, 2).await, ["Init", "Failed list"]);
    let mut delays = Vec::new();
    for _ in 0..3 {
        let (event, delay) = timed(&mut events).await;
        assert_eq!(event, "Init");
        delays.push(delay);
        let (event, _) = timed(&mut events).await;
        assert!(matches!(event.as_str(), "Failed list" | "InitDone"), "{event}");
    }
    for (delay, nominal) in delays.iter().zip([800, 1600, 3200]) {
        assert!(within(*delay, nominal), "{delays:?}");
        assert!(*delay != Duration::from_millis(nominal), "jittered: {delays:?}");
    }
    // The list succeeded: the watch's failure waits the first delay again, and the
    // established watch after it is a recovery (the list was not: its InitDone is).
    assert_eq!(next(&mut events).await, "Failed watch");
    let (event, delay) = timed(&mut events).await;
    assert_eq!(event, "Recovered");
    assert!(within(delay, 800), "reset: {delay:?}");
}

#[tokio::test(start_paused = true)]
async fn a_network_change_or_the_server_found_back_cuts_the_backoff_short() {
    let fake = FakeListWatch::default();
    fake.fail_list(refused());
    fake.fail_list(refused());
    fake.answer_list(vec![], "10");
    let connectivity = Connectivity::default();
    let mut events = start(&fake, &connectivity);
    assert_eq!(take(&mut events, 2).await, ["Init", "Failed list"]);
    connectivity.network_changed();
    assert_eq!(timed(&mut events).await, ("Init".to_owned(), Duration::ZERO));
    assert_eq!(next(&mut events).await, "Failed list");
    // Another request finds the server back 100 ms into this backoff (of 800 ms at least).
    let found_back = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        connectivity.reachable();
    };
    let ((event, delay), ()) = tokio::join!(timed(&mut events), found_back);
    assert_eq!((event.as_str(), delay), ("Init", Duration::from_millis(100)));
    assert_eq!(next(&mut events).await, "InitDone");
}

/// B13: after a long outage, a watcher woken because another request found the server
/// back goes at its own point of the spread window, not at once with every other.
#[tokio::test(start_paused = true)]
async fn after_a_long_outage_a_woken_watcher_goes_within_the_spread_window() {
    fastrand::seed(7);
    let fake = FakeListWatch::default();
    fake.fail_list(refused());
    fake.answer_list(vec![], "10");
    // Unreachable from the start; a backoff far longer than the outage.
    let connectivity = Connectivity::default();
    let long = Duration::from_secs(600);
    let config = Config { backoff: Backoff::new(long, long), ..config() };
    let mut events: Events = Box::pin(watcher(fake.clone(), config, connectivity.clone()));
    assert_eq!(take(&mut events, 2).await, ["Init", "Failed list"]);
    let away = Duration::from_secs(90);
    let found_back = async {
        tokio::time::sleep(away).await;
        connectivity.reachable();
    };
    let ((event, waited), ()) = tokio::join!(timed(&mut events), found_back);
    assert_eq!(event, "Init");
    let window = outpost_core::pace::spread_window(away, 0);
    assert_eq!(window, Duration::from_secs(60));
    assert!(waited > away && waited <= away + window, "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn connectivity_follows_answers_and_transport_failures_only() {
    let fake = FakeListWatch::default();
    fake.fail_list(status(500));
    fake.fail_list(refused());
    fake.answer_list(vec![], "10");
    fake.fail_watch(status(500));
    let first = fake.open_watch();
    let second = fake.open_watch();
    let connectivity = Connectivity::default();
    connectivity.reachable();
    let mut events = start(&fake, &connectivity);
    let mut reachable = Vec::new();
    for _ in 0..8 {
        let event = next(&mut events).await;
        reachable.push((event, connectivity.is_reachable()));
    }
    first.unbounded_send(error_event(500)).unwrap();
    for _ in 0..2 {
        let event = next(&mut events).await;
        reachable.push((event, connectivity.is_reachable()));
    }
    second.unbounded_send(Err(refused())).unwrap();
    let event = next(&mut events).await;
    reachable.push((event, connectivity.is_reachable()));
    let want = [
        ("Init", true),
        ("Failed list", true), // a status: the server answered
        ("Init", true),
        ("Failed list", false), // refused
        ("Init", false),
        ("InitDone", true),     // listed
        ("Failed watch", true), // a status again
        ("Recovered", true),
        ("Failed status 500", true),
        ("Recovered", true),
        ("Failed watch", false), // the stream broke
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(e, r)| ((*e).to_owned(), *r)).collect();
    assert_eq!(reachable, want);
}

/// B13: each watch asks its own timeout between 5 and 10 minutes, as client-go's, so
/// watches opened in the same second end apart.
#[test]
fn watch_timeouts_are_spread_between_the_minimum_and_twice_it() {
    assert_eq!(super::spread_timeout(300, 0.0), 300);
    assert_eq!(super::spread_timeout(300, 0.5), 450);
    assert_eq!(super::spread_timeout(300, 0.999_999), 599);
    assert_eq!(super::spread_timeout(300, 1.0), 599, "below twice the minimum");
    assert_eq!(super::spread_timeout(300, 7.0), 599, "clamped");
    for step in 0..1000 {
        let timeout = super::spread_timeout(MIN_WATCH_TIMEOUT_SECS, f64::from(step) / 1000.0);
        let min = MIN_WATCH_TIMEOUT_SECS;
        assert!((min..2 * min).contains(&timeout), "{timeout}");
    }
}

/// A server that sends no bookmarks: a quiet watch is not cut before its own timeout;
/// one still silent past it (and the grace) is taken for a dead connection and resumed
/// from its version, with no failure and no backoff.
#[tokio::test(start_paused = true)]
async fn a_quiet_watch_lasts_its_timeout_and_a_silent_one_is_resumed_past_it() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![], "10");
    let first = fake.open_watch();
    let second = fake.open_watch();
    let connectivity = Connectivity::default();
    let mut events = start(&fake, &connectivity);
    assert_eq!(take(&mut events, 2).await, ["Init", "InitDone"]);
    // An event after the shortest timeout's quiet minutes (far past the 295 s read
    // timeout kube's client once had) still arrives on the first watch.
    let quiet_for = Duration::from_secs(u64::from(MIN_WATCH_TIMEOUT_SECS));
    let sender = first.clone();
    tokio::spawn(async move {
        tokio::time::sleep(quiet_for).await;
        sender.unbounded_send(added("a", "11")).unwrap();
    });
    let (event, waited) = timed(&mut events).await;
    assert_eq!((event.as_str(), waited), ("Apply a", quiet_for));
    // Then silence past the watch's timeout and the grace: a new watch from the last
    // version, no sooner than the shortest timeout and no later than the longest.
    second.unbounded_send(added("b", "12")).unwrap();
    let (event, waited) = timed(&mut events).await;
    assert_eq!(event, "Apply b");
    let since_open = quiet_for + waited;
    let shortest = quiet_for + WATCH_GRACE;
    let longest = 2 * quiet_for + WATCH_GRACE;
    assert!(since_open >= shortest && since_open < longest, "{since_open:?}");
    assert_eq!(fake.calls(), [list_call(None), watch_call("10"), watch_call("11")]);
    assert!(connectivity.is_reachable(), "no failure");
    drop(first);
}

/// A server that sends bookmarks (kube-apiserver's watch cache: one a minute): once one
/// came, a watch that hears nothing for [`BOOKMARK_SILENCE`] is taken for a dead
/// connection and resumed from the bookmark's version, long before its own timeout.
#[tokio::test(start_paused = true)]
async fn a_watch_whose_bookmarks_stop_is_resumed_before_its_timeout() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![], "10");
    let first = fake.open_watch();
    let second = fake.open_watch();
    let connectivity = Connectivity::default();
    let mut events = start(&fake, &connectivity);
    assert_eq!(take(&mut events, 2).await, ["Init", "InitDone"]);
    // Bookmarks a minute apart keep the watch; an object between them too.
    for version in ["20", "21"] {
        tokio::time::sleep(Duration::from_secs(60)).await;
        first.unbounded_send(bookmark(version)).unwrap();
        assert_eq!(next(&mut events).await, "Bookmark");
    }
    first.unbounded_send(added("a", "22")).unwrap();
    assert_eq!(next(&mut events).await, "Apply a");
    // Then nothing: the watch is resumed from "22" after BOOKMARK_SILENCE, not after
    // its 15 to 30 minutes.
    let start = Instant::now();
    second.unbounded_send(added("b", "23")).unwrap();
    assert_eq!(next(&mut events).await, "Apply b");
    assert_eq!(start.elapsed(), BOOKMARK_SILENCE);
    assert_eq!(fake.calls(), [list_call(None), watch_call("10"), watch_call("22")]);
    assert!(connectivity.is_reachable(), "no failure");
    drop(first);
}

/// One bucket for a node's writes and its watchers (B13): a watch refused for load (429)
/// slows the writers' bucket, and each list and watch call takes one of its tokens.
#[tokio::test(start_paused = true)]
async fn a_watch_refused_for_load_slows_the_nodes_bucket() {
    let fake = FakeListWatch::default();
    fake.answer_list(vec![], "10");
    fake.fail_watch(status(429));
    let _open = fake.open_watch();
    let pacer = crate::apiserver::Pacer::new(5.0, 2);
    let config = Config { pacer: Some(pacer.clone()), ..config() };
    let mut events: Events = Box::pin(watcher(fake.clone(), config, Connectivity::default()));
    assert_eq!(take(&mut events, 3).await, ["Init", "InitDone", "Failed watch"]);
    assert_eq!(pacer.refusals(), 1, "the watch's 429 is the bucket's");
    // The list and the watch took the burst, and the 429 halved the rate: a write now
    // waits for a token at 2.5 a second.
    let start = Instant::now();
    pacer.ready().await;
    assert_eq!(start.elapsed(), Duration::from_millis(400));
    assert_eq!(next(&mut events).await, "Recovered");
}
