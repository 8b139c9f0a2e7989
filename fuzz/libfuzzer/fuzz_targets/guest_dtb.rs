#![no_main]
//! libFuzzer target: `fuzz::guest_dtb_target`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::guest_dtb_target(data));
