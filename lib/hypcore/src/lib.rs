//! The hypervisor's decisions that touch no hardware, as a `no_std` library tested on the host
//! (`cargo test -p hypcore`). The hypervisor binary calls these and does the side effects.
//!
//! * [`range`]: physical ranges `[start, end)` and the arithmetic on sets of them (subtract,
//!   take from the top, first fit), all with checked arithmetic.
//! * [`plan`]: the boot-time memory plan: which RAM the hypervisor keeps (its image and frame
//!   pool, the memslot pool) and which the guest gets, with an error that names the obstacle
//!   when a request cannot be met.
//! * [`exception`]: exception entry into the guest (the synchronous external abort it gets
//!   for a stray access), as AArch64.TakeException defines it.
//! * [`fault`]: a guest's abort at EL2 decoded once (ESR, FAR, HPFAR) into one typed value,
//!   with the IPA where HPFAR holds it.
//! * [`efi`]: what the UEFI entry takes from the firmware: RAM from the memory map (runtime
//!   and reserved regions left out), the command line from the load options.
//! * [`home`]: where the hypervisor runs (it moves itself to the top of RAM at boot) so the
//!   guest's RAM has no hole.
//! * [`load`]: where QEMU's loader puts a kernel, its initrd and the DTB, so the guest gets
//!   them at the same addresses under the hypervisor, and the order of the copies that put
//!   them there.
//! * [`share`]: how much RAM the machine needs so the guest gets exactly its `--mem` and the
//!   hypervisor its share on top (the xtask's `-m`), found by running the decisions above.
//! * [`options`]: the hypervisor's `hyp.` boot-word table (the xtask reads it too) and the
//!   words the memory plan reads.
//! * [`park`]: holding a CPU the guest has not started in `WFI` (GICv2 boards without PSCI
//!   firmware) and waking it with an SGI, giving the guest its GIC back untouched: both sides
//!   as step machines whose every interleaving the tests run.
//! * [`psci`]: PSCI's decisions (FEATURES, CPU_SUSPEND's check, CPU_ON's checks, the
//!   hypervisor's own AFFINITY_INFO) and a started CPU's life cycle ([`psci::CpuStart`]).
//! * [`mmio`]: decoding a trapped load/store (ESR syndrome) for MMIO emulation.
//! * [`slot`]: MEMSLOT_CREATE's checks against every kind of taken range and its mapping with
//!   a rollback that unmaps only what it mapped.
//! * [`dirty`]: the dirty-bitmap arithmetic of dirty logging (initially-set words, the
//!   argument checks of a clear, which pages one mask word write-protects).
#![no_std]
#![deny(missing_docs)]

extern crate alloc;

pub mod devices;
pub mod dirty;
pub mod efi;
pub mod exception;
pub mod fault;
pub mod home;
pub mod load;
pub mod mmio;
pub mod options;
pub mod park;
pub mod plan;
pub mod psci;
pub mod range;
pub mod share;
pub mod slot;
pub mod sync;
#[cfg(test)]
mod testdtb;

pub use range::Range;

/// 4 KiB (`abi::PAGE_SIZE`).
pub use abi::PAGE_SIZE as PAGE;
/// 2 MiB: a level-2 block.
pub const BLOCK_2M: u64 = 2 << 20;
/// 1 GiB: a level-1 block.
pub const BLOCK_1G: u64 = 1 << 30;
