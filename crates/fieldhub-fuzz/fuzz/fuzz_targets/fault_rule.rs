//! libFuzzer entry point of `fieldhub_fuzz::fault_rule` (see `fuzz/README.md`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fieldhub_fuzz::fault_rule(data));
