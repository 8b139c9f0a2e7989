//! The EL2 hypervisor. Entered by QEMU or the Pi 5 firmware as a Linux arm64 Image with x0 = DTB;
//! runs one guest at EL1 on every CPU, with the kernel Image it finds in the initrd.
//!
//! Boot: `start::rt_main` (boot CPU) runs `boot`'s phases: it parses the DTB, brings up the
//! console, reserves the hypervisor's memory, turns on its EL2 MMU (W^X), builds stage 2 for the
//! guest, loads the guest kernel and its DTB, configures EL2 and enters the guest. Other CPUs
//! start in `start::rt_secondary_main` when the guest asks PSCI CPU_ON for them. After that the
//! hypervisor only runs in `trap::rt_exception`.
// A bare-metal binary: on the host (`cargo clippy --workspace`, `cargo test --workspace`) it is
// only the stub `main` at the end; everything else is the module `hyp`, behind one gate.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

/// The hypervisor on the machine: its modules are the files beside this one.
#[cfg(target_os = "none")]
#[path = "."]
mod hyp {
    pub(crate) mod boot;
    pub(crate) mod counters;
    pub(crate) mod cpu;
    pub(crate) mod dirtylog;
    pub(crate) mod efi;
    pub(crate) mod el2;
    pub(crate) mod el2mode;
    pub(crate) mod exit;
    pub(crate) mod guest;
    pub(crate) mod guest_el1;
    pub(crate) mod hypercall;
    pub(crate) mod inject;
    pub(crate) mod mem;
    pub(crate) mod memslot;
    pub(crate) mod migrate;
    pub(crate) mod mmu;
    pub(crate) mod options;
    pub(crate) mod psci;
    pub(crate) mod slotlog;
    pub(crate) mod smccc;
    pub(crate) mod split;
    pub(crate) mod start;
    pub(crate) mod trap;
}
/// Each module as `crate::NAME`.
#[cfg(target_os = "none")]
use hyp::*;

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("hypervisor runs on aarch64-unknown-none: `cargo xtask run` builds and boots it");
    std::process::exit(abi::exit::USAGE as i32);
}
