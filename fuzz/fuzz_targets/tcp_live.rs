#![no_main]
// The body, its input layout and its properties: rustfab::fuzzing::tcp_live.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rustfab::fuzzing::tcp_live(data));
