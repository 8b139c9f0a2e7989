//! `cargo xtask`: the project's command line. docs/commands.md says what each does; each is a module
//! of the `xtask` library (`xtask/src/lib.rs` shows the layers).

use abi::exit;
use anyhow::Result;
use clap::{Parser, Subcommand};
use xtask::error::{self, ExitWith};
use xtask::provision::toolchain;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, boot, test and measure the EL2 hypervisor and EL1 kernel")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build both Images and boot them in QEMU (the hypervisor at EL2, the kernel as its guest).
    Run(xtask::run::RunArgs),
    /// Build both Images only.
    Build,
    /// Host unit tests of every crate, then the QEMU integration tests.
    Test(xtask::test::Args),
    /// Benchmarks: `pgtable` (host, against aarch64-paging), an in-guest one (`exits`, ...),
    /// `guest-boot`, `all` (every one, then the summary against seeds and goals), or `summary`
    /// (from saved runs).
    Bench(xtask::bench::Args),
    /// Put the hypervisor and kernel (or the serial chainloader) on a Raspberry Pi's SD card:
    /// a mounted boot partition, a card, or a card image.
    Flash(xtask::flash::Args),
    /// Send the hypervisor and kernel to the serial chainloader on a board (or in QEMU) and show
    /// its console.
    Chainboot(xtask::chainboot::Args),
    /// Show a board's serial console until the run's final line; exit with its code.
    Console(xtask::chainboot::ConsoleArgs),
    /// PMU events and the project's counters around a scenario, per mechanism setting.
    Perf(xtask::perf::Args),
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

fn main() {
    // Every exit code comes from the table in lib/abi/src/exit.rs (docs/exit-codes.md).
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
        let code = error::code_of(&e);
        match e.downcast_ref::<ExitWith>() {
            Some(ExitWith(v)) => eprintln!("xtask: {v}"),
            None => eprintln!("xtask: error: {e:#}"),
        }
        std::process::exit(code as i32);
    }
}

fn real_main(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Run(a) => xtask::run::run(a),
        Cmd::Build => {
            xtask::build::build(&toolchain::find()?, &[])?;
            Ok(())
        }
        Cmd::Lint => xtask::lint::run(&toolchain::find()?),
        Cmd::Flash(a) => xtask::flash::cli(a),
        Cmd::Chainboot(a) => std::process::exit(xtask::chainboot::cli(a)?),
        Cmd::Console(a) => std::process::exit(xtask::chainboot::console_cli(a)?),
        Cmd::Fuzz { target, time } => xtask::fuzz::run(target.as_deref(), time),
        Cmd::Mutants(a) => xtask::mutants::cli(a),
        Cmd::Test(a) => xtask::test::cli(a),
        Cmd::Bench(a) => xtask::bench::cli(a),
        Cmd::Perf(a) => xtask::perf::cli(a),
        Cmd::Doctor => xtask::doctor::run(),
    }
}
