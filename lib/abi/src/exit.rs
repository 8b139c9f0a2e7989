//! Exit codes of a run (QEMU's exit status, through semihosting), and the line that carries
//! the code where there is no QEMU to exit with it (a board's console).
//!
//! 0 is success. A guest's own failure statuses pass through its exit hypercall (low 8 bits,
//! never turned into 0: [`from_guest_status`]); the verdicts below are what the kernel and the
//! hypervisor use for their own failures, so the xtask can tell them apart.

/// A kernel self-test or boot step failed and the kernel said so.
pub const GUEST_FAILURE: u32 = 1;
/// The kernel panicked.
pub const GUEST_PANIC: u32 = 2;
/// The kernel took an exception it did not expect.
pub const GUEST_EXCEPTION: u32 = 3;
/// The hypervisor stopped the guest: an access to memory it does not own, or an exit the
/// hypervisor cannot handle.
pub const GUEST_FAULT: u32 = 4;
/// The hypervisor itself panicked, failed to boot, or took an unexpected exception.
pub const HYP_FAULT: u32 = 5;

/// QEMU exit code for the status a guest passes to [`crate::hypercall::EXIT`]: 0 stays 0,
/// anything else keeps its low 8 bits but never becomes 0 (256 -> 1).
pub const fn from_guest_status(status: u64) -> u32 {
    match status {
        0 => 0,
        s if s & 0xff == 0 => 1,
        s => (s & 0xff) as u32,
    }
}

/// What an exit code means.
pub fn describe(code: i32) -> &'static str {
    match code {
        0 => "success",
        1 => "guest failure",
        2 => "guest panic",
        3 => "guest exception",
        4 => "guest fault stopped by the hypervisor",
        5 => "hypervisor fault",
        _ => "other",
    }
}

/// Prefix of the last line of every run: [`FinalLine`].
pub const FINAL_LINE_PREFIX: &str = "@@exit ";

/// The last line the hypervisor (or the kernel on firmware without it) prints before the run
/// ends, on QEMU and on a board alike: `@@exit CODE (meaning)`. On a board, where the run ends
/// with PSCI SYSTEM_OFF instead of an exit status, `cargo xtask chainboot` exits with CODE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalLine(pub u32);

impl core::fmt::Display for FinalLine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{FINAL_LINE_PREFIX}{} ({})", self.0, describe(self.0 as i32))
    }
}

/// The code of a [`FinalLine`] (surrounding whitespace allowed); `None` for any other line.
pub fn parse_final_line(line: &str) -> Option<u32> {
    let rest = line.trim().strip_prefix(FINAL_LINE_PREFIX)?;
    let (code, meaning) = rest.split_once(' ').unwrap_or((rest, ""));
    let meaning = meaning.strip_prefix('(')?.strip_suffix(')')?;
    let code: u32 = code.parse().ok()?;
    (meaning == describe(code as i32)).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_line_reads_back() {
        extern crate std;
        use std::format;
        for code in [0, 1, 2, 3, 4, 5, 77] {
            let line = format!("{}\r\n", FinalLine(code));
            assert_eq!(parse_final_line(&line), Some(code), "{line:?}");
        }
        assert_eq!(format!("{}", FinalLine(2)), "@@exit 2 (guest panic)");
        for line in ["", "@@exit", "@@exit 2", "@@exit x (success)", "@@exit 2 (success)", "hyp: @@exit 0 (success)"] {
            assert_eq!(parse_final_line(line), None, "{line:?}");
        }
    }

    #[test]
    fn guest_status_to_exit_code() {
        assert_eq!(from_guest_status(0), 0);
        assert_eq!(from_guest_status(3), 3);
        assert_eq!(from_guest_status(255), 255);
        assert_eq!(from_guest_status(256), 1, "never 0 for a failure");
        assert_eq!(from_guest_status(0x1_0000_0007), 7);
        assert_eq!(describe(GUEST_PANIC as i32), "guest panic");
        assert_eq!(describe(HYP_FAULT as i32), "hypervisor fault");
        assert_eq!(describe(77), "other");
    }
}
