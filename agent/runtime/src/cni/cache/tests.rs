use serde_json::json;

use super::*;

fn record(id: &str) -> Record {
    Record {
        id: id.to_owned(),
        conf_file: PathBuf::from("/etc/cni/net.d/10.conflist"),
        config: json!({"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "bridge"}]}),
        netns: PathBuf::from("/run/outpost/pods/a/ns/net"),
        interface: "eth0".to_owned(),
        pod_namespace: "default".to_owned(),
        pod_name: "web".to_owned(),
        cni_args: "IgnoreUnknown=1".to_owned(),
        capability_args: Map::new(),
        result: Some(json!({"ips": []})),
    }
}

#[test]
fn records_round_trip_and_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path());
    assert_eq!(cache.ids().unwrap(), Vec::<String>::new());
    assert_eq!(cache.read("b").unwrap(), None);
    cache.write(&record("b")).unwrap();
    cache.write(&record("a")).unwrap();
    let mut updated = record("a");
    updated.result = None;
    cache.write(&updated).unwrap();
    assert_eq!(cache.read("a").unwrap(), Some(updated.clone()));
    assert_eq!(cache.ids().unwrap(), ["a", "b"]);
    cache.persist("a").unwrap();
    assert_eq!(cache.read("a").unwrap(), Some(updated));
    cache.remove("a").unwrap();
    cache.remove("a").unwrap();
    assert_eq!(cache.ids().unwrap(), ["b"]);
    // A record removed before it was made durable.
    cache.persist("a").unwrap();
}

#[test]
fn leftover_temp_files_are_not_records() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path());
    cache.write(&record("a")).unwrap();
    fs::write(dir.path().join("results/.b.json.tmp"), "{").unwrap();
    fs::write(dir.path().join("results/.c.json"), "{").unwrap();
    assert_eq!(cache.ids().unwrap(), ["a"]);
}

#[test]
fn a_corrupt_record_names_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path());
    fs::create_dir_all(dir.path().join("results")).unwrap();
    fs::write(dir.path().join("results/a.json"), "{").unwrap();
    let error = cache.read("a").unwrap_err();
    assert!(matches!(error, Error::Corrupt { .. }));
    assert!(error.to_string().contains("results/a.json"), "{error}");
}
