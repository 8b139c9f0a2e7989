//! Judging a run: QEMU's exit status, its own messages and the console output turned into one
//! row of the exit-code table (`lib/abi/src/exit.rs`) with a one-line reason.
//!
//! Under the hypervisor the run's code travels in its final line, `@@exit CODE (meaning)
//! key=KEY`, printed by the hypervisor just before it powers the machine off, with the key the
//! xtask gave it for this run alone ([`super::Judging::Keyed`]): a final line without that key
//! (a guest's, or a command line Linux echoes) is not the run's and decides nothing, nor does
//! it switch off the panic watch. A guest alone has nobody above it: QEMU's own ending decides
//! ([`super::Judging::Alone`]): a power-off is success, a reset a failure, which the guest's
//! last final line or its panic report may only name (a console line never turns a failure
//! into success). QEMU's exit status carries nothing (no semihosting), and QEMU exits 0 on a
//! power-off, on SIGTERM or SIGINT, and 1 when it refuses its arguments. So:
//!
//! * the xtask was stopped by a signal and ended QEMU -> [`exit::INTERRUPTED`];
//! * the xtask's time limit -> [`exit::TIMED_OUT`];
//! * a signal that killed QEMU, or QEMU's "terminating on signal" message -> [`exit::KILLED`];
//! * a failure with QEMU's own message on stderr and nothing on the console (the guest never
//!   ran) -> [`exit::QEMU_REFUSED`];
//! * the last final line -> its code, with the console line that says why (QEMU must then have
//!   ended cleanly, by itself or because the machine had nothing to power off with);
//! * no final line, but a guest kernel's panic or Oops on the console -> [`exit::GUEST_PANIC`]
//!   quoting it (a Linux guest without `panic=-1` stops there forever: [`Watch`] ends the run
//!   once the report is complete);
//! * no final line at all -> [`exit::NO_FINAL_LINE`], whatever QEMU's status.

use super::{Judging, Outcome};
pub use crate::error::Verdict;
use abi::exit;

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

/// Why the xtask ended QEMU before QEMU ended by itself (the time limit aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The run's final line was followed by [`exit::NO_POWER_OFF`]: the machine stays on.
    NoPowerOff,
    /// A guest kernel's panic or Oops report is complete (the line that started it): nothing
    /// more will happen.
    GuestPanic(String),
    /// The xtask got this signal (SIGINT, SIGTERM, SIGHUP).
    Interrupted(i32),
}

/// A console line that starts a guest kernel's panic or Oops report: Linux's panic and Oops
/// (`die()` on arm64), and this project's kernel's and hypervisor's panic lines.
fn panic_start(line: &str) -> bool {
    const STARTS: [&str; 4] = ["Kernel panic - not syncing", "Internal error: Oops", "kernel: PANIC", "hyp: PANIC"];
    STARTS.iter().any(|s| line.contains(s))
}

/// Linux's last line of a panic report when it will not reboot (`panic=0`, the default): the
/// CPU spins from here on.
const LINUX_PANIC_END: &str = "---[ end Kernel panic - not syncing";
/// Linux's last line when it halts: `reboot: System halted`, or `reboot: Power off not
/// available: System halted instead` when nothing can power the machine off (Linux alone on
/// the Pi 4 model: no PSCI, no power-off driver). The CPUs spin from here on.
fn linux_halted(line: &str) -> bool {
    line.contains("reboot: ") && line.contains("System halted")
}
/// The last line of a Linux Oops report.
const LINUX_TRACE_END: &str = "---[ end trace";

/// Watches a run's console, line by line: the run's final lines and the first panic or Oops
/// report, and whether QEMU must be ended now ([`Watch::end_now`]).
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// Whose final lines count.
    judging: Judging,
    /// Codes of the final lines that count, in order (one per run, when all is well).
    pub finals: Vec<u32>,
    /// Final lines that do not count: without this run's key, or with another.
    pub ignored: Vec<String>,
    /// The line that started the first panic or Oops report.
    pub panic: Option<String>,
    end: Option<Ended>,
}

impl Watch {
    /// A watch for a run judged by `judging`.
    pub fn new(judging: Judging) -> Watch {
        Watch { judging, ..Watch::default() }
    }

    /// Watches every line of `output`.
    pub fn scan(output: &str, judging: Judging) -> Watch {
        let mut w = Watch::new(judging);
        for l in output.lines() {
            w.line(l);
        }
        w
    }

    /// One console line.
    pub fn line(&mut self, l: &str) {
        if let Some(f) = exit::parse_final(l) {
            let counts = match self.judging {
                Judging::Keyed(k) => f.key == Some(k),
                Judging::Alone | Judging::Unverified => true,
            };
            if counts {
                self.finals.push(f.code);
            } else {
                self.ignored.push(l.trim().to_string());
            }
        } else if !self.finals.is_empty() && (l.contains(exit::NO_POWER_OFF) || linux_halted(l)) {
            self.end.get_or_insert(Ended::NoPowerOff);
        }
        if self.panic.is_none() && panic_start(l) {
            self.panic = Some(l.trim().to_string());
        }
        let linux_panic_over = l.contains(LINUX_PANIC_END)
            || (l.contains(LINUX_TRACE_END) && self.panic.as_deref().is_some_and(|p| p.contains("Oops")));
        // A final line that decides (the hypervisor's) answers a panic; alone, a final line
        // decides nothing, so the report ends the run.
        if linux_panic_over && (self.finals.is_empty() || self.judging == Judging::Alone) {
            let first = self.panic.clone().unwrap_or_else(|| l.trim().to_string());
            self.end.get_or_insert(Ended::GuestPanic(first));
        }
    }

    /// Whether QEMU must be ended now, and why.
    pub fn end_now(&self) -> Option<Ended> {
        self.end.clone()
    }
}

/// The last console line, for verdicts that have nothing better to quote.
fn last_console_line(o: &Outcome) -> Option<&str> {
    o.output.lines().rev().map(str::trim).find(|l| !l.is_empty() && !o.qemu_messages.iter().any(|m| m.trim() == *l))
}

/// Judges a finished run.
pub fn judge(o: &Outcome) -> Verdict {
    if let Some(Ended::Interrupted(sig)) = o.ended {
        return Verdict::new(
            exit::INTERRUPTED,
            format!(
                "the xtask got {} after {:.1} s and ended QEMU",
                crate::signals::name(sig),
                o.elapsed.as_secs_f64()
            ),
        );
    }
    let watch = Watch::scan(&o.output, o.judging);
    let panic_detail = || watch.panic.as_ref().map(|p| format!("{p} (and no final line)"));
    if o.timed_out {
        if let Some(p) = panic_detail() {
            return Verdict::new(exit::GUEST_PANIC, p);
        }
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
    let by_us = o.ended.is_some();
    let code = match o.code {
        Some(c) => c,
        None if by_us => 0,
        None => return Verdict::new(exit::KILLED, "QEMU ended without an exit status"),
    };
    if code != 0 && o.console_lines == 0 && !o.qemu_messages.is_empty() {
        return Verdict::new(exit::QEMU_REFUSED, refusal_line(&o.qemu_messages).to_string());
    }
    if o.judging == Judging::Alone {
        return alone(o, &watch, code);
    }
    // The run's own last word: the hypervisor prints it last, just before it powers off.
    let Some(&said) = watch.finals.last() else {
        if let Some(p) = panic_detail() {
            return Verdict::new(exit::GUEST_PANIC, p);
        }
        if let Some(l) = watch.ignored.last() {
            return Verdict::new(
                exit::NO_FINAL_LINE,
                format!("QEMU exited with {code}; {l:?} is not this run's final line (it lacks the run's key: not the hypervisor's)"),
            );
        }
        let last =
            last_console_line(o).map_or_else(|| "nothing on the console".to_string(), |l| format!("last line {l:?}"));
        return Verdict::new(exit::NO_FINAL_LINE, format!("QEMU exited with {code}; {last}"));
    };
    if code != 0 {
        return Verdict::new(
            exit::UNKNOWN_EXIT,
            format!("QEMU exited with {code} after the run's final line said {said}"),
        );
    }
    guest_code(o, said)
}

/// The QEMU message that says why it refused: the first that is not a warning (QEMU prints
/// those before its error, e.g. for a deprecated option), else the first that is not empty.
fn refusal_line(messages: &[String]) -> &str {
    let said = || messages.iter().map(|m| m.trim()).filter(|m| !m.is_empty());
    let warning = |m: &str| m.starts_with("warning: ") || m.contains(": warning: ");
    said().find(|m| !warning(m)).or_else(|| said().next()).unwrap_or("")
}

/// The verdict of a final line's code: a guest outcome with the console line that says why, or
/// an unknown exit.
fn guest_code(o: &Outcome, said: u32) -> Verdict {
    match exit::lookup(said.into()) {
        Some(row) if row.kind == exit::Kind::Guest => {
            let detail = if row.code == exit::SUCCESS { None } else { why_line(&o.output) };
            Verdict::new(row.code, detail.unwrap_or(row.reason))
        }
        _ => Verdict::new(exit::UNKNOWN_EXIT, format!("the run's final line says {said}, not a guest outcome")),
    }
}

/// A guest alone: how QEMU's machine ended decides; the console only names a failure.
fn alone(o: &Outcome, watch: &Watch, code: i32) -> Verdict {
    let said = watch.finals.last().copied();
    match &o.shutdown {
        Some(s) if s.powered_off() => Verdict::new(exit::SUCCESS, "the guest powered the machine off"),
        Some(s) if s.reset() => {
            // A failure: which one, the guest's own word may say (never success).
            if let Some(c) = said.filter(|c| *c != exit::SUCCESS && *c != exit::GUEST_RESET) {
                if let Some(row) = exit::lookup(c.into()).filter(|r| r.kind == exit::Kind::Guest) {
                    return guest_code(o, row.code);
                }
            }
            if let Some(p) = &watch.panic {
                return Verdict::new(exit::GUEST_PANIC, format!("{p} (then a reset)"));
            }
            Verdict::new(exit::GUEST_RESET, "the guest reset the machine")
        }
        _ if o.ended == Some(Ended::NoPowerOff) => match said {
            // Nothing can power this machine off: the guest's word is all there is.
            Some(c) => {
                let v = guest_code(o, c);
                Verdict {
                    reason: format!("{} (the guest's own final line: nothing powers this machine off)", v.reason),
                    ..v
                }
            }
            None => Verdict::new(exit::NO_FINAL_LINE, "the machine halted without a final line"),
        },
        _ => {
            if let Some(p) = &watch.panic {
                return Verdict::new(exit::GUEST_PANIC, format!("{p} (and the machine did not power off)"));
            }
            let how = o
                .shutdown
                .as_ref()
                .map_or("no shutdown event".to_string(), |s| format!("QEMU's shutdown reason {:?}", s.reason));
            Verdict::new(exit::NO_FINAL_LINE, format!("QEMU exited with {code} without the guest powering off ({how})"))
        }
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
            limit: Duration::from_secs(600),
            output,
            console_lines: console.lines().count(),
            qemu_messages: stderr.iter().map(|s| s.to_string()).collect(),
            elapsed: Duration::from_secs(1),
            ..Outcome::default()
        }
    }

    #[test]
    fn guest_outcomes_come_from_the_final_line_with_the_line_that_says_why() {
        let v = judge(&outcome(Some(0), "hyp: x\nkernel: all done\n@@exit 0 (success)\n", &[]));
        assert_eq!(v.code, 0);
        assert!(v.success());
        let v = judge(&outcome(Some(0), "kernel: PANIC: panicked at x\n@@exit 2 (guest panic)\n", &[]));
        assert_eq!((v.code, v.reason.as_str()), (2, "guest panic: kernel: PANIC: panicked at x"));
        let v = judge(&outcome(
            Some(0),
            "hyp: guest fault on CPU 0: read at IPA 0x40200000\n@@exit 4 (guest stopped by the hypervisor)\n",
            &[],
        ));
        assert_eq!(v.code, exit::GUEST_FAULT);
        assert!(v.reason.contains("IPA 0x40200000"), "{v}");
        let v = judge(&outcome(
            Some(0),
            "hyp: boot failed: unknown boot argument \"hyp.x\"\n@@exit 5 (hypervisor fault)\n",
            &[],
        ));
        assert_eq!(v.code, exit::HYP_FAULT);
        // A guest failure with no other console output is still the guest's.
        assert_eq!(judge(&outcome(Some(0), "@@exit 1 (guest failure)\n", &[])).code, exit::GUEST_FAILURE);
        let reset = "hyp: guest called PSCI SYSTEM_RESET\n@@exit 6 (guest reset)\n";
        assert_eq!(judge(&outcome(Some(0), reset, &[])).code, exit::GUEST_RESET);
    }

    #[test]
    fn no_final_line_is_never_success_whatever_qemu_says() {
        // A stub QEMU that printed nothing and exited 0.
        let v = judge(&outcome(Some(0), "", &[]));
        assert_eq!(v.code, exit::NO_FINAL_LINE, "{v}");
        assert!(v.reason.contains("nothing on the console"), "{v}");
        // A guest that said PANIC and ended QEMU some other way.
        let v = judge(&outcome(Some(0), "hello\nPANIC\n", &[]));
        assert_eq!(v.code, exit::NO_FINAL_LINE, "{v}");
        assert!(v.reason.contains("\"PANIC\""), "the last line is quoted: {v}");
        // A final line that is not exactly one: a lookalike is no final line.
        assert_eq!(judge(&outcome(Some(0), "@@exit 0 (guest panic)\n", &[])).code, exit::NO_FINAL_LINE);
        assert_eq!(judge(&outcome(Some(0), "hyp: @@exit 0 (success)\n", &[])).code, exit::NO_FINAL_LINE);
    }

    /// QEMU's messages on stderr are its refusal only when the guest never printed a line: a
    /// run that printed and then saw QEMU fail is judged by its final line, or its lack of one.
    #[test]
    fn qemu_messages_after_the_guest_ran_are_no_refusal() {
        let warn = ["qemu-system-aarch64: warning: something late"];
        let v = judge(&outcome(Some(1), "hyp: x\n@@exit 0 (success)\n", &warn));
        assert_eq!(v.code, exit::UNKNOWN_EXIT, "{v}");
        let v = judge(&outcome(Some(1), "hyp: x\n", &warn));
        assert_eq!(v.code, exit::NO_FINAL_LINE, "{v}");
        let v = judge(&outcome(Some(1), "", &warn));
        assert_eq!(v.code, exit::QEMU_REFUSED, "{v}");
    }

    /// QEMU's warnings (a deprecated option) come before the error that stopped it: the
    /// refusal quotes the error; a QEMU that only warned is quoted as it is.
    #[test]
    fn a_refusal_quotes_qemu_s_error_not_its_warnings() {
        let said = [
            "qemu-system-aarch64: -mon chardev=events,mode=control: warning: '-mon' is deprecated",
            "",
            "qemu-system-aarch64: KVM does not support GICv2 emulation",
            "qemu-system-aarch64: warning: a later one",
        ];
        let v = judge(&outcome(Some(1), "", &said));
        assert_eq!(v.code, exit::QEMU_REFUSED, "{v}");
        assert_eq!(v.reason, "QEMU refused: qemu-system-aarch64: KVM does not support GICv2 emulation", "{v}");
        let v = judge(&outcome(Some(1), "", &["warning: only this"]));
        assert_eq!(v.reason, "QEMU refused: warning: only this", "{v}");
    }

    /// The line quoted is the first that says why, not a later echo of it.
    #[test]
    fn the_first_line_that_says_why_is_quoted() {
        let console = "kernel: test a: step 1 failed\nkernel: test b: step 2 failed\n@@exit 1 (guest failure)\n";
        let v = judge(&outcome(Some(0), console, &[]));
        assert_eq!(v.reason, "guest failure: kernel: test a: step 1 failed", "{v}");
    }

    /// A success names no console line as its reason, even one that says "failed" (a self-test
    /// that checks a refusal prints one).
    #[test]
    fn a_success_quotes_no_failure_line() {
        let v = judge(&outcome(Some(0), "kernel: test x: step failed as expected\n@@exit 0 (success)\n", &[]));
        assert_eq!(v.code, exit::SUCCESS);
        assert_eq!(v.reason, format!("success: {}", exit::lookup(0).unwrap().reason), "{v}");
    }

    #[test]
    fn the_last_final_line_is_the_runs() {
        // A guest prints a final line of its own; the hypervisor's, printed last before it
        // powers off, is the run's.
        let v = judge(&outcome(
            Some(0),
            "@@exit 0 (success)\nhyp: guest fault\n@@exit 4 (guest stopped by the hypervisor)\n",
            &[],
        ));
        assert_eq!(v.code, exit::GUEST_FAULT, "{v}");
    }

    #[test]
    fn a_guest_kernels_panic_is_named_when_no_final_line_follows() {
        let linux = "[    1.0] Kernel panic - not syncing: sysrq triggered crash\n[    1.1] CPU: 0 PID: 1\n[    1.2] ---[ end Kernel panic - not syncing: sysrq triggered crash ]---\n";
        let w = Watch::scan(linux, Judging::Unverified);
        assert_eq!(
            w.end_now(),
            Some(Ended::GuestPanic("[    1.0] Kernel panic - not syncing: sysrq triggered crash".into()))
        );
        let mut o = outcome(None, linux, &[]);
        o.ended = w.end_now();
        let v = judge(&o);
        assert_eq!(v.code, exit::GUEST_PANIC, "{v}");
        assert!(v.reason.contains("sysrq triggered crash"), "{v}");
        // Not ended before the report is complete, nor for a panic the hypervisor answered.
        assert_eq!(Watch::scan("Kernel panic - not syncing: x\n", Judging::Unverified).end_now(), None);
        assert_eq!(
            Watch::scan("@@exit 6 (guest reset)\n---[ end Kernel panic - not syncing: x ]---\n", Judging::Unverified)
                .end_now(),
            None
        );
        // An Oops ends the run once its trace is out; a WARN's trace does not.
        let oops = "Unable to handle kernel NULL pointer dereference\nInternal error: Oops: 0000000096000005 [#1] SMP\n---[ end trace 0000000000000000 ]---\n";
        assert!(
            matches!(Watch::scan(oops, Judging::Unverified).end_now(), Some(Ended::GuestPanic(l)) if l.starts_with("Internal error: Oops"))
        );
        assert_eq!(
            Watch::scan("WARNING: CPU: 0 at x\n---[ end trace 0000000000000000 ]---\n", Judging::Unverified).end_now(),
            None
        );
        // The project kernel's own panic line, then silence until the time limit.
        let mut o = outcome(None, "kernel: PANIC: panicked at src/x.rs:1\n", &[]);
        o.timed_out = true;
        let v = judge(&o);
        assert_eq!(v.code, exit::GUEST_PANIC, "{v}");
        assert!(v.reason.contains("src/x.rs:1"), "{v}");
        // Linux alone with panic=-1: QEMU ends on the reset (-no-reboot) without a final line.
        let v = judge(&outcome(Some(0), "Kernel panic - not syncing: Attempted to kill init!\n", &[]));
        assert_eq!(v.code, exit::GUEST_PANIC, "{v}");
    }

    #[test]
    fn a_run_at_its_time_limit_says_where_it_stood() {
        let console = "hyp: x\n@@report {\"kind\":\"hyp_boot\"}\ntestguest: check hang: FAILED\n";
        let mut o = outcome(None, console, &[]);
        o.timed_out = true;
        o.cpus_at_limit = Some("CPU 0 at EL1 0x40080004; CPU 1 off".into());
        let v = judge(&o);
        assert_eq!(v.code, exit::TIMED_OUT);
        // The last console lines (records left out) and where the vCPUs were.
        assert!(
            v.reason
                .ends_with("last lines: hyp: x | testguest: check hang: FAILED; CPU 0 at EL1 0x40080004; CPU 1 off"),
            "{v}"
        );
    }

    #[test]
    fn a_machine_that_cannot_power_off_is_ended_after_its_final_line() {
        let console = format!("@@exit 0 (success)\nhyp: {}\n", exit::NO_POWER_OFF);
        let w = Watch::scan(&console, Judging::Unverified);
        assert_eq!(w.end_now(), Some(Ended::NoPowerOff));
        let mut o = outcome(None, &console, &[]);
        o.ended = w.end_now();
        assert_eq!(judge(&o).code, exit::SUCCESS);
        // Saying it before any final line ends nothing.
        assert_eq!(Watch::scan(&format!("{}\n", exit::NO_POWER_OFF), Judging::Unverified).end_now(), None);
        // Linux alone with nothing to power the machine off halts after /init's final line.
        for halted in ["reboot: System halted", "reboot: Power off not available: System halted instead"] {
            let linux = format!("@@exit 0 (success)\n[    6.212061] {halted}\n");
            assert_eq!(Watch::scan(&linux, Judging::Unverified).end_now(), Some(Ended::NoPowerOff), "{halted}");
            assert_eq!(Watch::scan(&format!("[    6.2] {halted}\n"), Judging::Unverified).end_now(), None, "{halted}");
        }
    }

    #[test]
    fn the_xtask_interrupted_is_its_own_code() {
        let mut o = outcome(None, "@@exit 0 (success)\n", &[]);
        o.ended = Some(Ended::Interrupted(libc::SIGTERM));
        let v = judge(&o);
        assert_eq!(v.code, exit::INTERRUPTED);
        assert!(v.reason.contains("SIGTERM"), "{v}");
    }

    /// Every combination of how QEMU ended, what the console's last word was, a signal and the
    /// time limit, each with the verdict the table at the top of this file gives.
    #[test]
    fn the_verdict_table_exhaustively() {
        #[derive(Clone, Copy, Debug)]
        enum Final {
            None,
            Code(u32),
            Panic,
        }
        #[derive(Clone, Copy, Debug)]
        enum Qemu {
            Exit(i32),
            Refused,
            TerminatedOnSignal,
            Killed(i32),
            EndedByUs,
        }
        let finals = [Final::None, Final::Code(0), Final::Code(2), Final::Code(6), Final::Code(77), Final::Panic];
        let qemus = [
            Qemu::Exit(0),
            Qemu::Exit(1),
            Qemu::Exit(3),
            Qemu::Refused,
            Qemu::TerminatedOnSignal,
            Qemu::Killed(9),
            Qemu::Killed(6),
            Qemu::EndedByUs,
        ];
        let mut cells = 0;
        for f in finals {
            for q in qemus {
                for interrupted in [false, true] {
                    for timed_out in [false, true] {
                        let mut console = String::from("hyp: pgtlab hypervisor\n");
                        match f {
                            Final::None => {}
                            Final::Code(c) => console.push_str(&format!("@@exit {c} ({})\n", exit::describe(c as i32))),
                            Final::Panic => console.push_str("[ 1.0] Kernel panic - not syncing: x\n"),
                        }
                        let mut o = outcome(None, &console, &[]);
                        match q {
                            Qemu::Exit(c) => o.code = Some(c),
                            Qemu::Refused => {
                                o = outcome(Some(1), "", &["qemu-system-aarch64: -m 0x: bad size"]);
                            }
                            Qemu::TerminatedOnSignal => {
                                o.code = Some(0);
                                o.qemu_messages.push("qemu-system-aarch64: terminating on signal 15 from pid 7".into());
                            }
                            Qemu::Killed(s) => o.signal = Some(s),
                            Qemu::EndedByUs => o.ended = Some(Ended::NoPowerOff),
                        }
                        if interrupted {
                            (o.code, o.signal, o.ended) = (None, None, Some(Ended::Interrupted(libc::SIGINT)));
                        }
                        if timed_out && !interrupted {
                            (o.code, o.signal, o.ended, o.timed_out) = (None, None, None, true);
                        }
                        let refused = matches!(q, Qemu::Refused);
                        let expect = if interrupted {
                            exit::INTERRUPTED
                        } else if timed_out {
                            if matches!(f, Final::Panic) && !refused {
                                exit::GUEST_PANIC
                            } else {
                                exit::TIMED_OUT
                            }
                        } else {
                            match q {
                                Qemu::Killed(_) | Qemu::TerminatedOnSignal => exit::KILLED,
                                Qemu::Refused => exit::QEMU_REFUSED,
                                Qemu::Exit(c) if c != 0 => match f {
                                    Final::Code(_) => exit::UNKNOWN_EXIT,
                                    Final::Panic => exit::GUEST_PANIC,
                                    Final::None => exit::NO_FINAL_LINE,
                                },
                                Qemu::Exit(_) | Qemu::EndedByUs => match f {
                                    Final::Code(77) => exit::UNKNOWN_EXIT,
                                    Final::Code(c) => c,
                                    Final::Panic => exit::GUEST_PANIC,
                                    Final::None => exit::NO_FINAL_LINE,
                                },
                            }
                        };
                        let v = judge(&o);
                        assert_eq!(
                            v.code, expect,
                            "final {f:?}, QEMU {q:?}, interrupted {interrupted}, timed out {timed_out}: {v}"
                        );
                        assert_eq!(v.success(), expect == exit::SUCCESS);
                        cells += 1;
                    }
                }
            }
        }
        assert_eq!(cells, 6 * 8 * 2 * 2);
    }

    const KEY: u64 = 0x5eed_1234_abcd_0042;

    fn keyed(code: Option<i32>, console: &str) -> Outcome {
        Outcome { judging: Judging::Keyed(KEY), ..outcome(code, console, &[]) }
    }

    fn final_line(code: u32) -> String {
        format!("{}\n", exit::KeyedFinalLine { code, key: KEY })
    }

    /// Under the hypervisor only the final line with this run's key counts: a line a guest
    /// prints (or Linux echoes from its command line) never makes a run pass, nor fail.
    #[test]
    fn only_the_final_line_with_the_runs_key_counts() {
        // The lie: Linux echoes a command line with a planted final line, then panics.
        let planted = "Kernel command line: console=ttyAMA0 pgtlab_test=panic\n@@exit 0 (success)\n";
        let v = judge(&keyed(Some(0), &format!("{planted}hyp: guest called PSCI SYSTEM_RESET\n{}", final_line(6))));
        assert_eq!(v.code, exit::GUEST_RESET, "{v}");
        // Another run's key is not this run's either.
        let other = format!("{}\n", exit::KeyedFinalLine { code: 0, key: KEY ^ 1 });
        let v = judge(&keyed(Some(0), &format!("{other}{}", final_line(1))));
        assert_eq!(v.code, exit::GUEST_FAILURE, "{v}");
        // A planted line alone, with QEMU ending cleanly: no final line at all.
        let v = judge(&keyed(Some(0), planted));
        assert_eq!(v.code, exit::NO_FINAL_LINE, "{v}");
        assert!(v.reason.contains("not this run's final line"), "{v}");
        // Timed out after a planted line: the verdict quotes it as what it is.
        let mut stuck = keyed(None, &format!("hyp: booting\n{planted}"));
        stuck.timed_out = true;
        let v = judge(&stuck);
        assert_eq!(v.code, exit::TIMED_OUT, "{v}");
        assert!(v.reason.contains("@@exit 0 (success) [not the run's final line: no key]"), "{v}");
        // The real line after a planted failure: success.
        assert_eq!(judge(&keyed(Some(0), &format!("@@exit 2 (guest panic)\n{}", final_line(0)))).code, exit::SUCCESS);
        // A planted line does not switch off the end-at-panic watch (the run would wait for
        // its whole time limit).
        let w = Watch::scan(
            "@@exit 0 (success)\nKernel panic - not syncing: x\n---[ end Kernel panic - not syncing: x ]---\n",
            Judging::Keyed(KEY),
        );
        assert!(matches!(w.end_now(), Some(Ended::GuestPanic(_))), "{w:?}");
        assert!(w.finals.is_empty() && w.ignored.len() == 1);
        let w = Watch::scan(
            "@@exit 0 (success)\nKernel panic - not syncing: x\n---[ end Kernel panic - not syncing: x ]---\n",
            Judging::Alone,
        );
        assert!(matches!(w.end_now(), Some(Ended::GuestPanic(_))), "alone too: {w:?}");
    }

    fn alone(console: &str, reason: Option<&str>) -> Outcome {
        let shutdown = reason.map(|r| crate::qmp::Shutdown { guest: true, reason: r.into() });
        Outcome { judging: Judging::Alone, shutdown, ..outcome(Some(0), console, &[]) }
    }

    /// A guest alone: QEMU's ending decides; the console may only name a failure.
    #[test]
    fn alone_the_machines_end_decides() {
        let ok = alone("@@exit 0 (success)\n", Some("guest-shutdown"));
        assert_eq!(judge(&ok).code, exit::SUCCESS);
        // A planted success before a panic and a reset: a panic.
        let lie = "@@exit 0 (success)\nKernel panic - not syncing: x\n";
        assert_eq!(judge(&alone(lie, Some("guest-reset"))).code, exit::GUEST_PANIC);
        // The guest's own failure line names the failure.
        assert_eq!(
            judge(&alone("kernel: x failed\n@@exit 1 (guest failure)\n", Some("guest-reset"))).code,
            exit::GUEST_FAILURE
        );
        assert_eq!(judge(&alone("@@exit 3 (guest exception)\n", Some("guest-reset"))).code, exit::GUEST_EXCEPTION);
        // A reset with nothing said.
        assert_eq!(judge(&alone("", Some("guest-reset"))).code, exit::GUEST_RESET);
        // A success line with no power-off at all decides nothing.
        assert_eq!(judge(&alone("@@exit 0 (success)\n", None)).code, exit::NO_FINAL_LINE);
        // A machine that cannot power off: the guest's word, said so.
        let mut halted = alone("@@exit 0 (success)\nreboot: System halted\n", None);
        halted.ended = Some(Ended::NoPowerOff);
        let v = judge(&halted);
        assert_eq!(v.code, exit::SUCCESS, "{v}");
        assert!(v.reason.contains("nothing powers this machine off"), "{v}");
    }

    #[test]
    fn the_docs_exit_code_table_is_this_one() {
        let section = include_str!("../../../docs/exit-codes.md");
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
        assert_eq!(rows, table, "docs/exit-codes.md's table differs from lib/abi/src/exit.rs");
    }
}
