#![no_main]
// The body, its input layout and its properties: rustfab::fuzzing::av_insert.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rustfab::fuzzing::av_insert(data));
