#![no_main]
//! libFuzzer target: `fuzz::image_header`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::image_header(data));
