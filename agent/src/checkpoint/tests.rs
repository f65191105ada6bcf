use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

type Pods = BTreeMap<String, Vec<u32>>;

fn sample() -> Pods {
    BTreeMap::from([("web".to_owned(), vec![1, 2, 3]), ("db".to_owned(), vec![])])
}

#[test]
fn round_trip_and_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let cps = Checkpoints::new(dir.path());
    assert_eq!(cps.read::<Pods>("api").unwrap(), None, "no checkpoint yet");
    cps.write("api", &sample()).unwrap();
    assert_eq!(cps.read::<Pods>("api").unwrap(), Some(sample()));
    cps.write("api", &Pods::new()).unwrap();
    assert_eq!(cps.read::<Pods>("api").unwrap(), Some(Pods::new()));
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(dir.path().join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["api.json"]);
}

#[test]
fn a_leftover_temporary_file_does_not_matter() {
    let dir = tempfile::tempdir().unwrap();
    let cps = Checkpoints::new(dir.path());
    cps.write("url", &sample()).unwrap();
    fs::write(dir.path().join("checkpoints/.url.json.tmp"), b"outpost-checkpoint v1 len=9")
        .unwrap();
    assert_eq!(cps.read::<Pods>("url").unwrap(), Some(sample()));
}

#[test]
fn garbage_and_foreign_files_are_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let cps = Checkpoints::new(dir.path());
    fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    for bytes in [&b""[..], b"{\"pods\":[]}", b"outpost-checkpoint v1\n{}", b"\xff\xfe\n{}"] {
        fs::write(cps.path("api"), bytes).unwrap();
        let err = cps.read::<Pods>("api").unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{bytes:?}: {err}");
        assert!(err.to_string().contains("api.json"), "{err}");
    }
}

#[test]
fn a_body_of_the_wrong_shape_is_corrupt_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let cps = Checkpoints::new(dir.path());
    cps.write("api", &vec!["not", "a", "map"]).unwrap();
    let err = cps.read::<Pods>("api").unwrap_err();
    assert!(err.to_string().contains("does not decode"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// O1: a torn write (any strict prefix) or any single changed byte is detected.
    #[test]
    fn torn_or_flipped_files_are_always_detected(cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(), xor in 1u8..=255, torn in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let cps = Checkpoints::new(dir.path());
        cps.write("api", &sample()).unwrap();
        let path = cps.path("api");
        let mut bytes = fs::read(&path).unwrap();
        if torn {
            bytes.truncate(cut.index(bytes.len()));
        } else {
            let i = flip.index(bytes.len());
            bytes[i] ^= xor;
        }
        fs::write(&path, &bytes).unwrap();
        let read = cps.read::<Pods>("api");
        prop_assert!(matches!(read, Err(Error::Corrupt { .. })), "{:?}", read);
    }
}

#[test]
fn writes_and_failed_writes_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = crate::checkpoint::metrics::CheckpointWrites::register(
        registry.sub_registry_with_prefix("outpost"),
    );
    let cps = Checkpoints::new(dir.path()).with_metrics(metrics.clone());
    cps.write("url", &sample()).unwrap();
    cps.write("url", &sample()).unwrap();
    // A state directory that is a file: the checkpoint directory cannot be created.
    let file = dir.path().join("not-a-dir");
    fs::write(&file, "").unwrap();
    let broken = Checkpoints::new(&file).with_metrics(metrics.clone());
    assert!(matches!(broken.write("push", &sample()), Err(Error::Write { .. })));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        "outpost_checkpoint_writes_total{source=\"url\"} 2",
        "outpost_checkpoint_writes_total{source=\"push\"} 1",
        "outpost_checkpoint_write_failures_total{source=\"push\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    assert!(!text.contains("write_failures_total{source=\"url\"}"), "{text}");
}

#[test]
fn v3_a_private_checkpoint_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let cps = Checkpoints::new(dir.path());
    let mode = |name: &str| fs::metadata(cps.path(name)).unwrap().permissions().mode() & 0o777;
    cps.write_private("api-objects", &sample()).unwrap();
    assert_eq!(mode("api-objects"), 0o600);
    assert_eq!(cps.read::<Pods>("api-objects").unwrap(), Some(sample()));
    // A leftover temporary file made readable by all does not lend its mode.
    fs::write(dir.path().join("checkpoints/.api-objects.json.tmp"), b"x").unwrap();
    fs::set_permissions(
        dir.path().join("checkpoints/.api-objects.json.tmp"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    cps.write_private("api-objects", &Pods::new()).unwrap();
    assert_eq!(mode("api-objects"), 0o600);
    cps.write("api", &sample()).unwrap();
    assert_eq!(mode("api") & 0o600, 0o600);
}

#[test]
fn the_sources_machines_see_the_error_in_the_same_words() {
    let path = PathBuf::from("/var/lib/outpost/checkpoints/url.json");
    let errors = [
        Error::Write { path: path.clone(), source: io::Error::from_raw_os_error(libc::ENOSPC) },
        Error::Read { path: path.clone(), source: io::Error::from_raw_os_error(libc::EACCES) },
        Error::Corrupt { path: path.clone(), reason: "no header line".into() },
        Error::Encode { path, source: serde_json::from_str::<u32>("x").expect_err("not a number") },
    ];
    for error in errors {
        let shown = outpost_core::error_chain::describe(&error);
        let described = outpost_core::source::checkpoint::Error::from(error);
        assert_eq!(outpost_core::error_chain::describe(&described), shown);
    }
}
