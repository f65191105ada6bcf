#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| outpost_fuzz::bpf_record::bpf_record(data));
