//! `cargo xtask`: the project's command line. See the README for the commands.

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use std::time::Duration;
use xtask::qemu::{self, QemuConfig};
use xtask::{build, report, system, toolchain};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, boot, test and measure the EL2 hypervisor and EL1 kernel")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build both Images and boot them in QEMU (the hypervisor at EL2, the kernel as its guest).
    Run(RunArgs),
    /// Build both Images only.
    Build,
    /// Host unit tests of every crate, then the QEMU integration tests.
    Test(TestArgs),
    /// Benchmarks: `pgtable` (host, against aarch64-paging) or an in-guest one (`exits`, ...).
    Bench {
        /// Which benchmark (an unknown name lists them).
        which: String,
        /// Run QEMU with -icount shift=0: deterministic instruction counts.
        #[arg(long)]
        icount: bool,
    },
    /// Put the hypervisor and kernel (or the serial chainloader) on a Raspberry Pi 5's SD card:
    /// a mounted boot partition, a card, or a card image.
    Flash(xtask::flash::Args),
    /// Send the hypervisor and kernel to the serial chainloader on a board (or in QEMU) and show
    /// its console.
    Chainboot(xtask::chainboot::Args),
    /// Show a board's serial console until the run's final line; exit with its code.
    Console(xtask::chainboot::ConsoleArgs),
    /// Clippy, warnings as errors, on the host crates and the bare-metal binaries.
    Lint,
    /// Show which toolchain, linker and QEMU would be used (installing what is missing when root).
    Doctor,
}

#[derive(Args)]
struct RunArgs {
    /// QEMU CPU model: max (FEAT_BBM level 2) or cortex-a76 (Raspberry Pi 5 core).
    #[arg(long, default_value = "max")]
    cpu: String,
    /// GIC version: 2 (like the Pi 5's GIC-400) or 3.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=3))]
    gic: u8,
    /// Number of CPUs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=8))]
    smp: u32,
    /// Memory size (QEMU -m syntax: 512M, 1G, 4G).
    #[arg(long, default_value = "1G")]
    mem: String,
    /// Deterministic instruction counting: -icount shift=N.
    #[arg(long)]
    icount: Option<u32>,
    /// Kernel command line; words starting with `hyp.` go to the hypervisor.
    #[arg(long, default_value = "")]
    bootargs: String,
    /// Wait for gdb on localhost:1234 before the first instruction.
    #[arg(long)]
    gdb: bool,
    /// Boot the kernel alone at EL1, without the hypervisor (for comparison).
    #[arg(long)]
    no_hypervisor: bool,
    /// Kill QEMU after this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
}

#[derive(Args)]
struct TestArgs {
    /// Long property tests (10^6 page-table operation sequences).
    #[arg(long)]
    long: bool,
    /// Only the host unit tests.
    #[arg(long)]
    host_only: bool,
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(2);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(a) => run(a),
        Cmd::Build => {
            let tc = toolchain::find()?;
            build::build(&tc, &[])?;
            Ok(())
        }
        Cmd::Lint => xtask::lint::run(&toolchain::find()?),
        Cmd::Flash(a) => xtask::flash::cli(a),
        Cmd::Chainboot(a) => std::process::exit(xtask::chainboot::cli(a)?),
        Cmd::Console(a) => std::process::exit(xtask::chainboot::console_cli(a)?),
        Cmd::Test(a) => xtask::test::run(a.long, a.host_only),
        Cmd::Bench { which, icount } => xtask::bench::run(&which, icount),
        Cmd::Doctor => {
            let tc = toolchain::find()?;
            println!("cross toolchain: {}", tc.description);
            println!("  cargo {}  rustc {}", tc.cargo.display(), tc.rustc.display());
            println!("  std: {:?}", tc.std);
            match &tc.linker {
                Some(l) => println!("  linker: {}", l.display()),
                None => println!("  linker: the toolchain's rust-lld"),
            }
            println!("qemu: {}", system::qemu()?.display());
            Ok(())
        }
    }
}

fn run(a: RunArgs) -> Result<()> {
    let tc = toolchain::find()?;
    let qemu_bin = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let cfg = QemuConfig {
        cpu: a.cpu,
        gic: a.gic,
        smp: a.smp,
        mem: a.mem,
        icount: a.icount,
        bootargs: a.bootargs,
        gdb: a.gdb,
        no_hypervisor: a.no_hypervisor,
    };
    eprintln!("xtask: {} {}", qemu_bin.display(), cfg.args(&images).join(" "));
    if cfg.gdb {
        eprintln!(
            "xtask: waiting for gdb: gdb-multiarch {} -ex 'target remote :1234'",
            images.hypervisor_elf.display()
        );
    }
    let timeout = if a.timeout == 0 { Duration::from_secs(u64::MAX / 4) } else { Duration::from_secs(a.timeout) };
    let elf_for = |line: &str| report::symbolize_line(line, &images);
    let outcome = qemu::run(&qemu_bin, &cfg, &images, timeout, |line| qemu::echo_stdout(&elf_for(line)))?;
    report::print_tables(&outcome.output);
    match outcome.code {
        Some(0) => {
            eprintln!("xtask: exit 0 after {:.2} s", outcome.elapsed.as_secs_f64());
            Ok(())
        }
        Some(code) => {
            eprintln!("xtask: QEMU exited with {code} after {:.2} s", outcome.elapsed.as_secs_f64());
            std::process::exit(code)
        }
        None if outcome.timed_out => bail!("timed out after {} s", a.timeout),
        None => bail!("QEMU was killed by a signal"),
    }
}
