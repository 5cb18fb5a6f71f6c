//! libFuzzer entry point of `fieldhub_fuzz::http_bodies` (see `fuzz/README.md`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fieldhub_fuzz::http_bodies(data));
