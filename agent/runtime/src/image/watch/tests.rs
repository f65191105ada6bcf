use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use proptest::prelude::*;

use super::record::{Record, Stamp, tarball_name};

fn stamp(size: u64, mtime_sec: i64, inode: u64) -> Stamp {
    Stamp { size, mtime_sec, mtime_nsec: 5, inode }
}

#[test]
fn only_visible_utf8_tar_files_are_tarballs() {
    assert_eq!(tarball_name(OsStr::new("busybox.tar")), Some("busybox.tar"));
    assert_eq!(tarball_name(OsStr::new("a b.tar")), Some("a b.tar"));
    for name in [".busybox.tar", ".tar", "busybox.tar.gz", "busybox.tar.part", "busybox.TAR", "tar"]
    {
        assert_eq!(tarball_name(OsStr::new(name)), None, "{name}");
    }
    assert_eq!(tarball_name(OsStr::from_bytes(b"\xffx.tar")), None);
}

#[test]
fn a_file_is_imported_only_in_the_recorded_version() {
    let mut record = Record::default();
    let s = stamp(10, 100, 7);
    assert!(!record.is_imported("a.tar", &s));
    record.insert("a.tar", s, vec!["docker.io/library/a:1".into()]);
    assert!(record.is_imported("a.tar", &s));
    assert!(!record.is_imported("b.tar", &s), "another name");
    assert!(!record.is_imported("a.tar", &stamp(11, 100, 7)), "another size");
    assert!(!record.is_imported("a.tar", &stamp(10, 101, 7)), "another mtime");
    assert!(!record.is_imported("a.tar", &Stamp { mtime_nsec: 6, ..s }), "another mtime (ns)");
    assert!(!record.is_imported("a.tar", &stamp(10, 100, 8)), "another inode: replaced");
}

#[test]
fn files_that_are_gone_are_forgotten() {
    let mut record = Record::default();
    record.insert("a.tar", stamp(1, 1, 1), vec![]);
    record.insert("b.tar", stamp(2, 2, 2), vec![]);
    assert!(!record.retain_present(&["a.tar".into(), "b.tar".into(), "c.tar".into()]));
    assert!(record.retain_present(&["b.tar".into()]));
    assert_eq!(record.files.keys().collect::<Vec<_>>(), ["b.tar"]);
}

#[test]
fn the_record_format_is_stable() {
    let mut record = Record::default();
    record.insert("a.tar", stamp(10, 100, 7), vec!["outpost.test/busybox:latest".into()]);
    let json: serde_json::Value = serde_json::from_slice(&record.to_json().unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"files": {"a.tar": {
            "size": 10, "mtimeSec": 100, "mtimeNsec": 5, "inode": 7,
            "images": ["outpost.test/busybox:latest"]
        }}})
    );
    assert_eq!(Record::parse(b"{}").unwrap(), Record::default());
    assert!(Record::parse(b"{\"files\": 3}").is_err());
}

proptest! {
    #[test]
    fn the_record_round_trips(
        files in proptest::collection::btree_map(
            "[a-z.]{1,12}",
            (any::<u64>(), any::<i64>(), 0..1_000_000_000i64, any::<u64>(), proptest::collection::vec("[a-z/:]{1,20}", 0..3)),
            0..5,
        )
    ) {
        let mut record = Record::default();
        for (name, (size, mtime_sec, mtime_nsec, inode, images)) in files {
            record.insert(&name, Stamp { size, mtime_sec, mtime_nsec, inode }, images);
        }
        prop_assert_eq!(Record::parse(&record.to_json().unwrap()).unwrap(), record);
    }
}
