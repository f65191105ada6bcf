#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| outpost_fuzz::spdy_session::spdy_session(data));
