//! Runtime pieces shared by both bare-metal binaries (`hypervisor` at EL2, `kernel` at EL1).
//!
//! * [`image`]: the Linux arm64 `Image` header (both binaries are Images, so QEMU and the Pi 5
//!   firmware pass x0 = DTB, and the hypervisor loads the kernel with the same protocol as Linux).
//! * `start` (target only): entry point, self-relocation, boot stacks, BSS clearing, secondary entry.
//! * `mmu` (target only): the one MMU-enable sequence (EL1 and EL2).
//! * `trap` (target only): one exception vector table shape for EL1 and EL2 and the [`TrapFrame`].
//! * [`uart`] (drivers [`pl011`], [`imx_uart`], [`cadence_uart`], [`ns16550`]) and
//!   [`console`]: the serial console the DTB names, `print!`/`println!`.
//! * [`esr`]: exception syndrome decoding, shared and tested on the host.
//! * [`features`]: CPU features from the ID registers and the EL2 controls that give them to a
//!   guest (SVE, SME, MTE, PMU, ...), tested on the host.
//! * `backtrace` (target only): frame-pointer unwinding for panics and unexpected exceptions.
#![no_std]
#![deny(missing_docs)]

pub mod cadence_uart;
pub mod console;
pub mod esr;
pub mod features;
pub mod image;
pub mod imx_uart;
pub mod ns16550;
pub mod pl011;
pub mod uart;

#[cfg(target_arch = "aarch64")]
pub mod backtrace;
#[cfg(target_arch = "aarch64")]
pub mod cache;
#[cfg(target_arch = "aarch64")]
pub mod mmu;
#[cfg(target_arch = "aarch64")]
pub mod start;
#[cfg(target_arch = "aarch64")]
pub mod trap;

#[cfg(target_arch = "aarch64")]
pub use trap::TrapFrame;

/// Most CPUs either binary brings up. QEMU `virt` runs up to 8 here; the Pi 5 has 4.
pub const MAX_CPUS: usize = 8;
/// Boot stack per CPU.
pub const STACK_SIZE: usize = 64 * 1024;
