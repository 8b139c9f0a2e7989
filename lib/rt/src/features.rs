//! CPU features, read from the ID registers: what the CPU offers, which decides which control
//! registers exist (and must be written) and what a guest may be given. Pure functions of the
//! ID register values, so the decisions are tested on the host; [`IdRegs::read`] reads them on
//! the target. The register values themselves are decided in [`crate::el2`] and [`crate::el1`].

/// The ID register values the decisions depend on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdRegs {
    /// ID_AA64PFR0_EL1.
    pub pfr0: u64,
    /// ID_AA64PFR1_EL1.
    pub pfr1: u64,
    /// ID_AA64MMFR0_EL1.
    pub mmfr0: u64,
    /// ID_AA64MMFR1_EL1.
    pub mmfr1: u64,
    /// ID_AA64MMFR2_EL1.
    pub mmfr2: u64,
    /// ID_AA64MMFR3_EL1 (RAZ where the CPU predates it).
    pub mmfr3: u64,
    /// ID_AA64MMFR4_EL1 (RAZ where the CPU predates it).
    pub mmfr4: u64,
    /// ID_AA64DFR0_EL1.
    pub dfr0: u64,
    /// ID_AA64ISAR2_EL1.
    pub isar2: u64,
    /// ID_AA64SMFR0_EL1 (0 without SME).
    pub smfr0: u64,
    /// PMCR_EL0.N: event counters the PMU has (0 without a PMU).
    pub pmu_counters: u64,
}

fn field(v: u64, shift: u32) -> u64 {
    (v >> shift) & 0xf
}

/// A signed ID field (a negative value means "not implemented" for fields such as E2H0).
fn signed_field(v: u64, shift: u32) -> i64 {
    ((v << (60 - shift)) as i64) >> 60
}

/// What the CPU has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// FEAT_SVE.
    pub sve: bool,
    /// FEAT_SME.
    pub sme: bool,
    /// FEAT_SME_FA64: the full A64 instruction set in streaming mode.
    pub sme_fa64: bool,
    /// FEAT_SME2 (the ZT0 register).
    pub sme2: bool,
    /// FEAT_MTE2: allocation tags in memory (FEAT_MTE alone has only the instructions).
    pub mte2: bool,
    /// FEAT_FGT: fine-grained trap registers (HFGRTR_EL2 and the others).
    pub fgt: bool,
    /// FEAT_FGT2: the second set (HFGRTR2_EL2 and the others).
    pub fgt2: bool,
    /// FEAT_HCX: HCRX_EL2.
    pub hcx: bool,
    /// FEAT_MOPS: memcpy/memset instructions (enabled through HCRX_EL2.MSCEn).
    pub mops: bool,
    /// FEAT_SPE: statistical profiling.
    pub spe: bool,
    /// FEAT_SPEv1p2 (PMSNEVFR_EL1, under a fine-grained trap).
    pub spe_v1p2: bool,
    /// FEAT_TRBE: trace buffer.
    pub trbe: bool,
    /// FEAT_BRBE: branch record buffer (its registers under fine-grained traps).
    pub brbe: bool,
    /// FEAT_PMUv3p9 (PMICNTR_EL0, PMICFILTR_EL0, PMUACR_EL1 under FGT2 traps).
    pub pmuv3p9: bool,
    /// FEAT_AMUv1: activity monitors (HAFGRTR_EL2 exists with FGT).
    pub amu: bool,
    /// FEAT_VHE: HCR_EL2.E2H can be set.
    pub vhe: bool,
    /// FEAT_PAN.
    pub pan: bool,
    /// FEAT_UAO.
    pub uao: bool,
    /// ID_AA64MMFR4_EL1.E2H0 < 0: HCR_EL2.E2H is RES1 (the CPU has no nVHE mode).
    pub e2h_res1: bool,
    /// FEAT_S1PIE: permission indirection (PIR_EL1, PIRE0_EL1).
    pub s1pie: bool,
    /// FEAT_S1POE: permission overlays (POR_EL0, POR_EL1).
    pub s1poe: bool,
    /// FEAT_TCR2: TCR2_ELx.
    pub tcr2: bool,
    /// FEAT_SCTLR2: SCTLR2_ELx.
    pub sctlr2: bool,
    /// FEAT_GCS: guarded control stacks.
    pub gcs: bool,
    /// The GICv3 system-register CPU interface (ID_AA64PFR0_EL1.GIC != 0).
    pub gic_sysregs: bool,
    /// FEAT_PMUv3 (PMUSERENR_EL0 and the PMU registers exist).
    pub pmu: bool,
    /// PMU event counters (PMCR_EL0.N); 0 without a PMU.
    pub pmu_counters: u64,
}

impl Features {
    /// Decodes the ID registers.
    pub fn from_ids(id: &IdRegs) -> Features {
        let sme = field(id.pfr1, 24) >= 1;
        let pmuver = field(id.dfr0, 8);
        let pmu = !matches!(pmuver, 0 | 0xf);
        let pmsver = field(id.dfr0, 32);
        Features {
            sve: field(id.pfr0, 32) >= 1,
            sme,
            sme_fa64: sme && id.smfr0 >> 63 == 1,
            sme2: sme && field(id.smfr0, 56) >= 1,
            mte2: field(id.pfr1, 8) >= 2,
            fgt: field(id.mmfr0, 56) >= 1,
            fgt2: field(id.mmfr0, 56) >= 2,
            hcx: field(id.mmfr1, 40) >= 1,
            mops: field(id.isar2, 16) >= 1,
            spe: pmsver >= 1,
            spe_v1p2: pmsver >= 3,
            trbe: field(id.dfr0, 44) >= 1,
            brbe: field(id.dfr0, 52) >= 1,
            pmuv3p9: pmu && pmuver >= 9,
            amu: field(id.pfr0, 44) >= 1,
            vhe: field(id.mmfr1, 8) >= 1,
            pan: field(id.mmfr1, 20) >= 1,
            uao: field(id.mmfr2, 4) >= 1,
            e2h_res1: signed_field(id.mmfr4, 24) < 0,
            s1pie: field(id.mmfr3, 8) >= 1,
            s1poe: field(id.mmfr3, 16) >= 1,
            tcr2: field(id.mmfr3, 0) >= 1,
            sctlr2: field(id.mmfr3, 4) >= 1,
            gcs: field(id.pfr1, 44) >= 1,
            gic_sysregs: field(id.pfr0, 24) >= 1,
            pmu,
            pmu_counters: if pmu { id.pmu_counters & 0x1f } else { 0 },
        }
    }
}

/// Reads a system register by its generic name (`S3_<op1>_C<n>_C<m>_<op2>`), for registers
/// the assembler knows by name only with a feature enabled (SVE, SME, FGT, ...).
#[cfg(target_arch = "aarch64")]
#[macro_export]
macro_rules! read_sysreg {
    ($name:literal) => {{
        let v: u64;
        // SAFETY: reads a system register; no memory or flag effects. The caller reads only
        // registers that exist on this CPU (checked from the ID registers) or that read as
        // zero where they do not (the ID register space).
        unsafe { core::arch::asm!(concat!("mrs {}, ", $name), out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}

/// Writes a system register by its generic name (see [`read_sysreg`]).
#[cfg(target_arch = "aarch64")]
#[macro_export]
macro_rules! write_sysreg {
    ($name:literal, $v:expr) => {{
        let v: u64 = $v;
        // SAFETY: the caller writes a control register that exists on this CPU (checked from
        // the ID registers) with a value decided in `rt::el1` / `rt::el2`; no memory effect.
        unsafe { core::arch::asm!(concat!("msr ", $name, ", {}"), in(reg) v, options(nomem, nostack, preserves_flags)) };
    }};
}

#[cfg(target_arch = "aarch64")]
impl IdRegs {
    /// This CPU's ID registers (at EL1 or EL2). ID_AA64MMFR3/4_EL1 are in the ID space that
    /// reads as zero on CPUs that predate them; ID_AA64SMFR0_EL1 and PMCR_EL0 are read only
    /// where SME and a PMU exist.
    pub fn read() -> IdRegs {
        let pfr1 = crate::read_sysreg!("id_aa64pfr1_el1");
        let dfr0 = crate::read_sysreg!("id_aa64dfr0_el1");
        let sme = field(pfr1, 24) != 0;
        let pmu = !matches!(field(dfr0, 8), 0 | 0xf);
        IdRegs {
            pfr0: crate::read_sysreg!("id_aa64pfr0_el1"),
            pfr1,
            mmfr0: crate::read_sysreg!("id_aa64mmfr0_el1"),
            mmfr1: crate::read_sysreg!("id_aa64mmfr1_el1"),
            mmfr2: crate::read_sysreg!("S3_0_C0_C7_2"),
            mmfr3: crate::read_sysreg!("S3_0_C0_C7_3"),
            mmfr4: crate::read_sysreg!("S3_0_C0_C7_4"),
            dfr0,
            isar2: crate::read_sysreg!("S3_0_C0_C6_2"),
            smfr0: if sme { crate::read_sysreg!("S3_0_C0_C4_5") } else { 0 },
            pmu_counters: if pmu { (crate::read_sysreg!("pmcr_el0") >> 11) & 0x1f } else { 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_fields_sign_extend() {
        assert_eq!(signed_field(0xf << 24, 24), -1);
        assert_eq!(signed_field(0xe << 24, 24), -2);
        assert_eq!(signed_field(0x7 << 24, 24), 7);
        assert_eq!(signed_field(0xf << 60, 60), -1);
    }

    #[test]
    fn nothing_in_the_id_registers_means_nothing_offered() {
        let f = Features::from_ids(&IdRegs::default());
        assert_eq!(f, Features::default());
    }
}
