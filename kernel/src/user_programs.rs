//! The EL0 programs built into the kernel (`user/src/bin/`, built by the xtask; see
//! `kernel/build.rs`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

include!(concat!(env!("OUT_DIR"), "/user_programs.rs"));

/// The ELF file of program `name`.
pub fn find(name: &str) -> Result<&'static [u8], String> {
    if PROGRAMS.is_empty() {
        return Err("no EL0 programs were built into this kernel (build it with `cargo xtask`)".into());
    }
    PROGRAMS.iter().find(|(n, _)| *n == name).map(|(_, elf)| *elf).ok_or_else(|| {
        let known: Vec<&str> = PROGRAMS.iter().map(|(n, _)| *n).collect();
        format!("no EL0 program {name:?} (known: {})", known.join(", "))
    })
}
