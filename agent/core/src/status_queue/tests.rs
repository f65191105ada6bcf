use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;

use super::*;

type Queue = StatusQueue<&'static str, u32, &'static str>;

fn queue() -> Queue {
    StatusQueue::new(Backoff::new(Duration::from_secs(1), Duration::from_secs(8)))
}

const NOW: Duration = Duration::ZERO;

/// Drains the queue at `now` as a sender that always succeeds: the sends made.
fn drain(q: &mut Queue, now: Duration) -> Vec<(&'static str, Action<&'static str>)> {
    let mut done = Vec::new();
    while let Some((key, action)) = q.next(now) {
        match &action {
            Action::Send(status) => q.sent(&key, status),
            Action::Delete => q.forget(&key),
        }
        done.push((key, action));
    }
    done
}

#[test]
fn coalesces_to_the_latest_status() {
    let mut q = queue();
    q.update("a", 1, "Pending");
    q.update("a", 1, "Running");
    q.update("a", 1, "Failed");
    assert_eq!(q.pending(), 1);
    assert_eq!(drain(&mut q, NOW), [("a", Action::Send("Failed"))]);
    assert_eq!(q.pending(), 0);
}

#[test]
fn a_status_equal_to_the_last_sent_is_not_sent_again() {
    let mut q = queue();
    q.update("a", 1, "Running");
    drain(&mut q, NOW);
    assert_eq!(q.last_sent(&"a"), Some(&"Running"));
    q.update("a", 1, "Running");
    assert_eq!(q.next(NOW), None);
    // A change and back before the send: nothing to send either.
    q.update("a", 1, "Failed");
    q.update("a", 1, "Running");
    assert_eq!(q.pending(), 0);
}

#[test]
fn oldest_first_then_by_key() {
    let mut q = queue();
    q.update("c", 3, "x");
    q.update("b", 1, "x");
    q.update("a", 2, "x");
    q.update("d", 1, "x");
    let order: Vec<_> = drain(&mut q, NOW).into_iter().map(|(k, _)| k).collect();
    assert_eq!(order, ["b", "d", "a", "c"]);
}

#[test]
fn a_spread_makes_each_object_due_at_its_own_point_of_the_window() {
    let mut q = queue();
    q.update("a", 1, "x");
    q.update("b", 2, "y");
    q.update("c", 3, "z");
    drain(&mut q, NOW);
    q.update("a", 1, "x2");
    q.update("b", 2, "y2");
    let mut draws = [0.5, 0.25].into_iter();
    q.spread(NOW, Duration::from_secs(20), || draws.next().unwrap_or(0.0));
    assert_eq!(q.due(NOW), 0, "nothing at once");
    assert_eq!(q.next_retry(), Some(Duration::from_secs(5)));
    // Objects with nothing to send took no draw; a change while waiting keeps the place.
    q.update("a", 1, "x3");
    let at = |secs| Duration::from_secs(secs);
    assert_eq!(q.next(at(5)).map(|(k, _)| k), Some("b"));
    q.sent(&"b", "y2");
    assert_eq!(q.next(at(9)), None);
    assert_eq!(q.next(at(10)), Some(("a", Action::Send("x3"))));
    // A zero window changes nothing.
    q.update("c", 3, "z2");
    q.spread(at(10), Duration::ZERO, || 0.9);
    assert_eq!(q.next(at(10)).map(|(k, _)| k), Some("a"));
}

#[test]
fn a_failure_backs_off_that_object_only() {
    let mut q = queue();
    q.update("a", 1, "x");
    q.update("b", 2, "y");
    let wait = q.failed(&"a", NOW, |b| b.next_delay(1.0));
    assert_eq!(wait, Some(Duration::from_secs(1)));
    assert_eq!(q.next_retry(), Some(Duration::from_secs(1)));
    assert_eq!(q.due(NOW), 1, "b is due, a backs off");
    assert_eq!(drain(&mut q, NOW), [("b", Action::Send("y"))]);
    assert_eq!(q.pending(), 1, "a still waits");
    assert_eq!((q.due(NOW), q.due(Duration::from_secs(1))), (0, 1));
    // A newer status while backing off does not jump the wait.
    q.update("a", 1, "z");
    assert_eq!(q.next(Duration::from_millis(999)), None);
    assert_eq!(q.next(Duration::from_secs(1)), Some(("a", Action::Send("z"))));
    // The backoff doubles, and a success resets it.
    let second = q.failed(&"a", Duration::from_secs(1), |b| b.next_delay(1.0));
    assert_eq!(second, Some(Duration::from_secs(2)));
    q.sent(&"a", "z");
    q.update("a", 1, "w");
    assert_eq!(q.failed(&"a", NOW, |b| b.next_delay(1.0)), Some(Duration::from_secs(1)));
}

#[test]
fn o3_a_storms_end_makes_what_failed_due_at_once_and_keeps_spread_points() {
    let mut q = queue();
    // c waits for its point of a spread after an outage; a and b then failed twice in
    // a storm.
    q.update("c", 3, "z");
    q.spread(NOW, Duration::from_secs(30), || 0.5);
    q.update("a", 1, "x");
    q.update("b", 2, "y");
    for at in [NOW, Duration::from_secs(1)] {
        q.failed(&"a", at, |b| b.next_delay(1.0));
        q.failed(&"b", at, |b| b.next_delay(1.0));
    }
    let later = Duration::from_secs(2);
    assert_eq!(q.due(later), 0);
    q.retry_now();
    assert_eq!(drain(&mut q, later), [("a", Action::Send("x")), ("b", Action::Send("y"))]);
    assert_eq!(q.next(Duration::from_secs(14)), None, "c keeps its point (15 s)");
    assert_eq!(q.next(Duration::from_secs(15)), Some(("c", Action::Send("z"))));
    // A retry made due keeps its backoff: failing again waits longer than before (the
    // success above reset it to 1 s).
    q.update("a", 1, "w");
    assert_eq!(q.failed(&"a", later, |b| b.next_delay(1.0)), Some(Duration::from_secs(1)));
    q.retry_now();
    assert_eq!(q.failed(&"a", later, |b| b.next_delay(1.0)), Some(Duration::from_secs(2)));
}

#[test]
fn the_callers_delay_wins_when_longer() {
    let mut q = queue();
    q.update("a", 1, "x");
    let wait = q.failed(&"a", NOW, |b| b.next_delay(0.0).max(Duration::from_secs(5)));
    assert_eq!(wait, Some(Duration::from_secs(5)));
    assert_eq!(q.next(Duration::from_secs(4)), None);
    assert!(q.next(Duration::from_secs(5)).is_some());
}

#[test]
fn finishing_sends_the_final_status_then_deletes() {
    let mut q = queue();
    q.update("a", 1, "Running");
    drain(&mut q, NOW);
    q.update("a", 1, "Failed");
    q.finish("a", 1);
    assert_eq!(q.next(NOW), Some(("a", Action::Send("Failed"))));
    q.sent(&"a", "Failed");
    assert_eq!(q.next(NOW), Some(("a", Action::Delete)));
    // A delete that fails is retried after its backoff.
    q.failed(&"a", NOW, |b| b.next_delay(1.0));
    assert_eq!(q.next(NOW), None);
    assert_eq!(q.next(Duration::from_secs(1)), Some(("a", Action::Delete)));
    q.forget(&"a");
    assert_eq!(q.pending(), 0);
}

#[test]
fn finishing_with_nothing_to_report_deletes_at_once() {
    let mut q = queue();
    q.finish("a", 1);
    assert_eq!(drain(&mut q, NOW), [("a", Action::Delete)]);
}

#[test]
fn unknown_sends_again_and_retain_forgets() {
    let mut q = queue();
    q.update("a", 1, "x");
    q.update("b", 2, "x");
    drain(&mut q, NOW);
    q.unknown(&"a");
    assert_eq!(q.next(NOW), Some(("a", Action::Send("x"))));
    q.retain(|k| *k != "a");
    assert_eq!(q.next(NOW), None);
    assert_eq!(q.failed(&"a", NOW, |b| b.next_delay(0.0)), None, "forgotten");
}

proptest! {
    /// Any sequence of updates while offline, then a drain: exactly one send per
    /// object, carrying its latest status, oldest object first; nothing for objects
    /// whose latest status equals the one sent before the cut.
    #[test]
    fn one_send_per_object_with_its_latest_status(
        before in prop::collection::vec((0usize..8, 0usize..4), 0..16),
        offline in prop::collection::vec((0usize..8, 0usize..4), 0..200),
    ) {
        const KEYS: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
        const STATUSES: [&str; 4] = ["Pending", "Running", "Succeeded", "Failed"];
        let order = |k: usize| (7 - k) as u32;
        let mut q = queue();
        let mut sent_before = BTreeMap::new();
        for (k, s) in before {
            q.update(KEYS[k], order(k), STATUSES[s]);
            sent_before.insert(KEYS[k], STATUSES[s]);
        }
        drain(&mut q, NOW);
        let mut latest = BTreeMap::new();
        for (k, s) in offline {
            q.update(KEYS[k], order(k), STATUSES[s]);
            latest.insert(k, STATUSES[s]);
        }
        let expected: Vec<_> = latest
            .iter()
            .rev()
            .filter(|(k, s)| sent_before.get(KEYS[**k]) != Some(*s))
            .map(|(k, s)| (KEYS[*k], Action::Send(*s)))
            .collect();
        prop_assert_eq!(q.pending(), expected.len());
        let sends = drain(&mut q, NOW);
        let keys: HashSet<_> = sends.iter().map(|(k, _)| *k).collect();
        prop_assert_eq!(keys.len(), sends.len(), "one send per object");
        prop_assert_eq!(sends, expected);
        prop_assert_eq!(q.pending(), 0);
    }

    /// Whatever fails and when, an object is never offered before its retry time, and
    /// every object is eventually sent once the clock passes every wait.
    #[test]
    fn failures_delay_but_never_lose_a_status(
        updates in prop::collection::vec((0usize..4, 0u8..3), 1..40),
        failures in prop::collection::vec(any::<bool>(), 0..40),
        storms_end in prop::collection::vec(any::<bool>(), 0..40),
    ) {
        const KEYS: [&str; 4] = ["a", "b", "c", "d"];
        const STATUSES: [&str; 3] = ["x", "y", "z"];
        let mut q = queue();
        let mut latest = BTreeMap::new();
        let mut failures = failures.into_iter();
        let mut storms_end = storms_end.into_iter();
        let mut now = NOW;
        for (k, s) in updates {
            // The server taking writes again (O3) at any point loses nothing either.
            if storms_end.next().unwrap_or(false) {
                q.retry_now();
            }
            q.update(KEYS[k], 0, STATUSES[usize::from(s)]);
            latest.insert(KEYS[k], STATUSES[usize::from(s)]);
            if let Some((key, _)) = q.next(now)
                && failures.next().unwrap_or(false)
            {
                q.failed(&key, now, |b| b.next_delay(0.5));
                prop_assert!(q.next(now).is_none_or(|(k, _)| k != key));
            }
            now += Duration::from_millis(300);
        }
        let sends = drain(&mut q, now + Duration::from_secs(60));
        for (key, action) in sends {
            prop_assert_eq!(action, Action::Send(latest[key]));
        }
        prop_assert_eq!(q.pending(), 0);
    }

    /// B13: spread after a reconnect, interleaved with changes and sends at any time,
    /// every send carries the object's latest status at that moment (never one older
    /// than its last change), nothing is offered before its point of the window, and
    /// everything is sent once the window is past.
    #[test]
    fn a_spread_backlog_sends_only_latest_statuses_and_all_of_them(
        before in prop::collection::vec((0usize..4, 0u8..3), 1..20),
        window_ms in 1u64..60_000,
        draws in prop::collection::vec(0.0f64..1.0, 4),
        after in prop::collection::vec((0usize..4, 0u8..3, 0u64..5_000), 0..40),
    ) {
        const KEYS: [&str; 4] = ["a", "b", "c", "d"];
        const STATUSES: [&str; 3] = ["x", "y", "z"];
        let mut q = queue();
        let mut latest = BTreeMap::new();
        for (k, s) in before {
            q.update(KEYS[k], 0, STATUSES[usize::from(s)]);
            latest.insert(KEYS[k], STATUSES[usize::from(s)]);
        }
        let window = Duration::from_millis(window_ms);
        let mut draws = draws.into_iter().cycle();
        q.spread(NOW, window, || draws.next().unwrap_or(0.0));
        let mut now = NOW;
        for (k, s, step) in after {
            now += Duration::from_millis(step);
            q.update(KEYS[k], 0, STATUSES[usize::from(s)]);
            latest.insert(KEYS[k], STATUSES[usize::from(s)]);
            while let Some((key, action)) = q.next(now) {
                prop_assert_eq!(&action, &Action::Send(latest[key]), "the latest, at {:?}", now);
                if let Action::Send(status) = action {
                    q.sent(&key, status);
                }
            }
        }
        let end = window.max(now);
        for (key, action) in drain(&mut q, end) {
            prop_assert_eq!(action, Action::Send(latest[key]));
        }
        prop_assert_eq!(q.pending(), 0, "everything sent once the window is past");
    }
}
