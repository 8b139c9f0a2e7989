#![no_main]
//! libFuzzer target: `fuzz::bootargs_target`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::bootargs_target(data));
