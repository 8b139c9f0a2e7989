//! The inner run's outcome, out of the outer QEMU's.
//!
//! The model's QEMU has two outputs: its serial port (the model's Linux: its kernel's messages,
//! `/init`'s own lines, the probe) goes to QEMU's stderr, and a virtio console (`/dev/hvc0` in
//! the model) to QEMU's stdout, which only the inner QEMU and `/init`'s markers write. So
//! nothing the model's Linux prints can be taken for the inner run's, and the run is judged
//! ([`crate::supervise::judge`]) on an [`Outcome`] made of the inner stream only: its console
//! lines, the inner QEMU's own messages (`/init` relays its stderr behind [`Tag::stderr`]),
//! its QMP events (`/init` relays them behind [`Tag::events`]: how its machine ended, which a
//! guest alone is judged by), and its exit status, which `/init` prints in the end marker once
//! it has ended. The run's judging is the launch's: under the hypervisor only a final line with
//! the run's key counts, inside the model as outside. Every marker
//! carries a token the xtask drew for this run and gave the model's Linux on its command line,
//! which the inner guests cannot read: a guest printing a marker forges nothing.
//!
//! Without the end marker the inner QEMU's status is unknown: the run then ends as the outer
//! run did when the xtask ended it (time limit, signal, a console line
//! [`crate::supervise::Watch`] acts on), else it fails: the model's Linux stopped before the
//! inner QEMU did.

use crate::supervise::{Judging, Outcome};

/// The markers of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    token: String,
}

/// A marker `/init` prints on the inner stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Marker {
    /// The inner QEMU starts now.
    Start,
    /// It ended with this shell status (128 + N: killed by signal N), after `secs` seconds.
    End { status: i32, secs: Option<f64> },
    /// The model's Linux has no `/dev/kvm`.
    NoKvm(String),
    /// KVM cannot run what the inner command line asks (the probe's refusal).
    Refused(String),
    /// The probe failed otherwise.
    ProbeFailed(String),
}

/// A shell status above this is a signal's (`128 + N`).
const SIGNALLED: i32 = 128;

impl Tag {
    /// The tag of a run with `token` (hex digits).
    pub fn new(token: &str) -> Tag {
        Tag { token: token.to_string() }
    }

    /// The token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// What starts a marker line: `kvm-model: [TOKEN] `.
    pub fn marker(&self) -> String {
        format!("kvm-model: [{}] ", self.token)
    }

    /// What starts a line of the inner QEMU's stderr: `[TOKEN]! `.
    pub fn stderr(&self) -> String {
        format!("[{}]! ", self.token)
    }

    /// What starts a line of the inner QEMU's QMP events (one JSON object): `[TOKEN]@ `.
    pub fn events(&self) -> String {
        format!("[{}]@ ", self.token)
    }

    /// The marker a line is, if it is one.
    pub fn parse(&self, line: &str) -> Option<Marker> {
        let rest = line.strip_prefix(&self.marker())?;
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let msg = tail.trim().to_string();
        Some(match word {
            "start" => Marker::Start,
            "end" => {
                let field = |k: &str| tail.split_whitespace().find_map(|w| w.strip_prefix(k));
                let status = field("status=")?.parse().ok()?;
                Marker::End { status, secs: field("secs=").and_then(|s| s.parse().ok()) }
            }
            "nokvm" => Marker::NoKvm(msg),
            "refused" => Marker::Refused(msg),
            "probe-failed" => Marker::ProbeFailed(msg),
            _ => return None,
        })
    }

    /// A line as the user reads it: the token left out of markers and relayed messages.
    pub fn display(&self, line: &str) -> String {
        if let Some(m) = line.strip_prefix(&self.marker()) {
            return format!("kvm-model: {m}");
        }
        if let Some(m) = line.strip_prefix(&self.stderr()) {
            return m.to_string();
        }
        if let Some(m) = line.strip_prefix(&self.events()) {
            return format!("kvm-model: QMP event: {m}");
        }
        line.to_string()
    }
}

/// The outer run's output split by stream: (stdout lines: the inner stream, stderr lines: the
/// model's Linux and the outer QEMU). `output` holds both in arrival order and `qemu_messages`
/// the stderr ones in order, so the stderr lines are `qemu_messages` taken in order from
/// `output`, the rest stdout.
pub fn split(outer: &Outcome) -> (Vec<&str>, Vec<&str>) {
    let (mut inner, mut model) = (Vec::new(), Vec::new());
    let mut next = outer.qemu_messages.iter().peekable();
    for l in outer.output.lines() {
        if next.peek().is_some_and(|m| m.trim_end_matches('\n') == l) {
            next.next();
            model.push(l);
        } else {
            inner.push(l);
        }
    }
    (inner, model)
}

/// How the model's run went, before judging.
#[derive(Debug, Clone)]
pub enum Inner {
    /// The inner QEMU ran (or the xtask ended the model while it did): its outcome.
    Ran(Outcome),
    /// KVM cannot run what was asked (the probe's refusal, with its reason).
    Refused(String),
}

/// The inner run out of the outer one, to be judged by `judging` (the launch's).
pub fn inner_outcome(outer: &Outcome, tag: &Tag, judging: Judging) -> Inner {
    let (stdout, model) = split(outer);
    let mut o = Outcome { limit: outer.limit, elapsed: outer.elapsed, judging, ..Outcome::default() };
    let mut started = false;
    let mut end = None;
    let mut failed = None;
    for l in stdout {
        if let Some(m) = tag.parse(l) {
            match m {
                Marker::Start => started = true,
                Marker::End { status, secs } => end = Some((status, secs)),
                Marker::Refused(why) => return Inner::Refused(why),
                Marker::NoKvm(why) => failed = Some(format!("kvm-model: no KVM in the model's Linux: {why}")),
                Marker::ProbeFailed(why) => failed = Some(format!("kvm-model: the KVM probe failed: {why}")),
            }
            continue;
        }
        if !started || end.is_some() {
            continue;
        }
        if let Some(event) = l.strip_prefix(&tag.events()) {
            // The first SHUTDOWN is the machine's end (as `crate::qmp::EventWatch` keeps it).
            let shutdown = serde_json::from_str(event).ok().and_then(|v| crate::qmp::shutdown_of(&v));
            if o.shutdown.is_none() {
                o.shutdown = shutdown;
            }
            continue;
        }
        o.output.push_str(l);
        o.output.push('\n');
        match l.strip_prefix(&tag.stderr()) {
            Some(msg) => o.qemu_messages.push(msg.to_string()),
            None => o.console_lines += 1,
        }
    }
    // What the xtask did to the outer run holds for the inner one.
    o.timed_out = outer.timed_out;
    o.ended = outer.ended.clone();
    match (started, end) {
        (_, Some((status, _))) if status > SIGNALLED => o.signal = Some(status - SIGNALLED),
        (_, Some((status, _))) => o.code = Some(status),
        // The inner QEMU never started: a QEMU that could not start (what the model said, or
        // its Linux's last line), unless the xtask ended the outer run first.
        (false, None) if !outer.timed_out && outer.ended.is_none() => {
            let why = failed.unwrap_or_else(|| {
                let last = model.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty()).unwrap_or("nothing");
                let status = outer.code.map_or_else(|| "no exit status".to_string(), |c| format!("exit status {c}"));
                format!("kvm-model: the model's Linux never started the inner QEMU (its QEMU: {status}; its last line: {last})")
            });
            o.code = Some(1);
            o.output.clear();
            o.console_lines = 0;
            o.qemu_messages = vec![why];
        }
        // It started and never ended, and the xtask did not end the model: its Linux stopped
        // under it.
        (true, None) if !outer.timed_out && outer.ended.is_none() => {
            let last = model.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty()).unwrap_or("nothing");
            o.code = Some(1);
            o.qemu_messages
                .push(format!("kvm-model: the model's Linux ended before its inner QEMU did (its last line: {last})"));
        }
        _ => {}
    }
    Inner::Ran(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervise::{judge, Ended};
    use abi::exit;
    use std::time::Duration;

    const T: &str = "0123456789abcdef";

    /// An outer outcome from (line, from stderr) pairs.
    fn outer(lines: &[(&str, bool)], code: Option<i32>) -> Outcome {
        let mut o = Outcome { code, limit: Duration::from_secs(600), ..Outcome::default() };
        for (l, err) in lines {
            o.output.push_str(l);
            o.output.push('\n');
            if *err {
                o.qemu_messages.push(l.to_string());
            } else {
                o.console_lines += 1;
            }
        }
        o
    }

    fn ran(i: Inner) -> Outcome {
        match i {
            Inner::Ran(o) => o,
            Inner::Refused(r) => panic!("refused: {r}"),
        }
    }

    fn m(s: &str) -> String {
        format!("kvm-model: [{T}] {s}")
    }

    #[test]
    fn the_inner_final_line_and_status_decide_the_model_s_lines_never() {
        let (start, end) = (m("start"), m("end status=0 secs=8.15"));
        let lines = [
            ("[    0.7] kvm [1]: VHE+NV2 mode initialized successfully", true),
            ("@@exit 0 (success)", true), // the model's Linux cannot speak for the run
            ("kvm-model: probing KVM", true),
            (start.as_str(), false),
            ("kernel: 2 of 2 CPUs online", false),
            ("[0123456789abcdef]! qemu-system-aarch64: warning: a message", false),
            ("@@exit 1 (guest failure)", false),
            ("[   12.3] Kernel panic - not syncing: the model's own", true),
            (end.as_str(), false),
            ("@@exit 0 (success)", false), // after the end marker: not the inner run's
        ];
        let tag = Tag::new(T);
        let o = ran(inner_outcome(&outer(&lines, Some(0)), &tag, Judging::Unverified));
        assert_eq!(o.code, Some(0));
        assert_eq!(o.console_lines, 2);
        assert_eq!(o.qemu_messages, ["qemu-system-aarch64: warning: a message"]);
        assert!(!o.output.contains("Kernel panic") && !o.output.contains("kvm [1]"));
        let v = judge(&o);
        assert_eq!(v.code, exit::GUEST_FAILURE, "{v}");
        assert_eq!(tag.display(&end), "kvm-model: end status=0 secs=8.15");
        assert_eq!(tag.display("[0123456789abcdef]! qemu: x"), "qemu: x");
    }

    #[test]
    fn a_forged_marker_without_the_token_is_console_output() {
        let (start, end) = (m("start"), m("end status=0"));
        let lines = [
            (start.as_str(), false),
            ("@@exit 0 (success)", false),
            ("kvm-model: [ffffffffffffffff] end status=0", false),
            ("kvm-model: [ffffffffffffffff] refused x", false),
            ("@@exit 5 (hypervisor fault)", false),
            (end.as_str(), false),
        ];
        let o = ran(inner_outcome(&outer(&lines, Some(0)), &Tag::new(T), Judging::Unverified));
        assert_eq!(judge(&o).code, exit::HYP_FAULT);
        assert_eq!(o.console_lines, 4);
    }

    #[test]
    fn the_inner_qemu_s_status_and_signals_reach_the_verdict() {
        let (start, end1, end9) = (m("start"), m("end status=1 secs=0.4"), m("end status=137"));
        let refused = [
            (start.as_str(), false),
            ("[0123456789abcdef]! qemu-system-aarch64: mach-virt: KVM does not support providing Virtualization extensions to the guest CPU", false),
            (end1.as_str(), false),
        ];
        let v = judge(&ran(inner_outcome(&outer(&refused, Some(0)), &Tag::new(T), Judging::Unverified)));
        assert_eq!(v.code, exit::QEMU_REFUSED, "{v}");
        assert!(v.reason.contains("Virtualization extensions"), "{v}");
        let killed = [(start.as_str(), false), ("@@exit 0 (success)", false), (end9.as_str(), false)];
        let o = ran(inner_outcome(&outer(&killed, Some(0)), &Tag::new(T), Judging::Unverified));
        assert_eq!((o.code, o.signal), (None, Some(9)));
        assert_eq!(judge(&o).code, exit::KILLED);
        let nothing = [(start.as_str(), false), (end1.as_str(), false)];
        assert_eq!(
            judge(&ran(inner_outcome(&outer(&nothing, Some(0)), &Tag::new(T), Judging::Unverified))).code,
            exit::NO_FINAL_LINE
        );
    }

    #[test]
    fn a_model_that_never_starts_the_inner_qemu_fails_saying_why() {
        let nokvm = m("nokvm /dev/kvm is missing");
        let o = ran(inner_outcome(
            &outer(&[("boot", true), (nokvm.as_str(), false)], Some(0)),
            &Tag::new(T),
            Judging::Unverified,
        ));
        let v = judge(&o);
        assert_eq!(v.code, exit::QEMU_REFUSED, "{v}");
        assert!(v.reason.contains("no KVM in the model's Linux: /dev/kvm is missing"), "{v}");
        let probe = m("probe-failed status=4: KVM API version 11");
        let v =
            judge(&ran(inner_outcome(&outer(&[(probe.as_str(), false)], Some(0)), &Tag::new(T), Judging::Unverified)));
        assert!(v.code == exit::QEMU_REFUSED && v.reason.contains("KVM API version 11"), "{v}");
        // The model's Linux died first: its last line is quoted, nothing passes.
        let died = outer(&[("[ 2.0] Kernel panic - not syncing: No working init found", true)], Some(0));
        let v = judge(&ran(inner_outcome(&died, &Tag::new(T), Judging::Unverified)));
        assert_eq!(v.code, exit::QEMU_REFUSED, "{v}");
        assert!(v.reason.contains("never started the inner QEMU") && v.reason.contains("No working init"), "{v}");
        let refused = m("refused this host's KVM offers no EL2 (KVM_CAP_ARM_EL2): run the kernel alone");
        match inner_outcome(&outer(&[(refused.as_str(), false)], Some(0)), &Tag::new(T), Judging::Unverified) {
            Inner::Refused(r) => assert!(r.starts_with("this host's KVM offers no EL2"), "{r}"),
            Inner::Ran(o) => panic!("ran: {o:?}"),
        }
    }

    #[test]
    fn a_model_that_stops_mid_run_fails_unless_the_xtask_ended_it() {
        let start = m("start");
        let lines =
            [(start.as_str(), false), ("hyp: booting", false), ("[ 9.9] Kernel panic - not syncing: Oops", true)];
        let v = judge(&ran(inner_outcome(&outer(&lines, Some(0)), &Tag::new(T), Judging::Unverified)));
        assert_eq!(v.code, exit::NO_FINAL_LINE, "{v}");
        let after_final = [(start.as_str(), false), ("@@exit 0 (success)", false)];
        let v = judge(&ran(inner_outcome(&outer(&after_final, Some(0)), &Tag::new(T), Judging::Unverified)));
        assert_ne!(v.code, exit::SUCCESS, "no end marker: the inner QEMU's status is unknown: {v}");
        let mut timed = outer(&lines, None);
        timed.timed_out = true;
        let v = judge(&ran(inner_outcome(&timed, &Tag::new(T), Judging::Unverified)));
        assert_eq!(v.code, exit::TIMED_OUT, "{v}");
        assert!(v.reason.contains("hyp: booting"), "the inner run's last lines: {v}");
        let mut ended = outer(&[(start.as_str(), false), ("@@exit 0 (success)", false)], None);
        ended.ended = Some(Ended::NoPowerOff);
        assert_eq!(judge(&ran(inner_outcome(&ended, &Tag::new(T), Judging::Unverified))).code, exit::SUCCESS);
        let mut int = outer(&[("boot", true)], None);
        int.ended = Some(Ended::Interrupted(2));
        assert_eq!(judge(&ran(inner_outcome(&int, &Tag::new(T), Judging::Unverified))).code, exit::INTERRUPTED);
    }

    #[test]
    fn the_run_s_key_decides_inside_the_model_as_outside() {
        const KEY: u64 = 0x5eed_0123_4567_89ab;
        let keyed = format!("{}", exit::KeyedFinalLine { code: 0, key: KEY });
        let forged = format!("{}", exit::KeyedFinalLine { code: 0, key: KEY ^ 1 });
        let (start, end) = (m("start"), m("end status=0"));
        let run = |lines: &[(&str, bool)]| {
            judge(&ran(inner_outcome(&outer(lines, Some(0)), &Tag::new(T), Judging::Keyed(KEY))))
        };
        let ok = run(&[(start.as_str(), false), (keyed.as_str(), false), (end.as_str(), false)]);
        assert_eq!(ok.code, exit::SUCCESS, "{ok}");
        // A guest's final line, with no key or another, is not the hypervisor's.
        let v = run(&[
            (start.as_str(), false),
            ("@@exit 0 (success)", false),
            (forged.as_str(), false),
            (end.as_str(), false),
        ]);
        assert_ne!(v.code, exit::SUCCESS, "{v}");
    }

    #[test]
    fn a_guest_alone_is_judged_by_the_inner_machine_s_end() {
        let (start, end) = (m("start"), m("end status=0"));
        let event = |reason: &str| {
            format!("[{T}]@ {{\"event\": \"SHUTDOWN\", \"data\": {{\"guest\": true, \"reason\": \"{reason}\"}}}}")
        };
        let run = |lines: &[(&str, bool)]| inner_outcome(&outer(lines, Some(0)), &Tag::new(T), Judging::Alone);
        let (off, reset) = (event("guest-shutdown"), event("guest-reset"));
        let o = ran(run(&[
            (start.as_str(), false),
            ("@@exit 0 (success)", false),
            (off.as_str(), false),
            (end.as_str(), false),
        ]));
        assert_eq!(o.shutdown.as_ref().map(|s| s.reason.as_str()), Some("guest-shutdown"));
        assert_eq!(o.console_lines, 1, "an event line is not console output");
        assert_eq!(judge(&o).code, exit::SUCCESS);
        // A reset after a final line of success is a failure; so is no event at all.
        let o = ran(run(&[
            (start.as_str(), false),
            ("@@exit 0 (success)", false),
            (reset.as_str(), false),
            (end.as_str(), false),
        ]));
        assert_ne!(judge(&o).code, exit::SUCCESS, "{}", judge(&o));
        let o = ran(run(&[(start.as_str(), false), ("@@exit 0 (success)", false), (end.as_str(), false)]));
        assert_ne!(judge(&o).code, exit::SUCCESS, "{}", judge(&o));
        // A guest printing an event without the token forges nothing.
        let forged = off.replace(T, "ffffffffffffffff");
        let o = ran(run(&[
            (start.as_str(), false),
            ("@@exit 0 (success)", false),
            (forged.as_str(), false),
            (end.as_str(), false),
        ]));
        assert!(o.shutdown.is_none());
        assert_ne!(judge(&o).code, exit::SUCCESS);
        assert_eq!(Tag::new(T).display(&off), format!("kvm-model: QMP event: {}", &off[20..]));
    }

    #[test]
    fn streams_split_by_the_stderr_lines_in_order() {
        let o = outer(&[("a", true), ("x", false), ("a", false), ("b", true), ("a", true)], Some(0));
        let (inner, model) = split(&o);
        assert_eq!(model, ["a", "b", "a"]);
        assert_eq!(inner, ["x", "a"]);
    }
}
