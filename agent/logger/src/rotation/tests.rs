use super::*;

fn limits(max_size: u64, max_files: usize) -> Limits {
    Limits { max_size, max_files }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn defaults_are_kubelets() {
    assert_eq!(Limits::default(), limits(10 * 1024 * 1024, 5));
}

#[test]
fn rotates_only_what_would_grow_past_the_limit() {
    let l = limits(100, 5);
    assert!(!must_rotate(0, 500, l), "an empty file takes any record");
    assert!(!must_rotate(60, 40, l));
    assert!(must_rotate(60, 41, l));
    assert!(must_rotate(100, 1, l));
    assert!(!must_rotate(1, u64::MAX - 1, limits(u64::MAX, 5)));
    assert!(must_rotate(2, u64::MAX, limits(u64::MAX - 1, 5)));
}

#[test]
fn rotated_names_carry_the_time_and_a_sequence_on_collision() {
    let now = Time::from_unix(1_772_600_767, 999_000_000);
    assert_eq!(
        rotated_name("0.log", now, &names(&["0.log", "1.log.20260304-050607"])),
        "0.log.20260304-050607"
    );
    let taken = names(&["0.log.20260304-050607", "0.log.20260304-050607.1"]);
    assert_eq!(rotated_name("0.log", now, &taken), "0.log.20260304-050607.2");
    // The oldest of the same second deleted: still after the newest.
    let taken = names(&["0.log.20260304-050606.9", "0.log.20260304-050607.3"]);
    assert_eq!(rotated_name("0.log", now, &taken), "0.log.20260304-050607.4");
}

#[test]
fn deletes_the_oldest_rotated_files_beyond_the_limit() {
    let list = names(&[
        "0.log",
        "0.log.20260101-000002",
        "0.log.20260101-000001.gz",
        "0.log.20260101-000002.1",
        "0.log.20260101-000002.10",
        "0.log.20260101-000002.2",
        "1.log",
        "1.log.20250101-000000",
        "0.log.tmp",
        "0.log.20260101-000000.tmp",
    ]);
    assert_eq!(
        to_delete("0.log", &list, 3),
        ["0.log.20260101-000001.gz", "0.log.20260101-000002", "0.log.20260101-000002.1"]
    );
    assert!(to_delete("0.log", &list, 6).is_empty());
    assert_eq!(to_delete("1.log", &list, 1), ["1.log.20250101-000000"]);
    assert!(to_delete("1.log", &list, 2).is_empty());
}

#[test]
fn rotation_key_wants_kubelets_time_format() {
    assert_eq!(rotation_key("0.log", "0.log.20260101-000002.7"), Some(("20260101-000002", 7)));
    for name in [
        "0.log",
        "0.log.",
        "0.log.2026010-0000002",
        "0.log.20260101-00000x",
        "10.log.20260101-000002",
        "0.log.20260101-000002x",
    ] {
        assert_eq!(rotation_key("0.log", name), None, "{name}");
    }
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn log_file_rotates_and_keeps_at_most_max_files() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("pod/c/0.log");
    let mut file = LogFile::open(&path, limits(25, 3)).unwrap();
    let now = Time::from_unix(1_772_600_767, 0);
    for i in 0..10 {
        file.write_record(format!("record number {i}\n").as_bytes(), now).unwrap();
    }
    let dir = path.parent().unwrap();
    assert_eq!(files(dir), ["0.log", "0.log.20260304-050607.7", "0.log.20260304-050607.8"]);
    assert_eq!(fs::read_to_string(&path).unwrap(), "record number 9\n");
    assert_eq!(
        fs::read_to_string(dir.join("0.log.20260304-050607.8")).unwrap(),
        "record number 8\n"
    );
}

#[test]
fn log_file_appends_to_an_existing_file_and_counts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("0.log");
    fs::write(&path, "0123456789\n").unwrap();
    let now = Time::from_unix(1_772_600_767, 0);
    let mut file = LogFile::open(&path, limits(20, 2)).unwrap();
    file.write_record(b"abcdefgh\n", now).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "0123456789\nabcdefgh\n");
    file.write_record(b"x\n", now).unwrap();
    assert_eq!(files(tmp.path()), ["0.log", "0.log.20260304-050607"]);
    assert_eq!(fs::read_to_string(&path).unwrap(), "x\n");
}

#[test]
fn a_single_file_is_truncated_instead() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("0.log");
    let mut file = LogFile::open(&path, limits(10, 1)).unwrap();
    let now = Time::UNIX_EPOCH;
    file.write_record(b"12345678\n", now).unwrap();
    file.write_record(b"abc\n", now).unwrap();
    assert_eq!(files(tmp.path()), ["0.log"]);
    assert_eq!(fs::read_to_string(&path).unwrap(), "abc\n");
}

#[test]
fn open_names_the_file_it_cannot_create() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("file"), "").unwrap();
    let err = LogFile::open(&tmp.path().join("file/c/0.log"), Limits::default()).unwrap_err();
    assert!(matches!(err, Error::CreateDir { .. }), "{err}");
    assert!(err.to_string().contains("file/c"), "{err}");
}

/// A reader waits for the logger that writes the live file, and for nothing else.
#[test]
fn wait_for_writer_waits_until_the_logger_is_done_with_the_live_file() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("0.log");
    let mut file = LogFile::open(&path, limits(25, 3)).unwrap();
    assert!(!wait_for_writer(&path, Duration::from_millis(20)), "the logger still writes it");
    let now = Time::from_unix(1_772_600_767, 0);
    // Rotation hands the lock to the new live file: the old one's is free.
    for i in 0..3 {
        file.write_record(format!("record number {i}\n").as_bytes(), now).unwrap();
    }
    let rotated = files(tmp.path()).into_iter().find(|name| name != "0.log");
    let rotated = tmp.path().join(rotated.expect("a rotated file"));
    assert!(wait_for_writer(&rotated, Duration::ZERO));
    assert!(!wait_for_writer(&path, Duration::from_millis(20)));
    // The logger ends a moment later: the reader sees every line it wrote.
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        file.write_record(b"the last line\n", now).unwrap();
        drop(file);
    });
    assert!(wait_for_writer(&path, Duration::from_secs(10)));
    assert!(fs::read_to_string(&path).unwrap().ends_with("the last line\n"));
    writer.join().unwrap();
    // No file, no writer.
    assert!(wait_for_writer(&tmp.path().join("9.log"), Duration::ZERO));
}
