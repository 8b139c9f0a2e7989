#![no_main]
//! libFuzzer target: `fuzz::dtb`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::dtb(data));
