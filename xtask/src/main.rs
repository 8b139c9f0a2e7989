//! `cargo xtask`: the project's command line. See the README for the commands.

use abi::exit;
use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use std::time::Duration;
use xtask::board::Board;
use xtask::outcome::{self, ExitWith};
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
    /// Benchmarks: `pgtable` (host, against aarch64-paging), an in-guest one (`exits`, ...),
    /// `all` (every one, then the summary against seeds and goals), or `summary` (from saved runs).
    Bench {
        /// Which benchmark (an unknown name lists them).
        which: String,
        /// Run QEMU with -icount shift=0: deterministic instruction counts.
        #[arg(long)]
        icount: bool,
        /// An earlier run's target/bench/NAME[-icount].jsonl: print the change per row with a
        /// verdict (better / worse / within noise).
        #[arg(long)]
        compare: Option<std::path::PathBuf>,
        /// Run the same workload on another kernel too, on the same machine, and print both
        /// side by side: `linux` (Debian's 6.12 from backports; EL0 benchmarks only).
        #[arg(long)]
        peer: Option<String>,
        /// `guest-boot` only: on this board's QEMU model (pi4, zcu102, imx8mp-evk).
        #[arg(long)]
        board: Option<String>,
    },
    /// Put the hypervisor and kernel (or the serial chainloader) on a Raspberry Pi 5's SD card:
    /// a mounted boot partition, a card, or a card image.
    Flash(xtask::flash::Args),
    /// Send the hypervisor and kernel to the serial chainloader on a board (or in QEMU) and show
    /// its console.
    Chainboot(xtask::chainboot::Args),
    /// Show a board's serial console until the run's final line; exit with its code.
    Console(xtask::chainboot::ConsoleArgs),
    /// PMU events and the project's counters around a scenario, per mechanism setting.
    Perf(PerfCli),
    /// Clippy, warnings as errors, on the host crates and the bare-metal binaries.
    Lint,
    /// Fuzz the parsers with libFuzzer (cargo-fuzz): image_header, dtb, guest_dtb, bootargs.
    Fuzz {
        /// One target (default: all).
        target: Option<String>,
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        time: u64,
    },
    /// Mutation testing, on demand: the seeded bugs of the bare-metal binaries and the judging
    /// (one at a time in a scratch copy, against the tests that should see them), or
    /// cargo-mutants on the host crates (--host [CRATE ...]). Runs at nice 19; long.
    Mutants(xtask::mutants::Args),
    /// Show which toolchain, linker and QEMU would be used (installing what is missing when root).
    Doctor,
}

#[derive(Args)]
struct RunArgs {
    /// The machine: virt (QEMU's, the default), pi4 (Raspberry Pi 4B), zcu102 (Xilinx ZCU102),
    /// imx8mp-evk (NXP i.MX 8M Plus EVK): QEMU's model with the board's own DTB from Debian's
    /// kernel package (and a QEMU new enough for it, fetched once when the system's is older).
    #[arg(long, default_value = "virt")]
    board: String,
    /// QEMU CPU model (virt; default max): max (FEAT_BBM level 2), cortex-a76 (Raspberry Pi 5
    /// core), cortex-a72, cortex-a57, cortex-a53, cortex-a35, neoverse-n1, a64fx (AArch64
    /// models only). A board has its own.
    #[arg(long)]
    cpu: Option<String>,
    /// GIC version (virt; default 3): 2 (like the Pi 5's GIC-400) or 3. A board has its own.
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
    gic: Option<u8>,
    /// Number of CPUs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=8))]
    smp: u32,
    /// Memory size with a unit: 512M, 1G, 4G (K, M, G, T; a whole number of MiB, not 0).
    /// Default 1G on virt, 2G on the boards.
    #[arg(long)]
    mem: Option<String>,
    /// Deterministic instruction counting: -icount shift=N.
    #[arg(long)]
    icount: Option<u32>,
    /// QEMU -singlestep: one instruction per translation block, so interrupts can land between
    /// any two instructions (slow; the per-CPU stress test's seeded bugs need it).
    #[arg(long)]
    singlestep: bool,
    /// Kernel command line; words starting with `hyp.` go to the hypervisor.
    #[arg(long, default_value = "")]
    bootargs: String,
    /// Wait for gdb on localhost (127.0.0.1, port --gdb-port) before the first instruction.
    #[arg(long)]
    gdb: bool,
    /// TCP port for --gdb (1-65535).
    #[arg(long, default_value_t = 1234, value_parser = clap::value_parser!(u16).range(1..))]
    gdb_port: u16,
    /// Boot the kernel alone at EL1, without the hypervisor (for comparison).
    #[arg(long)]
    no_hypervisor: bool,
    /// Time limit in seconds: QEMU is killed after it (exit 66); 0 for none (at most a year).
    #[arg(long, default_value_t = DEFAULT_TIMEOUT_S, value_parser = xtask::timeout_secs)]
    timeout: u64,
    /// Guest kernel instead of the project's kernel: a path (arm64 Image or raw binary), or
    /// `linux` / `linux-generic` for Debian's arm64 kernel with a busybox initramfs (fetched
    /// with apt-get into target/downloads/linux/), `linux-backports` for the newest cloud kernel
    /// of the machine's `<codename>-backports` (Linux 6.12 on Debian 12).
    #[arg(long)]
    guest: Option<String>,
    /// The guest's initramfs (with `--guest linux`: replaces the busybox one).
    #[arg(long, requires = "guest")]
    guest_initrd: Option<std::path::PathBuf>,
    /// The guest's command line (with `--guest linux`, default "console=ttyAMA0 panic=-1").
    #[arg(long, requires = "guest")]
    guest_append: Option<String>,
    /// Memory tagging: -M virt,mte=on.
    #[arg(long)]
    mte: bool,
    /// Count TLBI/DSB/ISB instructions with the QEMU plugin (per EL and vCPU), printed at exit.
    #[arg(long)]
    count_insns: bool,
    /// tcg (QEMU's TCG), kvm (this arm64 host's KVM: -accel kvm -cpu host) or kvm-model (the
    /// same command line inside the KVM host model, an arm64 Linux with KVM on TCG).
    #[arg(long, default_value = "tcg")]
    accel: String,
}

#[derive(Args)]
struct PerfCli {
    /// A self-test or benchmark workload (an unknown name lists them), or `list`: the events of
    /// the chosen CPU.
    scenario: String,
    /// Events by name or number, each optionally `:el0+el1+el2` (default every EL).
    #[arg(long, default_value = "INST_RETIRED")]
    events: String,
    /// NAME=VALUE, repeatable: one boot per combination (e.g. bbml2=on --mechanism bbml2=off).
    #[arg(long = "mechanism")]
    mechanisms: Vec<String>,
    /// QEMU CPU model.
    #[arg(long, default_value = "max")]
    cpu: String,
    /// GIC version.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=3))]
    gic: u8,
    /// -icount shift=0 (instructions counted, exactly).
    #[arg(long)]
    icount: bool,
    /// Also count TLBI/DSB/ISB with the QEMU plugin, per EL and vCPU.
    #[arg(long)]
    count_insns: bool,
    /// More kernel boot arguments (e.g. split.gib=4).
    #[arg(long, default_value = "")]
    bootargs: String,
}

#[derive(Args)]
struct TestArgs {
    /// Long runs too: 10^6-case page-table property tests, the wide configuration matrix.
    #[arg(long)]
    long: bool,
    /// Only the host unit tests.
    #[arg(long)]
    host_only: bool,
    /// Run `#[ignore]`d tests too.
    #[arg(long)]
    include_ignored: bool,
    /// Only tests whose name contains this (the lint is skipped).
    filter: Option<String>,
}

/// Default time limit of `cargo xtask run`.
const DEFAULT_TIMEOUT_S: u64 = 600;
/// How often a long run says how much time it has left (without output in between).
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

fn main() {
    // Every exit code comes from the table in lib/abi/src/exit.rs (README: "Exit codes").
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { exit::USAGE as i32 } else { 0 });
        }
    };
    if let Err(e) = xtask::signals::install() {
        eprintln!("xtask: error: cannot catch SIGINT/SIGTERM/SIGHUP: {e}");
        std::process::exit(exit::XTASK_ERROR as i32);
    }
    if let Err(e) = real_main(cli) {
        let code = outcome::code_of(&e);
        match e.downcast_ref::<ExitWith>() {
            Some(ExitWith(v)) => eprintln!("xtask: {v}"),
            None => eprintln!("xtask: error: {e:#}"),
        }
        std::process::exit(code as i32);
    }
}

fn real_main(cli: Cli) -> Result<()> {
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
        Cmd::Fuzz { target, time } => xtask::fuzz::run(target.as_deref(), time),
        Cmd::Mutants(a) => xtask::mutants::cli(a),
        Cmd::Test(a) => xtask::test::run(&xtask::test::TestOptions {
            long: a.long,
            host_only: a.host_only,
            filter: a.filter,
            include_ignored: a.include_ignored,
        }),
        Cmd::Bench { which, icount, board: Some(b), .. } if which == "guest-boot" => {
            xtask::guest_boot::run_board(board_arg(&b)?, icount)
        }
        Cmd::Bench { board: Some(b), .. } => {
            Err(anyhow::Error::new(outcome::Refused(format!("--board {b}: only bench guest-boot takes a board"))))
        }
        Cmd::Bench { which, icount, compare, peer, board: None } => {
            let peer = peer.as_deref().map(xtask::bench::Peer::parse).transpose()?;
            xtask::plot::cli(&which, icount, compare.as_deref(), peer)
        }
        Cmd::Perf(p) if p.scenario == "list" => xtask::perf::list(&p.cpu, p.icount),
        Cmd::Perf(p) => xtask::perf::run(&xtask::perf::PerfArgs {
            scenario: p.scenario,
            events: p.events,
            mechanisms: p.mechanisms,
            cpu: p.cpu,
            gic: p.gic,
            icount: p.icount,
            count_insns: p.count_insns,
            bootargs: p.bootargs,
        }),
        Cmd::Doctor => {
            let tc = toolchain::find()?;
            println!("cross toolchain: {}", tc.description);
            println!("  cargo {}  rustc {}", tc.cargo.display(), tc.rustc.display());
            println!("  std: {:?}", tc.std);
            match &tc.linker {
                Some(l) => println!("  linker: {}", l.display()),
                None => println!("  linker: the toolchain's rust-lld"),
            }
            let sys = system::qemu()?;
            let v = |q: &std::path::Path| {
                xtask::qemu_pkg::version_of(q).map_or_else(|e| format!("version unknown: {e:#}"), |v| v.to_string())
            };
            println!("qemu (virt): {} ({})", sys.display(), v(&sys));
            for l in xtask::kvm_host::doctor_lines() {
                println!("{l}");
            }
            for b in Board::ALL.into_iter().filter(|b| *b != Board::Virt) {
                match QemuConfig::default().for_board(b).qemu() {
                    Ok(q) => println!("qemu (--board {b}, needs {}): {} ({})", b.min_qemu(), q.display(), v(&q)),
                    Err(e) => println!("qemu (--board {b}, needs {}): not available: {e:#}", b.min_qemu()),
                }
            }
            Ok(())
        }
    }
}

/// The `--guest*` options as a [`qemu::Guest`].
fn guest(
    which: Option<&str>,
    initrd: Option<std::path::PathBuf>,
    append: Option<String>,
    board: Board,
) -> Result<Option<qemu::Guest>> {
    let Some(which) = which else { return Ok(None) };
    if let Some(flavour) = xtask::linux::Flavour::from_guest_arg(which) {
        // A board model needs the backports kernel (its console drivers, its DTB's bindings).
        let flavour = if board == Board::Virt { flavour } else { xtask::linux::Flavour::Backports };
        if let Some(i) = &initrd {
            regular_file("--guest-initrd", i).map_err(|why| anyhow::Error::new(outcome::Refused(why)))?;
        }
        let l = xtask::linux::prepare(flavour, &xtask::linux::extra_programs()?)?;
        eprintln!("xtask: Linux guest: {} ({}), initramfs {}", l.kernel.display(), l.package, l.initramfs.display());
        return Ok(Some(qemu::Guest {
            kernel: l.kernel,
            initrd: Some(initrd.unwrap_or(l.initramfs)),
            append: append.unwrap_or_else(|| xtask::linux::default_append(board)),
        }));
    }
    let refuse = |why: String| anyhow::Error::new(outcome::Refused(why));
    regular_file("--guest", std::path::Path::new(which)).map_err(|why| {
        refuse(format!("{why} (a kernel Image or raw binary, or `linux` / `linux-generic` / `linux-backports`)"))
    })?;
    if let Some(i) = &initrd {
        regular_file("--guest-initrd", i).map_err(refuse)?;
    }
    let kernel = xtask::kernel_file::prepare(std::path::Path::new(which)).map_err(|e| refuse(format!("{e:#}")))?;
    Ok(Some(qemu::Guest { kernel, initrd, append: append.unwrap_or_default() }))
}

/// `--board NAME` as a [`Board`], or a usage error listing the names.
fn board_arg(name: &str) -> Result<Board> {
    Board::from_name(name).ok_or_else(|| {
        anyhow::Error::new(outcome::Refused(format!("--board {name}: not a board; one of {}", Board::names())))
    })
}

/// `Ok` for a regular file (a FIFO or a device would block the read or never end).
fn regular_file(option: &str, path: &std::path::Path) -> std::result::Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(format!("{option} {}: not a regular file (a FIFO, device or directory)", path.display())),
        Err(e) => Err(format!("{option} {}: {e}", path.display())),
    }
}

fn run(a: RunArgs) -> Result<()> {
    let board = board_arg(&a.board)?;
    let base = QemuConfig::default().for_board(board);
    let mut cfg = QemuConfig {
        cpu: a.cpu.unwrap_or(base.cpu.clone()),
        gic: a.gic.unwrap_or(base.gic),
        smp: a.smp,
        mem: a.mem.unwrap_or(base.mem.clone()),
        icount: a.icount,
        bootargs: a.bootargs,
        gdb: a.gdb,
        gdb_port: a.gdb_port,
        no_hypervisor: a.no_hypervisor,
        guest: guest(a.guest.as_deref(), a.guest_initrd, a.guest_append, board)?,
        mte: a.mte,
        singlestep: a.singlestep,
        ..base
    };
    // Refuse a bad configuration before fetching or building anything.
    cfg.dtb = board.dtb().map(std::path::PathBuf::from);
    cfg.validate().map_err(|why| anyhow::Error::new(outcome::Refused(why)))?;
    cfg.resolve_dtb()?;
    let tc = toolchain::find()?;
    let qemu_bin = cfg.qemu()?;
    let images = build::build(&tc, &[])?;
    let counts_file = images.kernel.with_file_name("insncount.jsonl");
    if a.count_insns {
        let lib = xtask::plugin::build(&qemu_bin)?;
        let el2 = if a.no_hypervisor { None } else { Some(xtask::plugin::el2_range(&images, board)?) };
        let _ = std::fs::remove_file(&counts_file);
        cfg.plugin = Some(xtask::plugin::qemu_arg(&lib, &counts_file, el2, board));
    }
    let args = cfg.args(&images).map_err(|why| anyhow::Error::new(outcome::Refused(why)))?;
    eprintln!("xtask: {}", cfg.machine_mem(&images).map_err(anyhow::Error::msg)?.describe());
    eprintln!("xtask: {} {}", qemu_bin.display(), args.join(" "));
    if cfg.gdb {
        eprintln!(
            "xtask: waiting for gdb on 127.0.0.1:{}: gdb-multiarch {} -ex 'target remote localhost:{}'",
            cfg.gdb_port,
            images.hypervisor_elf.display(),
            cfg.gdb_port
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
    let out = match xtask::kvm_host::Accel::parse(&a.accel).map_err(|e| anyhow::Error::new(outcome::Refused(e)))? {
        xtask::kvm_host::Accel::Tcg => {
            qemu::run(&qemu_bin, &cfg, &images, timeout, progress, |line| qemu::echo_stdout(&elf_for(line)))?
        }
        accel => xtask::kvm_host::run(accel, &args, timeout, progress, |line| qemu::echo_stdout(&elf_for(line)))?,
    };
    report::print_tables(&out.output);
    if a.count_insns {
        print_insn_counts(&counts_file);
    }
    let verdict = outcome::judge(&out);
    eprintln!("xtask: {verdict} after {:.2} s", out.elapsed.as_secs_f64());
    std::process::exit(verdict.code as i32)
}

/// The plugin's counts: since boot per vCPU and EL, and per marked window.
fn print_insn_counts(path: &std::path::Path) {
    match xtask::plugin::read(path) {
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
