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
    /// `-icount shift=N`: deterministic instruction counts.
    pub icount: Option<u32>,
    /// Kernel command line (`hyp.`-prefixed words are the hypervisor's).
    pub bootargs: String,
    /// Wait for gdb on `127.0.0.1:PORT` (localhost only) before the first instruction.
    pub gdb: Option<u16>,
    /// Boot the kernel alone at EL1, no hypervisor.
    pub no_hypervisor: bool,
    /// Boot the kernel alone on a machine with EL2: it starts at EL2 (and must refuse to run
    /// there).
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

/// A [`Launch`] made concrete: QEMU's arguments and the RAM it gets.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The arguments after the QEMU executable.
    pub args: Vec<String>,
    /// The machine's RAM and the guest's.
    pub mem: MachineMem,
    /// The files QEMU reads (kernel, initrd, DTB), in that order.
    pub files: Vec<PathBuf>,
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
        }
        check_line("--bootargs", &self.bootargs)?;
        check_bootargs(&self.bootargs, self.smp)?;
        if let Some(g) = &self.guest {
            check_line("--guest-append", &g.append)?;
        }
        model.check(name, &self.cpu, self.gic, self.smp, self.mte)?;
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
        let initrd = self.hypervisor_initrd(images)?;
        self.machine_mem_with(images, initrd.as_deref())
    }

    fn machine_mem_with(&self, images: &Images, initrd: Option<&Path>) -> Result<MachineMem> {
        let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
        let hyp = match initrd {
            Some(_) => Some(read(&images.hypervisor)?),
            None => None,
        };
        let dtb = match &self.dtb {
            Some(p) => Some(read(p)?),
            None => None,
        };
        let initrd_len = match initrd {
            Some(p) => std::fs::metadata(p).with_context(|| format!("{}", p.display()))?.len(),
            None => 0,
        };
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
        let initrd = self.hypervisor_initrd(images)?;
        let mem = self.machine_mem_with(images, initrd.as_deref())?;
        let mut a = self.machine_args(mem.total, version);
        a.extend(model.console_args());
        // A reset ends QEMU (the run's code is in its final line): no second boot.
        a.push("-no-reboot".into());
        let mut files = Vec::new();
        if let Some(d) = &self.dtb {
            a.extend(["-dtb".into(), d.display().to_string()]);
        }
        // Under the hypervisor the guest gets exactly --mem (hyp.guest-mem), the rest is its.
        // Last: after a boot loader's words and their `pgtlab` marker, if the user gave some.
        let mut append = if mem.hypervisor {
            join(&[&self.bootargs, &format!("{}={}M", hypcore::options::GUEST_MEM, mem.guest >> 20)])
        } else {
            self.bootargs.clone()
        };
        let (kernel, initrd) = match (&self.guest, self.under_hypervisor()) {
            (Some(g), false) if self.no_hypervisor => {
                // Alone, the guest itself must print the run's final line: the project's Linux
                // init does when it finds this word (`crate::linux::init_script`).
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
            // QEMU keeps the board DTB's own /chosen/bootargs (the ZCU102's "earlycon") unless
            // -append replaces them; those are not ours to check: end them with the marker.
            if append.is_empty() {
                append = bootargs::FIRMWARE_MARKER.into();
            }
        }
        if !append.is_empty() {
            a.extend(["-append".into(), append]);
        }
        if let Some(port) = self.gdb {
            // Localhost only: `-s` would listen on every interface.
            a.extend(["-gdb".into(), format!("tcp:127.0.0.1:{port}"), "-S".into()]);
        }
        a.extend(self.qemu_args.iter().cloned());
        Ok(Resolved { args: a, mem, files })
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
            a.extend(["-icount".into(), format!("shift={shift}")]);
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

/// Refuses the boot words the xtask sets itself (`hyp.guest-mem`: the guest's RAM is `--mem`)
/// and a `hyp.cpus=` above `--smp` (the hypervisor cannot give the guest CPUs QEMU does not
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
