//! CPU features a guest may use, read from the ID registers, and the EL2 controls that hand
//! them to it untrapped: SVE and SME at their full vector length, MTE with its tags, the whole
//! PMU, SPE and the trace buffer where the CPU has them. Pure functions of the ID register
//! values, so the decisions are tested on the host; the hypervisor writes the result.

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
    /// ID_AA64DFR0_EL1.
    pub dfr0: u64,
    /// ID_AA64ISAR2_EL1.
    pub isar2: u64,
    /// ID_AA64SMFR0_EL1 (0 without SME).
    pub smfr0: u64,
    /// PMCR_EL0.N: event counters the PMU has.
    pub pmu_counters: u64,
}

fn field(v: u64, shift: u32) -> u64 {
    (v >> shift) & 0xf
}

/// What the CPU offers a guest.
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
    /// FEAT_FGT: fine-grained trap registers.
    pub fgt: bool,
    /// FEAT_HCX: HCRX_EL2.
    pub hcx: bool,
    /// FEAT_MOPS: memcpy/memset instructions (enabled through HCRX_EL2.MSCEn).
    pub mops: bool,
    /// FEAT_SPE: statistical profiling.
    pub spe: bool,
    /// FEAT_TRBE: trace buffer.
    pub trbe: bool,
    /// PMU event counters (PMCR_EL0.N); 0 without a PMU.
    pub pmu_counters: u64,
}

impl Features {
    /// Decodes the ID registers.
    pub fn from_ids(id: &IdRegs) -> Features {
        let sme = field(id.pfr1, 24) >= 1;
        let pmu = !matches!(field(id.dfr0, 8), 0 | 0xf);
        Features {
            sve: field(id.pfr0, 32) >= 1,
            sme,
            sme_fa64: sme && id.smfr0 >> 63 == 1,
            sme2: sme && field(id.smfr0, 56) >= 1,
            mte2: field(id.pfr1, 8) >= 2,
            fgt: field(id.mmfr0, 56) >= 1,
            hcx: field(id.mmfr1, 40) >= 1,
            mops: field(id.isar2, 16) >= 1,
            spe: field(id.dfr0, 32) >= 1,
            trbe: field(id.dfr0, 44) >= 1,
            pmu_counters: if pmu { id.pmu_counters & 0x1f } else { 0 },
        }
    }
}

/// CPTR_EL2 (non-VHE) trap bits: TFP (FP/SIMD), TZ (SVE), TSM (SME); bits 13, 9 and 7:0 are RES1,
/// and TZ / TSM read as RES1 where SVE / SME are not implemented.
pub mod cptr {
    /// RES1 bits.
    pub const RES1: u64 = (1 << 13) | (1 << 9) | 0xff;
    /// Trap SVE.
    pub const TZ: u64 = 1 << 8;
    /// Trap FP/SIMD.
    pub const TFP: u64 = 1 << 10;
    /// Trap SME.
    pub const TSM: u64 = 1 << 12;
}

/// HCR_EL2.ATA: EL1 and EL0 may access allocation tags (GCR_EL1, RGSR_EL1, TFSR*_EL1, LDG/STG...).
pub const HCR_ATA: u64 = 1 << 56;
/// HCRX_EL2.MSCEn: the FEAT_MOPS instructions are enabled at EL1 and EL0.
pub const HCRX_MSCEN: u64 = 1 << 11;
/// HFGRTR_EL2 / HFGWTR_EL2 bits that *trap when clear*: nTPIDR2_EL0 (55) and nSMPRI_EL1 (54),
/// both SME registers.
pub const HFG_SME_NBITS: u64 = (1 << 55) | (1 << 54);
/// SMCR_EL2.FA64 and .EZT0.
pub const SMCR_FA64: u64 = 1 << 31;
/// SMCR_EL2.EZT0: ZT0 (SME2) does not trap.
pub const SMCR_EZT0: u64 = 1 << 30;
/// The largest vector-length field ZCR_ELx.LEN / SMCR_ELx.LEN: the CPU clamps it to what it
/// implements, so the guest may choose any length the hardware has.
pub const LEN_MAX: u64 = 0xf;

/// The EL2 register values that let a guest use everything the CPU has. `None`: the register does
/// not exist on this CPU (do not write it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Controls {
    /// CPTR_EL2.
    pub cptr: u64,
    /// ZCR_EL2 (SVE).
    pub zcr: Option<u64>,
    /// SMCR_EL2 (SME).
    pub smcr: Option<u64>,
    /// Bits to add to HCR_EL2.
    pub hcr: u64,
    /// HCRX_EL2.
    pub hcrx: Option<u64>,
    /// HFGRTR_EL2 and HFGWTR_EL2 (the same value), HFGITR_EL2, HDFGRTR_EL2 and HDFGWTR_EL2 (0).
    pub hfg: Option<u64>,
    /// MDCR_EL2: all PMU counters to the guest (HPMN = N), and the profiling and trace buffers
    /// owned by EL1 where they exist (E2PB = E2TB = 0b11); nothing trapped.
    pub mdcr: u64,
}

/// The controls for `f`.
pub fn guest_controls(f: &Features) -> Controls {
    let mut cptr = cptr::RES1;
    if !f.sve {
        cptr |= cptr::TZ;
    }
    if !f.sme {
        cptr |= cptr::TSM;
    }
    let smcr = f.sme.then_some(LEN_MAX | if f.sme_fa64 { SMCR_FA64 } else { 0 } | if f.sme2 { SMCR_EZT0 } else { 0 });
    let mut mdcr = f.pmu_counters;
    if f.spe {
        mdcr |= 0b11 << 12;
    }
    if f.trbe {
        mdcr |= 0b11 << 24;
    }
    Controls {
        cptr,
        zcr: f.sve.then_some(LEN_MAX),
        smcr,
        hcr: if f.mte2 { HCR_ATA } else { 0 },
        hcrx: f.hcx.then_some(if f.mops { HCRX_MSCEN } else { 0 }),
        hfg: f.fgt.then_some(if f.sme { HFG_SME_NBITS } else { 0 }),
        mdcr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QEMU 7.2 `-cpu cortex-a76` (values the hypervisor read): no SVE, SME or MTE; PMUv3 with 6
    /// counters.
    const A76: IdRegs = IdRegs {
        pfr0: 0x1100_0000_1111_0112,
        pfr1: 0x10,
        mmfr0: 0x10_1122,
        mmfr1: 0x1021_2122,
        dfr0: 0x1030_5408,
        isar2: 0,
        smfr0: 0,
        pmu_counters: 6,
    };

    /// QEMU 7.2 `-M virt,mte=on -cpu max`: SVE, SME with FA64, MTE (level 3), FEAT_HCX.
    const MAX_MTE: IdRegs = IdRegs {
        pfr0: 0x1201_0011_2111_0222,
        pfr1: 0x100_0321,
        mmfr0: 0x323_1020_1126,
        mmfr1: 0x110_1021_1122,
        dfr0: 0x1030_5609,
        isar2: 0,
        smfr0: 0x80f1_00fd_0000_0000,
        pmu_counters: 6,
    };

    #[test]
    fn qemu_max_with_mte_gets_sve_sme_and_tags() {
        let f = Features::from_ids(&MAX_MTE);
        assert!(f.sve && f.sme && f.sme_fa64 && !f.sme2 && f.mte2 && f.hcx && !f.fgt && !f.mops);
        let c = guest_controls(&f);
        assert_eq!(c.cptr, 0x22ff);
        assert_eq!((c.zcr, c.smcr), (Some(0xf), Some(0xf | SMCR_FA64)));
        assert_eq!((c.hcr, c.hcrx, c.hfg, c.mdcr), (HCR_ATA, Some(0), None, 6));
        // Without mte=on QEMU's max reports MTE level 0 in ID_AA64PFR1_EL1.
        let f = Features::from_ids(&IdRegs { pfr1: 0x100_0021, ..MAX_MTE });
        assert!(!f.mte2);
    }

    #[test]
    fn a_cortex_a76_keeps_sve_and_sme_trapped_and_gets_its_pmu() {
        let f = Features::from_ids(&A76);
        assert!(!f.sve && !f.sme && !f.mte2 && !f.fgt && !f.hcx);
        let c = guest_controls(&f);
        assert_eq!(c.cptr, 0x33ff, "TZ and TSM are RES1 without SVE/SME; TFP clear");
        assert_eq!((c.zcr, c.smcr, c.hcrx, c.hfg), (None, None, None, None));
        assert_eq!(c.hcr, 0);
        assert_eq!(c.mdcr, 6, "HPMN = N: every counter is the guest's");
    }

    #[test]
    fn max_with_sve_sme_and_mte_gets_them_all_at_full_length() {
        let ids = IdRegs {
            pfr0: 1 << 32,
            pfr1: (1 << 24) | (2 << 8),
            smfr0: (1 << 63) | (1 << 56),
            mmfr0: 1 << 56,
            mmfr1: 1 << 40,
            isar2: 1 << 16,
            dfr0: (1 << 32) | (1 << 44) | (6 << 8),
            pmu_counters: 31,
        };
        let f = Features::from_ids(&ids);
        assert!(f.sve && f.sme && f.sme_fa64 && f.sme2 && f.mte2 && f.fgt && f.hcx && f.mops && f.spe && f.trbe);
        let c = guest_controls(&f);
        assert_eq!(c.cptr & (cptr::TZ | cptr::TSM | cptr::TFP), 0, "nothing trapped");
        assert_eq!(c.cptr, cptr::RES1);
        assert_eq!(c.zcr, Some(0xf));
        assert_eq!(c.smcr, Some(0xf | SMCR_FA64 | SMCR_EZT0));
        assert_eq!(c.hcr, HCR_ATA, "MTE2: tags reachable from EL1");
        assert_eq!(c.hcrx, Some(HCRX_MSCEN));
        assert_eq!(c.hfg, Some(HFG_SME_NBITS), "SME's registers do not trap under FGT");
        assert_eq!(c.mdcr, 31 | (3 << 12) | (3 << 24));
    }

    #[test]
    fn mte_without_tag_storage_needs_no_ata() {
        let f = Features::from_ids(&IdRegs { pfr1: 1 << 8, ..A76 });
        assert!(!f.mte2);
        assert_eq!(guest_controls(&f).hcr, 0);
    }

    #[test]
    fn no_pmu_means_no_counters() {
        for ver in [0, 0xf] {
            let f = Features::from_ids(&IdRegs { dfr0: ver << 8, pmu_counters: 6, ..A76 });
            assert_eq!(f.pmu_counters, 0);
        }
    }
}
