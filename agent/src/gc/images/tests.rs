use k8s_openapi::jiff::Timestamp;

use super::record::{Record, Times};
use super::{Seen, Tracker};

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

#[test]
fn a_restart_keeps_when_images_were_first_seen_and_last_used() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image-gc.json");
    let mut record = Record { since: Some(at("2026-01-01T00:00:00Z")), ..Record::default() };
    let times =
        Times { first_detected: at("2026-01-02T00:00:00Z"), last_used: at("2026-01-03T00:00:00Z") };
    record.images.insert("sha256:a".into(), times);
    record.save(&path).unwrap();
    let tracker = Tracker::new(at("2026-02-01T00:00:00Z"), Some(path));
    assert_eq!(tracker.started, at("2026-01-01T00:00:00Z"), "tracking began with the record");
    let seen = &tracker.seen["sha256:a"];
    assert_eq!((seen.first_detected, seen.last_used), (times.first_detected, times.last_used));
    let fresh = Tracker::new(at("2026-02-01T00:00:00Z"), None);
    assert_eq!(fresh.started, at("2026-02-01T00:00:00Z"));
    assert!(fresh.seen.is_empty());
}

#[test]
fn the_record_is_written_when_images_change_or_a_use_is_an_hour_newer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image-gc.json");
    let mut tracker = Tracker::new(at("2026-01-01T00:00:00Z"), Some(path.clone()));
    let first = at("2026-01-01T00:00:00Z");
    let seen = Seen { first_detected: first, last_used: first, recorded_use: None, size: None };
    tracker.seen.insert("sha256:a".into(), seen);
    tracker.save(true);
    assert_eq!(Record::load(&path).images["sha256:a"].last_used, first);
    // Used again half an hour later: not worth a write.
    tracker.seen.get_mut("sha256:a").unwrap().last_used = at("2026-01-01T00:30:00Z");
    tracker.save(false);
    assert_eq!(Record::load(&path).images["sha256:a"].last_used, first);
    // Two hours later: written.
    tracker.seen.get_mut("sha256:a").unwrap().last_used = at("2026-01-01T02:00:00Z");
    tracker.save(false);
    assert_eq!(Record::load(&path).images["sha256:a"].last_used, at("2026-01-01T02:00:00Z"));
    assert_eq!(Record::load(&path).since, Some(first));
}
