//! Running QEMU under supervision: its process (in a process group of its own, ended with the
//! xtask: [`crate::signals`]), its console read line by line and watched ([`judge::Watch`]),
//! its time limit (where the vCPUs stood, asked over QMP before QEMU is killed), and the
//! outcome ([`Outcome`]) that [`judge::judge`] turns into a verdict.

pub mod judge;
pub mod kvm;
pub mod kvm_model;

pub use judge::{judge, Ended, Watch};

use crate::build::Images;
pub use crate::launch::Judging;
use crate::launch::Launch;
use crate::machine::{accel::Runs, Accel};
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How a supervised run ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// QEMU's exit code; `None` when it was killed at the timeout or by a signal.
    pub code: Option<i32>,
    /// The signal that killed QEMU (`None` if it exited, or the xtask killed it at the limit).
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The time limit the run had.
    pub limit: Duration,
    /// Everything QEMU printed (serial console and QEMU's own messages), `\r` removed.
    pub output: String,
    /// Lines on QEMU's stdout: the serial console (what the hypervisor and the guest said).
    pub console_lines: usize,
    /// QEMU's own messages (its stderr), e.g. "qemu-system-aarch64: -m abc: …".
    pub qemu_messages: Vec<String>,
    pub elapsed: Duration,
    /// At the time limit, before QEMU was killed: where every vCPU was ([`crate::qmp`]).
    pub cpus_at_limit: Option<String>,
    /// Why the xtask ended QEMU before it ended by itself (the time limit aside).
    pub ended: Option<judge::Ended>,
    /// Whose final line decides the run.
    pub judging: Judging,
    /// How the machine ended, as QEMU's `SHUTDOWN` event said (`None`: it did not say).
    pub shutdown: Option<crate::qmp::Shutdown>,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// For a run stopped at its time limit: its last console lines and where its vCPUs were.
    pub fn stuck(&self) -> String {
        let last: Vec<&str> = self
            .output
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("qemu-system") && !l.starts_with(abi::report::PREFIX))
            .collect();
        let last = &last[last.len().saturating_sub(3)..];
        // A final line that does not decide this run (a guest's, without the run's key) is
        // quoted as what it is: a reader must not take "@@exit 0 (success)" for the outcome.
        let last: Vec<String> = last
            .iter()
            .map(|l| match (abi::exit::parse_final(l), self.judging) {
                (Some(f), Judging::Keyed(k)) if f.key != Some(k) => format!("{l} [not the run's final line: no key]"),
                _ => l.to_string(),
            })
            .collect();
        let mut s = String::new();
        if !last.is_empty() {
            s.push_str(&format!("; last lines: {}", last.join(" | ")));
        }
        if let Some(c) = &self.cpus_at_limit {
            s.push_str(&format!("; {c}"));
        }
        s
    }
}

/// Runs QEMU, echoing its output through `echo` line by line, killing it after `timeout`. With
/// `progress`, a line on stderr says how long the run has gone and how much time is left, every
/// `progress` without output. A configuration [`Launch::validate`] refuses is an error
/// (the caller's usage error, [`crate::error::Refused`]), QEMU is not started.
pub fn run(
    qemu: &Path,
    launch: &Launch,
    images: &Images,
    timeout: Duration,
    progress: Option<Duration>,
    echo: impl FnMut(&str),
) -> Result<Outcome> {
    let version = crate::provision::qemu_pkg::version_of(qemu)?;
    let r = launch.resolve(images, version)?;
    run_on(qemu, launch.accel, &r.args, r.judging, timeout, progress, echo)
}

/// Runs `args` (a launch's, resolved for `accel`) where the accelerator runs: QEMU's TCG here;
/// this host's KVM here once its `/dev/kvm` says it can run them ([`kvm::check_host`], a
/// refusal otherwise); or inside the KVM host model ([`kvm_model`], provisioned on first use),
/// whose inner run is the outcome.
pub fn run_on(
    qemu: &Path,
    accel: &Accel,
    args: &[String],
    judging: Judging,
    timeout: Duration,
    progress: Option<Duration>,
    echo: impl FnMut(&str),
) -> Result<Outcome> {
    match accel.runs {
        Runs::Here => {
            if !accel.tcg {
                kvm::check_host(args)?;
            }
            run_args(qemu, args, judging, timeout, progress, echo)
        }
        Runs::KvmModel => kvm_model::provision()?.run(args, judging, timeout, progress, echo),
    }
}

/// [`run`] with a complete argument list (not validated: the caller built it). QEMU runs
/// supervised ([`crate::signals::supervised`]: it dies with the xtask); the console is watched
/// ([`judge::Watch`]) and QEMU ended early when the run cannot end by itself: the
/// final line was followed by "nothing powers this machine off", or a guest kernel's panic or
/// Oops report is complete. A signal to the xtask ends QEMU at once.
pub fn run_args(
    qemu: &Path,
    args: &[String],
    judging: Judging,
    timeout: Duration,
    progress: Option<Duration>,
    echo: impl FnMut(&str),
) -> Result<Outcome> {
    Ok(run_args_until(qemu, args, judging, timeout, progress, echo, |_| false)?.0)
}

/// [`run_args`] that also ends QEMU (SIGKILL) as soon as a console line makes `stop` true:
/// for a guest that cannot power the machine off (Linux alone on a board without a
/// power-off it drives). Returns whether it stopped QEMU so (the outcome then has no exit
/// code: judging it is the caller's business).
pub fn run_args_until(
    qemu: &Path,
    args: &[String],
    judging: Judging,
    timeout: Duration,
    progress: Option<Duration>,
    mut echo: impl FnMut(&str),
    mut stop: impl FnMut(&str) -> bool,
) -> Result<(Outcome, bool)> {
    let mut stopped = false;
    let start = Instant::now();
    // A QMP socket, to see where the vCPUs are if the run hits its time limit; another for the
    // machine's events (how it ended), which QEMU waits for before it starts the machine.
    let qmp = crate::qmp::socket_path();
    let events_path = crate::qmp::socket_path();
    let mut cmd = Command::new(qemu);
    cmd.args(args).args(crate::qmp::qemu_args(&qmp)).args(crate::qmp::event_args(&events_path));
    // Stopped until the event monitor listens (`crate::qmp::event_args`); a run already stopped
    // for gdb (`-S`) is started by gdb.
    let held = !args.iter().any(|a| a == "-S");
    if held {
        cmd.arg("-S");
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = crate::signals::supervised(&mut cmd).with_context(|| format!("starting {}", qemu.display()))?;
    let events =
        crate::qmp::EventWatch::start(&events_path, EVENTS_WAIT, held, || matches!(child.try_wait(), Ok(None)));
    let _ = std::fs::remove_file(&events_path);
    let events = match events {
        Ok(e) => Some(e),
        Err(e) => {
            // QEMU ended first (it refused its arguments: its messages say why), or the xtask
            // got a signal while connecting (the loop below ends QEMU and says so); otherwise
            // QEMU waits for a connection that will not come.
            let t0 = Instant::now();
            while matches!(child.try_wait(), Ok(None))
                && crate::signals::caught().is_none()
                && t0.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) && crate::signals::caught().is_none() {
                child.kill();
                let _ = child.wait();
                return Err(e.context("QEMU's QMP event socket"));
            }
            None
        }
    };
    // (line, from stderr)
    let (tx, rx) = mpsc::channel::<(String, bool)>();
    let mut readers = Vec::new();
    for (stream, is_err) in [
        (Box::new(child.child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>, false),
        (Box::new(child.child.stderr.take().unwrap()), true),
    ] {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            let mut r = BufReader::new(stream);
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).map(|n| n > 0).unwrap_or(false) {
                let line = String::from_utf8_lossy(&buf).replace('\r', "");
                if tx.send((line, is_err)).is_err() {
                    break;
                }
                buf.clear();
            }
        }));
    }
    drop(tx);
    let mut output = String::new();
    let mut console_lines = 0;
    let mut qemu_messages = Vec::new();
    let mut watch = judge::Watch::new(judging);
    // The hypervisor's table of its CPUs' guest PCs (its `hyp_boot` record), for a time limit.
    let guest_pcs = std::cell::Cell::new(None);
    let mut take = |(line, is_err): (String, bool), echo: &mut dyn FnMut(&str), watch: &mut judge::Watch| {
        let l = line.trim_end_matches('\n');
        if is_err && is_module_noise(l) {
            return;
        }
        echo(l);
        if l.contains("\"kind\":\"hyp_boot\"") {
            guest_pcs.set(abi::report::parse_line(l).and_then(Result::ok).and_then(|r| r.u64("guest_pcs")));
        }
        if is_err {
            qemu_messages.push(l.to_string());
        } else {
            console_lines += 1;
            watch.line(l);
        }
        output.push_str(l);
        output.push('\n');
    };
    let mut timed_out = false;
    // A limit too far away to represent is no limit.
    let deadline = start.checked_add(timeout);
    let mut cpus_at_limit = None;
    let mut last_news = Instant::now();
    let mut ended = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(item) => {
                let hit = !item.1 && stop(item.0.trim_end_matches('\n'));
                take(item, &mut echo, &mut watch);
                last_news = Instant::now();
                if hit {
                    stopped = true;
                    child.kill();
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(sig) = crate::signals::caught() {
            ended = Some(judge::Ended::Interrupted(sig));
        } else if let Some(e) = watch.end_now() {
            ended = Some(e);
        }
        if ended.is_some() {
            child.kill();
            break;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now > d) {
            timed_out = true;
            cpus_at_limit = cpus_of(&qmp, guest_pcs.get());
            child.kill();
            break;
        }
        if let (Some(every), Some(deadline)) = (progress, deadline) {
            if now - last_news >= every {
                eprintln!(
                    "xtask: still running after {} s; time limit {} s, {} s left (--timeout S to change)",
                    (now - start).as_secs(),
                    timeout.as_secs(),
                    (deadline - now).as_secs()
                );
                last_news = now;
            }
        }
    }
    let status = child.wait()?;
    let _ = std::fs::remove_file(&qmp);
    // QEMU may have ended (on the handler's SIGTERM) before the loop saw the signal.
    if let (None, false, Some(sig)) = (&ended, timed_out, crate::signals::caught()) {
        ended = Some(judge::Ended::Interrupted(sig));
    }
    for r in readers {
        let _ = r.join();
    }
    // Lines that arrived between the kill and the join.
    while let Ok(item) = rx.try_recv() {
        take(item, &mut echo, &mut watch);
    }
    let shutdown = events.and_then(crate::qmp::EventWatch::finish);
    use std::os::unix::process::ExitStatusExt;
    let by_us = timed_out || ended.is_some() || stopped;
    Ok((
        Outcome {
            code: if by_us { None } else { status.code() },
            signal: if by_us { None } else { status.signal() },
            timed_out,
            limit: timeout,
            output,
            console_lines,
            qemu_messages,
            elapsed: start.elapsed(),
            cpus_at_limit,
            ended,
            judging,
            shutdown,
        },
        stopped,
    ))
}

/// `Ok` for a run that ended cleanly; else the error that ends the xtask: the verdict itself
/// when the xtask was interrupted (exit `interrupted`), `check failed` naming `what` otherwise.
pub fn require_success(verdict: &judge::Verdict, what: &str) -> Result<()> {
    if verdict.code == abi::exit::INTERRUPTED {
        return Err(anyhow::Error::new(crate::error::ExitWith(verdict.clone())));
    }
    if !verdict.success() {
        return Err(anyhow::Error::new(crate::error::ExitWith(judge::Verdict::new(
            abi::exit::CHECK_FAILED,
            format!("{what} did not end cleanly: {verdict}"),
        ))));
    }
    Ok(())
}

/// How long QEMU may take to open its event socket (it starts in well under a second; a
/// loaded host stretches that).
const EVENTS_WAIT: Duration = Duration::from_secs(60);

/// QEMU's complaint about a module of the system's QEMU (another build) that it found while
/// looking for one the unpacked backports QEMU does not ship (`ui-opengl`, in
/// qemu-system-gui), and its note that it waits for the xtask's event connection: harmless,
/// left out of the output.
pub fn is_module_noise(line: &str) -> bool {
    (line.contains("failed to initialize module:") || line.contains("failed to open module:"))
        || line.trim() == "Only modules from the same build can be loaded."
        || line.contains("QEMU waiting for connection on:")
}

/// Where the vCPUs of the QEMU behind `qmp` are (`None` if QMP does not answer). The guest's PC
/// of a CPU inside the hypervisor comes from the hypervisor's `table` (see `hyp_boot`).
fn cpus_of(qmp: &Path, table: Option<u64>) -> Option<String> {
    let mut q = crate::qmp::Qmp::connect(qmp, Duration::from_secs(1)).ok()?;
    crate::qmp::describe_cpus(&mut q, table).ok()
}

/// Prints a line to stdout immediately (for live runs).
pub fn echo_stdout(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guest's final line may only carry a guest outcome: the codes of the run itself (time
    /// limit, signal, xtask error, ...) are the xtask's to give, so a run whose last line claims
    /// one is judged an unknown exit, never that run outcome.
    #[test]
    fn a_final_line_cannot_claim_a_run_outcome() {
        use abi::exit;
        for c in exit::TABLE.iter().filter(|c| c.kind == exit::Kind::Run && c.code != exit::UNKNOWN_EXIT) {
            let output = format!("kernel: done\n@@exit {} ({})\n", c.code, c.name);
            let o = Outcome { code: Some(0), console_lines: 2, output, ..Outcome::default() };
            let v = judge(&o);
            assert_eq!(v.code, exit::UNKNOWN_EXIT, "a final line saying {} ({}): {v}", c.code, c.name);
        }
    }
}
