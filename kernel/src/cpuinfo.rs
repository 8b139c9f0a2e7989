//! What this CPU is and which optional features the kernel will use: the per-CPU banner.

use aarch64_cpu::registers::*;

/// ID register fields the banner and the mechanisms care about.
#[derive(Debug, Clone, Copy)]
pub struct CpuInfo {
    pub el: u64,
    pub midr: u64,
    pub mpidr: u64,
    /// ID_AA64MMFR2_EL1.BBM: 0, 1 or 2 (level 2 = change block size without break-before-make).
    pub bbm: u64,
    /// ID_AA64ISAR0_EL1.TLB: 1 = TLBI outer-shareable, 2 = plus range TLBIs.
    pub tlb: u64,
    /// ID_AA64DFR0_EL1.PMUVer.
    pub pmuver: u64,
    /// ID_AA64MMFR0_EL1.PARange.
    pub parange: u64,
}

impl CpuInfo {
    pub fn read() -> Self {
        Self {
            el: CurrentEL.read(CurrentEL::EL),
            midr: MIDR_EL1.get(),
            mpidr: MPIDR_EL1.get() & 0xff_00ff_ffff,
            bbm: ID_AA64MMFR2_EL1.read(ID_AA64MMFR2_EL1::BBM),
            tlb: (ID_AA64ISAR0_EL1.get() >> 56) & 0xf,
            pmuver: ID_AA64DFR0_EL1.read(ID_AA64DFR0_EL1::PMUVer),
            parange: ID_AA64MMFR0_EL1.read(ID_AA64MMFR0_EL1::PARange),
        }
    }

    pub fn variant(&self) -> u64 {
        (self.midr >> 20) & 0xf
    }
    pub fn revision(&self) -> u64 {
        self.midr & 0xf
    }

    /// A name for the core.
    pub fn core_name(&self) -> &'static str {
        core_name(self.midr)
    }

    /// Range TLBIs (FEAT_TLBIRANGE).
    pub fn tlbi_range(&self) -> bool {
        self.tlb >= 2
    }

    /// Physical address bits.
    pub fn pa_bits(&self) -> u32 {
        match self.parange {
            0 => 32,
            1 => 36,
            2 => 40,
            3 => 42,
            4 => 44,
            5 => 48,
            _ => 52,
        }
    }

    /// Whether BBML2 can be trusted on this CPU (`pgtable::bbml2_allowed`: BBM level 2 **and** a
    /// core on the allow-list of CPUs that never raise TLB conflict aborts), with the reason.
    pub fn bbml2(&self) -> (bool, &'static str) {
        if self.bbm < 2 {
            (false, "ID_AA64MMFR2_EL1.BBM < 2")
        } else if pgtable::bbml2_allowed(self.midr, self.bbm << 52, false) {
            (true, "BBM level 2 on an allow-listed core")
        } else {
            (false, "BBM level 2 but the core is not on the allow-list")
        }
    }
}

/// A name for the core of a MIDR_EL1 value.
pub fn core_name(midr: u64) -> &'static str {
    match ((midr >> 24) & 0xff, (midr >> 4) & 0xfff) {
        (0x41, 0xd03) => "Cortex-A53",
        (0x41, 0xd04) => "Cortex-A35",
        (0x41, 0xd07) => "Cortex-A57",
        (0x41, 0xd08) => "Cortex-A72",
        (0x41, 0xd0b) => "Cortex-A76",
        (0x41, 0xd0c) => "Neoverse-N1",
        (0x41, 0xd40) => "Neoverse-V1",
        (0x41, 0xd4f) => "Neoverse-V2",
        (0x41, 0xd82) => "Cortex-X4",
        (0x41, 0xd84) => "Neoverse-V3",
        (0x41, 0xd83) => "Neoverse-V3AE",
        (0xc0, 0xac3) => "AmpereOne",
        (0x46, 0x001) => "A64FX",
        (0x00, 0x051) => "QEMU max",
        _ => "unknown core",
    }
}
