#![no_main]
//! libFuzzer target: `fuzz::efi`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::efi_target(data));
