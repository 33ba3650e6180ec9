#![no_main]
// The body, its input layout and its properties: rustfab::fuzzing::getinfo_hints.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rustfab::fuzzing::getinfo_hints(data));
