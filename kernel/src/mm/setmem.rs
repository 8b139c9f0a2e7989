//! `set_memory_ro / rw / x / nx / valid / invalid` on `pages` pages at `va` (the image, the
//! vmalloc area or the linear map, all in TTBR1). Under `rodata=full` the change (except
//! x / nx: the linear map is never executable) is applied to the linear alias of every page too.
//! The page-table work is `pgtable::kmem::set_memory`: splits only at the two ends of the range
//! (live and without TLBI under BBML2; without BBML2 the linear map is PTE-only and nothing
//! is ever split live), blocks fully inside stay blocks, and with contpte the vmalloc area's
//! groups are folded back where they became uniform (the linear map is never refolded).

use super::frames::PAGE;
use super::layout::{is_linear, is_vmalloc, UPPER};
use super::{contpte, info, Tables, LINEAR_BASE, TABLES};
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use pgtable::kmem::{self, MemChange};
use pgtable::{Perms, VirtAddr};

/// Why a `set_memory_*` call changed nothing (or, for `Table` on the linear alias, changed the
/// range itself but not all of its alias).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetMemoryError {
    /// Called before `mm::init` built the kernel's tables.
    NoTables,
    /// `va` is below the kernel's half (TTBR1): not a kernel address.
    NotKernel { change: MemChange, va: u64 },
    /// The page-table library refused the change of `[at, +pages)`: `at` is the range asked for,
    /// or under `rodata=full` a run of its linear alias.
    Table { change: MemChange, at: u64, pages: usize, err: pgtable::Error },
}

impl fmt::Display for SetMemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetMemoryError::NoTables => f.write_str("set_memory before mm::init"),
            SetMemoryError::NotKernel { change, va } => {
                write!(f, "set_memory {change:?} at {va:#x}: not a kernel address")
            }
            SetMemoryError::Table { change, at, pages, err } => {
                write!(f, "set_memory {change:?} [{at:#x}, +{pages} pages): {err}")
            }
        }
    }
}

/// The self-tests and benchmarks report errors as text.
impl From<SetMemoryError> for String {
    fn from(e: SetMemoryError) -> String {
        e.to_string()
    }
}

pub fn set_memory_ro(va: u64, pages: usize) -> Result<(), SetMemoryError> {
    change(va, pages, MemChange::Ro)
}
pub fn set_memory_rw(va: u64, pages: usize) -> Result<(), SetMemoryError> {
    change(va, pages, MemChange::Rw)
}
pub fn set_memory_x(va: u64, pages: usize) -> Result<(), SetMemoryError> {
    change(va, pages, MemChange::X)
}
pub fn set_memory_nx(va: u64, pages: usize) -> Result<(), SetMemoryError> {
    change(va, pages, MemChange::Nx)
}
/// Makes invalid (PROT_NONE) pages accessible again, read-write (the default of the linear map).
pub fn set_memory_valid(va: u64, pages: usize) -> Result<(), SetMemoryError> {
    change(va, pages, MemChange::Valid(Perms::RW))
}
pub fn set_memory_invalid(va: u64, pages: usize) -> Result<(), SetMemoryError> {
    change(va, pages, MemChange::Invalid)
}

/// Physical runs `(pa, bytes)` behind `[va, va + size)` in the table that maps `va`.
fn phys_runs(t: &Tables, va: u64, size: u64) -> Vec<(u64, u64)> {
    let pt = &t.kernel;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut a = va;
    while a < va + size {
        if let Some(tr) = pt.translate(VirtAddr::new(a)) {
            let pa = tr.phys.as_u64();
            match runs.last_mut() {
                Some((s, len)) if *s + *len == pa => *len += PAGE,
                _ => runs.push((pa, PAGE)),
            }
        }
        a += PAGE;
    }
    runs
}

/// Applies `c` to `[va, va + pages * 4 KiB)` and, under `rodata=full`, to its linear alias.
pub fn change(va: u64, pages: usize, c: MemChange) -> Result<(), SetMemoryError> {
    let mm = info();
    let size = pages as u64 * PAGE;
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or(SetMemoryError::NoTables)?;
    let alias = kmem::alias_permissions(mm.rodata) && c.applies_to_alias() && !is_linear(va);
    let runs = if alias { phys_runs(t, va, size) } else { Vec::new() };
    let cont = contpte();
    let Tables { kernel, tlb, .. } = t;
    let err =
        |at: u64, bytes: u64| move |err| SetMemoryError::Table { change: c, at, pages: (bytes / PAGE) as usize, err };
    if va < UPPER {
        return Err(SetMemoryError::NotKernel { change: c, va });
    }
    // contpte refolds vmalloc mappings. The linear map is never refolded (as in Linux): its
    // contiguous ranges come from boot, a changed range's ends stay unfolded, which keeps
    // set_memory storms from churning fold/unfold (see bench=linear-map). The image is never
    // folded (it runs from those pages).
    let fold = cont && is_vmalloc(va);
    kmem::set_memory(kernel, tlb, VirtAddr::new(va), size, c, fold).map_err(err(va, size))?;
    for (pa, len) in runs {
        let at = LINEAR_BASE + pa;
        kmem::set_memory(kernel, tlb, VirtAddr::new(at), len, c, false).map_err(err(at, len))?;
    }
    Ok(())
}

/// The linear-map address of `va`'s page (through the table that maps `va`).
pub fn linear_alias(va: u64) -> Option<u64> {
    let g = TABLES.lock();
    let t = g.as_ref()?;
    t.kernel.translate(VirtAddr::new(va)).map(|tr| LINEAR_BASE + tr.phys.as_u64())
}

/// Level of the leaf mapping `va` in the table that maps it (1, 2 or 3), and its contiguous bit.
pub fn leaf_of(va: u64) -> Option<(usize, bool)> {
    let g = TABLES.lock();
    let t = g.as_ref()?;
    t.kernel.translate(VirtAddr::new(va)).map(|tr| (tr.level, tr.contiguous))
}
