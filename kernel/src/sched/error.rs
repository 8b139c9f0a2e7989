//! [`SchedError`]: why a program could not be started.

use crate::user_programs::ProgramError;
use abi::syscall::errno;
use alloc::string::{String, ToString};
use core::fmt;

/// Why program `name` could not be started ([`super::start_program`]). `Display` is the
/// boot's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchedError {
    /// The program is not built into this kernel.
    Program(ProgramError),
    /// No memory for its address space (`errno`).
    NoAddressSpace { name: String, errno: i64 },
    /// Its ELF file could not be loaded.
    Load { name: String, err: uspace::LoadError },
    /// Its argument page could not be mapped (`errno`).
    Args { name: String, errno: i64 },
    /// Its stack could not be mapped (`errno`).
    Stack { name: String, errno: i64 },
    /// Its first task could not be made (`errno`).
    FirstTask { name: String, errno: i64 },
}

impl fmt::Display for SchedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedError::Program(e) => write!(f, "{e}"),
            SchedError::NoAddressSpace { name, errno } => {
                write!(f, "{name}: no memory for an address space ({})", errno::name(*errno))
            }
            SchedError::Load { name, err } => write!(f, "loading {name}: {err}"),
            SchedError::Args { name, errno } => write!(f, "{name}: mapping its arguments: {}", errno::name(*errno)),
            SchedError::Stack { name, errno } => write!(f, "{name}: stack: {errno}"),
            SchedError::FirstTask { name, errno } => write!(f, "{name}: first task: {}", errno::name(*errno)),
        }
    }
}

impl From<ProgramError> for SchedError {
    fn from(e: ProgramError) -> Self {
        SchedError::Program(e)
    }
}

/// The boot and the self-tests report errors as text.
impl From<SchedError> for String {
    fn from(e: SchedError) -> String {
        e.to_string()
    }
}
