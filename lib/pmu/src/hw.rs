//! [`PmuRegs`] on the CPU: the PMUv3 system registers, each access one `mrs`/`msr`.
//!
//! Every register here is accessible at EL1 and EL2 (the hypervisor sets MDCR_EL2 so the guest's
//! accesses do not trap, see [`crate::mdcr_el2_for_guest`]). Counter indices beyond PMCR.N are
//! never passed by the driver.

use crate::PmuRegs;
use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};

static ISBS: AtomicU64 = AtomicU64::new(0);

/// ISBs this binary's PMU accesses have executed (the project's barrier counts name them
/// apart from the page-table and cache-maintenance ones).
pub fn isb_count() -> u64 {
    ISBS.load(Ordering::Relaxed)
}

macro_rules! read {
    ($reg:literal) => {{
        let v: u64;
        // SAFETY: reading a PMU register has no side effect (PMU registers are not
        // read-sensitive) and is permitted at EL1 and EL2.
        unsafe { asm!(concat!("mrs {}, ", $reg), out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}

macro_rules! write {
    ($reg:literal, $v:expr) => {
        // SAFETY: PMU register writes change only what the PMU counts and its overflow flags;
        // no memory is touched.
        unsafe { asm!(concat!("msr ", $reg, ", {}"), in(reg) $v, options(nomem, nostack, preserves_flags)) }
    };
}

/// The current CPU's PMU registers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SysRegs;

impl PmuRegs for SysRegs {
    fn pmuver(&self) -> u8 {
        ((read!("id_aa64dfr0_el1") >> 8) & 0xf) as u8
    }
    fn pmcr(&self) -> u64 {
        read!("pmcr_el0")
    }
    fn set_pmcr(&self, v: u64) {
        write!("pmcr_el0", v)
    }
    fn pmceid(&self) -> [u64; 2] {
        [read!("pmceid0_el0"), read!("pmceid1_el0")]
    }
    fn evtyper(&self, n: u8) -> u64 {
        match n {
            0 => read!("pmevtyper0_el0"),
            1 => read!("pmevtyper1_el0"),
            2 => read!("pmevtyper2_el0"),
            3 => read!("pmevtyper3_el0"),
            4 => read!("pmevtyper4_el0"),
            5 => read!("pmevtyper5_el0"),
            6 => read!("pmevtyper6_el0"),
            7 => read!("pmevtyper7_el0"),
            8 => read!("pmevtyper8_el0"),
            9 => read!("pmevtyper9_el0"),
            10 => read!("pmevtyper10_el0"),
            11 => read!("pmevtyper11_el0"),
            12 => read!("pmevtyper12_el0"),
            13 => read!("pmevtyper13_el0"),
            14 => read!("pmevtyper14_el0"),
            15 => read!("pmevtyper15_el0"),
            16 => read!("pmevtyper16_el0"),
            17 => read!("pmevtyper17_el0"),
            18 => read!("pmevtyper18_el0"),
            19 => read!("pmevtyper19_el0"),
            20 => read!("pmevtyper20_el0"),
            21 => read!("pmevtyper21_el0"),
            22 => read!("pmevtyper22_el0"),
            23 => read!("pmevtyper23_el0"),
            24 => read!("pmevtyper24_el0"),
            25 => read!("pmevtyper25_el0"),
            26 => read!("pmevtyper26_el0"),
            27 => read!("pmevtyper27_el0"),
            28 => read!("pmevtyper28_el0"),
            29 => read!("pmevtyper29_el0"),
            30 => read!("pmevtyper30_el0"),
            _ => 0,
        }
    }
    fn set_evtyper(&self, n: u8, v: u64) {
        match n {
            0 => write!("pmevtyper0_el0", v),
            1 => write!("pmevtyper1_el0", v),
            2 => write!("pmevtyper2_el0", v),
            3 => write!("pmevtyper3_el0", v),
            4 => write!("pmevtyper4_el0", v),
            5 => write!("pmevtyper5_el0", v),
            6 => write!("pmevtyper6_el0", v),
            7 => write!("pmevtyper7_el0", v),
            8 => write!("pmevtyper8_el0", v),
            9 => write!("pmevtyper9_el0", v),
            10 => write!("pmevtyper10_el0", v),
            11 => write!("pmevtyper11_el0", v),
            12 => write!("pmevtyper12_el0", v),
            13 => write!("pmevtyper13_el0", v),
            14 => write!("pmevtyper14_el0", v),
            15 => write!("pmevtyper15_el0", v),
            16 => write!("pmevtyper16_el0", v),
            17 => write!("pmevtyper17_el0", v),
            18 => write!("pmevtyper18_el0", v),
            19 => write!("pmevtyper19_el0", v),
            20 => write!("pmevtyper20_el0", v),
            21 => write!("pmevtyper21_el0", v),
            22 => write!("pmevtyper22_el0", v),
            23 => write!("pmevtyper23_el0", v),
            24 => write!("pmevtyper24_el0", v),
            25 => write!("pmevtyper25_el0", v),
            26 => write!("pmevtyper26_el0", v),
            27 => write!("pmevtyper27_el0", v),
            28 => write!("pmevtyper28_el0", v),
            29 => write!("pmevtyper29_el0", v),
            30 => write!("pmevtyper30_el0", v),
            _ => {}
        }
    }
    fn evcntr(&self, n: u8) -> u64 {
        match n {
            0 => read!("pmevcntr0_el0"),
            1 => read!("pmevcntr1_el0"),
            2 => read!("pmevcntr2_el0"),
            3 => read!("pmevcntr3_el0"),
            4 => read!("pmevcntr4_el0"),
            5 => read!("pmevcntr5_el0"),
            6 => read!("pmevcntr6_el0"),
            7 => read!("pmevcntr7_el0"),
            8 => read!("pmevcntr8_el0"),
            9 => read!("pmevcntr9_el0"),
            10 => read!("pmevcntr10_el0"),
            11 => read!("pmevcntr11_el0"),
            12 => read!("pmevcntr12_el0"),
            13 => read!("pmevcntr13_el0"),
            14 => read!("pmevcntr14_el0"),
            15 => read!("pmevcntr15_el0"),
            16 => read!("pmevcntr16_el0"),
            17 => read!("pmevcntr17_el0"),
            18 => read!("pmevcntr18_el0"),
            19 => read!("pmevcntr19_el0"),
            20 => read!("pmevcntr20_el0"),
            21 => read!("pmevcntr21_el0"),
            22 => read!("pmevcntr22_el0"),
            23 => read!("pmevcntr23_el0"),
            24 => read!("pmevcntr24_el0"),
            25 => read!("pmevcntr25_el0"),
            26 => read!("pmevcntr26_el0"),
            27 => read!("pmevcntr27_el0"),
            28 => read!("pmevcntr28_el0"),
            29 => read!("pmevcntr29_el0"),
            30 => read!("pmevcntr30_el0"),
            _ => 0,
        }
    }
    fn set_evcntr(&self, n: u8, v: u64) {
        match n {
            0 => write!("pmevcntr0_el0", v),
            1 => write!("pmevcntr1_el0", v),
            2 => write!("pmevcntr2_el0", v),
            3 => write!("pmevcntr3_el0", v),
            4 => write!("pmevcntr4_el0", v),
            5 => write!("pmevcntr5_el0", v),
            6 => write!("pmevcntr6_el0", v),
            7 => write!("pmevcntr7_el0", v),
            8 => write!("pmevcntr8_el0", v),
            9 => write!("pmevcntr9_el0", v),
            10 => write!("pmevcntr10_el0", v),
            11 => write!("pmevcntr11_el0", v),
            12 => write!("pmevcntr12_el0", v),
            13 => write!("pmevcntr13_el0", v),
            14 => write!("pmevcntr14_el0", v),
            15 => write!("pmevcntr15_el0", v),
            16 => write!("pmevcntr16_el0", v),
            17 => write!("pmevcntr17_el0", v),
            18 => write!("pmevcntr18_el0", v),
            19 => write!("pmevcntr19_el0", v),
            20 => write!("pmevcntr20_el0", v),
            21 => write!("pmevcntr21_el0", v),
            22 => write!("pmevcntr22_el0", v),
            23 => write!("pmevcntr23_el0", v),
            24 => write!("pmevcntr24_el0", v),
            25 => write!("pmevcntr25_el0", v),
            26 => write!("pmevcntr26_el0", v),
            27 => write!("pmevcntr27_el0", v),
            28 => write!("pmevcntr28_el0", v),
            29 => write!("pmevcntr29_el0", v),
            30 => write!("pmevcntr30_el0", v),
            _ => {}
        }
    }
    fn ccntr(&self) -> u64 {
        read!("pmccntr_el0")
    }
    fn set_ccfiltr(&self, v: u64) {
        write!("pmccfiltr_el0", v)
    }
    fn cnten(&self) -> u32 {
        read!("pmcntenset_el0") as u32
    }
    fn set_cnten(&self, mask: u32, on: bool) {
        if on {
            write!("pmcntenset_el0", mask as u64)
        } else {
            write!("pmcntenclr_el0", mask as u64)
        }
    }
    fn set_inten(&self, mask: u32, on: bool) {
        if on {
            write!("pmintenset_el1", mask as u64)
        } else {
            write!("pmintenclr_el1", mask as u64)
        }
    }
    fn ovs(&self) -> u32 {
        read!("pmovsclr_el0") as u32
    }
    fn clear_ovs(&self, mask: u32) {
        write!("pmovsclr_el0", mask as u64)
    }
    fn swinc(&self, mask: u32) {
        write!("pmswinc_el0", mask as u64)
    }
    fn sync(&self) {
        ISBS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: context synchronization only: earlier PMU register writes take effect and
        // later counter reads are not hoisted above earlier instructions.
        unsafe { asm!("isb", options(nostack, preserves_flags)) }
    }
    fn without_irqs<T>(&self, f: impl FnOnce() -> T) -> T {
        let daif: u64;
        // SAFETY: saves DAIF and masks IRQ and FIQ on this CPU; restored below.
        unsafe { asm!("mrs {}, daif", "msr daifset, #3", out(reg) daif, options(nomem, nostack, preserves_flags)) };
        let r = f();
        // SAFETY: restores the interrupt mask saved above.
        unsafe { asm!("msr daif, {}", in(reg) daif, options(nomem, nostack, preserves_flags)) };
        r
    }
}
