use proptest::prelude::*;

use super::*;

fn object(name: &str) -> ObjectKey {
    ObjectKey {
        kind: "Pod".into(),
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    }
}

fn key(name: &str, reason: &str, message: &str) -> EventKey {
    EventKey::new(object(name), String::new(), EventType::Normal, reason, message.into())
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn observe(c: &mut Correlator, k: &EventKey, second: u64) -> Observed {
    let s = i64::try_from(second).unwrap_or(i64::MAX);
    c.observe(k.clone(), Duration::from_secs(second), at(s), || {
        format!("{}.{second:016x}", k.object.name)
    })
}

fn small(backlog: usize) -> Correlator {
    Correlator::new(Limits { backlog, series: backlog, objects: 100 })
}

#[test]
fn identical_events_are_one_series_with_a_count() {
    let mut c = Correlator::new(Limits::default());
    let backoff = key("web", "BackOff", "Back-off restarting failed container main");
    assert_eq!(observe(&mut c, &backoff, 1), Observed::New);
    assert_eq!(observe(&mut c, &backoff, 2), Observed::Repeat);
    assert_eq!(observe(&mut c, &backoff, 3), Observed::Repeat);
    assert_eq!(c.backlog_len(), 1, "one Event object waits, not three");
    let (k, series) = c.take_next().unwrap();
    assert_eq!(k, backoff);
    assert_eq!(series.count, 3);
    assert_eq!((series.first, series.last), (at(1), at(3)));
    assert_eq!(series.name, "web.0000000000000001", "named when the series started");
    assert_eq!(series.sent, None);
    assert_eq!(c.stats().aggregated, 2);
}

#[test]
fn any_difference_in_the_key_is_another_series() {
    let mut c = Correlator::new(Limits::default());
    let base = key("web", "Started", "Started container main");
    let mut other_path = base.clone();
    other_path.field_path = "spec.containers{side}".into();
    let mut other_type = base.clone();
    other_type.kind = EventType::Warning;
    let mut other_uid = base.clone();
    other_uid.object.uid = "uid-2".into();
    for (i, k) in [&base, &other_path, &other_type, &other_uid].into_iter().enumerate() {
        assert_eq!(observe(&mut c, k, i as u64), Observed::New, "{k:?}");
    }
    assert_eq!(observe(&mut c, &key("web", "Started", "Started container side"), 9), Observed::New);
    assert_eq!(observe(&mut c, &key("web", "Killing", "Started container main"), 9), Observed::New);
    assert_eq!(c.backlog_len(), 6);
}

#[test]
fn a_repeat_after_sending_is_patched_with_the_total() {
    let mut c = Correlator::new(Limits::default());
    let k = key("web", "BackOff", "m");
    observe(&mut c, &k, 1);
    let (_, s) = c.take_next().unwrap();
    c.sent(&k, s.count);
    assert_eq!(c.take_next(), None, "nothing changed since");
    observe(&mut c, &k, 5);
    let (_, s) = c.take_next().unwrap();
    assert_eq!((s.count, s.sent), (2, Some(1)), "a PATCH to count 2");
    c.sent(&k, 2);
    c.sent(&k, 1);
    assert_eq!(c.recent(1)[0].1.sent, Some(2), "a late answer never lowers the count sent");
}

#[test]
fn an_expired_event_is_created_again() {
    let mut c = Correlator::new(Limits::default());
    let k = key("web", "BackOff", "m");
    observe(&mut c, &k, 1);
    c.take_next();
    c.sent(&k, 1);
    observe(&mut c, &k, 2);
    c.take_next();
    c.expired(&k);
    let (_, s) = c.take_next().unwrap();
    assert_eq!((s.count, s.sent), (2, None), "a POST of the whole series");
}

#[test]
fn a_failed_write_goes_back_to_the_front() {
    let mut c = Correlator::new(Limits::default());
    let (a, b) = (key("a", "R", "m"), key("b", "R", "m"));
    observe(&mut c, &a, 1);
    observe(&mut c, &b, 2);
    let (first, _) = c.take_next().unwrap();
    assert_eq!(first, a);
    c.retry(&a);
    assert_eq!(c.take_next().unwrap().0, a, "retried before newer ones");
    // Changed again while being written: queued at the back already, no duplicate.
    observe(&mut c, &a, 3);
    c.retry(&a);
    assert_eq!(c.take_next().unwrap().0, b);
    assert_eq!(c.take_next().unwrap().0, a);
    assert_eq!(c.take_next(), None);
}

#[test]
fn a_full_backlog_keeps_the_newest_and_counts_the_rest() {
    let mut c = Correlator::new(Limits { backlog: 2, series: 10, objects: 10 });
    let keys: Vec<EventKey> = (0..5).map(|i| key(&format!("p{i}"), "R", "m")).collect();
    for (i, k) in keys.iter().enumerate() {
        observe(&mut c, k, i as u64);
    }
    assert_eq!(c.backlog_len(), 2);
    assert_eq!(c.stats().dropped, 3);
    assert_eq!(c.take_next().unwrap().0, keys[3]);
    assert_eq!(c.take_next().unwrap().0, keys[4]);
    // A dropped series is still remembered: its next occurrence carries the full count.
    observe(&mut c, &keys[0], 9);
    assert_eq!(c.take_next().unwrap().1.count, 2);
}

#[test]
fn forgotten_series_start_a_new_event() {
    let mut c = small(2);
    let (a, b, d) = (key("a", "R", "m"), key("b", "R", "m"), key("d", "R", "m"));
    observe(&mut c, &a, 1);
    c.take_next();
    c.sent(&a, 1);
    observe(&mut c, &b, 2);
    observe(&mut c, &d, 3);
    assert_eq!(observe(&mut c, &a, 4), Observed::New, "a was the least recently seen");
    assert_eq!(c.recent(10).len(), 2);
}

#[test]
fn the_spam_filter_limits_each_object_apart() {
    let mut c = Correlator::new(Limits::default());
    let web = key("web", "BackOff", "m");
    for i in 0..SPAM_BURST {
        assert_ne!(observe(&mut c, &web, 0), Observed::RateLimited, "event {i} of the burst");
    }
    assert_eq!(observe(&mut c, &web, 0), Observed::RateLimited);
    assert_eq!(
        observe(&mut c, &key("web", "Other", "x"), 0),
        Observed::RateLimited,
        "per object, not per reason"
    );
    assert_eq!(
        observe(&mut c, &key("db", "BackOff", "m"), 0),
        Observed::New,
        "other objects are not limited"
    );
    assert_eq!(c.stats().rate_limited, 2);
    let later = SPAM_REFILL.as_secs();
    assert_eq!(observe(&mut c, &web, later), Observed::Repeat, "one token back after 5 minutes");
    assert_eq!(observe(&mut c, &web, later), Observed::RateLimited);
    assert_eq!(c.recent(1)[0].1.count, SPAM_BURST + 1);
}

#[test]
fn the_spam_filter_forgets_the_least_recent_object() {
    let mut f = SpamFilter::new(2);
    let (a, b, d) = (object("a"), object("b"), object("d"));
    for _ in 0..SPAM_BURST {
        assert!(f.allow(&a, Duration::ZERO));
    }
    assert!(!f.allow(&a, Duration::ZERO));
    assert!(f.allow(&b, Duration::ZERO));
    assert!(f.allow(&d, Duration::ZERO));
    assert_eq!(f.len(), 2);
    assert!(f.allow(&a, Duration::ZERO), "a was forgotten: a full burst again");
}

#[test]
fn long_messages_are_cut_on_a_character_boundary() {
    let message = "é".repeat(MAX_MESSAGE);
    let k = EventKey::new(object("a"), String::new(), EventType::Warning, "R", message);
    assert_eq!(k.message.len(), MAX_MESSAGE);
    let k = EventKey::new(
        object("a"),
        String::new(),
        EventType::Warning,
        "R",
        format!("x{}", "é".repeat(600)),
    );
    assert_eq!(k.message.len(), MAX_MESSAGE - 1);
    assert!(k.message.starts_with('x'));
}

#[test]
fn recent_lists_the_newest_first() {
    let mut c = Correlator::new(Limits::default());
    let (a, b) = (key("a", "R", "m"), key("b", "R", "m"));
    observe(&mut c, &a, 1);
    observe(&mut c, &b, 2);
    observe(&mut c, &a, 3);
    let names: Vec<String> = c.recent(10).into_iter().map(|(k, _)| k.object.name).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(c.recent(1).len(), 1);
}

#[test]
fn after_a_reconnect_one_event_per_object_and_reason_is_written() {
    let mut c = Correlator::new(Limits::default());
    let container = |name: &str, reason: &str, message: &str| {
        let mut k = key("web", reason, message);
        k.field_path = format!("spec.containers{{{name}}}");
        k
    };
    // While away: both containers restarted, and another pod's container too.
    observe(&mut c, &container("main", "Created", "Created container main"), 1);
    observe(&mut c, &container("main", "Started", "Started container main"), 2);
    observe(&mut c, &container("side", "Created", "Created container side"), 3);
    observe(&mut c, &container("side", "Started", "Started container side"), 4);
    observe(&mut c, &key("db", "Started", "Started container db"), 5);
    assert_eq!(c.reconnected(), 2);
    let written: Vec<(String, String, String)> = std::iter::from_fn(|| c.take_next())
        .map(|(k, _)| (k.object.name, k.reason, k.field_path))
        .collect();
    assert_eq!(
        written,
        [
            ("web".into(), "Created".into(), "spec.containers{side}".into()),
            ("web".into(), "Started".into(), "spec.containers{side}".into()),
            ("db".into(), "Started".into(), String::new()),
        ],
        "the newest of each pod's reason, in their order"
    );
    assert_eq!(c.stats().collapsed, 2);
    assert_eq!(c.stats().lost(), 2);
    // The series left unwritten keeps its count: its next repeat writes it whole.
    observe(&mut c, &container("main", "Created", "Created container main"), 6);
    let (_, series) = c.take_next().unwrap();
    assert_eq!(series.count, 2);
}

#[test]
fn a_refused_event_is_dropped_and_counted() {
    let mut c = Correlator::new(Limits::default());
    let k = key("web", "BackOff", "m");
    observe(&mut c, &k, 1);
    let (taken, _) = c.take_next().unwrap();
    c.refused(&taken);
    assert_eq!(c.backlog_len(), 0, "not retried");
    assert_eq!((c.stats().refused, c.stats().lost()), (1, 1));
}

#[test]
fn the_first_refusal_after_a_reconnect_sheds_the_normal_events_of_while_away() {
    let mut c = Correlator::new(Limits::default());
    let warning = |name: &str| {
        let mut k = key(name, "BackOff", "Back-off restarting failed container");
        k.kind = EventType::Warning;
        k
    };
    // While away: two pods restarted, one of them is crash-looping.
    observe(&mut c, &key("web", "Created", "Created container main"), 1);
    observe(&mut c, &key("web", "Started", "Started container main"), 2);
    observe(&mut c, &key("db", "Started", "Started container db"), 3);
    observe(&mut c, &warning("db"), 4);
    c.reconnected();
    // Back: something new happens before the first write.
    observe(&mut c, &key("api", "Pulled", "Container image already present"), 5);
    let (first, _) = c.take_next().unwrap();
    assert_eq!(first.reason, "Created");
    assert_eq!(c.refused(&first), 2, "web's Started and db's Started");
    let left: Vec<(String, String)> =
        std::iter::from_fn(|| c.take_next()).map(|(k, _)| (k.object.name, k.reason)).collect();
    assert_eq!(
        left,
        [("db".into(), "BackOff".into()), ("api".into(), "Pulled".into())],
        "the Warning of while away and what happened since stay"
    );
    let stats = c.stats();
    assert_eq!((stats.refused, stats.shed, stats.lost()), (1, 2, 3));
    // Only the first refusal after a reconnect sheds.
    observe(&mut c, &key("web", "Killing", "Stopping container main"), 6);
    observe(&mut c, &key("web", "Started", "Started container main"), 7);
    let (next, _) = c.take_next().unwrap();
    assert_eq!(c.refused(&next), 0);
    assert_eq!(c.backlog_len(), 1);
}

#[test]
fn a_refusal_without_a_reconnect_sheds_nothing_else() {
    let mut c = Correlator::new(Limits::default());
    observe(&mut c, &key("web", "Created", "Created container main"), 1);
    observe(&mut c, &key("web", "Started", "Started container main"), 2);
    let (first, _) = c.take_next().unwrap();
    assert_eq!(c.refused(&first), 0);
    assert_eq!(c.backlog_len(), 1);
}

#[test]
fn similar_events_are_combined_before_the_spam_filter_and_the_count() {
    let mut c = Correlator::new(Limits::default());
    for i in 0..12 {
        observe(&mut c, &key("web", "Unhealthy", &format!("probe output {i}")), i);
    }
    let messages: Vec<(String, u32)> =
        std::iter::from_fn(|| c.take_next()).map(|(k, s)| (k.message, s.count)).collect();
    assert_eq!(messages.len(), 10, "nine of their own and one combined");
    assert_eq!(messages[9], (format!("{COMBINED_PREFIX}probe output 9"), 3));
    assert_eq!(c.stats().combined, 3);
}

#[derive(Debug, Clone)]
enum Step {
    Observe(u8, u8),
    Next,
    Retry(u8),
    Expire(u8),
    Reconnect,
    Refuse,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..12, 0u8..3).prop_map(|(o, r)| Step::Observe(o, r)),
        2 => Just(Step::Next),
        1 => (0u8..12).prop_map(Step::Retry),
        1 => (0u8..12).prop_map(Step::Expire),
        1 => Just(Step::Reconnect),
        1 => Just(Step::Refuse),
    ]
}

proptest! {
    /// Whatever happens, the backlog never exceeds its bound, no series is queued twice,
    /// and every event is accounted for exactly: rate limited, folded into a queued
    /// series, dropped, collapsed after a reconnect, taken to be written, or still
    /// waiting (retries put taken series back, so they count on the other side). Right
    /// after a reconnect, one series at most is queued per object, type and reason.
    #[test]
    fn the_backlog_is_bounded_and_nothing_is_unaccounted(
        backlog in 1usize..6,
        series in 1usize..10,
        steps in prop::collection::vec(step(), 1..200),
    ) {
        let mut c = Correlator::new(Limits { backlog, series, objects: 4 });
        let (mut taken, mut requeued) = (0u64, 0u64);
        // Reason R2 is a Warning.
        let key = |o: u8, r: u8| {
            let mut k = key(&format!("p{o}"), &format!("R{r}"), "m");
            if r == 2 {
                k.kind = EventType::Warning;
            }
            k
        };
        for (i, s) in steps.into_iter().enumerate() {
            let now = i as u64 * 7;
            match s {
                Step::Observe(o, r) => {
                    observe(&mut c, &key(o, r), now);
                }
                Step::Next => {
                    if let Some((k, s)) = c.take_next() {
                        taken += 1;
                        prop_assert!(s.count >= 1);
                        c.sent(&k, s.count);
                    }
                }
                Step::Retry(o) | Step::Expire(o) => {
                    let k = key(o, 0);
                    if c.entries.get(&k).is_some_and(|e| e.queued.is_none()) {
                        requeued += 1;
                    }
                    if matches!(s, Step::Retry(_)) { c.retry(&k) } else { c.expired(&k) }
                }
                Step::Refuse => {
                    let away = c.away;
                    if let Some((k, _)) = c.take_next() {
                        taken += 1;
                        c.refused(&k);
                        if let Some(away) = away {
                            let mut while_away = c.backlog.range(..=away);
                            prop_assert!(while_away.all(|(_, k)| k.kind == EventType::Warning));
                        }
                    }
                }
                Step::Reconnect => {
                    c.reconnected();
                    let groups: std::collections::BTreeSet<_> =
                        c.backlog.values().map(|k| (&k.object, k.kind, &k.reason)).collect();
                    prop_assert_eq!(groups.len(), c.backlog_len());
                }
            }
            prop_assert!(c.backlog_len() <= backlog);
            let queued: Vec<&EventKey> = c.backlog.values().map(|k| &**k).collect();
            let unique: std::collections::BTreeSet<&EventKey> = queued.iter().copied().collect();
            prop_assert_eq!(unique.len(), queued.len());
            prop_assert!(c.entries.len() <= series.max(backlog));
            let st = c.stats();
            prop_assert_eq!(
                st.emitted - st.rate_limited + requeued,
                st.aggregated + st.dropped + st.collapsed + st.shed + taken + c.backlog_len() as u64
            );
        }
    }
}
