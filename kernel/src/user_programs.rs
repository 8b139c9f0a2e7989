//! The EL0 programs built into the kernel (`user/src/bin/`, built by the xtask; see
//! `kernel/build.rs`).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

include!(concat!(env!("OUT_DIR"), "/user_programs.rs"));

/// Why a program is not there ([`find`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgramError {
    /// This kernel was built without EL0 programs.
    NoneBuilt,
    /// No program of that name (the message lists the known ones).
    Unknown { name: String },
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgramError::NoneBuilt => {
                f.write_str("no EL0 programs were built into this kernel (build it with `cargo xtask`)")
            }
            ProgramError::Unknown { name } => {
                let known: Vec<&str> = PROGRAMS.iter().map(|(n, _)| *n).collect();
                write!(f, "no EL0 program {name:?} (known: {})", known.join(", "))
            }
        }
    }
}

/// The boot and the self-tests report errors as text.
impl From<ProgramError> for String {
    fn from(e: ProgramError) -> String {
        e.to_string()
    }
}

/// The ELF file of program `name`.
pub fn find(name: &str) -> Result<&'static [u8], ProgramError> {
    if PROGRAMS.is_empty() {
        return Err(ProgramError::NoneBuilt);
    }
    PROGRAMS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, elf)| *elf)
        .ok_or_else(|| ProgramError::Unknown { name: name.to_string() })
}
