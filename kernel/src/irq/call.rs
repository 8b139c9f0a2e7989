//! Running a function on other CPUs by IPI (the [`Sgi::Call`] SGI), and the TLB shootdown built
//! on it.
//!
//! [`on_cpus`] publishes one `fn(cpu)`, sends the SGI to the targets and waits until each has
//! run it in its IRQ handler (with IRQs masked, so it must be short and take no lock the
//! interrupted code may hold). One call at a time: a CPU waiting for another's call to finish
//! keeps taking its own pending IRQs, so two CPUs calling each other cannot deadlock. The
//! targets must take IRQs now and then (at EL0, in the idle wait, in a preemptible section):
//! the scheduler's CPUs do; CPUs parked in `work::secondary_loop` do not (use
//! `work::run_everywhere` there).

use super::{send_sgi, IrqError, Sgi};
use crate::arch::cpu::this_cpu;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use spin::Mutex;

static LOCK: Mutex<()> = Mutex::new(());
/// The published `fn(usize)`, as an address.
static FUNC: AtomicUsize = AtomicUsize::new(0);
/// Targets that have not run it yet.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// Calls answered, all CPUs.
pub static CALLS: AtomicU64 = AtomicU64::new(0);
/// TLB shootdowns (one per target CPU).
pub static SHOOTDOWNS: AtomicU64 = AtomicU64::new(0);

/// The SGI's handler.
pub fn handler(_intid: u32, cpu: usize) {
    let f = FUNC.load(Ordering::Acquire);
    if f != 0 && PENDING.load(Ordering::Acquire) & (1 << cpu) != 0 {
        // SAFETY: only `on_cpus` stores here, always a `fn(usize)`, before it sets PENDING.
        let f = unsafe { core::mem::transmute::<usize, fn(usize)>(f) };
        f(cpu);
        CALLS.fetch_add(1, Ordering::Relaxed);
        PENDING.fetch_and(!(1 << cpu), Ordering::AcqRel);
    }
}

/// Runs `f(cpu)` on every CPU in `cpus` (this one directly, the others by IPI) and returns
/// when all have. The caller holds no lock and has IRQs masked; it stays on its CPU.
pub fn on_cpus(cpus: u64, f: fn(usize)) -> Result<(), IrqError> {
    crate::arch::sync::preempt_disable();
    let r = on_cpus_pinned(cpus, f);
    crate::arch::sync::preempt_enable_no_resched();
    r
}

fn on_cpus_pinned(cpus: u64, f: fn(usize)) -> Result<(), IrqError> {
    let _g = loop {
        if let Some(g) = LOCK.try_lock() {
            break g;
        }
        super::take_pending();
    };
    let me = this_cpu();
    let others = cpus & !(1 << me);
    FUNC.store(f as usize, Ordering::Release);
    PENDING.store(others, Ordering::Release);
    if others != 0 {
        send_sgi(others, Sgi::Call);
    }
    if cpus & (1 << me) != 0 {
        f(me);
    }
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    let deadline = CNTPCT_EL0.get() + 10 * CNTFRQ_EL0.get();
    while PENDING.load(Ordering::Acquire) != 0 {
        if CNTPCT_EL0.get() > deadline {
            let left = PENDING.swap(0, Ordering::AcqRel);
            FUNC.store(0, Ordering::Release);
            return Err(IrqError::CallTimeout { left });
        }
        core::hint::spin_loop();
    }
    FUNC.store(0, Ordering::Release);
    Ok(())
}

/// Invalidates every EL1&0 TLB entry of the CPUs in `cpus` with **local** TLBIs run on each
/// of them (for translations only those CPUs may hold, like the per-CPU window's: a broadcast
/// TLBI would reach every CPU).
pub fn tlb_shootdown(cpus: u64) -> Result<(), IrqError> {
    on_cpus(cpus, |_| {
        use pgtable::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp};
        let mut tlb = pgtable::hw::HwTlb::detect();
        tlb.dsb(Barrier::IshSt);
        tlb.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: None }, leaf_only: false, sh: Shareability::Local });
        tlb.dsb(Barrier::Nsh);
        tlb.isb();
        SHOOTDOWNS.fetch_add(1, Ordering::Relaxed);
    })
}
