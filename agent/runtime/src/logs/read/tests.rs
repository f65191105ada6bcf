use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

/// A container directory with one run's file of these records.
fn container(records: &[(&str, &str, &str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ns_pod_uid").join("c");
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::new();
    for (time, stream, tag, content) in records {
        text.push_str(&format!("{time} {stream} {tag} {content}\n"));
    }
    std::fs::write(dir.join("0.log"), text).unwrap();
    (root, dir)
}

const RECORDS: &[(&str, &str, &str, &str)] = &[
    ("2024-05-01T10:00:00.000000000Z", "stdout", "F", "one"),
    ("2024-05-01T10:00:01.000000000Z", "stderr", "P", "tw"),
    ("2024-05-01T10:00:01.500000000Z", "stdout", "F", "three"),
    ("2024-05-01T10:00:02.000000000Z", "stderr", "F", "o"),
    ("2024-05-01T10:00:03.000000000Z", "stdout", "F", "four"),
];

fn read(dir: &Path, options: Options) -> String {
    let mut out = Vec::new();
    ContainerLog::open(dir, "ns/pod", options).unwrap().copy_to(&mut out, &|| false).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn lines_are_joined_and_filtered_by_time_tail_and_bytes() {
    let (_root, dir) = container(RECORDS);
    assert_eq!(read(&dir, Options::default()), "one\nthree\ntwo\nfour\n");
    let tail = Options { tail: Some(2), ..Options::default() };
    assert_eq!(read(&dir, tail), "two\nfour\n");
    let since =
        Options { since: Some("2024-05-01T10:00:01Z".parse().unwrap()), ..Options::default() };
    assert_eq!(
        read(&dir, since.clone()),
        "three\ntwo\nfour\n",
        "a line's time is its first part's"
    );
    assert_eq!(read(&dir, Options { tail: Some(1), ..since }), "four\n");
    let limited = Options { limit_bytes: Some(6), ..Options::default() };
    assert_eq!(read(&dir, limited), "one\nth");
    let stamped = Options { timestamps: true, tail: Some(1), ..Options::default() };
    assert_eq!(read(&dir, stamped), "2024-05-01T10:00:03.000000000Z four\n");
}

#[test]
fn a_missing_run_is_an_error_before_any_output() {
    let (_root, dir) = container(RECORDS);
    let previous =
        ContainerLog::open(&dir, "ns/pod", Options { previous: true, ..Options::default() });
    assert!(
        matches!(previous, Err(Error::Locate(locate::Error::NoPreviousRun { .. }))),
        "{previous:?}"
    );
    let gone = ContainerLog::open(&dir.join("nope"), "ns/pod", Options::default());
    assert!(matches!(gone, Err(Error::Locate(locate::Error::List { .. }))), "{gone:?}");
}

#[test]
fn a_timestamp_filter_keeps_what_it_cannot_parse() {
    let since = Some("2024-05-01T10:00:00Z".parse().unwrap());
    assert!(at_or_after("2024-05-01T10:00:00Z", since));
    assert!(at_or_after("2024-05-01T10:00:00.000000001Z", since));
    assert!(!at_or_after("2024-05-01T09:59:59.999999999Z", since));
    assert!(at_or_after("garbage", since));
    assert!(at_or_after("2000-01-01T00:00:00Z", None));
}

#[test]
fn following_prints_appends_and_stops_when_asked() {
    let (_root, dir) = container(&RECORDS[..1]);
    let log =
        ContainerLog::open(&dir, "ns/pod", Options { follow: true, ..Options::default() }).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let out = Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = {
        let (stop, out) = (stop.clone(), out.clone());
        std::thread::spawn(move || {
            let mut buffer = SharedWriter(out);
            log.copy_to(&mut buffer, &|| stop.load(Ordering::Relaxed))
        })
    };
    let mut file = std::fs::OpenOptions::new().append(true).open(dir.join("0.log")).unwrap();
    file.write_all(b"2024-05-01T10:00:05.000000000Z stdout F five\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while out.lock().unwrap().as_slice() != b"one\nfive\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            String::from_utf8_lossy(&out.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap().unwrap();
}

struct SharedWriter(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for SharedWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The records of `lines` lines of varying length (some over a read's size together, so
/// records straddle every read boundary), as the logger writes them.
fn many_records(lines: usize) -> String {
    let mut text = String::new();
    for i in 0..lines {
        let content = format!("line {i} {}", "x".repeat(i % 300));
        text.push_str(&format!("2024-05-01T10:00:00.{i:09}Z stdout F {content}\n"));
    }
    text
}

#[test]
fn a_large_log_is_read_in_bounded_pieces_whatever_its_size() {
    // A follower opened on a log of several MiB (a long-running pod's) must not hold
    // the whole file: 50 followers would hold 50 copies (load benchmark L1).
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("0.log");
    let lines = 40_000;
    std::fs::write(&path, many_records(lines)).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > 50 * READ_BYTES as u64);
    let mut reader = FileReader::open(&path).unwrap();
    let mut seen = 0;
    reader
        .read_records(|record| {
            let expected = format!("line {seen} ");
            assert!(record.content.starts_with(expected.as_bytes()), "record {seen} out of order");
            seen += 1;
            true
        })
        .unwrap();
    assert_eq!(seen, lines);
    assert!(reader.carry.capacity() <= MAX_RECORD_BYTES, "{}", reader.carry.capacity());

    // The whole log without a tail, and its last lines with one, through the printer.
    let dir = root.path().join("ns_pod_uid").join("c");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::rename(&path, dir.join("0.log")).unwrap();
    let all = read(&dir, Options::default());
    assert_eq!(all.lines().count(), lines);
    assert!(all.starts_with("line 0 \nline 1 x\n"), "{}", &all[..40]);
    let tail = read(&dir, Options { tail: Some(2), ..Options::default() });
    let last: Vec<&str> = all.lines().skip(lines - 2).collect();
    assert_eq!(tail.lines().collect::<Vec<_>>(), last);
}

#[test]
fn a_record_longer_than_the_logger_writes_is_skipped_and_reading_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ns_pod_uid").join("c");
    std::fs::create_dir_all(&dir).unwrap();
    let long = "y".repeat(3 * READ_BYTES);
    let text = format!(
        "2024-05-01T10:00:00Z stdout F before\n2024-05-01T10:00:01Z stdout F {long}\n2024-05-01T10:00:02Z stdout F after\n"
    );
    std::fs::write(dir.join("0.log"), text).unwrap();
    assert_eq!(read(&dir, Options::default()), "before\nafter\n");
}

#[test]
fn reading_stops_when_the_output_wants_no_more() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("0.log");
    std::fs::write(&path, many_records(10_000)).unwrap();
    let mut reader = FileReader::open(&path).unwrap();
    let mut handed = 0;
    reader
        .read_records(|_| {
            handed += 1;
            handed < 3
        })
        .unwrap();
    assert_eq!(handed, 3, "no record is handed on after the callback said stop");
    // A byte limit ends a catch-up of a large log early, with exactly that many bytes.
    let dir = root.path().join("ns_pod_uid").join("c");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::rename(&path, dir.join("0.log")).unwrap();
    let limited = read(&dir, Options { limit_bytes: Some(10), ..Options::default() });
    assert_eq!(limited, "line 0 \nli");
}
