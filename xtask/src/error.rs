//! One error style for the whole xtask: every fallible function returns `anyhow::Result`, and
//! the error that reaches `main` decides the exit code (a row of `lib/abi/src/exit.rs`):
//!
//! * [`Refused`]: the user asked for something the xtask will not do (a bad flag, a machine
//!   that cannot be, an input that is not what it must be): [`exit::USAGE`], nothing started;
//! * [`ExitWith`]: a run or check that ended with a verdict of its own (a test failed, the run
//!   timed out, the xtask was interrupted);
//! * anything else (I/O, a tool that failed): [`exit::XTASK_ERROR`].
//!
//! Pure decisions that refuse (parsing a flag, checking a machine) return
//! `Result<T, Refused>`, which `?` turns into the above.

use abi::exit;
use std::fmt;

/// A verdict: the exit code and one line saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The exit code (a row of `abi::exit::TABLE`).
    pub code: u32,
    /// One line.
    pub reason: String,
}

impl Verdict {
    /// A verdict with `code`'s own reason followed by `detail`.
    pub fn new(code: u32, detail: impl Into<String>) -> Verdict {
        let detail = detail.into();
        let name = exit::lookup(code.into()).map_or("?", |c| c.name);
        Verdict { code, reason: if detail.is_empty() { name.to_string() } else { format!("{name}: {detail}") } }
    }

    /// Whether the run ended cleanly (guest success).
    pub fn success(&self) -> bool {
        self.code == exit::SUCCESS
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exit {} ({})", self.code, self.reason)
    }
}

/// An error that ends the xtask with a given exit code (the message is printed as is).
#[derive(Debug)]
pub struct ExitWith(pub Verdict);

impl fmt::Display for ExitWith {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.reason)
    }
}

impl std::error::Error for ExitWith {}

/// An error that ends the xtask with [`exit::CHECK_FAILED`] (a test, the lint, a fuzz target or
/// a benchmark run failed).
pub fn check_failed(what: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(ExitWith(Verdict::new(exit::CHECK_FAILED, what)))
}

/// A request the xtask refuses before starting anything (a usage error): the message says
/// why and, where there is one, the way that works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// `Err` of a usage error with this message.
pub fn refuse<T>(why: impl Into<String>) -> anyhow::Result<T> {
    Err(anyhow::Error::new(Refused(why.into())))
}

/// The exit code for an error that reached the xtask's `main`.
pub fn code_of(e: &anyhow::Error) -> u32 {
    if let Some(ExitWith(v)) = e.downcast_ref() {
        v.code
    } else if e.downcast_ref::<Refused>().is_some() {
        exit::USAGE
    } else {
        exit::XTASK_ERROR
    }
}

/// `Ok` for a regular file: a FIFO or a device would block a read or never end, a directory
/// is not a file. `what` names the input (`--guest`, `--firmware DIR's bl31.bin`, ...).
pub fn regular_file(what: &str, path: &std::path::Path) -> Result<(), Refused> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) if m.is_dir() => Err(Refused(format!("{what} {}: a directory, not a file", path.display()))),
        Ok(_) => Err(Refused(format!("{what} {}: not a regular file (a FIFO or a device)", path.display()))),
        Err(e) => Err(Refused(format!("{what} {}: {e}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_codes() {
        assert_eq!(code_of(&anyhow::anyhow!("io")), exit::XTASK_ERROR);
        assert_eq!(code_of(&anyhow::Error::new(Refused("x".into()))), exit::USAGE);
        assert_eq!(code_of(&anyhow::Error::new(ExitWith(Verdict::new(exit::TIMED_OUT, "")))), exit::TIMED_OUT);
        assert_eq!(code_of(&anyhow::Error::new(Refused("x".into())).context("while running")), exit::USAGE);
        assert_eq!(code_of(&refuse::<()>("no").unwrap_err()), exit::USAGE);
    }

    #[test]
    fn only_regular_files_are_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        assert_eq!(regular_file("--guest", &f), Ok(()));
        assert!(regular_file("--guest", dir.path()).unwrap_err().0.contains("a directory"));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path; no memory is shared.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(regular_file("--guest", &fifo).unwrap_err().0.contains("FIFO"));
        assert!(regular_file("--guest", &dir.path().join("none")).unwrap_err().0.contains("No such file"));
    }
}
