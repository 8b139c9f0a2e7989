//! Judging a run: QEMU's exit status, its own messages and the console output turned into one
//! row of the exit-code table (`lib/abi/src/exit.rs`) with a one-line reason.
//!
//! QEMU's exit status alone cannot be trusted: QEMU exits 1 both when the guest reports a failure
//! and when it refuses its own arguments, and exits 0 when it stops on SIGTERM or SIGINT. So:
//!
//! * the xtask's time limit -> [`exit::TIMED_OUT`];
//! * a signal that killed QEMU, or QEMU's "terminating on signal" message -> [`exit::KILLED`];
//! * a failure with QEMU's own message on stderr and nothing on the console (the guest never
//!   ran) -> [`exit::QEMU_REFUSED`];
//! * a code of the guest outcomes (0-6) -> that outcome, with the console line that says why;
//! * any other code -> [`exit::UNKNOWN_EXIT`].

use crate::qemu::Outcome;
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

/// A configuration the xtask refuses before starting QEMU (a usage error).
#[derive(Debug)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

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

/// Words that mark the console line explaining a failure.
const WHY_WORDS: [&str; 12] = [
    "boot failed",
    "PANIC",
    "FATAL",
    "guest fault",
    "refused",
    "unknown boot argument",
    "bad boot argument",
    "given twice",
    "not a guest outcome",
    "not handled",
    "SYSTEM_RESET",
    "failed",
];

/// The console line that best says why a guest outcome happened (the first that matches the
/// earliest word of [`WHY_WORDS`]).
fn why_line(output: &str) -> Option<&str> {
    WHY_WORDS.iter().find_map(|w| {
        output.lines().find(|l| (l.starts_with("hyp:") || l.starts_with("kernel:")) && l.contains(w)).map(str::trim)
    })
}

/// Judges a finished run.
pub fn judge(o: &Outcome) -> Verdict {
    if o.timed_out {
        return Verdict::new(
            exit::TIMED_OUT,
            format!("no end after the {} s time limit (--timeout){}", o.limit.as_secs(), o.stuck()),
        );
    }
    if let Some(sig) = o.signal {
        return Verdict::new(exit::KILLED, format!("QEMU was killed by signal {sig}"));
    }
    if let Some(m) = o.qemu_messages.iter().find(|m| m.contains("terminating on signal")) {
        return Verdict::new(exit::KILLED, m.trim().to_string());
    }
    let Some(code) = o.code else {
        return Verdict::new(exit::KILLED, "QEMU ended without an exit status");
    };
    if code != 0 && o.console_lines == 0 && !o.qemu_messages.is_empty() {
        let first = o.qemu_messages.iter().find(|m| !m.trim().is_empty()).map_or("", |m| m.trim());
        return Verdict::new(exit::QEMU_REFUSED, first.to_string());
    }
    // The run's own last word (`@@exit CODE (meaning)`), when it got out: on a board (or QEMU
    // with a board's device tree) the firmware powers off with 0 and the line carries the code;
    // otherwise QEMU's status must agree with it.
    let final_line = o.output.lines().rev().find_map(exit::parse_final_line);
    let code = match final_line {
        Some(said) if code == 0 => i32::try_from(said).unwrap_or(i32::MAX),
        Some(said) if i64::from(said) != i64::from(code) => {
            return Verdict::new(
                exit::UNKNOWN_EXIT,
                format!("QEMU exited with {code}, the run's final line says {said}"),
            );
        }
        _ => code,
    };
    match u32::try_from(code).ok().and_then(|c| exit::lookup(c.into())) {
        Some(row) if row.kind == exit::Kind::Guest => {
            let detail = if row.code == exit::SUCCESS { None } else { why_line(&o.output) };
            Verdict::new(row.code, detail.unwrap_or(row.reason))
        }
        _ => Verdict::new(exit::UNKNOWN_EXIT, format!("QEMU exited with {code}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(code: Option<i32>, console: &str, stderr: &[&str]) -> Outcome {
        let mut output = console.to_string();
        for l in stderr {
            output.push_str(l);
            output.push('\n');
        }
        Outcome {
            code,
            signal: None,
            timed_out: false,
            limit: Duration::from_secs(600),
            output,
            console_lines: console.lines().count(),
            qemu_messages: stderr.iter().map(|s| s.to_string()).collect(),
            elapsed: Duration::from_secs(1),
            cpus_at_limit: None,
        }
    }

    #[test]
    fn guest_outcomes_pass_through_with_the_line_that_says_why() {
        let v = judge(&outcome(Some(0), "hyp: x\nkernel: all done\n", &[]));
        assert_eq!(v.code, 0);
        assert!(v.success());
        let v = judge(&outcome(Some(2), "kernel: PANIC: panicked at x\n", &[]));
        assert_eq!((v.code, v.reason.as_str()), (2, "guest panic: kernel: PANIC: panicked at x"));
        let v = judge(&outcome(Some(4), "hyp: guest fault on CPU 0: read at IPA 0x40200000\n", &[]));
        assert_eq!(v.code, exit::GUEST_FAULT);
        assert!(v.reason.contains("IPA 0x40200000"), "{v}");
        let v = judge(&outcome(Some(5), "hyp: boot failed: unknown boot argument \"hyp.x\"\n", &[]));
        assert_eq!(v.code, exit::HYP_FAULT);
        // A guest failure with no console output (no UART) is still the guest's.
        assert_eq!(judge(&outcome(Some(1), "", &[])).code, exit::GUEST_FAILURE);
        assert_eq!(judge(&outcome(Some(6), "hyp: guest called PSCI SYSTEM_RESET\n", &[])).code, exit::GUEST_RESET);
    }

    #[test]
    fn qemu_stopping_on_sigterm_is_not_success() {
        let o = outcome(Some(0), "hyp: x\n", &["qemu-system-aarch64: terminating on signal 15 from pid 7 (bash)"]);
        let v = judge(&o);
        assert_eq!(v.code, exit::KILLED);
        assert!(v.reason.contains("signal 15"), "{v}");
        let mut o = outcome(None, "", &[]);
        o.signal = Some(9);
        assert_eq!(judge(&o).code, exit::KILLED);
    }

    #[test]
    fn qemu_refusing_its_arguments_is_not_a_guest_failure() {
        let v = judge(&outcome(Some(1), "", &["qemu-system-aarch64: unable to find CPU model 'foo'"]));
        assert_eq!(v.code, exit::QEMU_REFUSED);
        assert!(v.reason.ends_with("unable to find CPU model 'foo'"), "{v}");
        // QEMU warnings beside a guest that ran do not make it QEMU's failure.
        let v = judge(&outcome(Some(1), "kernel: boot failed: x\n", &["qemu-system-aarch64: warning: y"]));
        assert_eq!(v.code, exit::GUEST_FAILURE);
    }

    #[test]
    fn timeouts_and_unknown_codes() {
        let mut o = outcome(None, "hyp: x\ntestguest: check hang: FAILED\n", &[]);
        o.timed_out = true;
        o.cpus_at_limit = Some("CPU 0 at EL1 0x40080004".into());
        let v = judge(&o);
        assert_eq!(v.code, exit::TIMED_OUT);
        assert!(v.reason.contains("600 s"), "{v}");
        // Where the run stood: its last lines and its vCPUs.
        assert!(
            v.reason.contains("last lines: hyp: x | testguest: check hang: FAILED; CPU 0 at EL1 0x40080004"),
            "{v}"
        );
        assert_eq!(judge(&outcome(Some(42), "x\n", &[])).code, exit::UNKNOWN_EXIT);
        // A run outcome's number coming from QEMU is not trusted as one.
        assert_eq!(judge(&outcome(Some(66), "x\n", &[])).code, exit::UNKNOWN_EXIT);
        // QEMU's status and the run's final line must agree.
        assert_eq!(judge(&outcome(Some(2), "kernel: PANIC\n@@exit 2 (guest panic)\n", &[])).code, exit::GUEST_PANIC);
        let v = judge(&outcome(Some(1), "kernel: PANIC\n@@exit 2 (guest panic)\n", &[]));
        assert_eq!(v.code, exit::UNKNOWN_EXIT);
        assert!(v.reason.contains("final line says 2"), "{v}");
        // A board's firmware powers off with 0: the final line is the run's code.
        let v = judge(&outcome(Some(0), "kernel: PANIC\n@@exit 2 (guest panic)\n", &[]));
        assert_eq!(v.code, exit::GUEST_PANIC, "{v}");
    }

    #[test]
    fn the_readmes_exit_code_table_is_this_one() {
        let readme = include_str!("../../README.md");
        let section = &readme[readme.find("### Exit codes").expect("README has an exit-code section")..];
        let rows: Vec<(u32, &str, &str)> = section
            .lines()
            .skip_while(|l| !l.starts_with("| code |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let c: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
                (c[0].parse().expect("a code"), c[1], c[2])
            })
            .collect();
        let table: Vec<(u32, &str, &str)> = exit::TABLE.iter().map(|c| (c.code, c.name, c.reason)).collect();
        assert_eq!(rows, table, "README.md's exit-code table differs from lib/abi/src/exit.rs");
    }

    #[test]
    fn errors_map_to_codes() {
        assert_eq!(code_of(&anyhow::anyhow!("io")), exit::XTASK_ERROR);
        assert_eq!(code_of(&anyhow::Error::new(Refused("x".into()))), exit::USAGE);
        assert_eq!(code_of(&anyhow::Error::new(ExitWith(Verdict::new(exit::TIMED_OUT, "")))), exit::TIMED_OUT);
        assert_eq!(code_of(&anyhow::Error::new(Refused("x".into())).context("while running")), exit::USAGE);
    }
}
