//! `cargo xtask run`: build both Images and boot them (the hypervisor at EL2, the kernel or
//! another guest under it, or a guest alone), on one machine of the table, print the console
//! and the report tables, and exit with the run's verdict.
//!
//! The machine flags ([`MachineArgs`]: `--board`, `--accel`, `--cpu`, `--gic`, `--smp`,
//! `--mem`) are shared with `chainboot --qemu`, `perf` and `bench`, and parsed once here into a
//! [`Launch`].

use crate::build;
use crate::error::{refuse, regular_file, Refused};
use crate::launch::{self, Guest, Launch};
use crate::machine::{self, Accel, Size};
use crate::provision::toolchain;
use crate::report;
use crate::supervise;
use anyhow::Result;
use std::path::PathBuf;
use std::time::Duration;

/// The machine a command boots: one row of the table and what the user chose of it.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// The machine: virt (QEMU's, the default), pi4 (Raspberry Pi 4B), zcu102 (Xilinx ZCU102),
    /// imx8mp-evk (NXP i.MX 8M Plus EVK): QEMU's model with the board's own DTB from Debian's
    /// kernel package (and a QEMU new enough for it, fetched once when the system's is older).
    #[arg(long)]
    pub board: Option<String>,
    /// How QEMU runs the guest: tcg (the default, any host), kvm (an arm64 Linux host's
    /// /dev/kvm, with the host's CPU), kvm-model (KVM inside the KVM host model: the KVM path
    /// tested on any host; slow).
    #[arg(long, value_parser = accel_arg)]
    pub accel: Option<&'static Accel>,
    /// QEMU CPU model (virt; default max): max (FEAT_BBM level 2), cortex-a76 (Raspberry Pi 5
    /// core), cortex-a72, cortex-a57, cortex-a53, cortex-a35, neoverse-n1, a64fx (with --gic 3
    /// only) (AArch64 models only). A board has its own; KVM takes the host's.
    #[arg(long)]
    pub cpu: Option<String>,
    /// GIC version (virt; default 3): 2 (like the Pi 5's GIC-400) or 3. A board has its own.
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
    pub gic: Option<u8>,
    /// Number of CPUs (default 4, or what the board has).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub smp: Option<u32>,
}

/// `--mem` for clap.
pub fn size_arg(s: &str) -> Result<Size, String> {
    Size::parse(s).map_err(|r| r.0)
}

/// `--accel` for clap.
pub fn accel_arg(s: &str) -> Result<&'static Accel, String> {
    machine::accel::find(s).map_err(|r| r.0)
}

impl MachineArgs {
    /// Whether any of the flags was given.
    pub fn any(&self) -> bool {
        self.board.is_some() || self.accel.is_some() || self.cpu.is_some() || self.gic.is_some() || self.smp.is_some()
    }

    /// The launch these flags describe, from `base`'s machine when no `--board` is given; each
    /// given flag replaces the machine's default and is checked against the machine later
    /// ([`Launch::validate`]).
    pub fn launch_from(&self, base: &'static machine::Machine) -> Result<Launch, Refused> {
        let m = match &self.board {
            Some(b) => machine::with_qemu(b)?,
            None => base,
        };
        let mut l = Launch::for_machine(m);
        if let Some(a) = self.accel {
            l.accel = a;
        }
        if let Some(c) = &self.cpu {
            if let Some(forced) = l.accel.cpu {
                return Err(Refused(format!(
                    "--cpu {c} with --accel {}: KVM runs the host's own CPU (-cpu {forced}); leave --cpu out",
                    l.accel
                )));
            }
            l.cpu.clone_from(c);
        }
        l.gic = self.gic.unwrap_or(l.gic);
        l.smp = self.smp.unwrap_or(l.smp);
        Ok(l)
    }

    /// [`Self::launch_from`] the default machine.
    pub fn launch(&self) -> Result<Launch, Refused> {
        self.launch_from(machine::default())
    }
}

/// The `run` command's own flags.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub machine: MachineArgs,
    /// The guest's RAM, exactly (its memory node and its kernel see this much), with a unit:
    /// 512M, 1G, 4G (K, M, G, T; a whole number of MiB, not 0). Under the hypervisor QEMU gets
    /// the hypervisor's share on top. Default 1G on virt; on a board, all the model holds
    /// (less the hypervisor's share).
    #[arg(long, value_parser = size_arg)]
    pub mem: Option<Size>,
    /// Deterministic instruction counting: -icount shift=N,sleep=off.
    #[arg(long)]
    pub icount: Option<u32>,
    /// One instruction per translation block, so interrupts can land between any two
    /// instructions (slow; the per-CPU stress test's seeded bugs need it).
    #[arg(long)]
    pub singlestep: bool,
    /// Kernel command line; words starting with `hyp.` go to the hypervisor.
    #[arg(long, default_value = "")]
    pub bootargs: String,
    /// Wait for gdb on localhost (127.0.0.1, port --gdb-port) before the first instruction.
    #[arg(long)]
    pub gdb: bool,
    /// TCP port for --gdb (1-65535).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..), requires = "gdb")]
    pub gdb_port: Option<u16>,
    /// Boot the kernel alone at EL1, without the hypervisor (for comparison).
    #[arg(long)]
    pub no_hypervisor: bool,
    /// Time limit in seconds: QEMU is killed after it (exit 66); 0 for none (at most a year).
    #[arg(long, default_value_t = DEFAULT_TIMEOUT_S, value_parser = crate::timeout_secs)]
    pub timeout: u64,
    /// Guest kernel instead of the project's kernel: a path (arm64 Image or raw binary), or
    /// `linux` / `linux-generic` for Debian's arm64 kernel with a busybox initramfs (fetched
    /// with apt-get into target/downloads/linux/), `linux-backports` for the newest cloud kernel
    /// of the machine's `<codename>-backports` (Linux 6.12 on Debian 12), `linux-newest` for
    /// Debian's newest arm64 cloud kernel (Linux 7.x of sid, the KVM host model's).
    #[arg(long)]
    pub guest: Option<String>,
    /// The guest's initramfs (with `--guest linux`: replaces the busybox one).
    #[arg(long, requires = "guest")]
    pub guest_initrd: Option<PathBuf>,
    /// The guest's command line (with `--guest linux`, default "console=ttyAMA0 panic=-1").
    #[arg(long, requires = "guest")]
    pub guest_append: Option<String>,
    /// Memory tagging: -M virt,mte=on.
    #[arg(long)]
    pub mte: bool,
    /// Count TLBI/DSB/ISB instructions with the QEMU plugin (per EL and vCPU), printed at exit.
    #[arg(long)]
    pub count_insns: bool,
    /// One more QEMU option with its value, e.g. "-device pci-testdev" (repeatable): devices,
    /// -global, drives and firmware inside target/; nothing that opens a path to the host.
    #[arg(long = "qemu-arg", value_name = "OPTION VALUE", allow_hyphen_values = true)]
    pub qemu_args: Vec<String>,
}

/// Default time limit of `cargo xtask run`.
pub const DEFAULT_TIMEOUT_S: u64 = 600;
/// How often a long run says how much time it has left (without output in between).
const PROGRESS_EVERY: Duration = Duration::from_secs(30);
/// gdb's default port.
pub const GDB_PORT: u16 = 1234;

/// The `--guest*` options as a [`Guest`], checked before anything is fetched or built.
pub fn guest(
    which: Option<&str>,
    initrd: Option<PathBuf>,
    append: Option<String>,
    m: &machine::Machine,
) -> Result<Option<Guest>> {
    let Some(which) = which else { return Ok(None) };
    if let Some(i) = &initrd {
        regular_file("--guest-initrd", i)?;
    }
    if let Some(a) = &append {
        launch::check_line("--guest-append", a)?;
    }
    if let Some(flavour) = crate::linux::Flavour::from_guest_arg(which) {
        // A board model needs the backports kernel (its console drivers, its DTB's bindings).
        let flavour = if m.model().linux.backports_only { crate::linux::Flavour::Backports } else { flavour };
        let l = crate::linux::prepare(flavour, &crate::linux::extra_programs()?)?;
        eprintln!("xtask: Linux guest: {} ({}), initramfs {}", l.kernel.display(), l.package, l.initramfs.display());
        return Ok(Some(Guest {
            kernel: l.kernel,
            initrd: Some(initrd.unwrap_or(l.initramfs)),
            append: append.unwrap_or_else(|| crate::linux::default_append(m)),
        }));
    }
    regular_file("--guest", std::path::Path::new(which)).map_err(|why| {
        Refused(format!(
            "{why} (a kernel Image or raw binary, or `linux` / `linux-generic` / `linux-backports` / `linux-newest`)"
        ))
    })?;
    let kernel = crate::kernel_file::prepare(std::path::Path::new(which)).map_err(|e| Refused(format!("{e:#}")))?;
    Ok(Some(Guest { kernel, initrd, append: append.unwrap_or_default() }))
}

/// `cargo xtask run`.
pub fn run(a: RunArgs) -> Result<()> {
    let mut launch = a.machine.launch()?;
    launch.mem = a.mem;
    if a.gdb_port.is_some() && !a.gdb {
        return refuse("--gdb-port without --gdb: give --gdb too");
    }
    launch.icount = a.icount;
    launch.bootargs = a.bootargs;
    launch.gdb = a.gdb.then_some(a.gdb_port.unwrap_or(GDB_PORT));
    launch.no_hypervisor = a.no_hypervisor;
    launch.mte = a.mte;
    launch.singlestep = a.singlestep;
    for q in &a.qemu_args {
        launch.qemu_args.extend(launch::qemu_arg::parse(q)?);
    }
    // Refuse a bad configuration before fetching or building anything (the DTB's path stands in
    // until it is fetched).
    launch.dtb = launch.model().debian_dtb().map(PathBuf::from);
    launch.validate()?;
    if launch.accel.runs == machine::accel::Runs::Here && !launch.accel.tcg {
        // No KVM here: said before anything is fetched or built.
        supervise::kvm::host()?;
    }
    launch.guest = guest(a.guest.as_deref(), a.guest_initrd, a.guest_append, launch.machine)?;
    launch.resolve_dtb()?;
    let tc = toolchain::find()?;
    let qemu = launch.qemu()?;
    let images = build::build(&tc, &[])?;
    let counts_file = images.kernel.with_file_name("insncount.jsonl");
    if a.count_insns {
        let lib = crate::plugin::build(&qemu.path)?;
        let el2 = if a.no_hypervisor { None } else { Some(crate::plugin::el2_range(&images, launch.model())?) };
        let _ = std::fs::remove_file(&counts_file);
        launch.plugin = Some(crate::plugin::qemu_arg(&lib, &counts_file, el2, launch.model()));
    }
    let resolved = launch.resolve(&images, qemu.version)?;
    eprintln!("xtask: {}", resolved.mem.describe());
    eprintln!("xtask: {} {}", qemu.path.display(), resolved.args.join(" "));
    if let Some(port) = launch.gdb {
        eprintln!(
            "xtask: waiting for gdb on 127.0.0.1:{port}: gdb-multiarch {} -ex 'target remote localhost:{port}'",
            images.hypervisor_elf.display(),
        );
    }
    let timeout = match a.timeout {
        0 => {
            eprintln!("xtask: no time limit (--timeout 0)");
            Duration::MAX
        }
        s => {
            eprintln!("xtask: time limit {s} s (--timeout S to change, 0 for none)");
            Duration::from_secs(s)
        }
    };
    let progress = (a.timeout != 0).then_some(PROGRESS_EVERY);
    let elf_for = |line: &str| report::symbolize_line(line, &images);
    let out =
        supervise::run_on(&qemu.path, launch.accel, &resolved.args, resolved.judging, timeout, progress, |line| {
            supervise::echo_stdout(&elf_for(line))
        })?;
    report::print_tables(&out.output);
    if a.count_insns {
        print_insn_counts(&counts_file);
    }
    let verdict = supervise::judge(&out);
    eprintln!("xtask: {verdict} after {:.2} s", out.elapsed.as_secs_f64());
    std::process::exit(verdict.code as i32)
}

/// The plugin's counts: since boot per vCPU and EL, and per marked window.
fn print_insn_counts(path: &std::path::Path) {
    match crate::plugin::read(path) {
        Ok(c) => {
            println!("\n== instructions executed (QEMU plugin, API {}; EL from the code's address) ==", c.api);
            println!(
                "{:<9} {:>4} {:>3} {:>10} {:>10} {:>10} {:>14}",
                "scope", "vcpu", "el", "tlbi", "dsb", "isb", "insns"
            );
            for l in &c.lines {
                let scope = l.window.map_or("total".to_string(), |w| format!("window {w}"));
                println!(
                    "{scope:<9} {:>4} {:>3} {:>10} {:>10} {:>10} {:>14}",
                    l.vcpu, l.el, l.tlbi, l.dsb, l.isb, l.insns
                );
            }
        }
        Err(e) => eprintln!("xtask: warning: instruction counts: {e:#}"),
    }
}
