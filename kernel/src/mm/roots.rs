//! Per-CPU TTBR1 roots, through `pgtable::percpu::PerCpuRoots` (the rules are there and in
//! `percpu`): CPU `c`'s root is the kernel table's top level with the window slot leading to a
//! subtree of its own, which maps CPU `c`'s area at `WINDOW_VA`.
//!
//! `mm` calls [`sync_roots`] after every change of the kernel table (under `mm::TABLES`; lock
//! order `mm::TABLES` before [`ROOTS`]). The per-CPU areas these roots' windows map are
//! `percpu`'s; the roots are kernel page tables, so they are `mm`'s.

use super::frames::KFrames;
use super::layout::WINDOW_VA;
use super::MmError;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use pgtable::hw::HwTlb;
use pgtable::percpu::{PerCpuRoots, Seed};
use pgtable::{regime, PageTable, PhysAddr};
use spin::Mutex;

static ROOTS: Mutex<Option<PerCpuRoots<KFrames>>> = Mutex::new(None);

/// Top-level entries copied into roots by [`sync_roots`] (after the roots were built).
pub static SYNCED: AtomicU64 = AtomicU64::new(0);
/// Page-table pages the per-CPU roots and windows hold, all CPUs.
pub static TABLE_PAGES: AtomicU64 = AtomicU64::new(0);

/// `percpu.seed=no-sync-cpu1`: [`sync_roots`] leaves CPU 1's root alone (the seeded bug the
/// late-mapping test must catch).
pub static SEED_SKIP_CPU1: AtomicBool = AtomicBool::new(false);

/// Builds every CPU's root (and empty window) from the kernel table's top level (`kernel`:
/// `mm::build_percpu_roots` passes it, under `mm::TABLES`).
pub fn build(kernel: &PageTable<KFrames>, cpus: usize) -> Result<(), MmError> {
    let mut r = PerCpuRoots::new(kernel, cpus, WINDOW_VA, KFrames).map_err(MmError::RootsBuild)?;
    if SEED_SKIP_CPU1.load(Ordering::Relaxed) {
        r.seed = Some(Seed::NoSyncRoot1);
    }
    TABLE_PAGES.store(r.table_pages(), Ordering::Relaxed);
    *ROOTS.lock() = Some(r);
    Ok(())
}

/// Maps page `page` of CPU `cpu`'s window onto frame `pa` and links the window into its root.
pub fn map_window_page(cpu: usize, page: u64, pa: u64) -> Result<(), MmError> {
    let mut g = ROOTS.lock();
    let r = g.as_mut().ok_or(MmError::RootsNotBuilt)?;
    r.map_window_page(cpu, page, PhysAddr::new(pa), &mut HwTlb::detect()).map_err(|err| MmError::Window {
        cpu,
        page,
        err,
    })?;
    TABLE_PAGES.store(r.table_pages(), Ordering::Relaxed);
    Ok(())
}

/// Unmaps page `page` of CPU `cpu`'s window with **no TLBI**: CPU `cpu` may keep the old
/// translation until its TLB is invalidated locally (`irq::call::tlb_shootdown`), which must
/// come before the page is mapped again (rule 4 of `percpu`).
pub fn unmap_window_page(cpu: usize, page: u64) -> Result<(), MmError> {
    let mut g = ROOTS.lock();
    let r = g.as_mut().ok_or(MmError::RootsNotBuilt)?;
    r.unmap_window_page(cpu, page, &mut HwTlb::detect()).map_err(|err| MmError::Window { cpu, page, err })
}

/// Copies the kernel's top-level entries covering `[va, va + len)` into every root where they
/// differ (none before the roots exist); refuses a removed one.
pub fn sync_roots(va: u64, len: u64) -> Result<u64, MmError> {
    let mut g = ROOTS.lock();
    let Some(r) = g.as_mut() else {
        return Ok(0);
    };
    let n = r.sync(va, len, &mut HwTlb::detect()).map_err(MmError::RootsSync)?;
    SYNCED.fetch_add(n, Ordering::Relaxed);
    Ok(n)
}

/// Puts this CPU (`cpu`) on its own root (`own`) or on the kernel table's root. Both map
/// everything but the window identically through the same lower tables, so no TLBI is needed;
/// the window's entries a CPU cached stay its own (rule 1). TTBR1_EL1.CnP stays 0.
pub fn install(cpu: usize, own: bool) {
    use aarch64_cpu::registers::{Writeable, TTBR1_EL1};
    let root = {
        let g = ROOTS.lock();
        let Some(r) = g.as_ref() else {
            return;
        };
        match (own, r.root(cpu)) {
            (true, Some(root)) => root,
            _ => r.kernel_root(),
        }
    };
    let v = regime::ttbr_el1(root, 0);
    debug_assert_eq!(v & 1, 0, "CnP must stay off for TTBR1");
    TTBR1_EL1.set(v);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}
