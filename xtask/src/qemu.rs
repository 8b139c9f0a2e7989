//! QEMU command lines and supervised runs.
//!
//! Both binaries are arm64 Images, so QEMU hands each x0 = DTB: the hypervisor is the `-kernel`
//! and the guest kernel the `-initrd` (the hypervisor loads it at EL1 with the Linux boot
//! protocol); with `--no-hypervisor` the kernel is the `-kernel` and starts at EL1 itself.
//! Semihosting is on so `qemu-exit` can end the run with the guest's status as exit code.

use crate::build::Images;
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Everything that varies between boots.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    /// `-cpu`: `max` (FEAT_BBM level 2) or `cortex-a76` (the Raspberry Pi 5 core).
    pub cpu: String,
    /// GIC version, 2 or 3.
    pub gic: u8,
    pub smp: u32,
    /// `-m`, e.g. `1G`, `512M`.
    pub mem: String,
    /// `-icount shift=N`: deterministic instruction counts.
    pub icount: Option<u32>,
    /// Kernel command line (`hyp.`-prefixed words are the hypervisor's).
    pub bootargs: String,
    /// Wait for gdb on tcp::1234.
    pub gdb: bool,
    /// Boot the kernel alone at EL1, no hypervisor.
    pub no_hypervisor: bool,
}

impl Default for QemuConfig {
    fn default() -> Self {
        Self {
            cpu: "max".into(),
            gic: 3,
            smp: 4,
            mem: "1G".into(),
            icount: None,
            bootargs: String::new(),
            gdb: false,
            no_hypervisor: false,
        }
    }
}

impl QemuConfig {
    /// The full QEMU argument list for these images.
    pub fn args(&self, images: &Images) -> Vec<String> {
        let mut a = self.machine_args();
        a.extend(["-nographic".into(), "-semihosting-config".into(), "enable=on,target=native".into()]);
        if self.no_hypervisor {
            a.extend(["-kernel".into(), images.kernel.display().to_string()]);
        } else {
            a.extend(["-kernel".into(), images.hypervisor.display().to_string()]);
            a.extend(["-initrd".into(), images.kernel.display().to_string()]);
        }
        if !self.bootargs.is_empty() {
            a.extend(["-append".into(), self.bootargs.clone()]);
        }
        if self.gdb {
            a.extend(["-s".into(), "-S".into()]);
        }
        a
    }

    /// The machine alone: board, CPU, CPU count, memory and `-icount` (no images, no console).
    pub fn machine_args(&self) -> Vec<String> {
        let mut machine = format!("virt,gic-version={}", self.gic);
        if !self.no_hypervisor {
            machine.push_str(",virtualization=on");
        }
        let mut a: Vec<String> = vec![
            "-M".into(),
            machine,
            "-cpu".into(),
            self.cpu.clone(),
            "-smp".into(),
            self.smp.to_string(),
            "-m".into(),
            self.mem.clone(),
        ];
        if let Some(shift) = self.icount {
            a.extend(["-icount".into(), format!("shift={shift}")]);
        }
        a
    }

    /// One line describing the machine, for test names and logs.
    pub fn describe(&self) -> String {
        format!(
            "cpu={} gic=v{} smp={} mem={}{}{}",
            self.cpu,
            self.gic,
            self.smp,
            self.mem,
            if self.no_hypervisor { " no-hypervisor" } else { "" },
            if self.bootargs.is_empty() { String::new() } else { format!(" bootargs=\"{}\"", self.bootargs) }
        )
    }
}

/// How a supervised run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// QEMU's exit code; `None` when it was killed at the timeout or by a signal.
    pub code: Option<i32>,
    pub timed_out: bool,
    /// Everything QEMU printed (serial console and QEMU's own messages), `\r` removed.
    pub output: String,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs QEMU, echoing its output through `echo` line by line, killing it after `timeout`.
pub fn run(
    qemu: &PathBuf,
    cfg: &QemuConfig,
    images: &Images,
    timeout: Duration,
    echo: impl FnMut(&str),
) -> Result<Outcome> {
    run_args(qemu, &cfg.args(images), timeout, echo)
}

/// [`run`] with a complete argument list.
pub fn run_args(qemu: &PathBuf, args: &[String], timeout: Duration, mut echo: impl FnMut(&str)) -> Result<Outcome> {
    let start = Instant::now();
    let mut child = Command::new(qemu)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", qemu.display()))?;
    let (tx, rx) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            let mut r = BufReader::new(stream);
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).map(|n| n > 0).unwrap_or(false) {
                let line = String::from_utf8_lossy(&buf).replace('\r', "");
                if tx.send(line).is_err() {
                    break;
                }
                buf.clear();
            }
        }));
    }
    drop(tx);
    let mut output = String::new();
    let mut timed_out = false;
    let deadline = start + timeout;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                echo(line.trim_end_matches('\n'));
                output.push_str(&line);
                if !line.ends_with('\n') {
                    output.push('\n');
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() > deadline {
            timed_out = true;
            let _ = child.kill();
            break;
        }
    }
    let status = child.wait()?;
    for r in readers {
        let _ = r.join();
    }
    // Lines that arrived between the kill and the join.
    while let Ok(line) = rx.try_recv() {
        echo(line.trim_end_matches('\n'));
        output.push_str(&line);
    }
    Ok(Outcome { code: if timed_out { None } else { status.code() }, timed_out, output, elapsed: start.elapsed() })
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

    fn images() -> Images {
        Images {
            hypervisor: "h.img".into(),
            kernel: "k.img".into(),
            hypervisor_elf: "h".into(),
            kernel_elf: "k".into(),
        }
    }

    fn after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
        args.iter().position(|a| a == flag).map(|i| args[i + 1].as_str())
    }

    #[test]
    fn hypervisor_boot_passes_the_kernel_as_initrd_at_el2() {
        let a = QemuConfig::default().args(&images());
        assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,virtualization=on"));
        assert_eq!(after(&a, "-kernel"), Some("h.img"));
        assert_eq!(after(&a, "-initrd"), Some("k.img"));
        assert_eq!(after(&a, "-cpu"), Some("max"));
        assert_eq!(after(&a, "-smp"), Some("4"));
        assert_eq!(after(&a, "-m"), Some("1G"));
        assert!(after(&a, "-semihosting-config").unwrap().contains("enable=on"));
        assert!(!a.contains(&"-icount".to_string()) && !a.contains(&"-S".to_string()));
    }

    #[test]
    fn no_hypervisor_boots_the_kernel_alone_at_el1() {
        let cfg = QemuConfig {
            no_hypervisor: true,
            gic: 2,
            icount: Some(0),
            gdb: true,
            bootargs: "a b".into(),
            ..QemuConfig::default()
        };
        let a = cfg.args(&images());
        assert_eq!(after(&a, "-M"), Some("virt,gic-version=2"));
        assert_eq!(after(&a, "-kernel"), Some("k.img"));
        assert_eq!(after(&a, "-initrd"), None);
        assert_eq!(after(&a, "-icount"), Some("shift=0"));
        assert_eq!(after(&a, "-append"), Some("a b"));
        assert!(a.contains(&"-S".to_string()) && a.contains(&"-s".to_string()));
    }
}
