//! Time and PMU counters for measurements.
//!
//! * [`now_ns`]: the generic timer (CNTVCT_EL0 at CNTFRQ_EL0; 16 ns steps on QEMU `virt`).
//! * [`Pmu`]: the cycle counter (always) and instructions retired (event 0x08) on counter 0.
//!   Under TCG, QEMU counts instructions only with `-icount`, which also makes them
//!   deterministic; without it the instruction count reads as zero, and cycles follow host time.

use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTVCT_EL0};

/// Nanoseconds since boot.
pub fn now_ns() -> u64 {
    let (t, f) = (CNTVCT_EL0.get() as u128, CNTFRQ_EL0.get().max(1) as u128);
    (t * 1_000_000_000 / f) as u64
}

/// PMU event number of "instructions architecturally executed".
pub const EVENT_INST_RETIRED: u64 = 0x08;

/// PMEVTYPER/PMCCFILTR bit 27: also count at EL2.
const FILTER_NSH: u64 = 1 << 27;

/// The per-CPU PMU, programmed for cycles and instructions.
pub struct Pmu;

impl Pmu {
    /// Enables the cycle counter and counter 0 = instructions retired on this CPU.
    pub fn enable() -> Self {
        // SAFETY: programs this CPU's PMU (PMEVTYPER0 = INST_RETIRED and PMCCFILTR counting at
        // EL1, EL0 and, with NSH (bit 27), at EL2 too, so a guest exit's hypervisor work counts; PMCR.E|C|P|LC: enable, reset cycle and event
        // counters, 64-bit cycle counter; PMCNTENSET enables counter 0 and the cycle counter).
        // The hypervisor leaves every counter to the guest (MDCR_EL2.HPMN = N, no traps).
        unsafe {
            core::arch::asm!(
                "msr pmevtyper0_el0, {ev}",
                "msr pmccfiltr_el0, {filt}",
                "msr pmcr_el0, {pmcr}",
                "msr pmcntenset_el0, {en}",
                "isb",
                ev = in(reg) EVENT_INST_RETIRED | FILTER_NSH,
                filt = in(reg) FILTER_NSH,
                pmcr = in(reg) 0b100_0111u64,
                en = in(reg) (1u64 << 31) | 1,
                options(nostack, preserves_flags),
            )
        };
        Pmu
    }

    /// (cycles, instructions) now.
    #[inline(always)]
    pub fn read(&self) -> (u64, u64) {
        let (c, i): (u64, u64);
        // SAFETY: reads two PMU counters; `isb` orders the reads after earlier instructions.
        unsafe {
            core::arch::asm!(
                "isb",
                "mrs {c}, pmccntr_el0",
                "mrs {i}, pmevcntr0_el0",
                c = out(reg) c,
                i = out(reg) i,
                options(nomem, nostack, preserves_flags),
            )
        };
        (c, i)
    }
}
