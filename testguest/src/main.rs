//! The project's own test guest: a small bare-metal binary that runs at EL1 with the MMU off,
//! built by the xtask in two forms, an arm64 Image (`testguest.img`) and a raw binary without
//! the Image header (`testguest.bin`, loaded as QEMU loads one). It reads its device tree
//! (x0), takes its words from `/chosen/bootargs` (strictly, `lib/bootargs`: [`WORDS`]), does
//! what `testguest=MODE` asks, and ends the run: under the pgtlab hypervisor with the exit
//! hypercall (the hypervisor prints the run's final line), alone with its own final line and
//! PSCI SYSTEM_OFF.
//!
//! Modes:
//! * `view`: what a guest sees, checked from the inside (`view.rs`): its DTB above its image,
//!   BSS and stacks, its load address, RAM (`testguest.mem`), CPUs (`testguest.smp`), PSCI
//!   version and features, the timer, the GIC, its command line. `hang`: a failed check, then
//!   silence (for the time-limit verdict).
//! * `entry-el2`, `entry-el1` (at EL2, as a boot loader: `entry.rs`): leave the control
//!   registers hostile but legal and enter the Image at `testguest.next` at EL2 or EL1, as the
//!   Linux boot protocol says; the words before the `pgtlab` marker are the test guest's, the
//!   rest the next Image's.
//! * `forge-reset`, `forge-panic`: a guest that prints final lines claiming success (`forge.rs`),
//!   then resets or panics: the run must fail all the same.
//! * `semihost`: what a hostile guest tries first. QEMU semihosting (`hlt #0xf000`), if it
//!   were on, would be served by QEMU itself before any trap: SYS_OPEN + SYS_WRITE create a
//!   host file (`testguest.path=PATH` + `.open`), SYS_SYSTEM runs a host command (`touch
//!   PATH.system`), SYS_EXIT ends QEMU with status 0. Each must come back as an undefined
//!   instruction at EL1, reported in a `testguest_semihost` record; the run then ends as a guest
//!   failure, since the guest's attempt to end it successfully through SYS_EXIT went nowhere.
// A bare-metal binary: on the host (`cargo clippy --workspace`, `cargo test --workspace`) it is
// only the stub `main` at the end; everything else is the module `bare`, behind one gate.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

/// The test guest on the machine: its modules are the files beside this one.
#[cfg(target_os = "none")]
#[path = "."]
mod bare {
    pub(crate) mod calls;
    pub(crate) mod entry;
    pub(crate) mod forge;
    pub(crate) mod guest;
    pub(crate) mod semihost;
    pub(crate) mod view;
}
/// Each module as `crate::NAME`.
#[cfg(target_os = "none")]
use bare::*;

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("testguest runs on aarch64-unknown-none: `cargo xtask run --guest` boots it (the tests in tests/ do)");
    std::process::exit(abi::exit::USAGE as i32);
}
