#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| outpost_fuzz::cri_log::cri_log(data));
