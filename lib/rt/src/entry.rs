//! Writing the values [`crate::el1`] and [`crate::el2`] decide, on the CPU. The early assembly
//! (`crate::start`) has already set SCTLR, CPACR/CPTR, HCR_EL2 and PSTATE; these functions write
//! the rest before the binary relies on it.

use crate::el2::{Controls, Mode};
use crate::features::Features;
use crate::{read_sysreg, write_sysreg};
use aarch64_cpu::asm::barrier;

/// At EL1, first thing in Rust: MDSCR_EL1 (no software step, no debug events), CNTKCTL_EL1 (EL0
/// gets nothing: the binary grants what it wants later), PMUSERENR_EL0 where a PMU exists (EL0
/// gets nothing), TPIDR_EL1 and TPIDR_EL0/TPIDRRO_EL0 zero (nothing points anywhere yet).
pub fn el1(f: &Features) {
    write_sysreg!("mdscr_el1", crate::el1::MDSCR_ENTRY);
    write_sysreg!("cntkctl_el1", crate::el1::cntkctl(false));
    if f.pmu {
        write_sysreg!("pmuserenr_el0", crate::el1::pmuserenr(false));
    }
    write_sysreg!("tpidr_el1", 0);
    write_sysreg!("tpidr_el0", 0);
    write_sysreg!("tpidrro_el0", 0);
    barrier::isb(barrier::SY);
}

/// Whether HCR_EL2.E2H is 1 now (at EL2): after the entry code, 1 only where it could not be
/// cleared.
pub fn e2h_now() -> bool {
    read_sysreg!("hcr_el2") & crate::el2::hcr::E2H != 0
}

/// The mode the boot CPU would run in without a boot word: hVHE where E2H stayed 1.
pub fn el2_mode_at_entry() -> Mode {
    crate::el2::decide(e2h_now(), false)
}

/// Writes every EL2 control in `c` (at EL2, with the MMU off or with tables valid in `c.mode`'s
/// regime): HCR_EL2 first (which sets the layout of the others: E2H = 1 for hVHE), then
/// CPTR_EL2 (ZCR_EL2 and SMCR_EL2 are reachable only once SVE and SME are untrapped), the
/// vector lengths, HCRX_EL2, the fine-grained traps, MDCR_EL2, CNTHCTL_EL2, CNTVOFF_EL2,
/// HSTR_EL2, GCSCR/TCR2/SCTLR2_EL2 where they exist, VTTBR_EL2 = 0 (stage 2 off until the
/// caller turns it on) and TPIDR_EL2 = 0. Only registers `c` says exist are touched.
pub fn el2(c: &Controls) {
    write_sysreg!("hcr_el2", c.hcr);
    barrier::isb(barrier::SY);
    write_sysreg!("cptr_el2", c.cptr);
    barrier::isb(barrier::SY);
    if let Some(zcr) = c.zcr {
        write_sysreg!("S3_4_C1_C2_0", zcr); // ZCR_EL2
    }
    if let Some(smcr) = c.smcr {
        write_sysreg!("S3_4_C1_C2_6", smcr); // SMCR_EL2
    }
    if let Some(hcrx) = c.hcrx {
        write_sysreg!("S3_4_C1_C2_2", hcrx); // HCRX_EL2
    }
    if let Some(g) = c.fgt {
        write_sysreg!("S3_4_C1_C1_4", g.hfgrtr); // HFGRTR_EL2
        write_sysreg!("S3_4_C1_C1_5", g.hfgwtr); // HFGWTR_EL2
        write_sysreg!("S3_4_C1_C1_6", g.hfgitr); // HFGITR_EL2
        write_sysreg!("S3_4_C3_C1_4", g.hdfgrtr); // HDFGRTR_EL2
        write_sysreg!("S3_4_C3_C1_5", g.hdfgwtr); // HDFGWTR_EL2
        if let Some(v) = g.hafgrtr {
            write_sysreg!("S3_4_C3_C1_6", v); // HAFGRTR_EL2
        }
        if let Some(v) = g.hdfg2 {
            write_sysreg!("S3_4_C3_C1_0", v); // HDFGRTR2_EL2
            write_sysreg!("S3_4_C3_C1_1", v); // HDFGWTR2_EL2
            write_sysreg!("S3_4_C3_C1_2", 0); // HFGRTR2_EL2
            write_sysreg!("S3_4_C3_C1_3", 0); // HFGWTR2_EL2
            write_sysreg!("S3_4_C3_C1_7", 0); // HFGITR2_EL2
        }
    }
    write_sysreg!("mdcr_el2", c.mdcr);
    write_sysreg!("cnthctl_el2", c.cnthctl);
    write_sysreg!("cntvoff_el2", c.cntvoff);
    write_sysreg!("hstr_el2", c.hstr);
    if let Some(v) = c.gcscr {
        write_sysreg!("S3_4_C2_C5_0", v); // GCSCR_EL2
    }
    if let Some(v) = c.tcr2 {
        write_sysreg!("S3_4_C2_C0_3", v); // TCR2_EL2
    }
    if let Some(v) = c.sctlr2 {
        write_sysreg!("S3_4_C1_C0_3", v); // SCTLR2_EL2
    }
    write_sysreg!("vttbr_el2", 0);
    write_sysreg!("tpidr_el2", 0);
    barrier::isb(barrier::SY);
}

/// The GICv3 CPU interface at EL2 (where it exists, `f.gic_sysregs`): ICC_SRE_EL2 for a board
/// whose GIC is a GICv3 (`gic_v3`) or not ([`crate::el2::icc_sre`]), and, where the
/// system-register interface is on, ICH_HCR_EL2 = 0 (no virtual CPU interface, none of its
/// traps of the guest's ICC_* accesses).
pub fn el2_gic(f: &Features, gic_v3: bool) {
    if !f.gic_sysregs {
        return;
    }
    write_sysreg!("S3_4_C12_C9_5", crate::el2::icc_sre(gic_v3)); // ICC_SRE_EL2
    barrier::isb(barrier::SY);
    if read_sysreg!("S3_4_C12_C9_5") & crate::el2::ICC_SRE_SRE != 0 {
        write_sysreg!("S3_4_C12_C11_0", 0); // ICH_HCR_EL2
    }
    barrier::isb(barrier::SY);
}
