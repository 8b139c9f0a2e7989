//! Runtime pieces shared by both bare-metal binaries (`hypervisor` at EL2, `kernel` at EL1).
//!
//! * [`image`]: the Linux arm64 `Image` header (both binaries are Images, so QEMU and the Pi 5
//!   firmware pass x0 = DTB, and the hypervisor loads the kernel with the same protocol as Linux).
//! * `start` (target only): entry point, self-relocation, boot stacks, BSS clearing, secondary entry.
//! * `mmu` (target only): the one MMU-enable sequence (EL1 and EL2).
//! * `trap` (target only): one exception vector table shape for EL1 and EL2 and the [`TrapFrame`].
//! * [`heap`]: the heap each binary starts in its BSS and grows into RAM.
//! * [`uart`] (drivers [`pl011`], [`imx_uart`], [`cadence_uart`], [`ns16550`]) and
//!   [`console`]: the serial console the DTB names, `print!`/`println!`.
//! * [`esr`]: exception syndrome decoding (`abi::esr`, re-exported).
//! * [`features`]: CPU features from the ID registers; [`el2`] and [`el1`]: every control-register
//!   value the binaries write at entry and for a guest, per feature and per EL2 mode (nVHE / hVHE),
//!   tested on the host; `entry` (target only) writes them.
//! * `smccc` (target only): the one `HVC #0` / `SMC #0` call of the SMC Calling Convention.
//! * `backtrace` (target only): frame-pointer unwinding for panics and unexpected exceptions.
#![no_std]
#![deny(missing_docs)]

#[cfg(test)]
extern crate std;

pub mod cadence_uart;
pub mod console;
pub mod crc;
pub use abi::esr;
pub mod el1;
pub mod el2;
pub mod features;
pub mod gicv2;
pub mod heap;
pub use abi::image;
pub mod imx_uart;
pub mod lines;
pub mod ns16550;
pub use abi::pe;
pub mod pl011;
pub mod rx;
pub mod uart;

#[cfg(target_arch = "aarch64")]
pub mod backtrace;
#[cfg(target_arch = "aarch64")]
pub mod cache;
#[cfg(target_arch = "aarch64")]
pub mod entry;
#[cfg(target_arch = "aarch64")]
pub mod mmu;
#[cfg(target_arch = "aarch64")]
pub mod smccc;
#[cfg(target_arch = "aarch64")]
pub mod start;
#[cfg(target_arch = "aarch64")]
pub mod trap;

#[cfg(target_arch = "aarch64")]
pub use trap::TrapFrame;

pub use abi::MAX_CPUS;

// The ABI's page is the translation granule the page tables use.
const _: () = assert!(abi::PAGE_SIZE == pgtable::PAGE_SIZE);
/// Boot stack per CPU.
pub const STACK_SIZE: usize = 64 * 1024;

/// The affinity fields of MPIDR_EL1 (Aff3 in [39:32], Aff2, Aff1, Aff0): what names a CPU (a
/// device tree's `cpu` `reg`, a PSCI target, GICv3 routing).
pub const MPIDR_AFF_MASK: u64 = 0xff_00ff_ffff;

/// The physical counter (CNTPCT_EL0) in nanoseconds since it started (the hypervisor's clock;
/// the kernel reads the virtual one, which the hypervisor leaves unoffset).
#[cfg(target_arch = "aarch64")]
pub fn counter_ns() -> u64 {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    abi::time::ticks_to_ns(CNTPCT_EL0.get(), CNTFRQ_EL0.get())
}

/// This CPU's MPIDR affinity.
#[cfg(target_arch = "aarch64")]
pub fn mpidr_affinity() -> u64 {
    use aarch64_cpu::registers::{Readable, MPIDR_EL1};
    MPIDR_EL1.get() & MPIDR_AFF_MASK
}
