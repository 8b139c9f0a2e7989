//! The EL1 guest kernel. Boots as a Linux arm64 Image (x0 = DTB), under the hypervisor or alone
//! on QEMU (`--no-hypervisor`). Brings up every CPU with PSCI, prints a banner per CPU, runs the
//! self-tests named on its command line, and ends the run.
// A bare-metal binary: on the host (`cargo clippy --workspace`, `cargo test --workspace`) it is
// only the stub `main` at the end; everything else is the module `kern`, behind one gate.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

/// The kernel on the machine: its modules are the files and folders beside this one.
#[cfg(target_os = "none")]
#[path = "."]
mod kern {
    pub(crate) mod arch;
    pub(crate) mod bench;
    pub(crate) mod boot;
    pub(crate) mod hyp;
    pub(crate) mod irq;
    pub(crate) mod mm;
    pub(crate) mod percpu;
    pub(crate) mod perf;
    pub(crate) mod sched;
    pub(crate) mod selftest;
    pub(crate) mod smp;
    pub(crate) mod syscall;
    pub(crate) mod trap;
    pub(crate) mod user_programs;
    pub(crate) mod work;
}
/// Each module as `crate::NAME`.
#[cfg(target_os = "none")]
use kern::*;

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("kernel runs on aarch64-unknown-none: `cargo xtask run` builds and boots it");
    std::process::exit(abi::exit::USAGE as i32);
}
