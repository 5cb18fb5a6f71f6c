//! libFuzzer entry point of `fieldhub_fuzz::socketcand` (see `fuzz/README.md`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fieldhub_fuzz::socketcand(data));
