//! Cache maintenance by address, shared by both binaries (aarch64-cpu has no wrappers for it).
//!
//! Both run parts of their life with the MMU (and so the data caches) off: the boot path, CPUs
//! started by PSCI, a guest before it enables its MMU. Data written on one side of that line must
//! be cleaned to the point of coherency before the other side reads it uncached, and lines that
//! may be stale must be invalidated before the first cacheable read.

use aarch64_cpu::asm::barrier;
use core::sync::atomic::{AtomicU64, Ordering};

static DSBS: AtomicU64 = AtomicU64::new(0);
static ISBS: AtomicU64 = AtomicU64::new(0);

/// DSBs and ISBs that cache maintenance has executed in this binary (every CPU), kept apart
/// from `lib/pgtable`'s TLB-maintenance counts: together with them (and the PMU driver's ISBs)
/// they are every barrier the project issues on its measured paths.
pub fn barrier_counts() -> (u64, u64) {
    (DSBS.load(Ordering::Relaxed), ISBS.load(Ordering::Relaxed))
}

/// Adds one to `c`. With the MMU (and so the data cache) off, memory is Device memory, where
/// exclusive accesses are not guaranteed to work: then only the boot CPU runs, and a plain
/// load and store is enough.
fn count(c: &AtomicU64) {
    let el: u64;
    // SAFETY: reads CurrentEL; no side effects.
    unsafe { core::arch::asm!("mrs {}, currentel", out(reg) el, options(nomem, nostack, preserves_flags)) };
    let sctlr: u64;
    if (el >> 2) & 3 == 2 {
        // SAFETY: reads SCTLR_EL2 at EL2; no side effects.
        unsafe { core::arch::asm!("mrs {}, sctlr_el2", out(reg) sctlr, options(nomem, nostack, preserves_flags)) };
    } else {
        // SAFETY: reads SCTLR_EL1 at EL1; no side effects.
        unsafe { core::arch::asm!("mrs {}, sctlr_el1", out(reg) sctlr, options(nomem, nostack, preserves_flags)) };
    }
    if sctlr & 0b101 == 0b101 {
        c.fetch_add(1, Ordering::Relaxed);
    } else {
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

fn dsb_sy() {
    count(&DSBS);
    barrier::dsb(barrier::SY);
}

fn dsb_ish() {
    count(&DSBS);
    barrier::dsb(barrier::ISH);
}

fn isb() {
    count(&ISBS);
    barrier::isb(barrier::SY);
}

/// Smallest data cache line in bytes (CTR_EL0.DminLine).
pub fn dcache_line() -> u64 {
    let ctr: u64;
    // SAFETY: reads CTR_EL0 (not in aarch64-cpu); no side effects.
    unsafe { core::arch::asm!("mrs {}, ctr_el0", out(reg) ctr, options(nomem, nostack, preserves_flags)) };
    // Bits [19:16]: log2 of the line size in 4-byte words.
    4u64 << ((ctr >> 16) & 0xf)
}

/// Smallest instruction cache line in bytes (CTR_EL0.IminLine).
fn icache_line() -> u64 {
    let ctr: u64;
    // SAFETY: reads CTR_EL0; no side effects.
    unsafe { core::arch::asm!("mrs {}, ctr_el0", out(reg) ctr, options(nomem, nostack, preserves_flags)) };
    4u64 << (ctr & 0xf)
}

/// Runs `op(line address)` for every data cache line overlapping `[start, start + len)`, then
/// `DSB SY` so the maintenance has completed on return.
fn by_line(start: u64, len: u64, op: impl Fn(u64)) {
    let line = dcache_line();
    let l = crate::lines::lines(start, len, line);
    let mut a = l.first;
    for _ in 0..l.rounds {
        for k in 0..crate::lines::ROUND {
            op(a + k * line);
        }
        a += crate::lines::ROUND * line;
    }
    for _ in 0..l.singles {
        op(a);
        a += line;
    }
    dsb_sy();
}

/// Writes `[start, start + len)` back to the point of coherency (`DC CVAC`), keeping the lines.
/// The range must be mapped at the current EL.
pub fn clean_to_poc(start: u64, len: u64) {
    // SAFETY: `dc cvac` only writes a line back; memory contents as seen by anyone are unchanged.
    by_line(start, len, |a| unsafe { core::arch::asm!("dc cvac, {}", in(reg) a, options(nostack, preserves_flags)) });
}

/// Writes back and drops `[start, start + len)` to the point of coherency (`DC CIVAC`), so a
/// side that accesses it uncached sees the latest data and later cached reads refetch it.
pub fn clean_invalidate_to_poc(start: u64, len: u64) {
    // SAFETY: `dc civac` writes a line back before dropping it; no data is lost.
    by_line(start, len, |a| unsafe { core::arch::asm!("dc civac, {}", in(reg) a, options(nostack, preserves_flags)) });
}

/// Drops `[start, start + len)` from the data caches without writing anything back (`DC IVAC`).
///
/// # Safety
/// Any dirty data in those lines is lost: use it only on memory that was written with the
/// caches off (so memory holds the data) and has not been written through the caches since.
pub unsafe fn invalidate_to_poc(start: u64, len: u64) {
    // SAFETY: the caller guarantees no line in the range holds data that memory lacks.
    by_line(start, len, |a| unsafe { core::arch::asm!("dc ivac, {}", in(reg) a, options(nostack, preserves_flags)) });
}

/// Makes instructions written through the data side at `[start, start + len)` fetchable:
/// clean to the point of unification, invalidate the instruction cache lines, barriers.
pub fn sync_icache(start: u64, len: u64) {
    let (dline, iline) = (dcache_line(), icache_line());
    let end = start.saturating_add(len);
    let mut a = start & !(dline - 1);
    while a < end {
        // SAFETY: `dc cvau` writes a line back to the PoU; no data is lost.
        unsafe { core::arch::asm!("dc cvau, {}", in(reg) a, options(nostack, preserves_flags)) };
        a += dline;
    }
    dsb_ish();
    let mut a = start & !(iline - 1);
    while a < end {
        // SAFETY: `ic ivau` drops an instruction cache line; no data side effect.
        unsafe { core::arch::asm!("ic ivau, {}", in(reg) a, options(nostack, preserves_flags)) };
        a += iline;
    }
    dsb_ish();
    isb();
}

/// Invalidates every instruction cache in the inner-shareable domain (`IC IALLUIS`), with the
/// barriers that make it complete before the next instruction fetch.
pub fn invalidate_icache_all() {
    // SAFETY: drops instruction cache contents only; no data side effect.
    unsafe { core::arch::asm!("ic ialluis", options(nostack, preserves_flags)) };
    dsb_sy();
    isb();
}
