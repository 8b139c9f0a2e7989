//! Barriers the kernel issues outside `lib/pgtable` (which counts its own), `rt::cache` and the
//! PMU driver: the GIC's and the idle wait's, the one after an address translation. Counted
//! here, at the bottom, so every layer can count its own; `perf` reports them.

use core::sync::atomic::{AtomicU64, Ordering};

static OTHER_ISBS: AtomicU64 = AtomicU64::new(0);
static OTHER_DSBS: AtomicU64 = AtomicU64::new(0);

/// Counts an ISB the kernel issues outside `lib/pgtable`, `rt::cache` and the PMU driver (the
/// one after an address translation, `hyp::virt_to_phys`; the GIC's and the idle wait's), so
/// the own counts stay complete.
pub fn count_other_isb() {
    OTHER_ISBS.fetch_add(1, Ordering::Relaxed);
}

/// Counts a DSB the kernel issues outside `lib/pgtable` and `rt::cache` (before an SGI).
pub fn count_other_dsb() {
    OTHER_DSBS.fetch_add(1, Ordering::Relaxed);
}

/// ISBs counted by [`count_other_isb`].
pub fn other_isbs() -> u64 {
    OTHER_ISBS.load(Ordering::Relaxed)
}

/// DSBs counted by [`count_other_dsb`].
pub fn other_dsbs() -> u64 {
    OTHER_DSBS.load(Ordering::Relaxed)
}
