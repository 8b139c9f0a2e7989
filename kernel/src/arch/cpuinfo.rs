//! What this CPU is and which optional features the kernel will use: the per-CPU banner.
//! The decoding and the decisions are `pgtable::cpu`'s (host-tested); this file only reads the
//! registers.

use aarch64_cpu::registers::*;
use pgtable::cpu::{self, Midr, Refusal};
use pgtable::regime::parange;

/// ID register values the banner and the mechanisms care about.
#[derive(Debug, Clone, Copy)]
pub struct CpuInfo {
    pub el: u64,
    pub midr: Midr,
    pub mpidr: u64,
    /// ID_AA64MMFR2_EL1 (BBM in bits 55:52).
    pub mmfr2: u64,
    /// ID_AA64ISAR0_EL1 (TLB in bits 59:56).
    pub isar0: u64,
    /// ID_AA64DFR0_EL1.PMUVer.
    pub pmuver: u64,
    /// ID_AA64MMFR0_EL1.PARange.
    pub parange: u8,
}

impl CpuInfo {
    pub fn read() -> Self {
        Self {
            el: CurrentEL.read(CurrentEL::EL),
            midr: Midr(MIDR_EL1.get()),
            mpidr: rt::mpidr_affinity(),
            mmfr2: ID_AA64MMFR2_EL1.get(),
            isar0: ID_AA64ISAR0_EL1.get(),
            pmuver: ID_AA64DFR0_EL1.read(ID_AA64DFR0_EL1::PMUVer),
            parange: cpu::parange(ID_AA64MMFR0_EL1.get()),
        }
    }

    /// ID_AA64MMFR2_EL1.BBM: 0, 1 or 2 (level 2 = change block size without break-before-make).
    pub fn bbm(&self) -> u8 {
        cpu::bbm_level(self.mmfr2)
    }

    /// Range TLBIs (FEAT_TLBIRANGE).
    pub fn tlbi_range(&self) -> bool {
        cpu::has_tlbi_range(self.isar0)
    }

    /// Physical address bits (`None` for a reserved PARange value).
    pub fn pa_bits(&self) -> Option<u32> {
        parange::bits(self.parange)
    }

    /// Whether BBML2 can be trusted on this CPU, or why not (`pgtable::cpu::capability`).
    pub fn bbml2(&self) -> Result<(), Refusal> {
        cpu::capability(self.midr, self.mmfr2)
    }
}
