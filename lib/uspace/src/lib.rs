//! User address spaces of the guest kernel, on the host as on the target: EL0 programs
//! ([`elf`]), regions ([`vma`]), and one address space with its system calls and its page-fault
//! decision ([`space`]), over `lib/pgtable`. The kernel wraps an [`AddressSpace`] in a lock,
//! gives it frames and TLB maintenance, and keeps its table's ASID current; everything here is
//! tested on the host with heap frames and a counting TLB.
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

extern crate alloc;

pub mod elf;
pub mod space;
pub mod vma;

pub use space::{Access, AddressSpace, Denial, FaultKind, FaultOutcome, LoadError, Loaded, Mmap, SpaceStats};

#[cfg(test)]
mod tests;
