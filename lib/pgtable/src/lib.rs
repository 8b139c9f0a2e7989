//! AArch64 translation tables (4 KiB granule) for a hypervisor's own stage 1 (EL2), a guest's
//! stage 2 and a kernel's stage 1 with ASIDs: one walker under map, remap, protect,
//! write-protect, unmap, split, contpte fold/unfold and a read-only walk, with the TLB
//! maintenance and break-before-make each change needs, and a model checker that proves those
//! sequences on the host (`model`, `model` feature).
//!
//! `no_std` + `alloc`, no dependency but `tock-registers` and `spin`. The crate owns no memory
//! and issues no instruction itself: tables come from a [`FrameAlloc`] (physical frames and how
//! to reach them), maintenance goes through a [`TlbMaintenance`] (on the target `hw`'s
//! `HwTlb` issues TLBI / DSB / ISB; on the host [`CountingTlb`] counts them). A table that is not
//! live ([`PageTable::set_live`]) gets no maintenance at all; a live one is consistent with every
//! TLB when each call returns. Page-table code never prints; [`PageTable::dump`] writes into a
//! caller's `fmt::Write`.
//!
//! # Map
//! An EL2 identity map: the largest blocks that fit, a page at the ragged end.
//! ```
//! use pgtable::{Attributes, Constraints, CountingTlb, HeapFrames, PageTable, Perms, PhysAddr, VirtAddr};
//!
//! let mut pt = PageTable::el2(HeapFrames::new())?;
//! let mut tlb = CountingTlb::default();
//! let (start, size) = (0x4000_0000, (1 << 30) + (2 << 20) + 4096);
//! pt.map(&mut tlb, VirtAddr::new(start), size, PhysAddr::new(start), Attributes::normal(Perms::RW), Constraints::NONE)?;
//! let t = pt.translate(VirtAddr::new(start + 0x1234)).expect("mapped");
//! assert_eq!((t.phys.as_u64(), t.level), (start + 0x1234, 1)); // a 1 GiB block
//! assert_eq!(pt.translate(VirtAddr::new(start + size - 1)).unwrap().level, 3); // a page
//! assert_eq!(tlb.counters.tlbi_total(), 0); // not live yet: no maintenance
//! // Then: MAIR_EL2 = pgtable::MAIR, TCR_EL2 = regime::tcr_el2(..), TTBR0_EL2 = pt.root().
//! # let _ = pt.root();
//! # Ok::<(), pgtable::Error>(())
//! ```
//! The input address kind is the table's type: a stage-1 table ([`PageTable::el2`],
//! [`PageTable::el1`]) is a `PageTable<A, VirtAddr>`, a stage-2 table ([`PageTable::stage2`]) a
//! `PageTable<A, IntermPhysAddr>`, and an address of the other kind does not compile (see
//! [`PageTable`]). [`PageTable::new`] takes a [`Regime`] chosen at run time and refuses one of
//! the other kind ([`Error::WrongAddressKind`]).
//!
//! # Protect
//! A live user address space (EL1&0, ASID 5): a permission change flushes exactly the pages it
//! restricted (by ASID), and an upgrade from read-only flushes nothing with
//! [`Policy::lazy_relax`] on.
//! ```
//! use pgtable::{Attributes, Constraints, CountingTlb, HeapFrames, PageTable, Perms, PhysAddr, VaHalf, VirtAddr};
//!
//! let mut pt = PageTable::el1(5, VaHalf::Lower, HeapFrames::new())?;
//! let mut tlb = CountingTlb::default();
//! let rw = Attributes::normal(Perms::RW | Perms::USER);
//! pt.map(&mut tlb, VirtAddr::new(0x40_0000), 16 * 4096, PhysAddr::new(0x8000_0000), rw, Constraints::PAGES_ONLY)?;
//! pt.set_live(&mut tlb);
//! let before = tlb.counters;
//! pt.protect(&mut tlb, VirtAddr::new(0x40_2000), 2 * 4096, Perms::READ | Perms::USER)?;
//! assert_eq!(tlb.counters.since(&before).tlbi_total(), 2); // one TLBI VALE1IS per page
//! assert_eq!(pt.translate(VirtAddr::new(0x40_2000)).unwrap().attrs.perms, Perms::READ | Perms::USER);
//! pt.policy_mut().lazy_relax = true; // the fault handler fixes a stale entry (fix_spurious_fault)
//! let before = tlb.counters;
//! pt.protect(&mut tlb, VirtAddr::new(0x40_2000), 2 * 4096, Perms::RW | Perms::USER)?;
//! assert_eq!(tlb.counters.since(&before).tlbi_total(), 0);
//! # Ok::<(), pgtable::Error>(())
//! ```
//!
//! # Split
//! A guest's stage 2 mapped with 2 MiB blocks, split to pages while live: each block is
//! replaced by a full level-3 table (break-before-make, or in place under
//! [`Config::bbml2`](Config)); the output addresses and permissions stay.
//! ```
//! use pgtable::{Attributes, Constraints, CountingTlb, HeapFrames, IntermPhysAddr, PageTable, Perms, PhysAddr};
//!
//! let mut s2 = PageTable::stage2(1, HeapFrames::new())?;
//! let mut tlb = CountingTlb::default();
//! let ram = IntermPhysAddr::new(0x4000_0000);
//! s2.map(&mut tlb, ram, 8 << 20, PhysAddr::new(0x8000_0000), Attributes::normal(Perms::RWX), Constraints::NONE)?;
//! s2.set_live(&mut tlb);
//! let blocks = s2.split(&mut tlb, ram, 8 << 20, 3, false)?;
//! assert_eq!(blocks, 4);
//! let t = s2.translate(IntermPhysAddr::new(0x4012_3456)).unwrap();
//! assert_eq!((t.level, t.phys.as_u64()), (3, 0x8012_3456));
//! # Ok::<(), pgtable::Error>(())
//! ```
//!
//! # A dirty-log round
//! Write-protect a memory slot, let the guest's write faults make their pages writable again,
//! then collect the dirty pages with a read-only walk (the hypervisor's `dirtylog` does this
//! per round, with the `TABLE_NO_WRITABLE` summary letting clean subtrees be skipped).
//! ```
//! use pgtable::descriptor::grants_write;
//! use pgtable::walker::WalkFlags;
//! use pgtable::{Attributes, Constraints, CountingTlb, HeapFrames, IntermPhysAddr, PageTable, Perms, PhysAddr};
//!
//! let mut s2 = PageTable::stage2(2, HeapFrames::new())?;
//! let regime = s2.regime();
//! let mut tlb = CountingTlb::default();
//! let (slot, size) = (IntermPhysAddr::new(0x4000_0000), 4 << 20);
//! s2.map(&mut tlb, slot, size, PhysAddr::new(0x8000_0000), Attributes::normal(Perms::RWX), Constraints::NONE)?;
//! s2.set_live(&mut tlb);
//! // Start logging: pages, read-only.
//! s2.split(&mut tlb, slot, size, 3, false)?;
//! s2.write_protect(&mut tlb, slot, size)?;
//! // The guest writes two pages: each permission fault (HPFAR gives the IPA) makes its page
//! // writable again and the write is retried.
//! for ipa in [0x4000_3000, 0x4020_0000] {
//!     s2.protect(&mut tlb, IntermPhysAddr::new(ipa), 4096, Perms::RWX)?;
//! }
//! // Collect: every writable page was written since the write-protect.
//! let mut dirty = Vec::new();
//! s2.walk(slot, size, WalkFlags::LEAF, |e| {
//!     if grants_write(regime, e.desc) {
//!         dirty.push(e.off);
//!     }
//!     Ok(())
//! })?;
//! assert_eq!(dirty, [0x4000_3000, 0x4020_0000]);
//! // The next round starts by write-protecting again.
//! s2.write_protect(&mut tlb, slot, size)?;
//! # Ok::<(), pgtable::Error>(())
//! ```
//!
//! # The model checker
//! See `model` (`model` feature, host only): the same operations on a table whose memory
//! and TLB maintenance go to a model of every CPU's TLB, checked for break-before-make, stale
//! translations and freed-but-reachable tables after each write and each operation.
//!
//! # Modules
//! - [`addr`]: `PhysAddr` / `IntermPhysAddr` / `VirtAddr`, granule constants.
//! - [`descriptor`]: descriptors built with tock-registers bitfields, software bits,
//!   [`descriptor::needs_flush`].
//! - [`regime`]: [`Regime`], MAIR / TCR_EL2 / TCR_EL1 / VTCR_EL2 values.
//! - [`frame`] and [`tlb`]: the two traits at the edge; `hw` (aarch64 only) implements TLB maintenance on
//!   the target.
//! - [`asid`]: ASIDs for user address spaces, with generation roll-over.
//! - [`kmem`]: a kernel's linear-map policy: BBML2 decision, linear-map constraints,
//!   `set_memory`.
//! - [`cpu`]: MIDR decoding, the BBML2 capability (allow-list) and other ID-register fields.
//! - [`percpu`]: per-CPU kernel roots that share all but one slot.
//! - [`walker`]: the one walker; [`gather`]: the TLB gather; [`PageTable`] and its operations.
//!
//! Measured against `aarch64-paging`: README.md (`cargo xtask bench pgtable` in the repository).

// The model checker (`model` feature, host only) keeps its state in std collections.
#![cfg_attr(not(any(test, feature = "model")), no_std)]
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
#[cfg(any(test, feature = "model"))]
pub mod model;
#[cfg(any(test, feature = "seeded-bugs"))]
pub mod mutation;
mod ops;
pub mod percpu;
pub mod raw;
pub mod regime;
mod table;
pub mod tlb;
pub mod vector;
pub mod walker;

/// The README's example, run as a doc-test too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use addr::{InputAddress, IntermPhysAddr, PhysAddr, VirtAddr, PAGE_SIZE};
pub use attrs::{Attributes, Constraints, MemType, Perms};
pub use cpu::{Midr, Refusal};
pub use error::{Arg, Error, ErrorKind};
pub use frame::{FrameAlloc, HeapFrames};
pub use gather::{FlushPolicy, TlbGather};
pub use ops::{FreshPage, Leaf, PageLeaf};
pub use regime::{Regime, VaHalf, MAIR};
pub use table::{Config, CrossingBlocks, Opts, PageTable, Policy, SplitOpts, Stats, Translation};
pub use tlb::{Barrier, CountingTlb, Shareability, TlbCounters, TlbFeatures, TlbMaintenance, Tlbi, TlbiOp, TlbiRange};
