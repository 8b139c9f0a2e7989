//! The host model checker (`model` feature; always on in this crate's own tests).
//!
//! A [`Harness`] (`Harness<K>`, `K` the table's input address type as for
//! [`PageTable`](crate::PageTable): `VirtAddr` by default, `IntermPhysAddr` for stage 2) is a
//! table whose frames ([`ModelFrames`]) and TLB maintenance ([`ModelTlb`]) go to one model, which logs every descriptor write, DSB, ISB and
//! TLBI in order, keeps a model TLB per CPU that may cache any valid translation (leaf entries
//! by size, contiguous range, ASID / VMID / global, and walk-cache entries, never invalid ones),
//! and checks:
//!
//! - at each write: no valid -> valid change of output address, memory type, block size or
//!   contiguous bit without break-before-make (a size or contiguous change is allowed without it
//!   only under BBML2); no misprogrammed contiguous range (under BBML2 the members may disagree
//!   on the contiguous bit alone, or, all contiguous, in permissions alone, while an operation
//!   runs: an in-place convert or permission change of the whole range);
//! - at each free: the table is unreachable, no walk cache holds it, no not-yet-visible write
//!   still links it;
//! - when an operation has returned ([`Harness::check`]): no cached translation
//!   grants more access than the tables (or maps another output), no walk-cache entry names an
//!   unlinked table, no TLBI is left without its completing DSB, no contiguous range is left
//!   with members that disagree (a partial in-place rewrite).
//!
//! In this crate's tests, `model::uspace` puts several such tables (user address spaces) under
//! one ASID-tagged TLB per CPU with the real ASID allocator, for roll-over and lazy relaxation;
//! the scenario, property and seeded-bug tests are in the files beside it.
//!
//! TLBI completion only counts after a DSB; a TLBI issued while a descriptor write is not yet
//! visible (no DSB in between) leaves the old translation re-fillable.
//!
//! ```
//! use pgtable::model::{Harness, ModelTlb};
//! use pgtable::{Attributes, Barrier, Constraints, PhysAddr, Perms, Regime, TlbFeatures, TlbMaintenance, Tlbi, VaHalf, VirtAddr};
//!
//! // A TLB-maintenance implementation with a bug: it drops every TLBI.
//! struct NoTlbi<'a>(&'a mut ModelTlb);
//! impl TlbMaintenance for NoTlbi<'_> {
//!     fn tlbi(&mut self, _: Tlbi) {}
//!     fn dsb(&mut self, b: Barrier) { self.0.dsb(b) }
//!     fn isb(&mut self) { self.0.isb() }
//!     fn features(&self) -> TlbFeatures { self.0.features() }
//! }
//!
//! let mut h = Harness::new(Regime::El1 { asid: 2, half: VaHalf::Lower }, false, false);
//! let rw = Attributes::normal(Perms::RW | Perms::USER);
//! h.pt.map(&mut h.tlb, VirtAddr::new(0x40_0000), 2 << 20, PhysAddr::new(0x8000_0000), rw, Constraints::NONE)?;
//! h.go_live();
//! // A page of the live 2 MiB block made read-only: the block is split (break-before-make
//! // without BBML2) and the page's old translation flushed. The checker finds nothing.
//! h.pt.protect(&mut h.tlb, VirtAddr::new(0x40_3000), 4096, Perms::READ | Perms::USER)?;
//! assert_eq!(h.check(), Ok(()));
//! // The same through the broken implementation: a CPU may still write through its TLB.
//! h.pt.protect(&mut NoTlbi(&mut h.tlb), VirtAddr::new(0x40_5000), 4096, Perms::READ | Perms::USER)?;
//! let report = h.check().unwrap_err();
//! assert!(report.contains("stale TLB entry"), "{report}");
//! # Ok::<(), pgtable::Error>(())
//! ```

// Outside this crate's tests (the `model` feature) only the harness is public; the checks the
// scenarios call directly stay crate-private, unused there.
#![cfg_attr(not(test), allow(dead_code))]

pub(crate) mod harness;
pub(crate) mod memory;
pub(crate) mod recorder;
pub(crate) mod state;
pub(crate) mod tlbmodel;
#[cfg(test)]
pub(crate) mod uspace;

pub use harness::Harness;
pub use memory::ModelFrames;
pub use recorder::ModelTlb;

#[cfg(test)]
mod contpte_scenarios;
#[cfg(test)]
mod kmem_scenarios;
#[cfg(test)]
mod memslot_scenarios;
#[cfg(test)]
mod mutations;
#[cfg(test)]
mod props;
#[cfg(test)]
mod scenarios;
#[cfg(test)]
mod uspace_scenarios;
