//! The chainloader in QEMU with its UART on a unix socket: `cargo xtask chainboot --qemu
//! [--board B]`, and the integration tests. QEMU's UARTs ignore the baud rate (the PL011 only
//! computes it for a trace event, the Pi 4's mini UART model has no divisor), so bytes move as
//! fast as QEMU and the loader take them.
//!
//! A socket, not a pty: when QEMU exits right after the run's final line (the hypervisor powers
//! off through PSCI), a pty's hang-up throws away what the host has not read yet, and a
//! busy host then never sees the `@@exit` line; a socket keeps every byte until it is read. The
//! raw-tty path of a real serial adapter is tested on a pty by `link`'s own tests.

use super::link::Link;
use crate::launch::Launch;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// A QEMU running the loader, its serial port on a unix socket.
pub struct LoaderVm {
    /// The QEMU process (killed on drop, and with the xtask: `crate::signals`).
    pub child: crate::signals::Supervised,
    /// The socket QEMU listens on for its serial port.
    pub socket: PathBuf,
    /// QEMU's own messages.
    pub messages: mpsc::Receiver<String>,
    /// The first (and only) connection to the socket, made by [`start`]: QEMU runs the guest
    /// once it is accepted.
    stream: Option<UnixStream>,
}

impl LoaderVm {
    /// The serial line: the connection [`start`] made (once; a second call is an error).
    pub fn link(&mut self) -> Result<Link> {
        let s = self.stream.take().context("the loader's serial line was already taken")?;
        let r = s.try_clone()?;
        Ok(Link { reader: Box::new(r), writer: Box::new(s), describe: format!("socket {}", self.socket.display()) })
    }
}

impl Drop for LoaderVm {
    fn drop(&mut self) {
        self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// QEMU arguments for the loader with `serial` as its console (`chardev:ID`, `pty`, ...): on a
/// board model, the port its DTB's stdout-path names, and the board's DTB (`cfg.dtb`, see
/// [`Launch::resolve_dtb`]), which the loader hands on to the hypervisor.
pub fn args(cfg: &Launch, machine_bytes: u64, loader: &Path, serial: &str) -> Vec<String> {
    let mut a = cfg.machine_args(machine_bytes, cfg.model().min_qemu);
    a.extend(cfg.model().serial_args(serial));
    // The run the loader starts ends like any other: its final line, then PSCI SYSTEM_OFF (or
    // the board's power-off), or SYSTEM_RESET, which ends QEMU too instead of restarting the
    // loader.
    a.push("-no-reboot".into());
    if let Some(d) = &cfg.dtb {
        a.extend(["-dtb".into(), d.display().to_string()]);
    }
    a.extend(["-kernel".into(), loader.display().to_string()]);
    a
}

/// Starts QEMU with the loader and `machine_bytes` of RAM, its serial port a unix socket QEMU
/// listens on (and waits for the first connection before it runs the guest), and returns once
/// connected. QEMU binds the socket's path before it listens on it: a connection refused while
/// the path exists is QEMU between the two, so it is tried again every 20 ms while QEMU runs,
/// for at most 30 s.
pub fn start(qemu: &Path, cfg: &Launch, machine_bytes: u64, loader: &Path) -> Result<LoaderVm> {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let socket = std::env::temp_dir().join(format!(
        "pgtlab-chainboot-{}-{}.sock",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&socket);
    let mut cmd = Command::new(qemu);
    // Not `serial0`: QEMU names the chardevs of `-serial null` ports serialN itself.
    cmd.args(args(cfg, machine_bytes, loader, "chardev:loader"))
        .arg("-chardev")
        .arg(format!("socket,id=loader,path={},server=on,wait=on", socket.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = crate::signals::supervised(&mut cmd).with_context(|| format!("starting {}", qemu.display()))?;
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.child.stderr.take().unwrap()),
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
    let mut exited = None;
    let connected = crate::qmp::connect_when_listening(&socket, Duration::from_secs(30), || match child.try_wait() {
        Ok(None) => true,
        end => {
            exited = Some(end);
            false
        }
    });
    match connected {
        Ok(stream) => Ok(LoaderVm { child, socket, messages: rx, stream: Some(stream) }),
        Err(e) => {
            child.kill();
            let said: Vec<String> = rx.try_iter().collect();
            bail!(
                "QEMU took no connection on the serial socket {} ({e}; QEMU ended: {:?}); it said:\n{}",
                socket.display(),
                exited,
                said.join("\n")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn loader_args_put_the_serial_on_the_given_chardev() {
        let cfg = Launch { cpu: "cortex-a76".into(), gic: 2, ..Launch::default() };
        let a = args(&cfg, 1 << 30, Path::new("l.img"), "chardev:serial0");
        let after = |f: &str| a.iter().position(|x| x == f).map(|i| a[i + 1].as_str());
        assert_eq!(after("-serial"), Some("chardev:serial0"));
        assert_eq!(after("-m"), Some("1024M"));
        assert_eq!(after("-kernel"), Some("l.img"));
        assert_eq!(after("-M"), Some("virt,gic-version=2,virtualization=on"));
        assert_eq!(after("-initrd"), None);
        assert!(!a.contains(&"-nographic".to_string()));
        let cfg = Launch { dtb: Some("pi4.dtb".into()), ..Launch::for_machine(crate::machine::find("pi4").unwrap()) };
        let a = args(&cfg, 2 << 30, Path::new("l.img"), "chardev:serial0");
        let ports: Vec<&str> = a.windows(2).filter(|w| w[0] == "-serial").map(|w| w[1].as_str()).collect();
        assert_eq!(ports, ["null", "chardev:serial0"], "the mini UART is the second port");
        let after = |f: &str| a.iter().position(|x| x == f).map(|i| a[i + 1].as_str());
        assert_eq!(after("-M"), Some("raspi4b"));
        assert_eq!(after("-dtb"), Some("pi4.dtb"));
    }
}
