#![no_main]
// The body, its input layout and its properties: rustfab::fuzzing::records.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rustfab::fuzzing::records(data));
