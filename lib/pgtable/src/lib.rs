//! One page-table library for the EL2 hypervisor (its own stage 1 and the guests' stage 2) and
//! the EL1 kernel (stage 1 with ASIDs), proven on the host by a TLB / break-before-make model
//! checker before any of it runs on a CPU.
//!
//! - [`addr`]: opaque `PhysAddr` / `IntermPhysAddr` / `VirtAddr`, granule constants.
//! - [`descriptor`]: descriptors built with tock-registers bitfields, software bits,
//!   [`descriptor::needs_flush`].
//! - [`regime`]: [`Regime`], MAIR / TCR_EL2 / TCR_EL1 / VTCR_EL2 values.
//! - [`frame`] and [`tlb`]: the two traits at the edge; [`hw`] implements TLB maintenance on
//!   the target.
//! - [`asid`]: ASIDs for user address spaces, with generation roll-over.
//! - [`kmem`]: the EL1 kernel's policy: BBML2 decision, linear-map constraints, `set_memory`.
//! - [`cpu`]: MIDR decoding, the BBML2 capability (allow-list) and other ID-register fields.
//! - [`walker`]: the one walker; [`gather`]: the TLB gather; [`PageTable`] and its operations.
//!
//! Page-table code never prints; [`PageTable::dump`] writes into a caller's `fmt::Write`.

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate alloc;

pub mod addr;
pub mod asid;
pub mod attrs;
pub mod cpu;
mod ctx;
pub mod descriptor;
pub mod error;
pub mod frame;
pub mod gather;
#[cfg(target_arch = "aarch64")]
pub mod hw;
pub mod kmem;
#[cfg(test)]
mod model;
#[cfg(any(test, feature = "seeded-bugs"))]
pub mod mutation;
mod ops;
pub mod percpu;
pub mod regime;
mod table;
pub mod tlb;
pub mod walker;

pub use addr::{IntermPhysAddr, PhysAddr, VirtAddr, PAGE_SIZE};
pub use attrs::{Attributes, Constraints, MemType, Perms};
pub use cpu::{Midr, Refusal};
pub use error::{Arg, Error, ErrorKind};
pub use frame::{FrameAlloc, HeapFrames};
pub use gather::{FlushPolicy, TlbGather};
pub use ops::Leaf;
pub use regime::{Regime, VaHalf, MAIR};
pub use table::{Config, CrossingBlocks, Opts, PageTable, Policy, SplitOpts, Stats, Translation};
pub use tlb::{Barrier, CountingTlb, Shareability, TlbCounters, TlbFeatures, TlbMaintenance, Tlbi, TlbiOp, TlbiRange};
