//! Host model checker (tests only).
//!
//! [`memory::ModelFrames`] is an instrumented frame store and [`recorder::ModelTlb`] a recording
//! TLB-maintenance implementation; both feed one [`state::Model`], which logs every descriptor
//! write, DSB, ISB and TLBI in order, keeps a model TLB per CPU that may cache any valid
//! translation (leaf entries by size, contiguous range, ASID / VMID / global, and walk-cache
//! entries, never invalid ones), and checks:
//!
//! - at each write: no valid -> valid change of output address, memory type, block size or
//!   contiguous bit without break-before-make (a size or contiguous change is allowed without it
//!   only under BBML2); no misprogrammed contiguous range (under BBML2 the members may disagree
//!   on the contiguous bit alone, or, all contiguous, in permissions alone, while an operation
//!   runs: an in-place convert or permission change of the whole range);
//! - at each free: the table is unreachable, no walk cache holds it, no not-yet-visible write
//!   still links it;
//! - when an operation has returned ([`state::Model::check_quiescent`]): no cached translation
//!   grants more access than the tables (or maps another output), no walk-cache entry names an
//!   unlinked table, no TLBI is left without its completing DSB, no contiguous range is left
//!   with members that disagree (a partial in-place rewrite).
//!
//! [`uspace`] puts several such tables (user address spaces) under one ASID-tagged TLB per CPU
//! with the real ASID allocator, for roll-over and lazy relaxation.
//!
//! TLBI completion only counts after a DSB; a TLBI issued while a descriptor write is not yet
//! visible (no DSB in between) leaves the old translation re-fillable.

pub mod harness;
pub mod memory;
pub mod recorder;
pub mod state;
pub mod tlbmodel;
pub mod uspace;

mod contpte_scenarios;
mod kmem_scenarios;
mod memslot_scenarios;
mod mutations;
mod props;
mod scenarios;
mod uspace_scenarios;
