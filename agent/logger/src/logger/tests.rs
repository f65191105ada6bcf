use std::io::Write;

use super::*;
use crate::rotation::Limits;

/// Runs the logger on two pipes fed by `feed` (which gets their write ends and drops
/// them), returns the log file's records without their timestamps.
fn log(limits: Limits, feed: impl FnOnce(File, File) + Send + 'static) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ns_pod_uid/c/0.log");
    let (out_r, out_w) = nix::unistd::pipe().unwrap();
    let (err_r, err_w) = nix::unistd::pipe().unwrap();
    let feeder = thread::spawn(move || feed(File::from(out_w), File::from(err_w)));
    let mut file = LogFile::open(&path, limits).unwrap();
    run(out_r, Some(err_r), &mut file).unwrap();
    feeder.join().unwrap();
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.to_owned())
        .collect()
}

#[test]
fn both_streams_are_logged_to_their_end() {
    let records = log(Limits::default(), |mut out, mut err| {
        out.write_all(b"one\ntw").unwrap();
        err.write_all(b"warning\n").unwrap();
        drop(err);
        out.write_all(b"o\nno newline").unwrap();
    });
    let mut stdout: Vec<&str> =
        records.iter().filter(|r| r.starts_with("stdout")).map(String::as_str).collect();
    let stderr: Vec<&str> =
        records.iter().filter(|r| r.starts_with("stderr")).map(String::as_str).collect();
    stdout.sort_unstable();
    assert_eq!(stdout, ["stdout F one", "stdout F two", "stdout P no newline"]);
    assert_eq!(stderr, ["stderr F warning"]);
}

#[test]
fn much_output_is_not_lost_and_rotates() {
    let records = log(Limits { max_size: 64 * 1024, max_files: 100 }, |mut out, err| {
        drop(err);
        for i in 0..5000 {
            writeln!(out, "line {i:05}").unwrap();
        }
    });
    // The live file holds the last records; together with the rotated ones, all of them.
    assert_eq!(records.last().map(String::as_str), Some("stdout F line 04999"));
    assert!(records.len() < 5000, "{} records in the live file: no rotation", records.len());
}

#[test]
fn a_logger_that_cannot_write_still_drains_the_container() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("0.log");
    let mut file = LogFile::open(&path, Limits { max_size: 10, max_files: 2 }).unwrap();
    // Rotation needs the directory: without it, writes fail after the first record.
    std::fs::remove_dir_all(tmp.path()).unwrap();
    let (out_r, out_w) = nix::unistd::pipe().unwrap();
    let (err_r, err_w) = nix::unistd::pipe().unwrap();
    drop(err_w);
    let feeder = thread::spawn(move || {
        let mut out = File::from(out_w);
        for _ in 0..20_000 {
            out.write_all(b"more than a pipe holds\n").unwrap();
        }
    });
    run(out_r, Some(err_r), &mut file).unwrap();
    feeder.join().unwrap();
}
