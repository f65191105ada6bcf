//! The parser on hand-made buffers.

use super::*;

fn metadata(event_len: u32, mask: u64, pid: i32) -> Vec<u8> {
    let mut buf = Vec::new();
    buf.extend_from_slice(&event_len.to_ne_bytes());
    buf.push(libc::FANOTIFY_METADATA_VERSION);
    buf.push(0);
    buf.extend_from_slice(&24u16.to_ne_bytes());
    buf.extend_from_slice(&mask.to_ne_bytes());
    buf.extend_from_slice(&(-1i32).to_ne_bytes());
    buf.extend_from_slice(&pid.to_ne_bytes());
    buf
}

fn dfid_name(handle: &[u8], name: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    body.extend_from_slice(&(handle.len() as u32).to_ne_bytes());
    body.extend_from_slice(&1i32.to_ne_bytes());
    body.extend_from_slice(handle);
    body.extend_from_slice(name);
    body.push(0);
    while (body.len() + 4) % 4 != 0 {
        body.push(0);
    }
    let mut record = vec![libc::FAN_EVENT_INFO_TYPE_DFID_NAME, 0];
    record.extend_from_slice(&((body.len() + 4) as u16).to_ne_bytes());
    record.extend_from_slice(&body);
    record
}

fn event(mask: u64, records: &[Vec<u8>]) -> Vec<u8> {
    let len: usize = 24 + records.iter().map(Vec::len).sum::<usize>();
    let mut buf = metadata(len as u32, mask, 42);
    for record in records {
        buf.extend_from_slice(record);
    }
    buf
}

#[test]
fn parse_reads_events_and_skips_unknown_records() {
    let unknown = vec![99, 0, 8, 0, 0, 0, 0, 0];
    let mut buf = event(libc::FAN_CREATE, &[unknown, dfid_name(&[9; 8], b"pod.yaml")]);
    buf.extend(event(libc::FAN_DELETE_SELF | libc::FAN_ONDIR, &[dfid_name(&[9; 8], b".")]));
    let events: Vec<_> = parse(&buf).collect();
    assert_eq!(events.len(), 2);
    let Ok(first) = &events[0] else { panic!("{events:?}") };
    assert_eq!(first.mask, libc::FAN_CREATE);
    assert_eq!(first.pid, 42);
    let dir = first.dir.as_ref().expect("dir record");
    assert_eq!(dir.fsid, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(dir.handle, &[9; 8]);
    assert_eq!(dir.name, Some(&b"pod.yaml"[..]));
    let Ok(second) = &events[1] else { panic!("{events:?}") };
    assert_eq!(second.dir.as_ref().and_then(|d| d.name), Some(&b"."[..]));
}

#[test]
fn parse_survives_broken_lengths() {
    let good = event(libc::FAN_CREATE, &[dfid_name(&[9; 8], b"a")]);
    // An event longer than the buffer: parsing stops there.
    let mut buf = good.clone();
    buf[0..4].copy_from_slice(&1000u32.to_ne_bytes());
    assert!(matches!(parse(&buf).collect::<Vec<_>>()[..], [Err(Malformed::Record(_))]));
    // A handle longer than its record: that event is reported broken, the next is read.
    let mut bad = good.clone();
    bad[24 + 12..24 + 16].copy_from_slice(&500u32.to_ne_bytes());
    bad.extend_from_slice(&good);
    let events: Vec<_> = parse(&bad).collect();
    assert!(matches!(events[..], [Err(Malformed::Record(_)), Ok(_)]), "{events:?}");
    // A record of length zero cannot loop forever.
    let mut zero = good.clone();
    zero[24 + 2..24 + 4].copy_from_slice(&0u16.to_ne_bytes());
    assert!(matches!(parse(&zero).collect::<Vec<_>>()[..], [Err(Malformed::Record(_))]));
    // Truncated metadata, a metadata length below 24, a foreign version.
    assert!(matches!(parse(&good[..10]).collect::<Vec<_>>()[..], [Err(Malformed::Record(_))]));
    let mut short = good.clone();
    short[6..8].copy_from_slice(&8u16.to_ne_bytes());
    assert!(matches!(parse(&short).collect::<Vec<_>>()[..], [Err(Malformed::Record(_))]));
    let mut version = good;
    version[4] = 2;
    assert!(matches!(parse(&version).collect::<Vec<_>>()[..], [Err(Malformed::Version(2))]));
    // Every truncation of a good buffer parses without panicking.
    let two = [event(libc::FAN_CREATE, &[dfid_name(&[9; 8], b"a")]), event(0, &[])].concat();
    for end in 0..two.len() {
        let _ = parse(&two[..end]).count();
    }
}
