//! VMSAv8-64 descriptors (4 KiB granule), built with tock-registers bitfields.
//!
//! One raw type, [`Desc`], for every level and stage; the field layouts differ between stage 1
//! ([`STAGE1`]) and stage 2 ([`STAGE2`]) only in the attribute bits. Bits 55..=58 are ignored by
//! the hardware in leaf descriptors and carry the software bits named in [`sw`].

use tock_registers::fields::FieldValue;
use tock_registers::register_bitfields;
use tock_registers::LocalRegisterCopy;

use crate::addr::{level_size, PhysAddr, CONT_ENTRIES, PAGE_SIZE};
use crate::attrs::{Attributes, MemType, Perms};
use crate::regime::{Regime, VaHalf, MAIR_DEVICE_NGNRNE, MAIR_NORMAL_NC, MAIR_NORMAL_WB};
use crate::Error;

register_bitfields! {u64,
    /// Stage-1 block, page and table descriptor (EL2 non-VHE and EL1&0 regimes).
    pub STAGE1 [
        /// Descriptor is valid.
        VALID OFFSET(0) NUMBITS(1) [],
        /// Levels 0-2: table (1) or block (0). Level 3: must be 1 (page).
        TYPE OFFSET(1) NUMBITS(1) [
            Block = 0,
            TableOrPage = 1
        ],
        /// Index into MAIR_ELx.
        ATTR_INDX OFFSET(2) NUMBITS(3) [],
        /// Non-secure output (ignored in the non-secure regimes used here).
        NS OFFSET(5) NUMBITS(1) [],
        /// Access permissions AP[2:1]. In the EL2 (single privilege) regime AP[1] is RES1.
        AP OFFSET(6) NUMBITS(2) [
            PrivRwUserNone = 0b00,
            PrivRwUserRw = 0b01,
            PrivRoUserNone = 0b10,
            PrivRoUserRo = 0b11
        ],
        /// Shareability.
        SH OFFSET(8) NUMBITS(2) [
            NonShareable = 0b00,
            OuterShareable = 0b10,
            InnerShareable = 0b11
        ],
        /// Access flag.
        AF OFFSET(10) NUMBITS(1) [],
        /// Not global: the entry is tagged with the current ASID (EL1&0 only; RES0 at EL2).
        NG OFFSET(11) NUMBITS(1) [],
        /// Output address bits [47:12] (next-level table address for table descriptors).
        OUTPUT_ADDR OFFSET(12) NUMBITS(36) [],
        /// Dirty bit modifier (unused: this library never enables hardware dirty tracking).
        DBM OFFSET(51) NUMBITS(1) [],
        /// Contiguous hint: one of 16 adjacent entries with consistent attributes.
        CONTIGUOUS OFFSET(52) NUMBITS(1) [],
        /// Privileged execute never (EL1&0; RES0 at EL2).
        PXN OFFSET(53) NUMBITS(1) [],
        /// Unprivileged execute never (EL1&0) / execute never (EL2).
        UXN OFFSET(54) NUMBITS(1) [],
        /// Software bits, ignored by the hardware in leaf descriptors.
        SW OFFSET(55) NUMBITS(4) []
    ],
    /// Stage-2 block, page and table descriptor (VTTBR_EL2).
    pub STAGE2 [
        /// Descriptor is valid.
        VALID OFFSET(0) NUMBITS(1) [],
        /// Levels 0-2: table (1) or block (0). Level 3: must be 1 (page).
        TYPE OFFSET(1) NUMBITS(1) [
            Block = 0,
            TableOrPage = 1
        ],
        /// Stage-2 memory attributes (HCR_EL2.FWB = 0 encoding).
        MEM_ATTR OFFSET(2) NUMBITS(4) [
            DeviceNgnrne = 0b0000,
            NormalNc = 0b0101,
            NormalWb = 0b1111
        ],
        /// Stage-2 access permissions.
        S2AP OFFSET(6) NUMBITS(2) [
            None = 0b00,
            ReadOnly = 0b01,
            WriteOnly = 0b10,
            ReadWrite = 0b11
        ],
        /// Shareability.
        SH OFFSET(8) NUMBITS(2) [
            NonShareable = 0b00,
            OuterShareable = 0b10,
            InnerShareable = 0b11
        ],
        /// Access flag.
        AF OFFSET(10) NUMBITS(1) [],
        /// Output address bits [47:12].
        OUTPUT_ADDR OFFSET(12) NUMBITS(36) [],
        /// Contiguous hint.
        CONTIGUOUS OFFSET(52) NUMBITS(1) [],
        /// Execute never, XN[1:0] (bit 53 is RES0 without FEAT_XNX; only 0b00 and 0b10 are used).
        XN OFFSET(53) NUMBITS(2) [
            Executable = 0b00,
            ExecuteNever = 0b10
        ],
        /// Software bits, ignored by the hardware in leaf descriptors.
        SW OFFSET(55) NUMBITS(4) []
    ]
}

/// Software bits (55..=58) of leaf descriptors. The hardware ignores them, so changing only
/// these bits never needs TLB maintenance.
pub mod sw {
    /// Software dirty bit (set by the owner of the mapping, e.g. a dirty-log fault handler).
    pub const DIRTY: u64 = 1 << 55;
    /// Logically writable: write-protected only for dirty logging; a write fault may restore it.
    pub const WRITABLE: u64 = 1 << 56;
    /// Free for the binaries (e.g. "special" or "pinned" markers); never touched by the library.
    pub const OWNER: u64 = 1 << 57;
    /// PROT_NONE: an invalid descriptor that still records a mapping (output address and
    /// attributes); the hardware sees a fault.
    pub const PROT_NONE: u64 = 1 << 58;
    /// All four software bits.
    pub const MASK: u64 = 0xf << 55;
}

/// Bits that are ignored by the hardware in a leaf descriptor: the four software bits and bit 63.
/// A change confined to these bits needs no TLB maintenance.
pub const IGNORED_LEAF_BITS: u64 = sw::MASK | (1 << 63);

const OA_MASK: u64 = 0x0000_ffff_ffff_f000;
const CONT_BIT: u64 = 1 << 52;

/// A raw descriptor as stored in a table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Desc(pub u64);

impl Desc {
    /// The invalid descriptor (all zero).
    pub const INVALID: Desc = Desc(0);

    /// The raw bits.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// Bit 0.
    pub const fn is_valid(self) -> bool {
        self.0 & 1 == 1
    }
    /// A table descriptor (valid, type 1, not at level 3).
    pub const fn is_table(self, level: usize) -> bool {
        level < 3 && self.0 & 0b11 == 0b11
    }
    /// A valid block (levels 1-2) or page (level 3) descriptor.
    pub const fn is_valid_leaf(self, level: usize) -> bool {
        match level {
            3 => self.0 & 0b11 == 0b11,
            1 | 2 => self.0 & 0b11 == 0b01,
            _ => false,
        }
    }
    /// An invalid descriptor that records a PROT_NONE mapping.
    pub const fn is_prot_none(self) -> bool {
        !self.is_valid() && self.0 & sw::PROT_NONE != 0
    }
    /// A mapping is recorded here: a valid leaf or a PROT_NONE leaf.
    pub const fn is_mapping(self, level: usize) -> bool {
        self.is_valid_leaf(level) || (self.is_prot_none() && level >= 1)
    }
    /// Nothing here at all (no mapping, no table).
    pub const fn is_empty(self) -> bool {
        !self.is_valid() && !self.is_prot_none()
    }
    /// Output address (leaf) or next-level table address (table).
    pub const fn addr(self) -> PhysAddr {
        PhysAddr::new(self.0 & OA_MASK)
    }
    /// The contiguous bit.
    pub const fn is_contiguous(self) -> bool {
        self.0 & CONT_BIT != 0
    }
    /// `self` with the contiguous bit set or cleared.
    pub const fn with_contiguous(self, cont: bool) -> Desc {
        if cont {
            Desc(self.0 | CONT_BIT)
        } else {
            Desc(self.0 & !CONT_BIT)
        }
    }
    /// `self` with another output address (same attributes).
    pub const fn with_addr(self, pa: PhysAddr) -> Desc {
        Desc((self.0 & !OA_MASK) | (pa.as_u64() & OA_MASK))
    }
    /// The software bits (55..=58), in place.
    pub const fn sw_bits(self) -> u64 {
        self.0 & sw::MASK
    }
    /// `self` with the software bits in `mask` replaced by those of `value`.
    pub const fn with_sw_bits(self, mask: u64, value: u64) -> Desc {
        let mask = mask & sw::MASK;
        Desc((self.0 & !mask) | (value & mask))
    }
    /// Attribute bits of a leaf: everything except the output address, the contiguous bit and
    /// the hardware-ignored bits. Two entries of a contiguous range must agree on these.
    pub const fn leaf_attr_bits(self) -> u64 {
        self.0 & !(OA_MASK | CONT_BIT | IGNORED_LEAF_BITS)
    }
    /// A table descriptor pointing at `table`.
    pub fn table(table: PhysAddr) -> Desc {
        let v: FieldValue<u64, STAGE1::Register> = STAGE1::VALID::SET
            + STAGE1::TYPE::TableOrPage
            + STAGE1::OUTPUT_ADDR.val(table.as_u64() >> 12);
        Desc(v.value)
    }
}

impl core::fmt::Debug for Desc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Desc({:#018x})", self.0)
    }
}

/// Whether replacing leaf `old` by `new` needs TLB maintenance (cf. Linux `pte_needs_flush`):
/// never when `old` was invalid (the hardware does not cache invalid entries, and PROT_NONE is
/// invalid), never when only hardware-ignored bits differ; always otherwise, including access
/// flag clears and permission upgrades.
pub const fn needs_flush(old: Desc, new: Desc) -> bool {
    if !old.is_valid() {
        return false;
    }
    (old.0 ^ new.0) & !IGNORED_LEAF_BITS != 0
}

/// Encodes a leaf (block at levels 1-2, page at level 3) for `regime`. `Perms::NONE` encodes a
/// PROT_NONE (invalid) leaf that keeps `pa` and the memory type.
pub fn encode_leaf(
    regime: Regime,
    pa: PhysAddr,
    attrs: Attributes,
    level: usize,
    contiguous: bool,
) -> Result<Desc, Error> {
    debug_assert!((1..=3).contains(&level));
    if !pa.is_aligned(level_size(level)) || pa.as_u64() & !OA_MASK != 0 {
        return Err(Error::Misaligned);
    }
    validate(regime, attrs)?;
    let page_type = level == 3;
    let prot_none = attrs.perms.is_none();
    // A PROT_NONE entry is encoded with read-only rights under the marker so that decoding is
    // unambiguous; the valid bit is clear, so the hardware never uses them.
    let perms = if prot_none { Perms::READ } else { attrs.perms };
    let bits = match regime {
        Regime::Stage2 { .. } => {
            let mem = match attrs.mem {
                MemType::Device => STAGE2::MEM_ATTR::DeviceNgnrne,
                MemType::Normal => STAGE2::MEM_ATTR::NormalWb,
                MemType::NormalNc => STAGE2::MEM_ATTR::NormalNc,
            };
            let ap = (perms.contains(Perms::READ) as u64) | ((perms.contains(Perms::WRITE) as u64) << 1);
            let xn = if perms.contains(Perms::EXEC) {
                STAGE2::XN::Executable
            } else {
                STAGE2::XN::ExecuteNever
            };
            let ty = if page_type {
                STAGE2::TYPE::TableOrPage
            } else {
                STAGE2::TYPE::Block
            };
            let v = STAGE2::VALID::SET
                + ty
                + mem
                + STAGE2::S2AP.val(ap)
                + STAGE2::SH::InnerShareable
                + STAGE2::AF::SET
                + STAGE2::OUTPUT_ADDR.val(pa.as_u64() >> 12)
                + STAGE2::CONTIGUOUS.val(contiguous as u64)
                + xn;
            v.value
        }
        Regime::El2 | Regime::El1 { .. } => {
            let idx = match attrs.mem {
                MemType::Device => MAIR_DEVICE_NGNRNE,
                MemType::Normal => MAIR_NORMAL_WB,
                MemType::NormalNc => MAIR_NORMAL_NC,
            };
            let write = perms.contains(Perms::WRITE);
            let ty = if page_type {
                STAGE1::TYPE::TableOrPage
            } else {
                STAGE1::TYPE::Block
            };
            let mut v = STAGE1::VALID::SET
                + ty
                + STAGE1::ATTR_INDX.val(idx as u64)
                + STAGE1::SH::InnerShareable
                + STAGE1::AF::SET
                + STAGE1::OUTPUT_ADDR.val(pa.as_u64() >> 12)
                + STAGE1::CONTIGUOUS.val(contiguous as u64);
            match regime {
                Regime::El1 { half, .. } => {
                    let user = perms.contains(Perms::USER);
                    v += match (write, user) {
                        (true, false) => STAGE1::AP::PrivRwUserNone,
                        (true, true) => STAGE1::AP::PrivRwUserRw,
                        (false, false) => STAGE1::AP::PrivRoUserNone,
                        (false, true) => STAGE1::AP::PrivRoUserRo,
                    };
                    v += STAGE1::PXN.val(!perms.contains(Perms::EXEC) as u64);
                    v += STAGE1::UXN.val(!perms.contains(Perms::USER_EXEC) as u64);
                    let global = attrs.global.unwrap_or(half == VaHalf::Upper);
                    v += STAGE1::NG.val(!global as u64);
                }
                _ => {
                    // EL2 non-VHE: AP[1] is RES1, AP[2] selects read-only; XN is bit 54.
                    v += if write {
                        STAGE1::AP::PrivRwUserRw
                    } else {
                        STAGE1::AP::PrivRoUserRo
                    };
                    v += STAGE1::UXN.val(!perms.contains(Perms::EXEC) as u64);
                }
            }
            v.value
        }
    };
    Ok(if prot_none {
        Desc((bits & !1) | sw::PROT_NONE)
    } else {
        Desc(bits)
    })
}

/// Decodes the attributes of a leaf (valid or PROT_NONE) written by [`encode_leaf`].
pub fn decode_leaf(regime: Regime, d: Desc) -> Attributes {
    match regime {
        Regime::Stage2 { .. } => {
            let r = LocalRegisterCopy::<u64, STAGE2::Register>::new(d.0);
            let mem = match r.read_as_enum(STAGE2::MEM_ATTR) {
                Some(STAGE2::MEM_ATTR::Value::DeviceNgnrne) => MemType::Device,
                Some(STAGE2::MEM_ATTR::Value::NormalNc) => MemType::NormalNc,
                _ => MemType::Normal,
            };
            let ap = r.read(STAGE2::S2AP);
            let mut perms = Perms::NONE;
            if ap & 1 != 0 {
                perms = perms | Perms::READ;
            }
            if ap & 2 != 0 {
                perms = perms | Perms::WRITE;
            }
            if r.read(STAGE2::XN) & 0b10 == 0 {
                perms = perms | Perms::EXEC;
            }
            Attributes {
                mem,
                perms: if d.is_prot_none() { Perms::NONE } else { perms },
                global: None,
            }
        }
        Regime::El2 | Regime::El1 { .. } => {
            let r = LocalRegisterCopy::<u64, STAGE1::Register>::new(d.0);
            let mem = match r.read(STAGE1::ATTR_INDX) as u8 {
                MAIR_DEVICE_NGNRNE => MemType::Device,
                MAIR_NORMAL_NC => MemType::NormalNc,
                _ => MemType::Normal,
            };
            let ap = r.read(STAGE1::AP);
            let mut perms = Perms::READ;
            if ap & 0b10 == 0 {
                perms = perms | Perms::WRITE;
            }
            let mut global = None;
            match regime {
                Regime::El1 { half, .. } => {
                    if ap & 0b01 != 0 {
                        perms = perms | Perms::USER;
                    }
                    if !r.is_set(STAGE1::PXN) {
                        perms = perms | Perms::EXEC;
                    }
                    if !r.is_set(STAGE1::UXN) {
                        perms = perms | Perms::USER_EXEC;
                    }
                    let g = !r.is_set(STAGE1::NG);
                    if g != (half == VaHalf::Upper) {
                        global = Some(g);
                    }
                }
                _ => {
                    if !r.is_set(STAGE1::UXN) {
                        perms = perms | Perms::EXEC;
                    }
                }
            }
            Attributes {
                mem,
                perms: if d.is_prot_none() { Perms::NONE } else { perms },
                global,
            }
        }
    }
}

/// Checks that `attrs` can be expressed in `regime`.
pub fn validate(regime: Regime, attrs: Attributes) -> Result<(), Error> {
    let p = attrs.perms;
    if p.is_none() {
        return Ok(());
    }
    let user = Perms::USER | Perms::USER_EXEC;
    match regime {
        Regime::Stage2 { .. } | Regime::El2 => {
            if !(p & user).is_none() {
                return Err(Error::InvalidAttributes);
            }
            if matches!(regime, Regime::El2) && !p.contains(Perms::READ) {
                return Err(Error::InvalidAttributes);
            }
        }
        Regime::El1 { .. } => {
            if !p.contains(Perms::READ)
                || (p.contains(Perms::USER_EXEC) && !p.contains(Perms::USER))
            {
                return Err(Error::InvalidAttributes);
            }
        }
    }
    if attrs.mem == MemType::Device && !(p & (Perms::EXEC | Perms::USER_EXEC)).is_none() {
        return Err(Error::InvalidAttributes);
    }
    Ok(())
}

/// Size of the region described by one contiguous range at `level` (64 KiB at level 3,
/// 32 MiB at level 2).
pub const fn cont_size(level: usize) -> u64 {
    level_size(level) * CONT_ENTRIES as u64
}

/// Whether `level` supports the contiguous bit in this library (levels 2 and 3).
pub const fn cont_level(level: usize) -> bool {
    level == 2 || level == 3
}

const _: () = assert!(cont_size(3) == 16 * PAGE_SIZE);

#[cfg(test)]
mod tests {
    use super::*;

    const REGIMES: [Regime; 4] = [
        Regime::El2,
        Regime::El1 {
            asid: 1,
            half: VaHalf::Lower,
        },
        Regime::El1 {
            asid: 0,
            half: VaHalf::Upper,
        },
        Regime::Stage2 { vmid: 1 },
    ];

    #[test]
    fn round_trip_all_valid_attributes() {
        for regime in REGIMES {
            for bits in 0..32u8 {
                for mem in [MemType::Device, MemType::Normal, MemType::NormalNc] {
                    let attrs = Attributes {
                        mem,
                        perms: Perms::from_bits(bits),
                        global: None,
                    };
                    if validate(regime, attrs).is_err() {
                        continue;
                    }
                    for level in 1..=3 {
                        let pa = PhysAddr::new(7 * level_size(level));
                        let d = encode_leaf(regime, pa, attrs, level, level == 3).unwrap();
                        assert_eq!(decode_leaf(regime, d), attrs, "{regime:?} {attrs:?}");
                        assert_eq!(d.addr(), pa);
                        assert_eq!(d.is_mapping(level), true);
                        assert_eq!(d.is_valid_leaf(level), !attrs.perms.is_none());
                        assert!(!d.is_table(level) || level == 3);
                    }
                }
            }
        }
    }

    #[test]
    fn known_encodings() {
        // EL2 normal RW, XN: AF | SH=IS | AP=01 | AttrIndx=1 | page | XN.
        let d = encode_leaf(
            Regime::El2,
            PhysAddr::new(0x4000_0000),
            Attributes::normal(Perms::RW),
            3,
            false,
        )
        .unwrap();
        assert_eq!(d.0, 0x0040_0000_4000_0747);
        // Stage 2 normal RWX block: MemAttr 1111, S2AP 11, SH 11, AF.
        let d = encode_leaf(
            Regime::Stage2 { vmid: 1 },
            PhysAddr::new(0x4000_0000),
            Attributes::normal(Perms::RWX),
            1,
            false,
        )
        .unwrap();
        assert_eq!(d.0, 0x0000_0000_4000_07fd);
    }

    #[test]
    fn flush_rules() {
        let r = Regime::El2;
        let rw = encode_leaf(r, PhysAddr::new(0x1000), Attributes::normal(Perms::RW), 3, false).unwrap();
        let ro = encode_leaf(r, PhysAddr::new(0x1000), Attributes::normal(Perms::RO), 3, false).unwrap();
        let none = encode_leaf(r, PhysAddr::new(0x1000), Attributes::normal(Perms::NONE), 3, false).unwrap();
        assert!(!needs_flush(Desc::INVALID, rw));
        assert!(!needs_flush(none, rw), "NONE -> RW is free");
        assert!(needs_flush(rw, none));
        assert!(needs_flush(rw, ro));
        assert!(needs_flush(ro, rw), "upgrades flush too");
        assert!(!needs_flush(rw, rw.with_sw_bits(sw::DIRTY, sw::DIRTY)));
        assert!(needs_flush(rw, Desc(rw.0 & !(1 << 10))), "AF clear flushes");
        assert!(needs_flush(rw, rw.with_addr(PhysAddr::new(0x2000))));
    }

    #[test]
    fn invalid_attributes_are_refused() {
        let el2 = Regime::El2;
        assert_eq!(
            validate(el2, Attributes::normal(Perms::RW | Perms::USER)),
            Err(Error::InvalidAttributes)
        );
        assert_eq!(
            validate(el2, Attributes::device(Perms::RX)),
            Err(Error::InvalidAttributes)
        );
        assert_eq!(
            encode_leaf(el2, PhysAddr::new(0x1000), Attributes::normal(Perms::RW), 2, false),
            Err(Error::Misaligned)
        );
    }
}
