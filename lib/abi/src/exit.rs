//! The exit-code table: every code `cargo xtask run` (and `test`, `bench`, `fuzz`) can return,
//! each with a one-line reason (docs/exit-codes.md's table is this one: a host test compares them), and
//! the final line `@@exit CODE (meaning)` that carries a run's code out of the machine, on QEMU
//! and on a board alike: the machine then powers off (PSCI SYSTEM_OFF), and the xtask reads the
//! code from that line, never from QEMU's exit status.
//!
//! Two kinds, kept apart:
//!
//! * **guest outcomes** (0-6): how the guest run ended, as the hypervisor (or, without it, the
//!   kernel) reports it in the run's final line [`FinalLine`] (QEMU itself only powers off: its
//!   exit status carries nothing; semihosting, which could carry it, is never on). A guest's own
//!   exit status ([`crate::hypercall::EXIT`]) can only say 0-3 ([`from_guest_status`]); 4 and 5
//!   are the hypervisor's verdicts and 6 its answer to PSCI SYSTEM_RESET.
//! * **run outcomes** (64 and up): what happened to the run itself, decided by the xtask,
//!   never by a guest: its command line was refused, QEMU refused its arguments, the run hit
//!   its time limit, QEMU was killed, QEMU returned a code no one here produces, a check
//!   failed, the xtask failed, the run ended without its final line, or the xtask was stopped
//!   by a signal.

/// The run succeeded: the guest powered off or exited with status 0.
pub const SUCCESS: u32 = 0;
/// A kernel self-test or boot step failed and the kernel said so.
pub const GUEST_FAILURE: u32 = 1;
/// The kernel panicked.
pub const GUEST_PANIC: u32 = 2;
/// The kernel took an exception it did not expect.
pub const GUEST_EXCEPTION: u32 = 3;
/// The hypervisor stopped the guest: an access to memory it does not own, or an exit the
/// hypervisor cannot handle (an AArch32 guest exception included).
pub const GUEST_FAULT: u32 = 4;
/// The hypervisor itself panicked, failed to boot (bad boot arguments, too little RAM), or took
/// an unexpected exception.
pub const HYP_FAULT: u32 = 5;
/// The guest asked for a system reset (PSCI SYSTEM_RESET): the run ends, and that is not
/// success.
pub const GUEST_RESET: u32 = 6;

/// The xtask refused its command line (unknown option, bad value, unusable CPU model).
pub const USAGE: u32 = 64;
/// QEMU refused its arguments or could not start (its own message says why).
pub const QEMU_REFUSED: u32 = 65;
/// The run hit its time limit and QEMU was killed.
pub const TIMED_OUT: u32 = 66;
/// QEMU was killed by a signal the xtask did not send (or stopped on one: SIGTERM, SIGINT).
pub const KILLED: u32 = 67;
/// QEMU exited with a code no one in this table produces.
pub const UNKNOWN_EXIT: u32 = 68;
/// A check failed: a test, the lint, or a benchmark run that did not end cleanly.
pub const CHECK_FAILED: u32 = 69;
/// The xtask itself failed (toolchain, build, I/O).
pub const XTASK_ERROR: u32 = 70;
/// QEMU ended, but the run never printed its final line ([`FinalLine`]): whatever QEMU's
/// status, nobody said how the guest ended, so it is not success.
pub const NO_FINAL_LINE: u32 = 71;
/// The xtask itself was stopped by a signal (SIGINT, SIGTERM, SIGHUP) and ended QEMU first.
pub const INTERRUPTED: u32 = 72;

/// Who decides a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// How the guest run ended (the run's final line).
    Guest,
    /// What happened to the run (the xtask's verdict).
    Run,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// The exit code.
    pub code: u32,
    /// Short name, e.g. `"guest panic"`.
    pub name: &'static str,
    /// Guest or run outcome.
    pub kind: Kind,
    /// One line: what it means.
    pub reason: &'static str,
}

/// Every exit code, in order.
pub const TABLE: [Code; 16] = [
    Code { code: SUCCESS, name: "success", kind: Kind::Guest, reason: "the guest powered off or exited with status 0" },
    Code {
        code: GUEST_FAILURE,
        name: "guest failure",
        kind: Kind::Guest,
        reason: "a kernel self-test or boot step failed (or the guest exited with a status that is not 0-3)",
    },
    Code { code: GUEST_PANIC, name: "guest panic", kind: Kind::Guest, reason: "the kernel panicked" },
    Code {
        code: GUEST_EXCEPTION,
        name: "guest exception",
        kind: Kind::Guest,
        reason: "the kernel took an exception it did not expect",
    },
    Code {
        code: GUEST_FAULT,
        name: "guest stopped by the hypervisor",
        kind: Kind::Guest,
        reason: "the guest touched memory it does not own (reported with the IPA) or made an exit the hypervisor cannot handle",
    },
    Code {
        code: HYP_FAULT,
        name: "hypervisor fault",
        kind: Kind::Guest,
        reason: "the hypervisor panicked, refused to boot (bad boot arguments, too little RAM) or took an unexpected exception",
    },
    Code {
        code: GUEST_RESET,
        name: "guest reset",
        kind: Kind::Guest,
        reason: "the guest asked for a system reset (PSCI SYSTEM_RESET); the run ends there",
    },
    Code {
        code: USAGE,
        name: "usage",
        kind: Kind::Run,
        reason: "the xtask refused its command line (unknown option, bad value, unusable CPU model)",
    },
    Code {
        code: QEMU_REFUSED,
        name: "QEMU refused",
        kind: Kind::Run,
        reason: "QEMU refused its arguments or could not start",
    },
    Code { code: TIMED_OUT, name: "timed out", kind: Kind::Run, reason: "the run hit its time limit and QEMU was killed" },
    Code {
        code: KILLED,
        name: "killed",
        kind: Kind::Run,
        reason: "QEMU was killed by (or stopped on) a signal the xtask did not send",
    },
    Code {
        code: UNKNOWN_EXIT,
        name: "unknown exit code",
        kind: Kind::Run,
        reason: "QEMU exited with a code no one in this table produces",
    },
    Code {
        code: CHECK_FAILED,
        name: "check failed",
        kind: Kind::Run,
        reason: "a test, the lint, a fuzz target or a benchmark run that did not end cleanly failed",
    },
    Code { code: XTASK_ERROR, name: "xtask error", kind: Kind::Run, reason: "the xtask itself failed (toolchain, build, I/O)" },
    Code {
        code: NO_FINAL_LINE,
        name: "no final line",
        kind: Kind::Run,
        reason: "QEMU ended without the run's final `@@exit` line, whatever its own status",
    },
    Code {
        code: INTERRUPTED,
        name: "interrupted",
        kind: Kind::Run,
        reason: "the xtask was stopped by a signal (SIGINT, SIGTERM, SIGHUP) and ended QEMU first",
    },
];

/// The table's row for `code`.
pub fn lookup(code: i64) -> Option<&'static Code> {
    TABLE.iter().find(|c| i64::from(c.code) == code)
}

/// The guest outcomes a guest may claim through its exit status: success, failure, panic,
/// unexpected exception.
pub const fn is_guest_status(status: u64) -> bool {
    status <= GUEST_EXCEPTION as u64
}

/// QEMU exit code for the status a guest passes to [`crate::hypercall::EXIT`]: 0-3 as they
/// are; anything else (a claim of a hypervisor verdict, 4-6, or any other number) becomes
/// [`GUEST_FAILURE`], so a guest can never report more than its own outcome.
pub const fn from_guest_status(status: u64) -> u32 {
    if is_guest_status(status) {
        status as u32
    } else {
        GUEST_FAILURE
    }
}

/// What an exit code means (its short name; `"not in the exit-code table"` for others).
pub fn describe(code: i32) -> &'static str {
    lookup(i64::from(code)).map_or("not in the exit-code table", |c| c.name)
}

/// What a binary says, in a line after its [`FinalLine`], when nothing powers the machine off
/// (no PSCI firmware, or the firmware refused): the machine stays on, and the xtask, which
/// would otherwise wait for QEMU to end by itself, ends QEMU and takes the final line's code.
pub const NO_POWER_OFF: &str = "nothing powers this machine off: parked after the final line";

/// Prefix of the last line of every run: [`FinalLine`].
pub const FINAL_LINE_PREFIX: &str = "@@exit ";

/// The last line the hypervisor (or the guest when it runs alone) prints before the run ends,
/// on QEMU and on a board alike: `@@exit CODE (meaning)`, and from the hypervisor
/// `@@exit CODE (meaning) key=KEY` with the run's key ([`KeyedFinalLine`]). The machine then
/// powers off (PSCI SYSTEM_OFF, or SYSTEM_RESET), which carries no code: `cargo xtask run`,
/// `chainboot` and `console` exit with CODE, and a run without this line is never success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalLine(pub u32);

impl core::fmt::Display for FinalLine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{FINAL_LINE_PREFIX}{} ({})", self.0, describe(self.0 as i32))
    }
}

/// The hypervisor's final line: [`FinalLine`] with the run's key (`hyp.key=`), a number the
/// xtask chose for this run and gave only the hypervisor (the guest never sees it: the
/// hypervisor strips its words from the guest's command line and zeroes the boot loader's
/// device tree). A line without it, or with another, is not the run's: a guest that prints a
/// final line (or a command line that Linux echoes) decides nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyedFinalLine {
    /// The run's code.
    pub code: u32,
    /// The run's key.
    pub key: u64,
}

/// The word after the meaning that carries the key.
pub const KEY_WORD: &str = "key=";

impl core::fmt::Display for KeyedFinalLine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} {KEY_WORD}{:016x}", FinalLine(self.code), self.key)
    }
}

/// What a final line says: its code, and the key it carries (`None`: an unkeyed line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Final {
    /// The code.
    pub code: u32,
    /// The key, for a [`KeyedFinalLine`].
    pub key: Option<u64>,
}

/// A [`FinalLine`] or [`KeyedFinalLine`] (surrounding whitespace allowed); `None` for any other
/// line (a meaning that is not the code's, a malformed key, anything after it).
pub fn parse_final(line: &str) -> Option<Final> {
    let rest = line.trim().strip_prefix(FINAL_LINE_PREFIX)?;
    let (code, rest) = rest.split_once(' ')?;
    let code: u32 = code.parse().ok()?;
    let meaning = describe(code as i32);
    let rest = rest.strip_prefix('(')?.strip_prefix(meaning)?.strip_prefix(')')?;
    if rest.is_empty() {
        return Some(Final { code, key: None });
    }
    let hex = rest.strip_prefix(' ')?.strip_prefix(KEY_WORD)?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(Final { code, key: Some(u64::from_str_radix(hex, 16).ok()?) })
}

/// The code of any final line, keyed or not ([`parse_final`]).
pub fn parse_final_line(line: &str) -> Option<u32> {
    parse_final(line).map(|f| f.code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_line_reads_back() {
        extern crate std;
        use std::format;
        for code in [0, 1, 2, 3, 4, 5, 6, 77] {
            let line = format!("{}\r\n", FinalLine(code));
            assert_eq!(parse_final_line(&line), Some(code), "{line:?}");
        }
        assert_eq!(format!("{}", FinalLine(2)), "@@exit 2 (guest panic)");
        for line in ["", "@@exit", "@@exit 2", "@@exit x (success)", "@@exit 2 (success)", "hyp: @@exit 0 (success)"] {
            assert_eq!(parse_final_line(line), None, "{line:?}");
        }
        let keyed = format!("{}", KeyedFinalLine { code: 0, key: 0x0123_4567_89ab_cdef });
        assert_eq!(keyed, "@@exit 0 (success) key=0123456789abcdef");
        assert_eq!(parse_final(&keyed), Some(Final { code: 0, key: Some(0x0123_4567_89ab_cdef) }));
        assert_eq!(parse_final("@@exit 0 (success)"), Some(Final { code: 0, key: None }));
        for bad in [
            "@@exit 0 (success) key=0123",
            "@@exit 0 (success) key=0123456789abcdefg",
            "@@exit 0 (success) key=0123456789abcdef x",
            "@@exit 0 (success)key=0123456789abcdef",
            "@@exit 0 (success) nokey",
            "@@exit 0 (success) key=+123456789abcdef",
        ] {
            assert_eq!(parse_final(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn guest_status_can_only_report_a_guest_outcome() {
        for s in 0..=3 {
            assert_eq!(from_guest_status(s), s as u32);
        }
        for s in [4, 5, 6, 7, 64, 255, 256, 0x1_0000_0000, u64::MAX] {
            assert_eq!(from_guest_status(s), GUEST_FAILURE, "status {s}");
        }
    }

    #[test]
    fn table_is_ordered_distinct_and_kinds_are_apart() {
        assert!(TABLE.windows(2).all(|w| w[0].code < w[1].code));
        for c in TABLE {
            assert_eq!(c.kind == Kind::Guest, c.code <= GUEST_RESET, "{}", c.name);
            assert!(!c.reason.is_empty() && !c.reason.contains('\n'));
            assert_eq!(lookup(c.code.into()), Some(&c));
        }
        // Run outcomes stay clear of anything a guest or a shell produces by itself: 0-63 for
        // guests, 101 for a Rust panic in the xtask, 124+ for shells and `timeout`.
        assert!(TABLE.iter().filter(|c| c.kind == Kind::Run).all(|c| (64..=100).contains(&c.code)));
        assert_eq!(describe(GUEST_PANIC as i32), "guest panic");
        assert_eq!(describe(HYP_FAULT as i32), "hypervisor fault");
        assert_eq!(describe(77), "not in the exit-code table");
        assert_ne!(GUEST_RESET, SUCCESS);
    }
}
