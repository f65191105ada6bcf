use proptest::prelude::*;

use super::*;

fn put(b: &mut [u8], offset: usize, bytes: &[u8]) {
    b[offset..offset + bytes.len()].copy_from_slice(bytes);
}

fn header(b: &mut [u8], kind: u32) {
    put(b, offset_of!(EventHeader, kind), &kind.to_ne_bytes());
    put(b, offset_of!(EventHeader, tgid), &4242u32.to_ne_bytes());
    put(b, offset_of!(EventHeader, pid), &4243u32.to_ne_bytes());
    put(b, offset_of!(EventHeader, ns_tgid), &1u32.to_ne_bytes());
    put(b, offset_of!(EventHeader, cgroup_id), &77u64.to_ne_bytes());
    put(b, offset_of!(EventHeader, ktime_ns), &9u64.to_ne_bytes());
    put(b, offset_of!(EventHeader, comm), b"sleep\0");
}

fn task() -> Task {
    Task { tgid: 4242, pid: 4243, ns_tgid: 1, cgroup_id: 77, ktime_ns: 9, comm: "sleep".into() }
}

fn exec(filename: &[u8], filename_len: u32, args: &[u8], args_len: u32) -> Vec<u8> {
    let mut b = vec![0u8; size_of::<ExecEvent>()];
    header(&mut b, KIND_EXEC);
    put(&mut b, offset_of!(ExecEvent, uid), &1000u32.to_ne_bytes());
    put(&mut b, offset_of!(ExecEvent, ppid), &4000u32.to_ne_bytes());
    put(&mut b, offset_of!(ExecEvent, filename_len), &filename_len.to_ne_bytes());
    put(&mut b, offset_of!(ExecEvent, args_len), &args_len.to_ne_bytes());
    put(&mut b, offset_of!(ExecEvent, filename), filename);
    put(&mut b, offset_of!(ExecEvent, args), args);
    b
}

#[test]
fn reads_an_exec_record() {
    let b = exec(b"/bin/sleep\0", 10, b"sleep\x003600\x00", 11);
    assert_eq!(
        parse(&b),
        Ok(KernelEvent::Exec {
            task: task(),
            uid: 1000,
            ppid: 4000,
            filename: "/bin/sleep".into(),
            argv: vec!["sleep".into(), "3600".into()],
        })
    );
}

#[test]
fn lengths_past_the_fields_are_cut_to_them() {
    let b = exec(b"/bin/ls", u32::MAX, b"ls\0-l", u32::MAX);
    let Ok(KernelEvent::Exec { filename, argv, .. }) = parse(&b) else { panic!("not an exec") };
    assert_eq!(filename, "/bin/ls");
    // The rest of the field is NULs: empty arguments after the real ones.
    assert_eq!(&argv[..2], &["ls".to_owned(), "-l".to_owned()]);
    let b = exec(b"/bin/ls", 0, b"", 0);
    let Ok(KernelEvent::Exec { filename, argv, .. }) = parse(&b) else { panic!("not an exec") };
    assert_eq!((filename.as_str(), argv.len()), ("", 0));
}

#[test]
fn reads_exit_and_oom_records() {
    let mut b = vec![0u8; size_of::<ExitEvent>()];
    header(&mut b, KIND_EXIT);
    put(&mut b, offset_of!(ExitEvent, exit_code), &(3u32 << 8).to_ne_bytes());
    assert_eq!(parse(&b), Ok(KernelEvent::Exit { task: task(), exit_code: 0x300 }));
    let mut b = vec![0u8; size_of::<OomKillEvent>()];
    header(&mut b, KIND_OOM_KILL);
    put(&mut b, offset_of!(OomKillEvent, uid), &0u32.to_ne_bytes());
    assert_eq!(parse(&b), Ok(KernelEvent::OomKill { task: task(), uid: 0 }));
}

#[test]
fn short_and_unknown_records_are_errors() {
    assert!(matches!(parse(&[]), Err(Error::Short { .. })));
    let mut b = vec![0u8; size_of::<EventHeader>()];
    header(&mut b, KIND_EXEC);
    assert!(matches!(parse(&b), Err(Error::Short { what: "an exec event", .. })));
    header(&mut b, 99);
    assert_eq!(parse(&b), Err(Error::Kind(99)));
}

#[test]
fn reads_exec_history_values() {
    let mut b: ExecInfoValue = [0; size_of::<ExecInfo>()];
    put(&mut b, offset_of!(ExecInfo, ktime_ns), &5u64.to_ne_bytes());
    put(&mut b, offset_of!(ExecInfo, uid), &7u32.to_ne_bytes());
    put(&mut b, offset_of!(ExecInfo, args_len), &9u32.to_ne_bytes());
    put(&mut b, offset_of!(ExecInfo, filename), b"/usr/bin/vi\0");
    put(&mut b, offset_of!(ExecInfo, args), b"vi\0a.yaml\0");
    assert_eq!(
        exec_info(&b),
        ExecRecord {
            ktime_ns: 5,
            uid: 7,
            filename: "/usr/bin/vi".into(),
            argv: vec!["vi".into(), "a.yaml".into()],
        }
    );
}

#[test]
fn exit_codes_decode_as_containerd_reports_them() {
    assert_eq!(exit_status(0), ExitStatus { code: 0, signal: None, core_dumped: false });
    assert_eq!(exit_status(3 << 8), ExitStatus { code: 3, signal: None, core_dumped: false });
    assert_eq!(exit_status(255 << 8), ExitStatus { code: 255, signal: None, core_dumped: false });
    assert_eq!(exit_status(9), ExitStatus { code: 137, signal: Some(9), core_dumped: false });
    assert_eq!(exit_status(15), ExitStatus { code: 143, signal: Some(15), core_dumped: false });
    assert_eq!(
        exit_status(0x80 | 11),
        ExitStatus { code: 139, signal: Some(11), core_dumped: true }
    );
}

#[test]
fn traffic_adds_up_per_cpu_values() {
    let mut sum = Traffic::default();
    sum.add(&Traffic::from_value([1, 2, 3, 4]));
    sum.add(&Traffic::from_value([10, 20, 30, 40]));
    assert_eq!(sum, Traffic { rx_bytes: 11, rx_packets: 22, tx_bytes: 33, tx_packets: 44 });
}

proptest! {
    #[test]
    fn any_bytes_parse_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn any_kind_prefix_parses_or_fails(kind in 0u32..5, rest in proptest::collection::vec(any::<u8>(), 0..700)) {
        let mut bytes = kind.to_ne_bytes().to_vec();
        bytes.extend(rest);
        let _ = parse(&bytes);
    }

    #[test]
    fn exit_codes_stay_in_a_byte_plus_128(code in any::<u32>()) {
        let status = exit_status(code);
        prop_assert!(status.code <= 255);
        prop_assert_eq!(status.signal.is_some(), code & 0x7f != 0);
    }
}
