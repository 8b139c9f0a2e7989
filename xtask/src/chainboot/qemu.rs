//! The chainloader in QEMU with its UART on a pty: `cargo xtask chainboot --qemu`, and the
//! integration test. QEMU's PL011 ignores the baud rate (it only computes it for a trace event)
//! and a pty ignores termios speeds, so bytes move as fast as QEMU and the loader take them.

use crate::qemu::QemuConfig;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A QEMU running the loader, its serial port on a pty.
pub struct LoaderVm {
    /// The QEMU process (killed on drop).
    pub child: Child,
    /// The pty QEMU made (`/dev/pts/N`).
    pub pty: PathBuf,
    /// QEMU's own messages after the pty line.
    pub messages: mpsc::Receiver<String>,
}

impl Drop for LoaderVm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// QEMU arguments for the loader with `serial` as its console (`pty`, `chardev:ID`, ...).
pub fn args(cfg: &QemuConfig, loader: &Path, serial: &str) -> Vec<String> {
    let mut a = cfg.machine_args();
    a.extend(
        [
            "-display",
            "none",
            "-monitor",
            "none",
            "-serial",
            serial,
            // The run the loader starts ends like any other: the hypervisor exits through
            // semihosting with the run's code.
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
        ]
        .map(String::from),
    );
    a.push(loader.display().to_string());
    a
}

/// Starts QEMU with the loader on a new pty and returns once QEMU said which pty it is.
pub fn start(qemu: &Path, cfg: &QemuConfig, loader: &Path) -> Result<LoaderVm> {
    let mut child = Command::new(qemu)
        .args(args(cfg, loader, "pty"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", qemu.display()))?;
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut early = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => {
                if let Some(pty) = pty_of(&line) {
                    return Ok(LoaderVm { child, pty, messages: rx });
                }
                early.push(line);
            }
            Err(_) => {
                let _ = child.kill();
                bail!("QEMU named no pty for the serial port; it said:\n{}", early.join("\n"));
            }
        }
    }
}

/// The pty in QEMU's `char device redirected to /dev/pts/N (label serial0)`.
pub fn pty_of(line: &str) -> Option<PathBuf> {
    let rest = line.split("char device redirected to ").nth(1)?;
    let (path, label) = rest.split_once(' ')?;
    label.starts_with("(label serial0)").then(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_pty() {
        assert_eq!(pty_of("char device redirected to /dev/pts/7 (label serial0)"), Some(PathBuf::from("/dev/pts/7")));
        assert_eq!(pty_of("char device redirected to /dev/pts/7 (label compat_monitor0)"), None);
        assert_eq!(pty_of("qemu-system-aarch64: warning: something"), None);
    }

    #[test]
    fn loader_args_put_the_serial_on_the_given_chardev() {
        let cfg = QemuConfig { cpu: "cortex-a76".into(), gic: 2, ..QemuConfig::default() };
        let a = args(&cfg, Path::new("l.img"), "pty");
        let after = |f: &str| a.iter().position(|x| x == f).map(|i| a[i + 1].as_str());
        assert_eq!(after("-serial"), Some("pty"));
        assert_eq!(after("-kernel"), Some("l.img"));
        assert_eq!(after("-M"), Some("virt,gic-version=2,virtualization=on"));
        assert_eq!(after("-initrd"), None);
        assert!(!a.contains(&"-nographic".to_string()));
    }
}
