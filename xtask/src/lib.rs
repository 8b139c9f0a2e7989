//! The host side of the project, as a library so the integration tests in `tests/` boot QEMU
//! exactly the way `cargo xtask run` does.
//!
//! * [`toolchain`]: finds (or installs) a toolchain that builds `aarch64-unknown-none`.
//! * [`system`]: Debian packages the project needs (QEMU, lld), installed with apt when root.
//! * [`lint`]: clippy with warnings as errors, host crates and bare-metal binaries.
//! * [`build`]: builds the two binaries and turns their ELF files into arm64 Images.
//! * [`qemu`]: QEMU command lines, usable CPU models, and runs with a time limit.
//! * [`outcome`]: a run's verdict, a row of the exit-code table (`lib/abi/src/exit.rs`).
//! * [`fuzz`]: `cargo xtask fuzz`, libFuzzer runs of the `fuzz` crate's targets.
//! * [`cpio`], [`debian`], [`linux`]: Debian's arm64 Linux as a guest (apt-get download into
//!   `target/downloads/linux/`, a busybox initramfs built here).
//! * [`report`]: the `@@report` records the guest and hypervisor print, as tables.
//! * [`chainboot`]: the host side of the serial chainloader (and the loader in QEMU on a pty).
//! * [`perf`]: `cargo xtask perf`: counters of any scenario per mechanism setting, side by side.
//! * [`plot`]: SVG plots of benchmark results, run-to-run comparison with verdicts, and the
//!   `bench all` summary against each mechanism's seed and goal.
//! * [`plugin`]: the instruction-counting QEMU plugin (built with the host C compiler).

pub mod bench;
pub mod build;
pub mod chainboot;
pub mod cpio;
pub mod debian;
pub mod flash;
pub mod fuzz;
pub mod guest_boot;
pub mod lint;
pub mod linux;
pub mod outcome;
pub mod peer;
pub mod perf;
pub mod plot;
pub mod plugin;
pub mod qemu;
pub mod report;
pub mod system;
pub mod test;
pub mod toolchain;

use std::path::PathBuf;

/// The workspace root (parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace").to_path_buf()
}
