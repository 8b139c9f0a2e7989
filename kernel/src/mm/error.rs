//! [`MmError`]: why a change of the kernel's own tables (`mm::init`, `vmalloc` / `vfree`,
//! `ioremap`, the kernel-page and per-CPU-root mappings) failed. `set_memory_*` has its own
//! ([`super::setmem::SetMemoryError`]).

use alloc::string::{String, ToString};
use core::fmt;
use pgtable::percpu::PerCpuError;

/// Why a change of the kernel's tables failed. `Display` is the message the boot or the
/// self-test reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmError {
    /// Called before `mm::init` built the kernel's tables (`call`: what was called).
    NoTables { call: &'static str },
    /// The page-table library refused a step of `mm::init` (`what`: the step).
    Table { what: &'static str, err: pgtable::Error },
    /// Mapping `what`, `[pa, pa + len)` at `va`, was refused.
    Map { what: &'static str, va: u64, pa: u64, len: u64, err: pgtable::Error },
    /// The frame allocator had no frame (`what`: what the frame was for).
    NoFrame { what: &'static str },
    /// The vmalloc area has no room left (the area is never reused).
    VmallocFull,
    /// `vfree` of an address outside the vmalloc area.
    NotVmalloc { va: u64 },
    /// `vfree` of a range whose page `page` is not mapped.
    NotMapped { va: u64, page: u64 },
    /// The page-table library refused a step of `vfree(va)`.
    Vfree { va: u64, err: pgtable::Error },
    /// `ioremap` of `[pa, +size)`: the MMIO window is full.
    MmioFull { pa: u64, size: u64 },
    /// The per-CPU roots could not be built.
    RootsBuild(PerCpuError),
    /// A per-CPU root call before the roots were built.
    RootsNotBuilt,
    /// Page `page` of CPU `cpu`'s window could not be mapped.
    Window { cpu: usize, page: u64, err: PerCpuError },
    /// A change of the kernel table could not be copied into the per-CPU roots (rule 3: a
    /// removed top-level entry is refused).
    RootsSync(PerCpuError),
}

impl fmt::Display for MmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MmError::NoTables { call } => write!(f, "{call} before mm::init"),
            MmError::Table { what, err } => write!(f, "{what}: {err}"),
            MmError::Map { what, va, pa, len, err } => {
                write!(f, "mapping {what} [{pa:#x}, {:#x}) at {va:#x}: {err}", pa + len)
            }
            MmError::NoFrame { what } => write!(f, "no frame for {what}"),
            MmError::VmallocFull => f.write_str("vmalloc area exhausted"),
            MmError::NotVmalloc { va } => write!(f, "vfree({va:#x}): not in the vmalloc area"),
            MmError::NotMapped { va, page } => write!(f, "vfree: {va:#x} page {page} not mapped"),
            MmError::Vfree { va, err } => write!(f, "vfree({va:#x}): {err}"),
            MmError::MmioFull { pa, size } => write!(f, "ioremap [{pa:#x}, +{size:#x}): the MMIO window is full"),
            MmError::RootsBuild(e) => write!(f, "per-CPU roots: {e}"),
            MmError::RootsNotBuilt => f.write_str("per-CPU roots not built"),
            MmError::Window { cpu, page, err } => write!(f, "CPU {cpu}'s window page {page}: {err}"),
            MmError::RootsSync(e) => write!(f, "{e}"),
        }
    }
}

/// The boot and the self-tests report errors as text.
impl From<MmError> for String {
    fn from(e: MmError) -> String {
        e.to_string()
    }
}
