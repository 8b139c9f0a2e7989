//! `cargo xtask chainboot`: the host side of the serial chainloader (protocol in
//! `lib/chainboot`, loader in `chainloader/`). It waits for the loader's `ready`, sends the
//! hypervisor and the kernel with a progress line, and then shows the board's console until the
//! run's final `@@exit CODE` line, whose code becomes its own exit status.
//!
//! [`qemu`] runs the same loader in QEMU (its UART on a unix socket), so all of it can be tried without a board.

pub mod link;
pub mod qemu;

use anyhow::{bail, Context, Result};
use chainboot::{crc32, Header, Status};
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub use link::Link;

/// What is sent.
#[derive(Debug, Clone)]
pub struct Payload {
    /// The hypervisor Image.
    pub hypervisor: Vec<u8>,
    /// The kernel Image (the hypervisor's initrd).
    pub kernel: Vec<u8>,
    /// Boot arguments for `/chosen/bootargs` (empty: keep the firmware's).
    pub bootargs: String,
    /// Send the Images DEFLATE-compressed (about half the bytes).
    pub compress: bool,
}

/// What goes on the wire for one transfer.
#[derive(Debug, Clone)]
pub struct Wire {
    /// The header.
    pub header: Header,
    /// Hypervisor bytes as sent.
    pub hypervisor: Vec<u8>,
    /// Kernel bytes as sent.
    pub kernel: Vec<u8>,
}

impl Payload {
    /// The header and the bytes to send.
    pub fn wire(&self) -> Result<Wire> {
        let mut header = self.header()?;
        let (hypervisor, kernel) = if self.compress {
            let deflate = |b: &[u8]| miniz_oxide::deflate::compress_to_vec(b, 9);
            (deflate(&self.hypervisor), deflate(&self.kernel))
        } else {
            (self.hypervisor.clone(), self.kernel.clone())
        };
        header.hyp_wire_len = u32::try_from(hypervisor.len())?;
        header.kernel_wire_len = u32::try_from(kernel.len())?;
        Ok(Wire { header, hypervisor, kernel })
    }

    /// The transfer header (wire lengths as if uncompressed), with the hypervisor's placement
    /// taken from its Image header.
    pub fn header(&self) -> Result<Header> {
        let h = abi::image::ImageHeader::parse(&self.hypervisor)
            .map_err(|e| anyhow::anyhow!("the hypervisor is not an arm64 Image: {e}"))?;
        abi::image::ImageHeader::parse(&self.kernel)
            .map_err(|e| anyhow::anyhow!("the kernel is not an arm64 Image: {e}"))?;
        let len = |what: &str, n: usize| u32::try_from(n).with_context(|| format!("the {what} is larger than 4 GiB"));
        Ok(Header {
            flags: if self.compress { chainboot::FLAG_DEFLATE } else { 0 },
            hyp_len: len("hypervisor", self.hypervisor.len())?,
            hyp_wire_len: len("hypervisor", self.hypervisor.len())?,
            kernel_wire_len: len("kernel", self.kernel.len())?,
            hyp_text_offset: u32::try_from(h.text_offset)?,
            hyp_image_size: u32::try_from(h.image_size).context("hypervisor image_size above 4 GiB")?,
            hyp_crc: crc32(&self.hypervisor),
            kernel_len: len("kernel", self.kernel.len())?,
            kernel_crc: crc32(&self.kernel),
            args_len: len("boot arguments", self.bootargs.len())?,
            args_crc: crc32(self.bootargs.as_bytes()),
        })
    }
}

/// Damage done on purpose after the checksums were computed (to show the loader refusing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tamper {
    /// Send the kernel with byte N (of what goes on the wire) inverted.
    FlipKernelByte(usize),
    /// Stop after N payload bytes, as a host that died would.
    StopAfter(u64),
}

/// How a transfer ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Sent {
    /// The loader checked everything and jumped.
    Booted {
        /// Payload bytes (arguments + hypervisor + kernel).
        bytes: u64,
        /// From the first payload byte written to the loader's `boot` line.
        elapsed: Duration,
        /// The hypervisor's entry point.
        entry: u64,
    },
    /// The loader refused (header, placement, checksum, Image): nothing was started.
    Refused(String),
    /// The loader stopped waiting for bytes.
    TimedOut {
        /// Bytes it got.
        received: u64,
        /// Bytes announced.
        total: u64,
    },
}

impl Sent {
    /// Payload bytes per second, for a boot.
    pub fn rate(&self) -> Option<f64> {
        match self {
            Sent::Booted { bytes, elapsed, .. } => Some(*bytes as f64 / elapsed.as_secs_f64().max(1e-9)),
            _ => None,
        }
    }
}

/// How the console part ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsoleEnd {
    /// The run's final line, with its code.
    Exit(u32),
    /// The line closed (the board or QEMU went away) without a final line.
    Closed,
    /// Nothing final within the time limit.
    TimedOut,
}

/// A conversation with the loader and then the board, over one [`Link`].
pub struct Session {
    lines: Receiver<String>,
    writer: Box<dyn Write + Send>,
    echo: Box<dyn FnMut(&str) + Send>,
    progress: bool,
    /// Every line received so far (status lines included).
    pub log: Vec<String>,
}

impl Session {
    /// Starts reading the link; each line from the board goes through `echo` (and into
    /// [`Session::log`]). `progress` draws a progress line on stderr while sending.
    pub fn new(link: Link, echo: impl FnMut(&str) + Send + 'static, progress: bool) -> Session {
        let (tx, rx) = mpsc::channel();
        let reader = link.reader;
        std::thread::spawn(move || {
            let mut r = BufReader::new(reader);
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).map(|n| n > 0).unwrap_or(false) {
                let line = String::from_utf8_lossy(&buf).trim_end_matches(['\r', '\n']).to_string();
                if tx.send(line).is_err() {
                    break;
                }
                buf.clear();
            }
        });
        Session { lines: rx, writer: link.writer, echo: Box::new(echo), progress, log: Vec::new() }
    }

    /// The next line, echoed and logged; `Ok(None)` at the deadline, `Err` when the line closed.
    fn next_line(&mut self, deadline: Option<Instant>) -> Result<Option<String>, ()> {
        let got = match deadline {
            None => self.lines.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => self.lines.recv_timeout(d.saturating_duration_since(Instant::now())),
        };
        match got {
            Ok(line) => {
                (self.echo)(&line);
                self.log.push(line.clone());
                Ok(Some(line))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(()),
        }
    }

    /// Waits for the loader's `ready` line; returns the RAM it reports, in MiB.
    pub fn wait_ready(&mut self, timeout: Option<Duration>) -> Result<u64> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            match self.next_line(deadline) {
                Ok(Some(line)) => match Status::parse(&line) {
                    Some(Status::Ready { version, ram_mib }) if version == chainboot::VERSION => return Ok(ram_mib),
                    Some(Status::Ready { version, .. }) => bail!(
                        "the loader on the board speaks protocol v{version}, this xtask v{}: write the new one to the card (cargo xtask flash --chainloader)",
                        chainboot::VERSION
                    ),
                    _ => {}
                },
                Ok(None) => bail!("no `ready` from the loader within {:?}: is the board on, with the loader on its card?", timeout.unwrap_or_default()),
                Err(()) => bail!("the serial line closed before the loader said `ready`"),
            }
        }
    }

    /// Sends one transfer after `ready` and waits for the verdict.
    pub fn send(&mut self, p: &Payload, tamper: Option<Tamper>) -> Result<Sent> {
        let Wire { header, hypervisor, mut kernel } = p.wire()?;
        self.writer.write_all(&header.encode())?;
        self.writer.flush()?;
        let deadline = Some(Instant::now() + Duration::from_secs(10));
        loop {
            let Ok(Some(line)) = self.next_line(deadline) else {
                bail!("the loader did not answer the header within 10 s");
            };
            match Status::parse(&line) {
                Some(Status::Accept { .. }) => break,
                Some(Status::Refuse(why)) => return Ok(Sent::Refused(why.to_string())),
                Some(Status::Timeout { received, total }) => return Ok(Sent::TimedOut { received, total }),
                _ => {}
            }
        }
        if let Some(Tamper::FlipKernelByte(i)) = tamper {
            let i = i.min(kernel.len() - 1);
            kernel[i] = !kernel[i];
        }
        let parts: [&[u8]; 3] = [p.bootargs.as_bytes(), &hypervisor, &kernel];
        let total = header.payload_len();
        let stop = match tamper {
            Some(Tamper::StopAfter(n)) => n.min(total),
            _ => total,
        };
        let start = Instant::now();
        let mut sent = 0u64;
        let mut shown = start;
        for part in parts {
            for chunk in part.chunks(1024) {
                let chunk = &chunk[..chunk.len().min((stop - sent) as usize)];
                self.writer.write_all(chunk).context("writing to the serial line")?;
                sent += chunk.len() as u64;
                if self.progress && (shown.elapsed() > Duration::from_millis(200) || sent == total) {
                    shown = Instant::now();
                    let secs = start.elapsed().as_secs_f64().max(1e-3);
                    eprint!(
                        "\rxtask: sending {} KiB: {:3}%  {:.1} KiB/s  ",
                        total / 1024,
                        sent * 100 / total,
                        sent as f64 / 1024.0 / secs
                    );
                }
            }
        }
        self.writer.flush()?;
        if self.progress {
            eprintln!();
        }
        // The loader answers once the last byte is in and checked (or, after a stop, when it
        // gives up waiting); at 115200 baud a tty may still hold a few KiB when the last write
        // returns.
        let deadline = Some(Instant::now() + Duration::from_secs(30));
        loop {
            let Ok(Some(line)) = self.next_line(deadline) else {
                bail!("no verdict from the loader within 30 s of the last byte");
            };
            match Status::parse(&line) {
                Some(Status::Boot { entry, .. }) => {
                    return Ok(Sent::Booted { bytes: total, elapsed: start.elapsed(), entry });
                }
                Some(Status::Refuse(why)) => return Ok(Sent::Refused(why.to_string())),
                Some(Status::Timeout { received, total }) => return Ok(Sent::TimedOut { received, total }),
                _ => {}
            }
        }
    }

    /// Shows the board's console until the run's final line (its code), the line closing, or
    /// the time limit. With the run's `key` (given to the hypervisor as `hyp.key=`) only a final
    /// line that carries it ends the run; a line without it (a guest's) is said to be ignored.
    pub fn console(&mut self, timeout: Option<Duration>, key: Option<u64>) -> ConsoleEnd {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            match self.next_line(deadline) {
                Ok(Some(line)) => match (abi::exit::parse_final(&line), key) {
                    (Some(f), Some(k)) if f.key == Some(k) => return ConsoleEnd::Exit(f.code),
                    (Some(_), Some(_)) => {
                        eprintln!(
                            "xtask: ignored: {:?} is not this run's final line (without the run's key)",
                            line.trim()
                        )
                    }
                    (Some(f), None) => return ConsoleEnd::Exit(f.code),
                    (None, _) => {}
                },
                Ok(None) => return ConsoleEnd::TimedOut,
                Err(()) => return ConsoleEnd::Closed,
            }
        }
    }
}

/// One line describing a transfer rate against what the line could carry (8N1: 10 bits a byte).
pub fn rate_line(sent: &Sent, baud: u32, emulated: bool) -> String {
    let Some(rate) = sent.rate() else { return String::from("no transfer") };
    let Sent::Booted { bytes, elapsed, .. } = sent else { unreachable!() };
    let line = f64::from(baud) / 10.0;
    let mut s = format!(
        "{} KiB in {:.2} s: {:.1} KiB/s ({:.0}% of a {baud} baud line's {:.1} KiB/s)",
        bytes / 1024,
        elapsed.as_secs_f64(),
        rate / 1024.0,
        rate / line * 100.0,
        line / 1024.0
    );
    if emulated {
        s.push_str("; QEMU's UART ignores the baud rate, so this is the emulator's speed");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(len: usize, image_size: u64) -> Vec<u8> {
        let mut v = vec![0u8; len];
        v[0x38..0x3c].copy_from_slice(&abi::image::MAGIC.to_le_bytes());
        v[24..32].copy_from_slice(&(abi::image::FLAG_PAGE_4K | abi::image::FLAG_ANYWHERE).to_le_bytes());
        abi::image::ImageHeader::patch(&mut v, image_size).unwrap();
        v
    }

    #[test]
    fn header_describes_the_payload() {
        let p = Payload {
            hypervisor: image(4096, 0x10_0000),
            kernel: image(8192, 0x2_0000),
            bootargs: "a b".into(),
            compress: false,
        };
        let h = p.header().unwrap();
        assert_eq!((h.hyp_len, h.hyp_image_size, h.hyp_text_offset), (4096, 0x10_0000, 0));
        assert_eq!((h.kernel_len, h.args_len), (8192, 3));
        assert_eq!(h.kernel_crc, crc32(&p.kernel));
        assert_eq!(Header::decode(&h.encode()), Ok(h));
        let w = p.wire().unwrap();
        assert_eq!((w.header.hyp_wire_len, w.header.kernel_wire_len), (4096, 8192));
        assert_eq!(w.kernel, p.kernel);
        let bad = Payload { kernel: vec![0; 100], ..p.clone() };
        assert!(bad.header().unwrap_err().to_string().contains("kernel is not an arm64 Image"));
        // Compressed: the CRCs still cover the files, the wire lengths are the streams'.
        let c = Payload { compress: true, ..p.clone() };
        let w = c.wire().unwrap();
        assert!(w.header.compressed() && w.header.kernel_wire_len < 8192);
        assert_eq!(w.header.kernel_crc, crc32(&p.kernel));
        assert_eq!(miniz_oxide::inflate::decompress_to_vec(&w.kernel).unwrap(), p.kernel);
        assert_eq!(Header::decode(&w.header.encode()), Ok(w.header));
    }

    #[test]
    fn console_ends_at_the_final_line_with_its_code() {
        let (mut master, name) = link::pty();
        let mut s = Session::new(link::open(&name, 115_200).unwrap(), |_| {}, false);
        master
            .write_all(b"hyp: something\r\n@@exit 2 (success)\r\nkernel: PANIC\r\n@@exit 2 (guest panic)\r\nafter\r\n")
            .unwrap();
        assert_eq!(s.console(Some(Duration::from_secs(10)), None), ConsoleEnd::Exit(2));
        assert_eq!(s.log.len(), 4, "a line whose meaning does not match its code is not final: {:?}", s.log);
        assert_eq!(s.console(Some(Duration::from_millis(300)), None), ConsoleEnd::TimedOut);
        // With the run's key, only the line that carries it ends the run.
        let keyed = abi::exit::KeyedFinalLine { code: 1, key: 0x1234 };
        master.write_all(format!("@@exit 0 (success)\r\n{keyed}\r\n").as_bytes()).unwrap();
        assert_eq!(s.console(Some(Duration::from_secs(10)), Some(0x1234)), ConsoleEnd::Exit(1));
    }

    /// `wait_ready` waits up to its limit for a `ready` that comes late (the loader repeats it
    /// about once a second), takes the RAM it reports, and says "no ready" only once the limit
    /// has passed. The line comes 300 ms after the wait starts; the limit is 30 s, so a loaded
    /// machine cannot make it late.
    #[test]
    fn a_late_ready_is_waited_for_until_the_limit() {
        let (mut master, name) = link::pty();
        let mut s = Session::new(link::open(&name, 115_200).unwrap(), |_| {}, false);
        let ready = format!("{}\r\n", Status::Ready { version: chainboot::VERSION, ram_mib: 1024 });
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            master.write_all(ready.as_bytes()).unwrap();
            master
        });
        assert_eq!(s.wait_ready(Some(Duration::from_secs(30))).unwrap(), 1024);
        let _master = writer.join().unwrap();
        let started = Instant::now();
        let e = s.wait_ready(Some(Duration::from_millis(200))).unwrap_err().to_string();
        assert!(e.contains("no `ready` from the loader within 200ms"), "{e}");
        assert!(started.elapsed() >= Duration::from_millis(200), "gave up before its limit");
    }

    #[test]
    fn rate_line_compares_with_the_line() {
        let s = Sent::Booted { bytes: 11_520, elapsed: Duration::from_secs(1), entry: 0 };
        let l = rate_line(&s, 115_200, false);
        assert!(l.contains("11.2 KiB/s (100% of a 115200 baud line"), "{l}");
        assert!(rate_line(&s, 115_200, true).contains("ignores the baud rate"));
        assert_eq!(rate_line(&Sent::Refused("x".into()), 115_200, false), "no transfer");
    }
}

/// `cargo xtask chainboot` options.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The board's serial line: a tty (`/dev/ttyUSB0`) or `unix:PATH` (a socket chardev).
    #[arg(long, required_unless_present = "qemu", conflicts_with = "qemu")]
    pub serial: Option<String>,
    /// Baud rate of the tty: the rate the firmware set the board's UART to (config.txt
    /// `init_uart_baud`, 115200 by default).
    #[arg(long, default_value_t = 115_200, value_parser = link::baud_arg)]
    pub baud: u32,
    /// Run the loader in QEMU (its UART on a unix socket) instead of a board; the machine flags
    /// below say which (default: virt with the Pi 5's core, cortex-a76, and a GICv2).
    #[arg(long)]
    pub qemu: bool,
    /// With --qemu: the machine, `virt` or a board's QEMU model (pi4, zcu102, imx8mp-evk) with
    /// the board's own DTB, the loader on the UART its stdout-path names.
    #[command(flatten)]
    pub machine: crate::run::MachineArgs,
    /// With --qemu: the emulated board's RAM, as a board has it (default 1G on virt, the most a
    /// board's model holds): the loader places what it receives as a board's loader does, and
    /// the hypervisor gives the guest what it leaves (its boot line says how much).
    #[arg(long, value_parser = crate::run::size_arg)]
    pub ram: Option<crate::machine::Size>,
    /// Kernel command line written into the DTB's /chosen/bootargs (words starting with `hyp.`
    /// go to the hypervisor); empty keeps the firmware's (cmdline.txt).
    #[arg(long, default_value = "")]
    pub bootargs: String,
    /// Seconds to wait for the loader's `ready` (0: forever; default 0 on a board, 30 with --qemu).
    #[arg(long, value_parser = crate::timeout_secs)]
    pub ready_timeout: Option<u64>,
    /// Seconds to show the console before giving up on the run's final line (0: forever).
    #[arg(long, default_value_t = 0, value_parser = crate::timeout_secs)]
    pub timeout: u64,
    /// Send the Images as they are instead of DEFLATE-compressed (twice the bytes).
    #[arg(long)]
    pub no_compress: bool,
    /// First send the kernel with byte N inverted, to see the loader refuse it, then send it
    /// right.
    #[arg(long, hide = true)]
    pub corrupt_kernel_byte: Option<usize>,
}

/// The machine for `--qemu`: `virt` with the Pi 5's core and GIC by default, or a board's
/// model with its DTB; what the user gave is checked against the board. Machine flags without
/// `--qemu` are refused: a board is what it is.
pub fn qemu_config(a: &Args) -> Result<crate::launch::Launch> {
    if !a.qemu {
        if a.machine.any() || a.ram.is_some() {
            return crate::error::refuse(
                "--board, --accel, --cpu, --gic, --smp and --ram describe the QEMU machine of --qemu; a real board \
                 on --serial is what it is: give --qemu, or leave them out",
            );
        }
        return crate::error::refuse("no machine without --qemu");
    }
    let mut cfg = a.machine.launch()?;
    if cfg.accel.runs != crate::machine::accel::Runs::Here {
        return crate::error::refuse(format!(
            "--accel {}: the chainloader's UART is a pty of a QEMU on this host, which the KVM host model cannot \
             give: use --accel tcg (or kvm on an arm64 host)",
            cfg.accel
        ));
    }
    if a.machine.board.is_none() {
        // The Pi 5's core and GIC on virt, unless asked otherwise.
        cfg.cpu = a.machine.cpu.clone().unwrap_or_else(|| "cortex-a76".into());
        cfg.gic = a.machine.gic.unwrap_or(2);
    }
    cfg.resolve_dtb()?;
    cfg.validate()?;
    Ok(cfg)
}

/// The emulated board's RAM: `ram`, or 1 GiB on a model whose RAM is chosen and has that
/// default, else all the model holds; refused when the model cannot have it.
pub fn board_ram(cfg: &crate::launch::Launch, ram: Option<crate::machine::Size>) -> Result<u64> {
    use crate::machine::RamSize;
    let model = cfg.model();
    let bytes = match (ram, model.ram.size) {
        (Some(r), RamSize::UpTo(max)) if r.bytes() > max => {
            return crate::error::refuse(format!("--ram {r}: --board {} takes at most {} MiB", cfg.machine, max >> 20))
        }
        (Some(r), RamSize::Fixed { total, .. }) if r.bytes() != total => {
            return crate::error::refuse(format!(
                "--ram {r}: --board {} always has {} MiB of RAM: leave --ram out",
                cfg.machine,
                total >> 20
            ))
        }
        (Some(r), _) => r.bytes(),
        (None, _) => model.ram.default_guest.map_or(model.ram.max(), crate::machine::Size::bytes),
    };
    Ok(bytes)
}

fn secs(s: u64) -> Option<Duration> {
    (s != 0).then(|| Duration::from_secs(s))
}

/// Runs `cargo xtask chainboot`; returns the run's exit code.
pub fn cli(a: Args) -> Result<i32> {
    if (a.machine.any() || a.ram.is_some()) && !a.qemu {
        qemu_config(&a)?;
    }
    let tc = crate::provision::toolchain::find()?;
    let images = crate::build::build(&tc, &[])?;
    crate::launch::check_line("--bootargs", &a.bootargs)?;
    crate::launch::check_bootargs(&a.bootargs, u32::MAX)?;
    // The run's key goes with the command line: always on QEMU; on a board only when a command
    // line is sent at all (an empty one keeps the firmware's cmdline.txt, and the run's final
    // line is then unverified).
    let key = (a.qemu || !a.bootargs.trim().is_empty()).then(crate::launch::new_key).transpose()?;
    let bootargs = match key {
        Some(k) => crate::launch::join(&[&a.bootargs, &format!("{}={k:#x}", hypcore::options::KEY)]),
        None => a.bootargs.clone(),
    };
    let payload = Payload {
        hypervisor: std::fs::read(&images.hypervisor)?,
        kernel: std::fs::read(&images.kernel)?,
        bootargs,
        compress: !a.no_compress,
    };
    let mut vm = None;
    let (link, ready_timeout) = if a.qemu {
        let mut cfg = qemu_config(&a)?;
        let ram = board_ram(&cfg, a.ram)?;
        // The machine's description names the size it runs with, given or not.
        cfg.mem = crate::machine::Size::from_bytes(ram);
        if !cfg.accel.tcg {
            crate::supervise::kvm::check_host(&cfg.machine_args(ram, cfg.model().min_qemu))?;
        }
        eprintln!(
            "xtask: the emulated board has {} MiB of RAM ({}); the guest gets what the hypervisor leaves",
            ram >> 20,
            if a.ram.is_some() { "--ram" } else { "the default; --ram sets it" }
        );
        let mut v = qemu::start(&cfg.qemu()?.path, &cfg, ram, &crate::build::chainloader_image())?;
        eprintln!("xtask: QEMU ({}) runs the chainloader with its UART on {}", cfg.describe(), v.socket.display());
        let link = v.link()?;
        vm = Some(v);
        (link, secs(a.ready_timeout.unwrap_or(30)))
    } else {
        let spec = a.serial.as_deref().unwrap_or_default();
        (link::open(spec, a.baud)?, secs(a.ready_timeout.unwrap_or(0)))
    };
    eprintln!("xtask: waiting for the chainloader on {} (power on or reset the board)", link.describe);
    let mut s = Session::new(link, crate::supervise::echo_stdout, true);
    let ram = s.wait_ready(ready_timeout)?;
    eprintln!("xtask: the loader is ready ({ram} MiB of RAM)");
    if let Some(n) = a.corrupt_kernel_byte {
        match s.send(&payload, Some(Tamper::FlipKernelByte(n)))? {
            Sent::Refused(why) => eprintln!("xtask: as it should, the loader refused the damaged kernel: {why}"),
            other => bail!("the loader did not refuse a kernel with byte {n} inverted: {other:?}"),
        }
        s.wait_ready(secs(10))?;
    }
    let sent = s.send(&payload, None)?;
    match &sent {
        Sent::Booted { .. } => eprintln!("xtask: sent {}", rate_line(&sent, a.baud, a.qemu)),
        Sent::Refused(why) => bail!("the loader refused the transfer: {why}"),
        Sent::TimedOut { received, total } => bail!("the loader timed out after {received} of {total} bytes"),
    }
    match s.console(secs(a.timeout), key) {
        ConsoleEnd::Exit(code) => {
            eprintln!("xtask: the run ended with exit code {code} ({})", abi::exit::describe(code as i32));
            if let Some(mut v) = vm {
                // The run powers off (or resets: -no-reboot) right after its final line.
                let status = v.child.wait()?;
                if !status.success() {
                    bail!("QEMU exited with {status} after the run's final line (said {code})");
                }
            }
            Ok(code as i32)
        }
        ConsoleEnd::Closed => bail!("the serial line closed before the run's final @@exit line"),
        ConsoleEnd::TimedOut => bail!("no final @@exit line within {} s", a.timeout),
    }
}

/// `cargo xtask console` options.
#[derive(clap::Args, Debug)]
pub struct ConsoleArgs {
    /// The board's serial line: a tty (`/dev/ttyUSB0`) or `unix:PATH`.
    #[arg(long)]
    pub serial: String,
    /// Baud rate of the tty.
    #[arg(long, default_value_t = 115_200, value_parser = link::baud_arg)]
    pub baud: u32,
    /// Seconds to wait for the run's final line (0: forever).
    #[arg(long, default_value_t = 0, value_parser = crate::timeout_secs)]
    pub timeout: u64,
}

/// `cargo xtask console`: the board's console until the run's final `@@exit` line; returns its
/// code.
pub fn console_cli(a: ConsoleArgs) -> Result<i32> {
    let link = link::open(&a.serial, a.baud)?;
    eprintln!("xtask: console on {} until the run's final @@exit line (Ctrl-C to leave)", link.describe);
    let mut s = Session::new(link, crate::supervise::echo_stdout, false);
    match s.console(secs(a.timeout), None) {
        ConsoleEnd::Exit(code) => {
            eprintln!(
                "xtask: the run ended with exit code {code} ({}; unverified: this console knows no run key)",
                abi::exit::describe(code as i32)
            );
            Ok(code as i32)
        }
        ConsoleEnd::Closed => bail!("the serial line closed before the run's final @@exit line"),
        ConsoleEnd::TimedOut => bail!("no final @@exit line within {} s", a.timeout),
    }
}
