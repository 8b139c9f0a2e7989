//! Time and counters EL0 reads directly: the virtual counter (CNTKCTL_EL1.EL0VCTEN) and, when
//! the kernel allows it (`sysctl::PMU_EL0`), the PMU cycle counter and event counter 0, which
//! the kernel programs for instructions retired at EL0 and EL1 (and EL2: a guest exit counts).

pub use el0bench::{counter, frequency, ticks_to_ns};

/// Instructions retired (PMU event counter 0), when EL0 may read it; else 0.
#[inline(always)]
pub fn instructions() -> u64 {
    let v: u64;
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads PMEVCNTR0_EL0, which the kernel lets EL0 read (PMUSERENR_EL0.ER) only when
    // `sysctl::PMU_EL0` says so; callers check that first.
    unsafe {
        core::arch::asm!("isb", "mrs {}, pmevcntr0_el0", out(reg) v, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    {
        v = 0;
    }
    v
}
