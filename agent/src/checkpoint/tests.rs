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

/// Tears the file at `path` (cuts it at `cut`) or changes one byte (at `flip`, by `xor`).
fn damage(path: &Path, cut: prop::sample::Index, flip: prop::sample::Index, xor: u8, torn: bool) {
    let mut bytes = fs::read(path).unwrap();
    if torn {
        bytes.truncate(cut.index(bytes.len()));
    } else {
        let i = flip.index(bytes.len());
        bytes[i] ^= xor;
    }
    fs::write(path, &bytes).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// O1: a torn write (any strict prefix) or any single changed byte is detected.
    #[test]
    fn torn_or_flipped_files_are_always_detected(cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(), xor in 1u8..=255, torn in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let cps = Checkpoints::new(dir.path());
        cps.write("api", &sample()).unwrap();
        damage(&cps.path("api"), cut, flip, xor, torn);
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

mod sealed {
    use std::os::unix::fs::PermissionsExt as _;
    use std::sync::Arc;

    use super::*;
    use crate::checkpoint::seal::{self, Source, StateKey};

    const SECRET: &str = "hunter2-database-password";

    fn key(byte: u8) -> Arc<StateKey> {
        Arc::new(
            StateKey::derive(&[byte; 32], Source::File("/etc/outpost/state.key".into())).unwrap(),
        )
    }

    fn secrets() -> BTreeMap<String, String> {
        BTreeMap::from([("password".to_owned(), SECRET.to_owned())])
    }

    #[test]
    fn v3_a_private_checkpoint_is_sealed_with_the_state_key() {
        let dir = tempfile::tempdir().unwrap();
        let cps = Checkpoints::new(dir.path()).with_key(Some(key(1)));
        cps.write_private("api-objects", &secrets()).unwrap();
        let bytes = fs::read(cps.path("api-objects")).unwrap();
        assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()), "plaintext on disk");
        let header =
            String::from_utf8_lossy(&bytes[..bytes.iter().position(|&b| b == b'\n').unwrap()])
                .into_owned();
        let id = key(1).id().to_owned();
        assert!(
            header.starts_with(&format!(
                "outpost-checkpoint v1 sealed=chacha20-poly1305 key={id} len="
            )),
            "{header}"
        );
        assert_eq!(cps.read::<BTreeMap<String, String>>("api-objects").unwrap(), Some(secrets()));
        // Two writes of the same value differ: each has its own nonce.
        cps.write_private("api-objects", &secrets()).unwrap();
        assert_ne!(fs::read(cps.path("api-objects")).unwrap(), bytes);
        // Public checkpoints (pods, no Secrets) stay plain and readable by all.
        cps.write("url", &sample()).unwrap();
        assert!(fs::read_to_string(cps.path("url")).unwrap().contains("\"web\""));
    }

    #[test]
    fn v3_a_sealed_checkpoint_without_its_key_is_named_and_not_read() {
        let dir = tempfile::tempdir().unwrap();
        Checkpoints::new(dir.path())
            .with_key(Some(key(1)))
            .write_private("api-objects", &secrets())
            .unwrap();
        let id = key(1).id().to_owned();
        let none = Checkpoints::new(dir.path())
            .read::<BTreeMap<String, String>>("api-objects")
            .unwrap_err();
        assert!(
            matches!(&none, Error::Sealed { source: seal::Error::NoKey { sealed_with }, .. } if *sealed_with == id),
            "{none}"
        );
        let shown = none.to_string();
        assert!(
            shown.contains("api-objects.json") && shown.contains("outpost.state-key"),
            "{shown}"
        );
        let other = Checkpoints::new(dir.path()).with_key(Some(key(2)));
        let err = other.read::<BTreeMap<String, String>>("api-objects").unwrap_err();
        assert!(
            matches!(&err, Error::Sealed { source: seal::Error::OtherKey { .. }, .. }),
            "{err}"
        );
        // The sources' machines see it as a checkpoint they cannot use, with the reason.
        let described = outpost_core::source::checkpoint::Error::from(err);
        assert!(outpost_core::error_chain::describe(&described).contains(&id));
    }

    #[test]
    fn v3_a_plain_private_checkpoint_is_sealed_as_soon_as_it_is_read_with_a_key() {
        let dir = tempfile::tempdir().unwrap();
        Checkpoints::new(dir.path()).write_private("api-objects", &secrets()).unwrap();
        let cps = Checkpoints::new(dir.path()).with_key(Some(key(1)));
        assert!(fs::read_to_string(cps.path("api-objects")).unwrap().contains(SECRET));
        assert_eq!(
            cps.read_private::<BTreeMap<String, String>>("api-objects").unwrap(),
            Some(secrets())
        );
        let bytes = fs::read(cps.path("api-objects")).unwrap();
        assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()), "still plain");
        assert_eq!(cps.read::<BTreeMap<String, String>>("api-objects").unwrap(), Some(secrets()));
    }

    #[test]
    fn v3_a_sealed_checkpoint_moved_to_another_name_or_edited_does_not_open() {
        let dir = tempfile::tempdir().unwrap();
        let cps = Checkpoints::new(dir.path()).with_key(Some(key(1)));
        cps.write_private("api-objects", &secrets()).unwrap();
        let bytes = fs::read(cps.path("api-objects")).unwrap();
        fs::write(cps.path("other"), &bytes).unwrap();
        let err = cps.read::<BTreeMap<String, String>>("other").unwrap_err();
        assert!(matches!(&err, Error::Sealed { source: seal::Error::Forged(_), .. }), "{err}");
        // An edit with a header made to match (xxh3 is a checksum, not a seal).
        let newline = bytes.iter().position(|&b| b == b'\n').unwrap();
        let mut body = bytes[newline + 1..].to_vec();
        let last = body.len() - 1;
        body[last] ^= 1;
        fs::write(cps.path("api-objects"), frame_with(Some(key(1).id()), &body)).unwrap();
        let err = cps.read::<BTreeMap<String, String>>("api-objects").unwrap_err();
        assert!(matches!(&err, Error::Sealed { source: seal::Error::Forged(_), .. }), "{err}");
    }

    #[test]
    fn v3_the_state_key_is_long_enough_and_its_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.key");
        fs::write(&path, [7u8; 31]).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let short = StateKey::load(Source::File(path.clone())).unwrap_err();
        assert!(matches!(short, seal::Error::Short { len: 31, .. }), "{short}");
        fs::write(&path, [7u8; 32]).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let exposed = StateKey::load(Source::File(path.clone())).unwrap_err();
        assert!(exposed.to_string().contains("chmod 600"), "{exposed}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o400)).unwrap();
        let loaded = StateKey::load(Source::File(path.clone())).unwrap();
        assert_eq!(loaded.id(), key(7).id(), "the id depends on the key's bytes alone");
        assert_ne!(key(7).id(), key(8).id());
        assert_eq!(loaded.id().len(), 16);
        let missing = StateKey::load(Source::File(dir.path().join("none"))).unwrap_err();
        assert!(matches!(missing, seal::Error::Read { .. }), "{missing}");
    }

    #[test]
    fn v3_the_flag_wins_over_the_systemd_credential() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Source::find(None, Some(dir.path())), None, "no credential loaded");
        assert_eq!(Source::find(None, None), None);
        fs::write(dir.path().join(seal::CREDENTIAL), [1u8; 32]).unwrap();
        let credential = dir.path().join("outpost.state-key");
        assert_eq!(Source::find(None, Some(dir.path())), Some(Source::Credential(credential)));
        let flag = PathBuf::from("/etc/outpost/state.key");
        assert_eq!(Source::find(Some(flag.clone()), Some(dir.path())), Some(Source::File(flag)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// O1 and V3: a torn or changed sealed file is refused, never half-read.
        #[test]
        fn torn_or_flipped_sealed_files_are_always_refused(cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(), xor in 1u8..=255, torn in any::<bool>()) {
            let dir = tempfile::tempdir().unwrap();
            let cps = Checkpoints::new(dir.path()).with_key(Some(key(3)));
            cps.write_private("api-objects", &secrets()).unwrap();
            super::damage(&cps.path("api-objects"), cut, flip, xor, torn);
            let read = cps.read::<BTreeMap<String, String>>("api-objects");
            prop_assert!(matches!(read, Err(Error::Corrupt { .. } | Error::Sealed { .. })), "{:?}", read);
        }
    }
}
