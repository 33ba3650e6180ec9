#![no_main]
// The body, its input layout and its properties: rustfab::fuzzing::shm_ring.
libfuzzer_sys::fuzz_target!(|data: &[u8]| rustfab::fuzzing::shm_ring(data));
