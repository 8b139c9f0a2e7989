//! Translation regimes and the system-register values that go with them (MAIR, TCR_EL2,
//! TCR_EL1, VTCR_EL2), so the binaries never hand-encode them.

use tock_registers::fields::FieldValue;
use tock_registers::register_bitfields;

use crate::addr::{level_size, InputKind, ENTRIES_PER_TABLE};

/// MAIR index of Device-nGnRnE memory.
pub const MAIR_DEVICE_NGNRNE: u8 = 0;
/// MAIR index of Normal memory, inner/outer write-back read/write-allocate non-transient.
pub const MAIR_NORMAL_WB: u8 = 1;
/// MAIR index of Normal non-cacheable memory.
pub const MAIR_NORMAL_NC: u8 = 2;

/// The MAIR_EL1 / MAIR_EL2 value every stage-1 descriptor of this library assumes:
/// Attr0 = 0x00 (Device-nGnRnE), Attr1 = 0xff (Normal WB RWA), Attr2 = 0x44 (Normal NC).
pub const MAIR: u64 = (0x44 << 16) | (0xff << 8);

/// Which half of the EL1&0 VA space a table serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VaHalf {
    /// `0 .. 2^48`, TTBR0_EL1 (user space; entries are non-global by default).
    Lower,
    /// `0xffff_0000_0000_0000 ..= u64::MAX`, TTBR1_EL1 (kernel; entries are global by default).
    Upper,
}

/// A translation regime, with the tag (ASID / VMID) its TLB entries carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Regime {
    /// EL2 stage 1, non-VHE (HCR_EL2.E2H = 0, TTBR0_EL2): 48-bit VA, 4 levels from level 0,
    /// no ASID. Invalidated with TLBI VAE2IS / ALLE2IS.
    El2,
    /// The EL2&0 regime (HCR_EL2.E2H = 1, TTBR0_EL2), used as the hypervisor's own table when
    /// EL2 runs with E2H = 1 (hVHE): 48-bit VA from TTBR0_EL2, 4 levels from level 0, the
    /// EL1&0 descriptor format (AP[1] = EL0 access, PXN and UXN), global entries only (no
    /// ASID). Invalidated with TLBI VAE2IS / ALLE2IS, as [`Regime::El2`].
    El20,
    /// EL1&0 stage 1: 48-bit VA, 4 levels from level 0. `asid` tags non-global entries.
    El1 {
        /// ASID of the non-global entries (TTBRn_EL1.ASID, TCR_EL1.A1 = 0 uses TTBR0's).
        asid: u16,
        /// TTBR0 or TTBR1 half.
        half: VaHalf,
    },
    /// Stage 2 (VTTBR_EL2): 40-bit IPA, 4 KiB granule, starting at level 1 with two
    /// concatenated level-1 tables (VTCR_EL2.T0SZ = 24, SL0 = 1).
    Stage2 {
        /// VMID (VTTBR_EL2.VMID).
        vmid: u16,
    },
}

/// Stage-2 input size in bits.
pub const IPA_BITS: u32 = 40;
/// Stage-1 input size in bits.
pub const VA_BITS: u32 = 48;
const UPPER_BASE: u64 = 0xffff_0000_0000_0000;

impl Regime {
    /// Level of the root table.
    pub const fn start_level(self) -> usize {
        match self {
            Regime::Stage2 { .. } => 1,
            _ => 0,
        }
    }
    /// Number of concatenated 4 KiB pages in the root table (2 for stage 2).
    pub const fn root_pages(self) -> usize {
        match self {
            Regime::Stage2 { .. } => 2,
            _ => 1,
        }
    }
    /// Entries in the root table.
    pub const fn root_entries(self) -> usize {
        self.root_pages() * ENTRIES_PER_TABLE
    }
    /// Input address size in bits.
    pub const fn input_bits(self) -> u32 {
        match self {
            Regime::Stage2 { .. } => IPA_BITS,
            _ => VA_BITS,
        }
    }
    /// First input address of the regime.
    pub const fn input_base(self) -> u64 {
        match self {
            Regime::El1 { half: VaHalf::Upper, .. } => UPPER_BASE,
            _ => 0,
        }
    }
    /// Bytes of input address space covered (2^48 or 2^40).
    pub const fn input_span(self) -> u64 {
        1 << self.input_bits()
    }
    /// Whether this is the stage-2 regime.
    pub const fn is_stage2(self) -> bool {
        matches!(self, Regime::Stage2 { .. })
    }
    /// Which address type translates in this regime.
    pub const fn input_kind(self) -> InputKind {
        match self {
            Regime::Stage2 { .. } => InputKind::IntermPhys,
            _ => InputKind::Virtual,
        }
    }
    /// Whether blocks are possible at `level` (levels 1 and 2 with the 4 KiB granule).
    pub const fn block_level(level: usize) -> bool {
        level == 1 || level == 2
    }
    /// Bytes covered by one root entry.
    pub const fn root_entry_size(self) -> u64 {
        level_size(self.start_level())
    }
}

/// PARange / PS / IPS encodings (ID_AA64MMFR0_EL1.PARange).
pub mod parange {
    /// 32 bits, 4 GiB.
    pub const PA_32: u8 = 0b000;
    /// 36 bits, 64 GiB.
    pub const PA_36: u8 = 0b001;
    /// 40 bits, 1 TiB (Raspberry Pi 5).
    pub const PA_40: u8 = 0b010;
    /// 42 bits.
    pub const PA_42: u8 = 0b011;
    /// 44 bits.
    pub const PA_44: u8 = 0b100;
    /// 48 bits.
    pub const PA_48: u8 = 0b101;
    /// 52 bits (needs LPA; this library caps at 48).
    pub const PA_52: u8 = 0b110;

    /// Bits of physical address for a PARange value (`None` for reserved values).
    pub const fn bits(parange: u8) -> Option<u32> {
        match parange {
            0 => Some(32),
            1 => Some(36),
            2 => Some(40),
            3 => Some(42),
            4 => Some(44),
            5 => Some(48),
            6 => Some(52),
            _ => None,
        }
    }
}

register_bitfields! {u64,
    /// TCR_EL2 with HCR_EL2.E2H = 0 (single VA range).
    TCR_EL2 [
        T0SZ OFFSET(0) NUMBITS(6) [],
        IRGN0 OFFSET(8) NUMBITS(2) [ WbWa = 0b01 ],
        ORGN0 OFFSET(10) NUMBITS(2) [ WbWa = 0b01 ],
        SH0 OFFSET(12) NUMBITS(2) [ Inner = 0b11 ],
        TG0 OFFSET(14) NUMBITS(2) [ K4 = 0b00 ],
        PS OFFSET(16) NUMBITS(3) [],
        RES1_23 OFFSET(23) NUMBITS(1) [],
        RES1_31 OFFSET(31) NUMBITS(1) []
    ],
    /// TCR_EL1.
    TCR_EL1 [
        T0SZ OFFSET(0) NUMBITS(6) [],
        EPD0 OFFSET(7) NUMBITS(1) [],
        IRGN0 OFFSET(8) NUMBITS(2) [ WbWa = 0b01 ],
        ORGN0 OFFSET(10) NUMBITS(2) [ WbWa = 0b01 ],
        SH0 OFFSET(12) NUMBITS(2) [ Inner = 0b11 ],
        TG0 OFFSET(14) NUMBITS(2) [ K4 = 0b00 ],
        T1SZ OFFSET(16) NUMBITS(6) [],
        A1 OFFSET(22) NUMBITS(1) [],
        EPD1 OFFSET(23) NUMBITS(1) [],
        IRGN1 OFFSET(24) NUMBITS(2) [ WbWa = 0b01 ],
        ORGN1 OFFSET(26) NUMBITS(2) [ WbWa = 0b01 ],
        SH1 OFFSET(28) NUMBITS(2) [ Inner = 0b11 ],
        TG1 OFFSET(30) NUMBITS(2) [ K4 = 0b10 ],
        IPS OFFSET(32) NUMBITS(3) [],
        AS OFFSET(36) NUMBITS(1) []
    ],
    /// VTCR_EL2.
    VTCR_EL2 [
        T0SZ OFFSET(0) NUMBITS(6) [],
        SL0 OFFSET(6) NUMBITS(2) [ Level1 = 0b01 ],
        IRGN0 OFFSET(8) NUMBITS(2) [ WbWa = 0b01 ],
        ORGN0 OFFSET(10) NUMBITS(2) [ WbWa = 0b01 ],
        SH0 OFFSET(12) NUMBITS(2) [ Inner = 0b11 ],
        TG0 OFFSET(14) NUMBITS(2) [ K4 = 0b00 ],
        PS OFFSET(16) NUMBITS(3) [],
        VS OFFSET(19) NUMBITS(1) [],
        RES1_31 OFFSET(31) NUMBITS(1) []
    ]
}

/// Caps a PARange value at 48 bits (no LPA descriptors in this library).
const fn cap_pa(parange: u8) -> u64 {
    if parange > parange::PA_48 {
        parange::PA_48 as u64
    } else {
        parange as u64
    }
}

/// TCR_EL2 (E2H = 0) for [`Regime::El2`] tables: T0SZ = 16 (48-bit VA, walk from level 0),
/// 4 KiB granule, inner-shareable write-back walks, PS from `parange`
/// (ID_AA64MMFR0_EL1.PARange, capped at 48 bits). RES1 bits 23 and 31 set.
pub fn tcr_el2(parange: u8) -> u64 {
    let v: FieldValue<u64, TCR_EL2::Register> = TCR_EL2::T0SZ.val(64 - VA_BITS as u64)
        + TCR_EL2::IRGN0::WbWa
        + TCR_EL2::ORGN0::WbWa
        + TCR_EL2::SH0::Inner
        + TCR_EL2::TG0::K4
        + TCR_EL2::PS.val(cap_pa(parange))
        + TCR_EL2::RES1_23::SET
        + TCR_EL2::RES1_31::SET;
    v.value
}

/// TCR_EL2 with HCR_EL2.E2H = 1 (TCR_EL1's layout) for [`Regime::El20`] tables: TTBR0_EL2 as
/// [`tcr_el2`] sets it up (T0SZ = 16, 4 KiB granule, inner-shareable write-back walks), no walks
/// from TTBR1_EL2 (EPD1; T1SZ and TG1 still valid values), 8-bit ASIDs (unused: every entry is
/// global), no hardware access-flag or dirty updates, IPS from `parange` (capped at 48 bits).
pub fn tcr_el2_e2h(parange: u8) -> u64 {
    let v: FieldValue<u64, TCR_EL1::Register> = TCR_EL1::T0SZ.val(64 - VA_BITS as u64)
        + TCR_EL1::IRGN0::WbWa
        + TCR_EL1::ORGN0::WbWa
        + TCR_EL1::SH0::Inner
        + TCR_EL1::TG0::K4
        + TCR_EL1::T1SZ.val(64 - VA_BITS as u64)
        + TCR_EL1::EPD1::SET
        + TCR_EL1::TG1::K4
        + TCR_EL1::IPS.val(cap_pa(parange));
    v.value
}

/// TCR_EL1 for [`Regime::El1`] tables: both halves 48-bit (T0SZ = T1SZ = 16, walks from
/// level 0), 4 KiB granules, inner-shareable write-back walks, ASID from TTBR0 (A1 = 0),
/// 16-bit ASIDs when `asid16` (ID_AA64MMFR0_EL1.ASIDBits = 0b0010), IPS from `parange`.
/// `ttbr0_walks = false` sets EPD0 (no TTBR0 walks: a kernel with no user space yet).
pub fn tcr_el1(parange: u8, asid16: bool, ttbr0_walks: bool) -> u64 {
    let v: FieldValue<u64, TCR_EL1::Register> = TCR_EL1::T0SZ.val(64 - VA_BITS as u64)
        + TCR_EL1::EPD0.val(!ttbr0_walks as u64)
        + TCR_EL1::IRGN0::WbWa
        + TCR_EL1::ORGN0::WbWa
        + TCR_EL1::SH0::Inner
        + TCR_EL1::TG0::K4
        + TCR_EL1::T1SZ.val(64 - VA_BITS as u64)
        + TCR_EL1::IRGN1::WbWa
        + TCR_EL1::ORGN1::WbWa
        + TCR_EL1::SH1::Inner
        + TCR_EL1::TG1::K4
        + TCR_EL1::IPS.val(cap_pa(parange))
        + TCR_EL1::AS.val(asid16 as u64);
    v.value
}

/// VTCR_EL2 for [`Regime::Stage2`] tables: 40-bit IPA (T0SZ = 24), start at level 1 (SL0 = 1)
/// with two concatenated level-1 tables, 4 KiB granule, inner-shareable write-back walks,
/// PS from `parange` (capped at 48 bits), 16-bit VMIDs when `vmid16`
/// (ID_AA64MMFR1_EL1.VMIDBits = 0b0010). `None` when the PA size is below 40 bits (the IPA
/// space must not exceed it).
pub fn vtcr_el2(parange: u8, vmid16: bool) -> Option<u64> {
    if parange::bits(parange)? < IPA_BITS {
        return None;
    }
    let v: FieldValue<u64, VTCR_EL2::Register> = VTCR_EL2::T0SZ.val(64 - IPA_BITS as u64)
        + VTCR_EL2::SL0::Level1
        + VTCR_EL2::IRGN0::WbWa
        + VTCR_EL2::ORGN0::WbWa
        + VTCR_EL2::SH0::Inner
        + VTCR_EL2::TG0::K4
        + VTCR_EL2::PS.val(cap_pa(parange))
        + VTCR_EL2::VS.val(vmid16 as u64)
        + VTCR_EL2::RES1_31::SET;
    Some(v.value)
}

/// VTTBR_EL2 value for a stage-2 root and VMID (VMID in bits 63:48; with 8-bit VMIDs only the
/// low byte is used by the hardware).
pub const fn vttbr_el2(root: crate::PhysAddr, vmid: u16) -> u64 {
    root.as_u64() | ((vmid as u64) << 48)
}

/// TTBRn_EL1 value for a root and ASID (ASID in bits 63:48).
pub const fn ttbr_el1(root: crate::PhysAddr, asid: u16) -> u64 {
    root.as_u64() | ((asid as u64) << 48)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_values() {
        assert_eq!(MAIR, 0x44ff00);
        // T0SZ=16, IRGN/ORGN WBWA, SH inner, PS=40-bit, RES1 bits.
        assert_eq!(tcr_el2(parange::PA_40), 0x8082_3510);
        assert_eq!(tcr_el2(parange::PA_52), tcr_el2(parange::PA_48));
        // T0SZ=24, SL0=1, WBWA, inner, PS=40, RES1.
        assert_eq!(vtcr_el2(parange::PA_40, false), Some(0x8002_3558));
        assert_eq!(vtcr_el2(parange::PA_36, false), None);
        assert_eq!(vtcr_el2(parange::PA_48, true).unwrap() >> 16 & 0xf, 0b1101);
        let tcr = tcr_el1(parange::PA_48, true, true);
        assert_eq!(tcr & 0x3f, 16);
        assert_eq!(tcr >> 16 & 0x3f, 16);
        assert_eq!(tcr >> 30 & 3, 0b10);
        assert_eq!(tcr >> 32 & 7, 0b101);
        assert_eq!(tcr >> 36 & 1, 1);
        assert_eq!(tcr >> 7 & 1, 0);
        assert_eq!(tcr_el1(parange::PA_48, false, false) >> 7 & 1, 1);
    }

    #[test]
    fn regime_geometry() {
        let s2 = Regime::Stage2 { vmid: 1 };
        assert_eq!(s2.start_level(), 1);
        assert_eq!(s2.root_entries(), 1024);
        assert_eq!(s2.root_entries() as u64 * s2.root_entry_size(), s2.input_span());
        let k = Regime::El1 { asid: 0, half: VaHalf::Upper };
        assert_eq!(k.input_base().wrapping_add(k.input_span()), 0);
        assert_eq!(Regime::El2.root_entries() as u64 * Regime::El2.root_entry_size(), 1 << 48);
        assert_eq!(Regime::El20.root_entries() as u64 * Regime::El20.root_entry_size(), 1 << 48);
    }
}
