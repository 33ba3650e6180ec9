#![no_main]
// The body, its input layout and its properties: rustfab::fuzzing::tcp_reader.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rustfab::fuzzing::tcp_reader(data));
