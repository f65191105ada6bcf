use super::{Record, Times};

#[test]
fn the_record_survives_a_round_trip_and_a_missing_file_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image-gc.json");
    assert_eq!(Record::load(&path), Record::default());
    let at: k8s_openapi::jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
    let mut record = Record { since: Some(at), ..Record::default() };
    record.images.insert("sha256:abc".into(), Times { first_detected: at, last_used: at });
    record.save(&path).unwrap();
    assert_eq!(Record::load(&path), record);
    std::fs::write(&path, "{not json").unwrap();
    assert_eq!(Record::load(&path), Record::default(), "corrupt: started afresh");
}
