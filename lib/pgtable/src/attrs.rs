//! Regime-independent mapping attributes: memory type, permissions, constraints.
//!
//! The descriptor encoders in [`crate::descriptor`] turn these into stage-1 (AttrIndx, AP,
//! PXN/UXN, nG) or stage-2 (MemAttr, S2AP, XN) bits.

use core::fmt;
use core::ops::{BitAnd, BitOr, Not};

/// Memory type of a mapping. Stage 1 encodes it as a MAIR index (see [`crate::regime::MAIR`]),
/// stage 2 as MemAttr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemType {
    /// Device-nGnRnE (MAIR index 0; stage-2 MemAttr 0b0000).
    Device,
    /// Normal, write-back read/write-allocate, inner shareable (MAIR index 1; MemAttr 0b1111).
    Normal,
    /// Normal non-cacheable, inner shareable (MAIR index 2; MemAttr 0b0101).
    NormalNc,
}

/// Access permissions, as a small flag set.
///
/// Stage 1: `READ`/`WRITE`/`EXEC` are for the privileged level (EL1 or EL2); `USER` makes the
/// page accessible from EL0 (EL1&0 regime only), `USER_EXEC` lets EL0 execute it. `WRITE`
/// requires `READ` at stage 1.
/// Stage 2: `READ`/`WRITE`/`EXEC` are the guest's rights (S2AP and XN); `USER*` are not allowed.
/// The empty set is PROT_NONE: an invalid descriptor with a software marker that keeps the output
/// address, so making it accessible again needs no TLB maintenance.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Perms(u8);

impl Perms {
    /// No access (PROT_NONE).
    pub const NONE: Perms = Perms(0);
    /// Read.
    pub const READ: Perms = Perms(1 << 0);
    /// Write.
    pub const WRITE: Perms = Perms(1 << 1);
    /// Execute (privileged at stage 1).
    pub const EXEC: Perms = Perms(1 << 2);
    /// Accessible from EL0 (stage 1 EL1&0 only).
    pub const USER: Perms = Perms(1 << 3);
    /// Executable at EL0 (stage 1 EL1&0 only; needs `USER`).
    pub const USER_EXEC: Perms = Perms(1 << 4);

    /// Read-only.
    pub const RO: Perms = Perms::READ;
    /// Read-write.
    pub const RW: Perms = Perms(Perms::READ.0 | Perms::WRITE.0);
    /// Read-execute.
    pub const RX: Perms = Perms(Perms::READ.0 | Perms::EXEC.0);
    /// Read-write-execute.
    pub const RWX: Perms = Perms(Perms::READ.0 | Perms::WRITE.0 | Perms::EXEC.0);

    /// All flags this type knows.
    pub const ALL: Perms = Perms(0x1f);

    /// The raw flag bits.
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// From raw flag bits (unknown bits dropped).
    pub const fn from_bits(bits: u8) -> Perms {
        Perms(bits & Perms::ALL.0)
    }
    /// Whether all flags of `other` are set in `self`.
    pub const fn contains(self, other: Perms) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether no flag is set (PROT_NONE).
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }
    /// `self` with the flags of `other` added.
    pub const fn union(self, other: Perms) -> Perms {
        Perms(self.0 | other.0)
    }
    /// `self` without the flags of `other`.
    pub const fn difference(self, other: Perms) -> Perms {
        Perms(self.0 & !other.0)
    }
}

impl BitOr for Perms {
    type Output = Perms;
    fn bitor(self, rhs: Perms) -> Perms {
        self.union(rhs)
    }
}

impl BitAnd for Perms {
    type Output = Perms;
    fn bitand(self, rhs: Perms) -> Perms {
        Perms(self.0 & rhs.0)
    }
}

impl Not for Perms {
    type Output = Perms;
    fn not(self) -> Perms {
        Perms(!self.0 & Perms::ALL.0)
    }
}

impl fmt::Debug for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags =
            [(Perms::READ, 'r'), (Perms::WRITE, 'w'), (Perms::EXEC, 'x'), (Perms::USER, 'u'), (Perms::USER_EXEC, 'X')];
        for (p, c) in flags {
            let c = if self.contains(p) { c } else { '-' };
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// Attributes of a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// Memory type.
    pub mem: MemType,
    /// Access permissions.
    pub perms: Perms,
    /// Stage 1 EL1&0 only: global (nG = 0) even in a table that has an ASID. Ignored elsewhere.
    /// The default for an [`crate::regime::Regime::El1`] table follows its VA half: TTBR1 tables
    /// are global, TTBR0 tables are not.
    pub global: Option<bool>,
}

impl Attributes {
    /// Normal memory with `perms`.
    pub const fn normal(perms: Perms) -> Self {
        Attributes { mem: MemType::Normal, perms, global: None }
    }
    /// Device-nGnRnE memory with `perms` (execute is refused by the encoders).
    pub const fn device(perms: Perms) -> Self {
        Attributes { mem: MemType::Device, perms, global: None }
    }
    /// `self` with other permissions.
    pub const fn with_perms(self, perms: Perms) -> Self {
        Attributes { mem: self.mem, perms, global: self.global }
    }
}

/// Constraints on the shape of a mapping (cf. `aarch64-paging`'s `Constraints`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Constraints {
    /// Only 4 KiB pages: no 1 GiB / 2 MiB blocks.
    pub no_blocks: bool,
    /// Never set the contiguous bit.
    pub no_contiguous: bool,
}

impl Constraints {
    /// Largest blocks and contiguous ranges allowed.
    pub const NONE: Constraints = Constraints { no_blocks: false, no_contiguous: false };
    /// 4 KiB pages only, contiguous ranges allowed.
    pub const NO_BLOCKS: Constraints = Constraints { no_blocks: true, no_contiguous: false };
    /// Individual 4 KiB pages only (what a table without BBML2 needs for live splitting).
    pub const PAGES_ONLY: Constraints = Constraints { no_blocks: true, no_contiguous: true };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perms_ops() {
        assert!(Perms::RW.contains(Perms::READ));
        assert!(!Perms::RO.contains(Perms::WRITE));
        assert_eq!(Perms::RWX.difference(Perms::WRITE), Perms::RX);
        assert!(Perms::NONE.is_none());
        assert_eq!(format!("{:?}", Perms::RX | Perms::USER), "r-xu-");
        assert_eq!(!Perms::ALL, Perms::NONE);
    }
}
