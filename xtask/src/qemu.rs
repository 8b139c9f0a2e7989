//! QEMU command lines and supervised runs.
//!
//! Both binaries are arm64 Images, so QEMU hands each x0 = DTB: the hypervisor is the `-kernel`
//! and the guest kernel the `-initrd` (the hypervisor loads it at EL1 with the Linux boot
//! protocol); with `--no-hypervisor` the kernel is the `-kernel` and starts at EL1 itself.
//!
//! No guest gets a path to the host: QEMU semihosting (`hlt #0xf000`, served by QEMU itself at
//! EL1 and EL2 before any trap: the host's files and shell) is never turned on, whatever runs. A
//! run ends as on a board: the final line `@@exit CODE (meaning)` on the console, then PSCI
//! SYSTEM_OFF or SYSTEM_RESET to QEMU's own firmware, which ends the process (`-no-reboot`:
//! a reset ends it too). The code comes from that line ([`crate::outcome::judge`]).
//!
//! Any other guest ([`Guest`]: a kernel, an initramfs, a command line) travels to the hypervisor
//! as one guest bundle (`abi::bundle`) in the `-initrd` slot, written under `target/guest/`
//! before QEMU starts; without the hypervisor QEMU boots it directly (`-kernel`, `-initrd`,
//! `-append`).

use crate::board::{Board, Smp};
use crate::build::Images;
use anyhow::{Context, Result};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
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
    /// Wait for gdb on `127.0.0.1:gdb_port` (localhost only) before the first instruction.
    pub gdb: bool,
    /// TCP port for `gdb` (default 1234).
    pub gdb_port: u16,
    /// Boot the kernel alone at EL1, no hypervisor.
    pub no_hypervisor: bool,
    /// Boot the kernel alone on a machine with virtualization=on: it starts at EL2 (and must
    /// refuse to run there).
    pub kernel_at_el2: bool,
    /// A file to give the hypervisor as the guest kernel instead of the built kernel Image.
    pub guest_image: Option<PathBuf>,
    /// A guest other than the project's kernel (`None`: the kernel).
    pub guest: Option<Guest>,
    /// `-M virt,mte=on`: memory tagging.
    pub mte: bool,
    /// `-plugin` argument (the instruction-counting plugin, see [`crate::plugin`]).
    pub plugin: Option<String>,
    /// `-singlestep`: one guest instruction per translation block. TCG takes interrupts only
    /// between blocks, so only then can the tick land between any two instructions (the
    /// per-CPU stress test needs it to preempt a read-modify-write in its middle). Slow.
    pub singlestep: bool,
    /// The machine: `virt` or a board model (`crate::board`).
    pub board: Board,
    /// The board's DTB file (`-dtb`), resolved by [`QemuConfig::resolve_dtb`]; `None` on
    /// `virt` (QEMU writes its DTB).
    pub dtb: Option<PathBuf>,
}

/// A guest kernel with its initramfs and command line (`cargo xtask run --guest …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guest {
    /// An arm64 Image or a raw binary.
    pub kernel: PathBuf,
    /// The initramfs, if any.
    pub initrd: Option<PathBuf>,
    /// The guest's command line.
    pub append: String,
}

impl Guest {
    /// Where its bundle goes: named by what it holds (paths, sizes, modification times, command
    /// line), so runs in parallel with different guests never share a file.
    pub fn bundle_path(&self) -> PathBuf {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for p in std::iter::once(&self.kernel).chain(self.initrd.iter()) {
            p.hash(&mut h);
            if let Ok(m) = std::fs::metadata(p) {
                m.len().hash(&mut h);
                m.modified().ok().hash(&mut h);
            }
        }
        self.append.hash(&mut h);
        crate::workspace_root().join("target/guest").join(format!("bundle-{:016x}.img", h.finish()))
    }

    /// Writes the bundle (kernel, initramfs, command line) the hypervisor unpacks.
    pub fn write_bundle(&self) -> Result<PathBuf> {
        let path = self.bundle_path();
        if path.is_file() {
            return Ok(path);
        }
        let kernel = std::fs::read(&self.kernel)
            .with_context(|| format!("reading the guest kernel {}", self.kernel.display()))?;
        let initrd = match &self.initrd {
            Some(p) => Some(std::fs::read(p).with_context(|| format!("reading the guest initramfs {}", p.display()))?),
            None => None,
        };
        let append = (!self.append.is_empty()).then_some(self.append.as_str());
        let b =
            abi::bundle::write(&kernel, initrd.as_deref(), append).map_err(|e| anyhow::anyhow!("guest bundle: {e}"))?;
        std::fs::create_dir_all(path.parent().unwrap())?;
        crate::write_if_changed(&path, &b)?;
        Ok(path)
    }
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
            gdb_port: 1234,
            no_hypervisor: false,
            kernel_at_el2: false,
            guest_image: None,
            guest: None,
            mte: false,
            plugin: None,
            singlestep: false,
            board: Board::Virt,
            dtb: None,
        }
    }
}

impl QemuConfig {
    /// The file QEMU loads as the hypervisor's initrd: the guest bundle (written here if it is
    /// not yet), the `--guest` Image, or the kernel; `None` without the hypervisor.
    fn hypervisor_initrd(&self, images: &Images) -> Result<Option<PathBuf>, String> {
        if self.no_hypervisor || self.kernel_at_el2 {
            return Ok(None);
        }
        Ok(Some(match &self.guest {
            Some(g) => g.write_bundle().map_err(|e| format!("{e:#}"))?,
            None => self.guest_image.clone().unwrap_or_else(|| images.kernel.clone()),
        }))
    }

    /// The RAM QEMU gets: `--mem`, plus the hypervisor's share when it runs
    /// ([`crate::share`]).
    pub fn machine_mem(&self, images: &Images) -> Result<crate::share::MachineMem, String> {
        let initrd = self.hypervisor_initrd(images)?;
        crate::share::machine_mem(self, images, initrd.as_deref().unwrap_or(Path::new("")))
    }

    /// The full QEMU argument list for these images; `Err` (a usage error) when no machine
    /// gives the guest `--mem` exactly.
    pub fn args(&self, images: &Images) -> Result<Vec<String>, String> {
        let mem = self.machine_mem(images)?;
        let mut a = self.machine_args_with(mem.total);
        a.extend(self.board.console_args());
        // A reset ends QEMU (the run's code is in its final line): no second boot.
        a.push("-no-reboot".into());
        if let Some(d) = &self.dtb {
            a.extend(["-dtb".into(), d.display().to_string()]);
        }
        // Under the hypervisor the guest gets exactly --mem (hyp.guest-mem), the rest is its.
        // Last: after a boot loader's words and their `pgtlab` marker, if the user gave some.
        let mut append = if mem.total != mem.guest {
            let w = format!("{}={}M", hypcore::options::GUEST_MEM, mem.guest >> 20);
            [self.bootargs.as_str(), w.as_str()].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join(" ")
        } else {
            self.bootargs.clone()
        };
        match (&self.guest, self.no_hypervisor || self.kernel_at_el2) {
            (Some(g), true) if self.no_hypervisor => {
                a.extend(["-kernel".into(), g.kernel.display().to_string()]);
                if let Some(i) = &g.initrd {
                    a.extend(["-initrd".into(), i.display().to_string()]);
                }
                // Alone, the guest itself must print the run's final line: the project's Linux
                // init does when it finds this word (`crate::linux::init_script`).
                append = [g.append.as_str(), self.bootargs.as_str(), crate::linux::ALONE_WORD]
                    .iter()
                    .filter(|s| !s.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            (_, true) => a.extend(["-kernel".into(), images.kernel.display().to_string()]),
            (Some(g), false) => {
                a.extend(["-kernel".into(), images.hypervisor.display().to_string()]);
                a.extend(["-initrd".into(), g.bundle_path().display().to_string()]);
            }
            (None, false) => {
                a.extend(["-kernel".into(), images.hypervisor.display().to_string()]);
                let guest = self.guest_image.as_ref().unwrap_or(&images.kernel);
                a.extend(["-initrd".into(), guest.display().to_string()]);
            }
        }
        if let (Smp::UpTo(dtb_cpus), false) = (self.board.smp(), self.no_hypervisor) {
            if self.board != Board::Virt && self.smp < dtb_cpus && !append.contains("hyp.cpus=") {
                // The board's DTB lists all its CPUs, QEMU makes only --smp of them: the
                // hypervisor gives the guest those (firmware would have trimmed the DTB).
                append = format!("hyp.cpus={} {append}", self.smp).trim_end().to_string();
            }
        }
        if append.is_empty() && self.board != Board::Virt && !self.no_hypervisor {
            // QEMU keeps the board DTB's own /chosen/bootargs (the ZCU102's "earlycon") unless
            // -append replaces them; those are not ours to check: end them with the marker.
            append = "pgtlab".into();
        }
        if !append.is_empty() {
            a.extend(["-append".into(), append]);
        }
        if self.gdb {
            // Localhost only: `-s` would listen on every interface.
            a.extend(["-gdb".into(), format!("tcp:127.0.0.1:{}", self.gdb_port), "-S".into()]);
        }
        Ok(a)
    }

    /// The machine alone: board, CPU, CPU count, `--mem` and `-icount` (no images, no console):
    /// the machine plain QEMU gives a guest of `--mem`.
    pub fn machine_args(&self) -> Vec<String> {
        self.machine_args_with(parse_mem(&self.mem).unwrap_or(0))
    }

    /// [`Self::machine_args`] with `mem` bytes of RAM (`self.mem` as given if 0).
    fn machine_args_with(&self, mem: u64) -> Vec<String> {
        let virtualization = !self.no_hypervisor || self.kernel_at_el2;
        let mut a: Vec<String> = vec!["-M".into(), self.board.machine(self.gic, virtualization, self.mte)];
        if self.board.cpu().is_none() {
            a.extend(["-cpu".into(), self.cpu.clone()]);
        }
        if !matches!(self.board.smp(), Smp::Fixed(_)) {
            a.extend(["-smp".into(), self.smp.to_string()]);
        }
        // Normalised to MiB (QEMU reads a bare number as MiB, this project as bytes).
        a.extend(["-m".into(), if mem == 0 { self.mem.clone() } else { format!("{}M", mem >> 20) }]);
        if let Some(shift) = self.icount {
            a.extend(["-icount".into(), format!("shift={shift}")]);
        }
        if let Some(p) = &self.plugin {
            a.extend(["-plugin".into(), p.clone()]);
        }
        if self.singlestep {
            a.push("-singlestep".into());
        }
        a
    }

    /// Refuses what QEMU would misread or what cannot run this project: an unknown or
    /// AArch32-only CPU model (with the list of usable ones), a memory size that does not parse,
    /// is 0 or is not a whole number of MiB, no CPU.
    pub fn validate(&self) -> std::result::Result<(), String> {
        check_cpu(&self.cpu)?;
        let mem = parse_mem(&self.mem)?;
        crate::share::check_bootargs(&self.bootargs)?;
        if self.smp == 0 {
            return Err("--smp 0: at least one CPU".into());
        }
        if !matches!(self.gic, 2 | 3) {
            return Err(format!("--gic {}: 2 or 3", self.gic));
        }
        self.board.check(&self.cpu, self.gic, self.smp, mem, self.mte)?;
        if self.board != Board::Virt && self.dtb.is_none() {
            return Err(format!("--board {}: its device tree was not fetched (QemuConfig::resolve_dtb)", self.board));
        }
        Ok(())
    }

    /// The configuration for `board`: its own CPU model, GIC, RAM and (where the model fixes
    /// it) CPU count; what the user gives afterwards is checked against the board by
    /// [`QemuConfig::validate`].
    pub fn for_board(mut self, board: Board) -> Self {
        self.board = board;
        self.mem = board.default_mem().into();
        if let Some(c) = board.cpu() {
            self.cpu = c.into();
        }
        if let Some(g) = board.gic() {
            self.gic = g;
        }
        if let Smp::Fixed(n) = board.smp() {
            self.smp = n;
        }
        self
    }

    /// Fetches the board's DTB (once, cached: `crate::debian::file_from_kernel_package`).
    pub fn resolve_dtb(&mut self) -> Result<()> {
        if let Some(d) = self.board.dtb() {
            self.dtb = Some(crate::debian::file_from_kernel_package(d).with_context(|| {
                format!("--board {}: its device tree {d} from Debian's backports arm64 kernel", self.board)
            })?);
        }
        Ok(())
    }

    /// The QEMU this configuration needs: the system one, or a newer one for a board model
    /// (`crate::qemu_pkg`).
    pub fn qemu(&self) -> Result<PathBuf> {
        match self.board {
            Board::Virt => crate::system::qemu(),
            b => crate::qemu_pkg::qemu_at_least(b.min_qemu())
                .with_context(|| format!("--board {b} needs QEMU {}", b.min_qemu())),
        }
    }

    /// One line describing the machine, for test names and logs.
    pub fn describe(&self) -> String {
        format!(
            "{}cpu={} gic=v{} smp={} mem={}{}{}{}{}",
            if self.board == Board::Virt { String::new() } else { format!("board={} ", self.board) },
            self.cpu,
            self.gic,
            self.smp,
            self.mem,
            if self.mte { " mte" } else { "" },
            match &self.guest {
                Some(g) => format!(" guest={}", g.kernel.display()),
                None => String::new(),
            },
            match (self.no_hypervisor, self.kernel_at_el2, &self.guest_image) {
                (_, true, _) => " kernel-at-EL2".to_string(),
                (true, _, _) => " no-hypervisor".to_string(),
                (_, _, Some(g)) => format!(" guest={}", g.display()),
                _ => String::new(),
            },
            if self.bootargs.is_empty() { String::new() } else { format!(" bootargs=\"{}\"", self.bootargs) }
        )
    }
}

/// AArch64 CPU models of QEMU's `virt` board that run this project (EL2 and EL1 in AArch64),
/// with what sets them apart. `host` (KVM only) is not among them.
pub const CPUS: &[(&str, &str)] = &[
    ("max", "every feature QEMU emulates; FEAT_BBM level 2, allow-listed for BBML2"),
    ("cortex-a76", "the Raspberry Pi 5 core; no FEAT_BBM"),
    ("cortex-a72", "Raspberry Pi 4 core; no FEAT_BBM"),
    ("cortex-a57", "ARMv8.0; no FEAT_BBM"),
    ("cortex-a53", "ARMv8.0 in-order; no FEAT_BBM"),
    ("cortex-a35", "ARMv8.0 small core; no FEAT_BBM"),
    ("neoverse-n1", "ARMv8.2 server core; no FEAT_BBM"),
    ("a64fx", "Fujitsu A64FX, SVE; no FEAT_BBM"),
];

/// QEMU's ARM CPU models that have no AArch64 at all (QEMU 7.2's list): refused with their
/// own message rather than as unknown.
const AARCH32_ONLY: &[&str] = &[
    "arm1026",
    "arm1136",
    "arm1136-r2",
    "arm1176",
    "arm11mpcore",
    "arm926",
    "arm946",
    "cortex-a15",
    "cortex-a7",
    "cortex-a8",
    "cortex-a9",
    "cortex-m0",
    "cortex-m3",
    "cortex-m33",
    "cortex-m4",
    "cortex-m55",
    "cortex-m7",
    "cortex-r5",
    "cortex-r5f",
    "pxa250",
    "pxa255",
    "pxa260",
    "pxa261",
    "pxa262",
    "pxa270",
    "pxa270-a0",
    "pxa270-a1",
    "pxa270-b0",
    "pxa270-b1",
    "pxa270-c0",
    "pxa270-c5",
    "sa1100",
    "sa1110",
    "ti925t",
];

/// The usable CPU models, one per line, for messages.
pub fn cpu_list() -> String {
    CPUS.iter().map(|(n, d)| format!("  {n:<12} {d}")).collect::<Vec<_>>().join("\n")
}

/// `Ok` for a CPU model this project runs on; else a message with the usable ones.
pub fn check_cpu(cpu: &str) -> std::result::Result<(), String> {
    if CPUS.iter().any(|(n, _)| *n == cpu) {
        return Ok(());
    }
    let why = if AARCH32_ONLY.contains(&cpu) {
        format!("--cpu {cpu} is an AArch32-only CPU: the hypervisor and the kernel are AArch64 (EL2 and EL1)")
    } else if cpu == "host" {
        "--cpu host needs KVM on an arm64 host; this project runs under TCG".to_string()
    } else {
        format!("--cpu {cpu:?} is not a CPU model this project runs on")
    };
    Err(format!("{why}. Usable CPU models:\n{}", cpu_list()))
}

/// Bytes of a `--mem` size: a number with `K`, `M`, `G` or `T` (checked, no overflow), not 0,
/// a whole number of MiB. A bare number is refused (QEMU would read MiB, the boot arguments
/// bytes).
pub fn parse_mem(mem: &str) -> std::result::Result<u64, String> {
    if mem.bytes().last().is_some_and(|c| c.is_ascii_digit()) {
        return Err(format!("--mem {mem}: give a unit (K, M, G or T), e.g. {mem}M"));
    }
    let bytes = bootargs::parse_size(mem).map_err(|e| format!("--mem {mem:?}: {e}"))?;
    if bytes == 0 {
        return Err(format!("--mem {mem}: a machine needs some RAM (QEMU would silently use 128M)"));
    }
    if !bytes.is_multiple_of(1 << 20) {
        return Err(format!("--mem {mem}: not a whole number of MiB"));
    }
    Ok(bytes)
}

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
    pub ended: Option<crate::outcome::Ended>,
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
/// `progress` without output. A configuration [`QemuConfig::validate`] refuses is an error
/// (the caller's usage error), QEMU is not started.
pub fn run(
    qemu: &Path,
    cfg: &QemuConfig,
    images: &Images,
    timeout: Duration,
    progress: Option<Duration>,
    echo: impl FnMut(&str),
) -> Result<Outcome> {
    cfg.validate().map_err(|why| anyhow::Error::new(crate::outcome::Refused(why)))?;
    let args = cfg.args(images).map_err(|why| anyhow::Error::new(crate::outcome::Refused(why)))?;
    run_args(qemu, &args, timeout, progress, echo)
}

/// [`run`] with a complete argument list (not validated: the caller built it). QEMU runs
/// supervised ([`crate::signals::supervised`]: it dies with the xtask); the console is watched
/// ([`crate::outcome::Watch`]) and QEMU ended early when the run cannot end by itself: the
/// final line was followed by "nothing powers this machine off", or a guest kernel's panic or
/// Oops report is complete. A signal to the xtask ends QEMU at once.
pub fn run_args(
    qemu: &Path,
    args: &[String],
    timeout: Duration,
    progress: Option<Duration>,
    echo: impl FnMut(&str),
) -> Result<Outcome> {
    Ok(run_args_until(qemu, args, timeout, progress, echo, |_| false)?.0)
}

/// [`run_args`] that also ends QEMU (SIGKILL) as soon as a console line makes `stop` true:
/// for a guest that cannot power the machine off (Linux alone on a board without a
/// power-off it drives). Returns whether it stopped QEMU so (the outcome then has no exit
/// code: judging it is the caller's business).
pub fn run_args_until(
    qemu: &Path,
    args: &[String],
    timeout: Duration,
    progress: Option<Duration>,
    mut echo: impl FnMut(&str),
    mut stop: impl FnMut(&str) -> bool,
) -> Result<(Outcome, bool)> {
    let mut stopped = false;
    let start = Instant::now();
    // A QMP socket, to see where the vCPUs are if the run hits its time limit.
    let qmp = crate::qmp::socket_path();
    let mut cmd = Command::new(qemu);
    cmd.args(args).args(crate::qmp::qemu_args(&qmp));
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = crate::signals::supervised(&mut cmd).with_context(|| format!("starting {}", qemu.display()))?;
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
    let mut watch = crate::outcome::Watch::default();
    // The hypervisor's table of its CPUs' guest PCs (its `hyp_boot` record), for a time limit.
    let guest_pcs = std::cell::Cell::new(None);
    let mut take = |(line, is_err): (String, bool), echo: &mut dyn FnMut(&str), watch: &mut crate::outcome::Watch| {
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
            ended = Some(crate::outcome::Ended::Interrupted(sig));
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
        ended = Some(crate::outcome::Ended::Interrupted(sig));
    }
    for r in readers {
        let _ = r.join();
    }
    // Lines that arrived between the kill and the join.
    while let Ok(item) = rx.try_recv() {
        take(item, &mut echo, &mut watch);
    }
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
        },
        stopped,
    ))
}

/// QEMU's complaint about a module of the system's QEMU (another build) that it found while
/// looking for one the unpacked backports QEMU does not ship (`ui-opengl`, in
/// qemu-system-gui): harmless, left out of the output.
pub fn is_module_noise(line: &str) -> bool {
    (line.contains("failed to initialize module:") || line.contains("failed to open module:"))
        || line.trim() == "Only modules from the same build can be loaded."
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
            let v = crate::outcome::judge(&o);
            assert_eq!(v.code, exit::UNKNOWN_EXIT, "a final line saying {} ({}): {v}", c.code, c.name);
        }
    }

    #[test]
    fn cpu_models_aarch32_only_ones_are_refused_with_the_usable_list() {
        for (c, _) in CPUS {
            assert_eq!(check_cpu(c), Ok(()));
        }
        let e = check_cpu("cortex-a15").unwrap_err();
        assert!(e.starts_with("--cpu cortex-a15 is an AArch32-only CPU"), "{e}");
        assert!(e.contains("cortex-a76") && e.contains("neoverse-n1") && e.contains("a64fx"), "{e}");
        assert!(check_cpu("foo").unwrap_err().contains("is not a CPU model this project runs on"));
        assert!(check_cpu("host").unwrap_err().contains("KVM"));
        assert!(CPUS.iter().all(|(c, _)| !AARCH32_ONLY.contains(c)));
    }

    #[test]
    fn memory_sizes_need_a_unit_and_refuse_zero_and_overflow() {
        assert_eq!(parse_mem("1G"), Ok(1 << 30));
        assert_eq!(parse_mem("512M"), Ok(512 << 20));
        assert_eq!(parse_mem("16g"), Ok(16 << 30));
        assert!(parse_mem("0").unwrap_err().contains("give a unit"));
        assert!(parse_mem("0M").unwrap_err().contains("needs some RAM"));
        assert!(parse_mem("1024").unwrap_err().contains("give a unit"));
        assert!(parse_mem("abc").unwrap_err().contains("not a number"));
        assert!(parse_mem("1000K").unwrap_err().contains("whole number of MiB"));
        assert!(parse_mem("99999999999T").unwrap_err().contains("too large"));
        let cfg = QemuConfig { mem: "2048M".into(), no_hypervisor: true, ..QemuConfig::default() };
        assert_eq!(after(&cfg.args(&images()).unwrap(), "-m"), Some("2048M"));
        let four = QemuConfig { mem: "4G".into(), ..cfg.clone() };
        assert_eq!(after(&four.args(&images()).unwrap(), "-m"), Some("4096M"));
        // Under the hypervisor: --mem for the guest, told to the hypervisor, its share on top.
        let hyp = QemuConfig { no_hypervisor: false, ..four };
        let a = hyp.args(&images()).unwrap();
        let m = hyp.machine_mem(&images()).unwrap();
        assert_eq!(m.guest, 4 << 30);
        assert!(m.hypervisor() > 256 << 20 && m.hypervisor() < 300 << 20, "RAM/16 of frame pool: {m:?}");
        assert_eq!(after(&a, "-m"), Some(format!("{}M", m.total >> 20).as_str()));
        assert_eq!(after(&a, "-append"), Some("hyp.guest-mem=4096M"));
        assert!(QemuConfig { bootargs: "hyp.guest-mem=1G".into(), ..hyp }.validate().unwrap_err().contains("--mem"));
        assert!(QemuConfig { smp: 0, ..cfg.clone() }.validate().is_err());
        assert!(QemuConfig { cpu: "cortex-a7".into(), ..cfg }.validate().is_err());
    }

    /// Two Image files with this project's headers (a 4.8 MiB hypervisor, a 5.6 MiB kernel),
    /// written once (a guest bundle's name depends on its files' modification times).
    fn images() -> Images {
        static DIR: std::sync::OnceLock<(tempfile::TempDir, Images)> = std::sync::OnceLock::new();
        let (_, images) = DIR.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let image = |name: &str, image_size: u64| {
                let mut f = vec![0u8; 4096];
                f[16..24].copy_from_slice(&image_size.to_le_bytes());
                f[0x38..0x3c].copy_from_slice(b"ARM\x64");
                let p = dir.path().join(name);
                std::fs::write(&p, f).unwrap();
                p
            };
            std::fs::write(dir.path().join("rootfs.cpio"), [7u8; 1000]).unwrap();
            let images = Images {
                hypervisor: image("h.img", 0x4d_6000),
                kernel: image("k.img", 0x5a_7000),
                hypervisor_elf: "h".into(),
                kernel_elf: "k".into(),
            };
            (dir, images)
        });
        images.clone()
    }

    fn name(a: &[String], flag: &str) -> Option<String> {
        after(a, flag).map(|p| Path::new(p).file_name().unwrap().to_string_lossy().into_owned())
    }

    fn after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
        args.iter().position(|a| a == flag).map(|i| args[i + 1].as_str())
    }

    #[test]
    fn hypervisor_boot_passes_the_kernel_as_initrd_at_el2() {
        let a = QemuConfig::default().args(&images()).unwrap();
        assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,virtualization=on"));
        assert_eq!(name(&a, "-kernel").as_deref(), Some("h.img"));
        assert_eq!(name(&a, "-initrd").as_deref(), Some("k.img"));
        assert_eq!(after(&a, "-cpu"), Some("max"));
        assert_eq!(after(&a, "-smp"), Some("4"));
        // 1 GiB for the guest, 22 MiB for the hypervisor's region (image + 16 MiB of frames).
        assert_eq!(after(&a, "-m"), Some("1046M"));
        assert_eq!(after(&a, "-append"), Some("hyp.guest-mem=1024M"));
        assert_eq!(after(&a, "-semihosting-config"), None, "no guest gets the host's files and shell");
        assert!(a.iter().any(|x| x == "-no-reboot"), "a reset ends QEMU: the run's final line is out");
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
        let a = cfg.args(&images()).unwrap();
        assert_eq!(after(&a, "-M"), Some("virt,gic-version=2"));
        assert_eq!(after(&a, "-m"), Some("1024M"));
        assert_eq!(name(&a, "-kernel").as_deref(), Some("k.img"));
        assert_eq!(after(&a, "-initrd"), None);
        assert_eq!(after(&a, "-icount"), Some("shift=0"));
        assert_eq!(after(&a, "-append"), Some("a b"));
        // gdb on localhost only, never `-s` (every interface).
        assert_eq!(after(&a, "-gdb"), Some("tcp:127.0.0.1:1234"));
        assert!(a.contains(&"-S".to_string()) && !a.contains(&"-s".to_string()));
    }

    #[test]
    fn another_guest_travels_as_a_bundle_or_boots_alone() {
        let dir = images().kernel.parent().unwrap().to_path_buf();
        let guest =
            Guest { kernel: images().kernel, initrd: Some(dir.join("rootfs.cpio")), append: "console=ttyAMA0".into() };
        let cfg = QemuConfig {
            guest: Some(guest.clone()),
            bootargs: "hyp.on-fault=stop".into(),
            mte: true,
            ..Default::default()
        };
        let a = cfg.args(&images()).unwrap();
        assert_eq!(name(&a, "-kernel").as_deref(), Some("h.img"));
        let bundle = guest.bundle_path();
        assert_eq!(after(&a, "-initrd"), Some(bundle.to_str().unwrap()));
        assert!(bundle.starts_with(crate::workspace_root().join("target/guest")));
        assert!(bundle.is_file(), "written before QEMU's arguments are (their -m depends on its size)");
        assert_eq!(
            after(&a, "-append"),
            Some("hyp.on-fault=stop hyp.guest-mem=1024M"),
            "the bundle carries the guest's command line"
        );
        assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,virtualization=on,mte=on"));
        let plain = QemuConfig { no_hypervisor: true, ..cfg };
        let a = plain.args(&images()).unwrap();
        assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,mte=on"));
        assert_eq!(
            (name(&a, "-kernel").as_deref(), name(&a, "-initrd").as_deref()),
            (Some("k.img"), Some("rootfs.cpio"))
        );
        assert_eq!(after(&a, "-append"), Some("console=ttyAMA0 hyp.on-fault=stop pgtlab_alone=1"));
        let other = Guest { append: "quiet".into(), ..guest.clone() };
        assert_ne!(other.bundle_path(), guest.bundle_path(), "a different guest gets its own bundle file");
    }
}
