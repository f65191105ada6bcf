//! `bpf_record`: a record from the BPF programs' ring buffer, as the agent's reader gets
//! it ([`records::parse`]), an EXEC_HISTORY map value ([`records::exec_info`]) and the
//! exit code an exit record carries ([`records::exit_status`]).

use std::mem::size_of;

use outpost::ebpf::records::{
    self, ARGS_LEN, COMM_LEN, Error, ExecEvent, ExecInfoValue, ExitEvent, FILENAME_LEN, KIND_EXEC,
    KIND_EXIT, KIND_OOM_KILL, KernelEvent, OomKillEvent,
};

/// A byte the kernel wrote may become U+FFFD (three bytes) in a string.
const LOSSY: usize = 3;

/// Parses `data` as each of the three: what comes out stays within its fields' sizes, and
/// a refusal says why.
pub fn bpf_record(data: &[u8]) {
    let kind = data.first_chunk::<4>().map(|b| u32::from_ne_bytes(*b));
    match records::parse(data) {
        Ok(event) => {
            let task = event.task();
            assert!(task.comm.len() <= COMM_LEN * LOSSY && !task.comm.contains('\0'));
            let (expected, need) = match &event {
                KernelEvent::Exec { filename, argv, .. } => {
                    assert!(filename.len() <= FILENAME_LEN * LOSSY && !filename.contains('\0'));
                    let args: usize = argv.iter().map(|arg| arg.len() + 1).sum();
                    assert!(args <= ARGS_LEN * LOSSY + 1, "argv longer than its field");
                    (KIND_EXEC, size_of::<ExecEvent>())
                }
                KernelEvent::Exit { .. } => (KIND_EXIT, size_of::<ExitEvent>()),
                KernelEvent::OomKill { .. } => (KIND_OOM_KILL, size_of::<OomKillEvent>()),
            };
            assert_eq!(kind, Some(expected), "the event is not of the record's kind");
            assert!(data.len() >= need, "a {}-byte record parsed as a {need}-byte one", data.len());
        }
        Err(Error::Short { len, need, .. }) => {
            assert_eq!(len, data.len());
            assert!(need > len, "refused as short with {len} of {need} bytes");
        }
        Err(Error::Kind(refused)) => {
            assert_eq!(Some(refused), kind);
            assert!(![KIND_EXEC, KIND_EXIT, KIND_OOM_KILL].contains(&refused));
        }
    }

    if let Some(value) = data.first_chunk::<{ size_of::<ExecInfoValue>() }>() {
        let record = records::exec_info(value);
        assert!(record.filename.len() <= FILENAME_LEN * LOSSY && !record.filename.contains('\0'));
        let args: usize = record.argv.iter().map(|arg| arg.len() + 1).sum();
        assert!(args <= ARGS_LEN * LOSSY + 1, "argv longer than its field");
    }

    if let Some(code) = kind {
        let status = records::exit_status(code);
        match status.signal {
            None => assert!(status.code <= 255 && !status.core_dumped),
            Some(signal) => {
                assert!((1..=127).contains(&signal));
                assert_eq!(status.code, 128 + signal);
            }
        }
    }
}
