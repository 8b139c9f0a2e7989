//! What one boot is, as a typed spec ([`Launch`]), checked once ([`Launch::validate`]) and
//! turned once into QEMU's argument list ([`Launch::resolve`]), with the machine's RAM sized
//! on the way ([`mem`]).
//!
//! Both binaries are arm64 Images, so QEMU hands each x0 = DTB: the hypervisor is the `-kernel`
//! and the guest kernel the `-initrd` (the hypervisor loads it at EL1 with the Linux boot
//! protocol); with `--no-hypervisor` the kernel is the `-kernel` and starts at EL1 itself.
//!
//! No guest gets a path to the host: QEMU semihosting (`hlt #0xf000`, served by QEMU itself at
//! EL1 and EL2 before any trap: the host's files and shell) is never turned on, whatever runs,
//! and `--qemu-arg` refuses what would open one ([`qemu_arg`]). A run ends as on a board: the
//! final line `@@exit CODE (meaning)` on the console, then PSCI SYSTEM_OFF or SYSTEM_RESET to
//! QEMU's own firmware, which ends the process (`-no-reboot`: a reset ends it too).

pub mod guest;
pub mod mem;
pub mod qemu_arg;

pub use guest::Guest;
pub use mem::MachineMem;

use crate::build::Images;
use crate::error::Refused;
use crate::machine::{self, Accel, Machine, QemuModel, Size};
use crate::provision::qemu_pkg::Version;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The word the xtask adds to a guest's command line when the guest runs alone, without the
/// hypervisor: nobody else prints the run's final line then, and the project's Linux `/init`
/// prints it before powering off (under the hypervisor the hypervisor does).
pub const ALONE_WORD: &str = "pgtlab_alone=1";

/// The longest command line a guest is given: arm64 Linux's `COMMAND_LINE_SIZE` (2048) less its
/// terminating NUL; Linux cuts a longer one silently.
pub const GUEST_CMDLINE_MAX: usize = 2047;

/// Everything that varies between boots.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The machine (`--board`): a row of [`machine::MACHINES`] with a QEMU model.
    pub machine: &'static Machine,
    /// How QEMU executes it (`--accel`).
    pub accel: &'static Accel,
    /// `-cpu`: `max` (FEAT_BBM level 2), `cortex-a76` (the Raspberry Pi 5 core), ...; a board
    /// fixes its own, KVM takes the host's.
    pub cpu: String,
    /// GIC version, 2 or 3.
    pub gic: u8,
    /// CPUs.
    pub smp: u32,
    /// The guest's RAM (`--mem`); `None`: the machine's default ([`mem`]).
    pub mem: Option<Size>,
    /// `-icount shift=N,sleep=off`: deterministic instruction counts and virtual time.
    pub icount: Option<u32>,
    /// Kernel command line (`hyp.`-prefixed words are the hypervisor's).
    pub bootargs: String,
    /// Wait for gdb on `127.0.0.1:PORT` (localhost only) before the first instruction.
    pub gdb: Option<u16>,
    /// Boot the kernel alone at EL1, no hypervisor.
    pub no_hypervisor: bool,
    /// Boot the kernel alone on a machine with EL2: it starts at EL2 (and must refuse to run
    /// there); with [`Self::guest`], that guest alone at EL2 (Linux with KVM).
    pub kernel_at_el2: bool,
    /// A file to give the hypervisor as the guest kernel instead of the built kernel Image.
    pub guest_image: Option<PathBuf>,
    /// A guest other than the project's kernel (`None`: the kernel).
    pub guest: Option<Guest>,
    /// Memory tagging (`-M virt,mte=on`).
    pub mte: bool,
    /// `-plugin` argument (the instruction-counting plugin, see [`crate::plugin`]).
    pub plugin: Option<String>,
    /// One guest instruction per translation block. TCG takes interrupts only between blocks,
    /// so only then can the tick land between any two instructions (the per-CPU stress test
    /// needs it to preempt a read-modify-write in its middle). Slow.
    pub singlestep: bool,
    /// The board's DTB file (`-dtb`), resolved by [`Launch::resolve_dtb`]; `None` on a machine
    /// whose DTB QEMU writes.
    pub dtb: Option<PathBuf>,
    /// More QEMU arguments (`--qemu-arg`), each checked by [`qemu_arg::check`].
    pub qemu_args: Vec<String>,
    /// The run's key under the hypervisor; `None`: a new one is drawn when the launch is
    /// resolved (a test that writes the command line onto a disk sets its own).
    pub key: Option<u64>,
}

impl Default for Launch {
    fn default() -> Self {
        Launch::for_machine(machine::default())
    }
}

/// A QEMU binary and its version (argument spellings changed between versions).
#[derive(Debug, Clone)]
pub struct Qemu {
    /// The executable.
    pub path: PathBuf,
    /// Its version.
    pub version: Version,
}

impl Qemu {
    /// The QEMU at `path` (runs it with `--version`).
    pub fn at(path: PathBuf) -> Result<Qemu> {
        let version = crate::provision::qemu_pkg::version_of(&path)?;
        Ok(Qemu { path, version })
    }
}

/// Whose word decides a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Judging {
    /// The hypervisor's: only a final line carrying this run's key counts
    /// (`abi::exit::KeyedFinalLine`; the key reached the hypervisor alone, as `hyp.key=`).
    Keyed(u64),
    /// A guest alone, with nobody above it: QEMU's own ending decides. A power-off is success;
    /// a reset is a failure, which the guest's last final line (or its panic report) may name.
    Alone,
    /// No key is known (a board's console, outcomes built by hand): the last final line counts,
    /// unverified.
    #[default]
    Unverified,
}

/// A run key: 64 random bits from the kernel's generator, new for each run.
pub fn new_key() -> Result<u64> {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`, which is valid and ours.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    anyhow::ensure!(n == b.len() as isize, "getrandom: {}", std::io::Error::last_os_error());
    Ok(u64::from_le_bytes(b))
}

/// A [`Launch`] made concrete: QEMU's arguments and the RAM it gets.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The arguments after the QEMU executable.
    pub args: Vec<String>,
    /// The machine's RAM and the guest's.
    pub mem: MachineMem,
    /// The files QEMU reads (kernel, initrd, DTB), in that order.
    pub files: Vec<PathBuf>,
    /// Whose word decides the run (under the hypervisor: its final line with this run's key,
    /// which the arguments give it as `hyp.key=`).
    pub judging: Judging,
}

impl Launch {
    /// The configuration for `machine`: its own CPU model, GIC and (where the model fixes it)
    /// CPU count; what the user gives afterwards is checked against the model by
    /// [`Launch::validate`].
    pub fn for_machine(machine: &'static Machine) -> Launch {
        let model = machine.model();
        Launch {
            machine,
            accel: machine::accel::default(),
            cpu: model.default_cpu().into(),
            gic: model.default_gic(),
            smp: 4.min(model.max_cpus()),
            mem: None,
            icount: None,
            bootargs: String::new(),
            gdb: None,
            no_hypervisor: false,
            kernel_at_el2: false,
            guest_image: None,
            guest: None,
            mte: false,
            plugin: None,
            singlestep: false,
            dtb: None,
            qemu_args: Vec::new(),
            key: None,
        }
    }

    /// The machine's QEMU model.
    pub fn model(&self) -> &'static QemuModel {
        self.machine.model()
    }

    /// Whether the hypervisor runs (at EL2, the guest under it).
    pub fn under_hypervisor(&self) -> bool {
        !self.no_hypervisor && !self.kernel_at_el2
    }

    /// The CPU model QEMU is given: the accelerator's (`host` under KVM) or [`Self::cpu`].
    pub fn qemu_cpu(&self) -> &str {
        self.accel.cpu.unwrap_or(&self.cpu)
    }

    /// Refuses what QEMU would misread or what cannot run this project: a machine QEMU has no
    /// model of, a CPU model, GIC, CPU count or MTE the model does not have, TCG-only options
    /// under KVM, boot words the xtask sets itself or that would cut a line, an unresolved
    /// board DTB, a `--qemu-arg` that opens a path to the host.
    pub fn validate(&self) -> Result<(), Refused> {
        let name = self.machine.name;
        let model = self.machine.qemu.as_ref().ok_or_else(|| machine::with_qemu(name).unwrap_err())?;
        self.accel.check(self.icount.is_some(), self.plugin.is_some(), self.singlestep)?;
        if self.accel.cpu.is_none() {
            machine::cpu::check_cpu(&self.cpu)?;
            machine::cpu::check_cpu_gic(&self.cpu, self.gic)?;
        }
        check_line("--bootargs", &self.bootargs)?;
        check_bootargs(&self.bootargs, self.smp)?;
        if let Some(g) = &self.guest {
            check_line("--guest-append", &g.append)?;
            let guest_words: Vec<&str> =
                self.bootargs.split_ascii_whitespace().filter(|w| !w.starts_with("hyp.")).collect();
            let line = join(&[&g.append, &guest_words.join(" "), ALONE_WORD]);
            if line.len() > GUEST_CMDLINE_MAX {
                return Err(Refused(format!(
                    "--guest-append: the guest's command line would be {} bytes; Linux keeps {GUEST_CMDLINE_MAX} (arm64's \
                     COMMAND_LINE_SIZE) and cuts the rest without a word",
                    line.len()
                )));
            }
        }
        model.check(name, &self.cpu, self.gic, self.smp, self.mte)?;
        if !self.accel.tcg && !model.kvm {
            return Err(Refused(format!(
                "--board {name} with --accel {}: KVM runs QEMU's virt machine only; a board model runs under \
                 --accel tcg",
                self.accel
            )));
        }
        if self.no_hypervisor && self.guest.is_none() && model.guest_alone_at_el2() {
            return Err(Refused(format!(
                "--no-hypervisor: --board {name}'s CPUs always start at EL2 and this project's kernel runs at EL1 \
                 only: run it under the hypervisor (leave --no-hypervisor out); a guest that starts at EL2 itself \
                 (--guest linux) runs alone there"
            )));
        }
        if self.no_hypervisor && self.kernel_at_el2 {
            return Err(Refused("the kernel runs either alone at EL1 or alone at EL2, not both".into()));
        }
        if model.debian_dtb().is_some() && self.dtb.is_none() {
            return Err(Refused(format!("--board {name}: its device tree was not fetched (Launch::resolve_dtb)")));
        }
        for a in &self.qemu_args {
            qemu_arg::check(a)?;
        }
        Ok(())
    }

    /// Fetches the board's DTB (once, cached: `crate::provision::debian::file_from_kernel_package`).
    pub fn resolve_dtb(&mut self) -> Result<()> {
        if let Some(d) = self.model().debian_dtb() {
            self.dtb = Some(crate::provision::debian::file_from_kernel_package(d).with_context(|| {
                format!("--board {}: its device tree {d} from Debian's backports arm64 kernel", self.machine)
            })?);
        }
        Ok(())
    }

    /// The QEMU this launch needs: the system one when it is new enough for the model, else
    /// the provisioned one (`crate::provision::qemu_pkg`).
    pub fn qemu(&self) -> Result<Qemu> {
        let need = self.model().min_qemu;
        let path = crate::provision::qemu_pkg::qemu_at_least(need)
            .with_context(|| format!("--board {} needs QEMU {need}", self.machine))?;
        Qemu::at(path)
    }

    /// The length of the file QEMU loads as the hypervisor's initrd (the guest bundle, the
    /// `--guest` Image, or the kernel), known before a bundle is written; `None` without the
    /// hypervisor.
    fn hypervisor_initrd_len(&self, images: &Images) -> Result<Option<u64>> {
        if !self.under_hypervisor() {
            return Ok(None);
        }
        let file_len =
            |p: &Path| -> Result<u64> { Ok(std::fs::metadata(p).with_context(|| format!("{}", p.display()))?.len()) };
        Ok(Some(match &self.guest {
            Some(g) => g.bundle_len()?,
            None => file_len(self.guest_image.as_ref().unwrap_or(&images.kernel))?,
        }))
    }

    /// The file QEMU loads as the hypervisor's initrd: the guest bundle (written here if it is
    /// not yet), the `--guest` Image, or the kernel; `None` without the hypervisor.
    fn hypervisor_initrd(&self, images: &Images) -> Result<Option<PathBuf>> {
        if !self.under_hypervisor() {
            return Ok(None);
        }
        Ok(Some(match &self.guest {
            Some(g) => g.write_bundle()?,
            None => self.guest_image.clone().unwrap_or_else(|| images.kernel.clone()),
        }))
    }

    /// The machine's RAM for this launch ([`mem::machine_mem`]).
    pub fn machine_mem(&self, images: &Images) -> Result<MachineMem> {
        let initrd_len = self.hypervisor_initrd_len(images)?;
        self.machine_mem_with(images, initrd_len)
    }

    fn machine_mem_with(&self, images: &Images, initrd_len: Option<u64>) -> Result<MachineMem> {
        let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
        let hyp = match initrd_len {
            Some(_) => Some(read(&images.hypervisor)?),
            None => None,
        };
        // The board's reservations matter only to the hypervisor's plan.
        let dtb = match (&self.dtb, &hyp) {
            (Some(p), Some(_)) => Some(read(p)?),
            _ => None,
        };
        let initrd_len = initrd_len.unwrap_or(0);
        // A malformed hyp. word is the hypervisor's to refuse (exit 5, with its message): size
        // the machine as if it were not there.
        let words = hypcore::options::PlanWords::parse(&self.bootargs).unwrap_or_default();
        let input = mem::MemInput {
            name: self.machine.name,
            model: self.model(),
            guest: self.mem,
            hypervisor: hyp.as_deref(),
            initrd_len,
            dtb: dtb.as_deref(),
            words,
        };
        Ok(mem::machine_mem(&input)?)
    }

    /// QEMU's arguments for these images (convenience for [`Self::resolve`] on this host's
    /// QEMU for the model; `virt` takes the system QEMU's spellings).
    pub fn args(&self, images: &Images) -> Result<Vec<String>> {
        let version = if self.singlestep { self.qemu()?.version } else { self.model().min_qemu };
        Ok(self.resolve(images, version)?.args)
    }

    /// QEMU's arguments and RAM for these images on a QEMU of `version`; a usage error
    /// ([`Refused`]) when the machine cannot give the guest what was asked.
    pub fn resolve(&self, images: &Images, version: Version) -> Result<Resolved> {
        self.validate()?;
        let model = self.model();
        // Sized first, from the files' lengths: a guest that cannot fit is refused before its
        // bundle is written.
        let mem = self.machine_mem_with(images, self.hypervisor_initrd_len(images)?)?;
        let initrd = self.hypervisor_initrd(images)?;
        let mut a = self.machine_args(mem.total, version);
        a.extend(model.console_args());
        // A reset ends QEMU (the run's code is in its final line): no second boot.
        a.push("-no-reboot".into());
        // No guest here uses a network card; virt's default one also needs a ROM file that a
        // QEMU unpacked without its recommends (the KVM host model's) does not have.
        a.extend(["-nic".into(), "none".into()]);
        let mut files = Vec::new();
        if let Some(d) = &self.dtb {
            a.extend(["-dtb".into(), d.display().to_string()]);
        }
        // The run's key and the guest's RAM, for the hypervisor alone; last, after a boot
        // loader's words and their `pgtlab` marker if the user gave some.
        let judging = match (self.under_hypervisor(), self.key) {
            (true, Some(k)) => Judging::Keyed(k),
            (true, None) => Judging::Keyed(new_key()?),
            (false, _) => Judging::Alone,
        };
        let mut append = match judging {
            Judging::Keyed(key) => join(&[
                &self.bootargs,
                &format!("{}={}M", hypcore::options::GUEST_MEM, mem.guest >> 20),
                &format!("{}={key:#x}", hypcore::options::KEY),
            ]),
            _ => self.bootargs.clone(),
        };
        let (kernel, initrd) = match (&self.guest, self.under_hypervisor()) {
            (Some(g), false) => {
                // Alone (at EL1, or at EL2 with `kernel_at_el2`: Linux with KVM), the guest
                // itself must print the run's final line: the project's Linux init does when it
                // finds this word (`crate::linux::init_script`).
                append = join(&[&g.append, &self.bootargs, ALONE_WORD]);
                (g.kernel.clone(), g.initrd.clone())
            }
            (_, false) => (images.kernel.clone(), None),
            (_, true) => (images.hypervisor.clone(), initrd),
        };
        a.extend(["-kernel".into(), kernel.display().to_string()]);
        files.push(kernel);
        if let Some(i) = initrd {
            a.extend(["-initrd".into(), i.display().to_string()]);
            files.push(i);
        }
        if let Some(d) = &self.dtb {
            files.push(d.clone());
        }
        if self.under_hypervisor() && model.debian_dtb().is_some() {
            // The board's DTB lists all its CPUs, QEMU makes only --smp of them: the hypervisor
            // gives the guest those (firmware would have trimmed the DTB).
            if self.smp < model.max_cpus() && !append.contains("hyp.cpus=") {
                append = join(&[&format!("hyp.cpus={}", self.smp), &append]);
            }
        }
        if model.debian_dtb().is_some() && append.is_empty() {
            // QEMU keeps the board DTB's own /chosen/bootargs (the ZCU102's "earlycon") unless
            // -append replaces them; those are not ours to check, nor the guest's alone: end
            // them with the marker.
            append = bootargs::FIRMWARE_MARKER.into();
        }
        if !append.is_empty() {
            a.extend(["-append".into(), append]);
        }
        if let Some(port) = self.gdb {
            // Localhost only: `-s` would listen on every interface.
            a.extend(["-gdb".into(), format!("tcp:127.0.0.1:{port}"), "-S".into()]);
        }
        a.extend(self.qemu_args.iter().cloned());
        Ok(Resolved { args: a, mem, files, judging })
    }

    /// The machine alone, with `machine_bytes` of RAM: `-M`, the accelerator, CPU model and
    /// count, `-m`, `-icount`, the plugin, one instruction per block (no console, no images).
    pub fn machine_args(&self, machine_bytes: u64, version: Version) -> Vec<String> {
        let model = self.model();
        let el2 = !self.no_hypervisor || self.kernel_at_el2;
        let mut a: Vec<String> = vec!["-M".into(), model.machine_arg(self.gic, el2, self.mte)];
        a.extend(self.accel.qemu_args.iter().map(|s| s.to_string()));
        if model.takes_cpu() || self.accel.cpu.is_some() {
            a.extend(["-cpu".into(), self.qemu_cpu().into()]);
        }
        if model.takes_smp() {
            a.extend(["-smp".into(), self.smp.to_string()]);
        }
        // In MiB: QEMU reads a bare number as MiB, this project as bytes.
        a.extend(["-m".into(), format!("{}M", machine_bytes >> 20)]);
        if let Some(shift) = self.icount {
            // sleep=off: while every vCPU waits (WFI), the virtual clock jumps to the next timer
            // instead of running at the host's real-time pace. With QEMU's default (sleep=on) a
            // guest's clock, and so its uptime and any count taken across a wait, follows how
            // fast the host happened to run QEMU: two boots of the same Linux under -icount
            // differed by 10% and more, the slower side (more TCG work per instruction, e.g. a
            // guest behind stage 2) losing time in every wait.
            a.extend(["-icount".into(), format!("shift={shift},sleep=off")]);
        }
        if let Some(p) = &self.plugin {
            a.extend(["-plugin".into(), p.clone()]);
        }
        if self.singlestep {
            // QEMU 8.1 replaced -singlestep with a TCG property (and 9.0 removed it).
            if version < Version(8, 1, 0) {
                a.push("-singlestep".into());
            } else {
                a.extend(["-accel".into(), "tcg,one-insn-per-tb=on".into()]);
            }
        }
        a
    }

    /// One line describing the machine, for test names and logs.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if self.machine != machine::default() {
            s.push_str(&format!("board={} ", self.machine));
        }
        if self.accel != machine::accel::default() {
            s.push_str(&format!("accel={} ", self.accel));
        }
        s.push_str(&format!("cpu={} gic=v{} smp={} mem=", self.qemu_cpu(), self.gic, self.smp));
        s.push_str(&self.mem.map_or("default".to_string(), |m| m.to_string()));
        if self.mte {
            s.push_str(" mte");
        }
        if let Some(g) = &self.guest {
            s.push_str(&format!(" guest={}", g.kernel.display()));
        }
        match (self.no_hypervisor, self.kernel_at_el2, &self.guest_image) {
            (_, true, _) => s.push_str(" kernel-at-EL2"),
            (true, _, _) => s.push_str(" no-hypervisor"),
            (_, _, Some(g)) => s.push_str(&format!(" guest={}", g.display())),
            _ => {}
        }
        if !self.bootargs.is_empty() {
            s.push_str(&format!(" bootargs=\"{}\"", self.bootargs));
        }
        for q in &self.qemu_args {
            s.push_str(&format!(" qemu-arg={q}"));
        }
        s
    }
}

/// The non-empty parts, joined by spaces.
pub fn join(parts: &[&str]) -> String {
    parts.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Refuses control characters in a command line: a newline would end it early for a firmware
/// that reads one line (the Pi's cmdline.txt), and let a guest that echoes its command line
/// (Linux does) print a line the user wrote as if it were the guest's.
pub fn check_line(what: &str, line: &str) -> Result<(), Refused> {
    match line.chars().find(|c| c.is_control()) {
        Some(c) => Err(Refused(format!(
            "{what}: {:?} has a control character ({c:?}): a command line is one line of printable words",
            line
        ))),
        None => Ok(()),
    }
}

/// Refuses the boot words the xtask sets itself (`hyp.guest-mem`: the guest's RAM is `--mem`;
/// `hyp.key`: the run's key is new each run) and a `hyp.cpus=` above `--smp` (the hypervisor cannot give the guest CPUs QEMU does not
/// make).
pub fn check_bootargs(bootargs: &str, smp: u32) -> Result<(), Refused> {
    for w in bootargs.split_ascii_whitespace() {
        let (name, value) = w.split_once('=').unwrap_or((w, ""));
        if name == hypcore::options::GUEST_MEM {
            return Err(Refused(format!(
                "--bootargs {w}: the guest's RAM is --mem (the xtask passes {} itself)",
                hypcore::options::GUEST_MEM
            )));
        }
        if name == hypcore::options::KEY {
            return Err(Refused(format!(
                "--bootargs {w}: the run's key is the xtask's to choose, new for each run (and the only final line it accepts carries it)"
            )));
        }
        if name == "hyp.cpus" {
            if let Ok(n) = value.parse::<u32>() {
                if n > smp {
                    return Err(Refused(format!(
                        "--bootargs {w}: the machine has {smp} CPUs (--smp {smp}): the guest can have at most {smp}"
                    )));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
