//! libFuzzer entry point of `fieldhub_fuzz::ldf` (see `fuzz/README.md`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fieldhub_fuzz::ldf(data));
