//! Which CPU this is, and its static per-CPU page: what TPIDR_EL1 points at on every CPU
//! (`smp::set_this_cpu`), first at the page in the image, then (`percpu::init`) at the same
//! frame through the per-CPU areas' mapping. Its first word is the CPU's index, so
//! [`this_cpu`] is one register read and one load; the scheduler's `need_resched` lives here
//! too, so the preemption point ([`crate::arch::sync`]) reads it the same way. The per-CPU
//! areas built around these pages are `percpu`'s.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Static per-CPU counters (the stress test's and the benchmark's).
pub const STATIC_COUNTERS: usize = 8;
/// What every canary of CPU `c` holds: this pattern xor `c`.
pub const CANARY: u64 = 0xc0ff_ee00_5afe_0000;

/// What the EL0 page fault's first-touch path (`mm::user`'s `UserSpace::first_touch`) did on
/// one CPU, counted by that CPU alone (with IRQs masked: plain increments) and summed over every
/// CPU where read: the first touches it mapped (each a demand-zero fault and an elided flush:
/// an empty entry became valid) and the barriers they issued (by kind, not in `HwTlb`'s shared
/// atomic counters: `mm::user::tlb_counters` adds them). Here, beside the page it lives in, so
/// this module needs nothing of `mm`.
pub struct CpuTally {
    /// First touches mapped.
    pub(crate) touches: AtomicU64,
    /// Barriers issued, by `pgtable::tlb::Barrier::kind`.
    pub(crate) dsb: [AtomicU64; pgtable::tlb::BARRIER_KINDS],
}

impl CpuTally {
    /// Nothing counted.
    pub const fn new() -> Self {
        CpuTally { touches: AtomicU64::new(0), dsb: [const { AtomicU64::new(0) }; pgtable::tlb::BARRIER_KINDS] }
    }
}

/// Page 0 of every area.
#[repr(C, align(4096))]
pub struct StaticArea {
    /// This CPU's kernel index ([`this_cpu`] reads it through TPIDR_EL1).
    pub cpu: u64,
    /// The running thread's `sync::ThreadInfo` (put into SP_EL0 on entry from EL0).
    pub thread: AtomicUsize,
    /// The scheduler wants this CPU to switch tasks.
    pub need_resched: AtomicU64,
    /// `CANARY ^ cpu`.
    pub canary_lo: u64,
    /// Static per-CPU counters.
    pub counters: [AtomicU64; STATIC_COUNTERS],
    /// What the EL0 page fault's first-touch path counted on this CPU (`mm::user`): here, so
    /// the handler reaches it through TPIDR_EL1 alone.
    pub first_touch: CpuTally,
    /// Whether this CPU's DCZID_EL0 lets `DC ZVA` zero 64-byte blocks (`mm::frames`: read
    /// once when the CPU starts; false before, when zeroing reads the register itself).
    pub zva64: core::sync::atomic::AtomicBool,
    /// `CANARY ^ cpu`.
    pub canary_hi: u64,
}

const _: () = assert!(core::mem::size_of::<StaticArea>() == abi::PAGE_SIZE as usize);

/// The static parts, one page each, in the image (TPIDR_EL1 points here until the areas are
/// mapped, then at the same frames through `AREAS_BASE`).
#[no_mangle]
pub static STATIC_AREAS: [StaticArea; rt::MAX_CPUS] = {
    let mut a = [const {
        StaticArea {
            cpu: 0,
            thread: AtomicUsize::new(0),
            need_resched: AtomicU64::new(0),
            canary_lo: 0,
            counters: [const { AtomicU64::new(0) }; STATIC_COUNTERS],
            first_touch: CpuTally::new(),
            zva64: core::sync::atomic::AtomicBool::new(false),
            canary_hi: 0,
        }
    }; rt::MAX_CPUS];
    let mut c = 0;
    while c < rt::MAX_CPUS {
        a[c].cpu = c as u64;
        a[c].canary_lo = CANARY ^ c as u64;
        a[c].canary_hi = CANARY ^ c as u64;
        c += 1;
    }
    a
};

/// This CPU's static page (through TPIDR_EL1: one register read; callers keep IRQs masked or
/// preemption off while they use it, as the exception entry does).
#[inline(always)]
pub fn this_area() -> &'static StaticArea {
    use aarch64_cpu::registers::{Readable, TPIDR_EL1};
    // SAFETY: `smp::set_this_cpu` pointed TPIDR_EL1 at this CPU's static page (mapped for good)
    // before anything that calls this runs.
    unsafe { &*(TPIDR_EL1.get() as *const StaticArea) }
}

/// This CPU's kernel index (the first word of its static page, through TPIDR_EL1).
#[inline(always)]
pub fn this_cpu() -> usize {
    this_area().cpu as usize
}

/// Whether this CPU was asked to switch tasks (read through TPIDR_EL1: a task that moves
/// between the read of the register and the load reads its old CPU's flag, a switch at most
/// one tick late or early).
#[inline(always)]
pub fn need_resched() -> bool {
    this_area().need_resched.load(Ordering::Relaxed) != 0
}

/// Sets or clears CPU `cpu`'s `need_resched`.
pub fn set_need_resched(cpu: usize, v: bool) {
    STATIC_AREAS[cpu].need_resched.store(v as u64, Ordering::Release);
}

/// Takes (reads and clears) CPU `cpu`'s `need_resched`.
pub fn take_need_resched(cpu: usize) -> bool {
    STATIC_AREAS[cpu].need_resched.swap(0, Ordering::AcqRel) != 0
}
