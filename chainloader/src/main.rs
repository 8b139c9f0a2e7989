//! The resident serial loader. Installed as `kernel_2712.img` on a Pi 5, `kernel8.img` on a Pi 4
//! (`cargo xtask flash --chainloader`), it waits on the console UART the DTB names (any kind
//! `rt::uart` drives: the Pi 5's PL011, the Pi 4's mini UART, ...) for `cargo xtask chainboot`
//! to send a hypervisor and a kernel (protocol and memory plan: `lib/chainboot`), checks them,
//! writes a DTB that points the hypervisor at the kernel, and jumps to the hypervisor as the
//! firmware would have. A refused or broken transfer leaves it waiting for the next one.
//!
//! It runs on the boot CPU only, with the MMU off (so data accesses are uncached and it never
//! has to clean its own writes), at the exception level it was entered at (EL2 on the Pi 5 and
//! on QEMU with virtualization).
// A bare-metal binary: on the host (`cargo clippy --workspace`, `cargo test --workspace`) it is
// only the stub `main` at the end; everything else is the module `bare`, behind one gate.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

/// The chainloader on the machine: its modules are the files beside this one.
#[cfg(target_os = "none")]
#[path = "."]
mod bare {
    pub(crate) mod loader;
    pub(crate) mod receive;
}
/// Each module as `crate::NAME`.
#[cfg(target_os = "none")]
use bare::*;

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("chainloader runs on aarch64-unknown-none: `cargo xtask build` builds it, `cargo xtask flash --chainloader` puts it on a card");
    std::process::exit(abi::exit::USAGE as i32);
}
