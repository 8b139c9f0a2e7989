//! Opaque address types and granule constants.
//!
//! The three address spaces never mix: a [`VirtAddr`] is an input of a stage-1 regime, an
//! [`IntermPhysAddr`] is the input of stage 2 (and the output of a guest's stage 1), and a
//! [`PhysAddr`] is what every regime of this library outputs. None converts into another
//! implicitly; `as_u64` is the explicit escape hatch.

use core::fmt;

/// log2 of the translation granule (4 KiB).
pub const PAGE_SHIFT: u32 = 12;
/// The translation granule, 4 KiB.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Descriptors per 4 KiB table.
pub const ENTRIES_PER_TABLE: usize = 512;
/// Entries that form one contiguous range (4 KiB granule, levels 2 and 3).
pub const CONT_ENTRIES: usize = 16;
/// Largest output address this library produces (48-bit PA, no LPA).
pub const MAX_PA_BITS: u32 = 48;

/// Bytes covered by one entry at `level` (0..=3) with a 4 KiB granule.
pub const fn level_size(level: usize) -> u64 {
    1u64 << level_shift(level)
}

/// Shift of the input-address bits indexing a table at `level`.
pub const fn level_shift(level: usize) -> u32 {
    PAGE_SHIFT + 9 * (3 - level as u32)
}

/// Whether `value` is a multiple of `align` (a power of two).
pub const fn is_aligned(value: u64, align: u64) -> bool {
    value & (align - 1) == 0
}

/// Rounds `value` down to a multiple of `align` (a power of two).
pub const fn align_down(value: u64, align: u64) -> u64 {
    value & !(align - 1)
}

/// Rounds `value` up to a multiple of `align` (a power of two); `None` on overflow.
pub const fn align_up(value: u64, align: u64) -> Option<u64> {
    match value.checked_add(align - 1) {
        Some(v) => Some(v & !(align - 1)),
        None => None,
    }
}

macro_rules! address_type {
    ($(#[$m:meta])* $name:ident, $short:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(u64);

        impl $name {
            /// Wraps a raw address.
            pub const fn new(addr: u64) -> Self {
                Self(addr)
            }
            /// The raw address.
            pub const fn as_u64(self) -> u64 {
                self.0
            }
            /// Whether the address is a multiple of `align` (a power of two).
            pub const fn is_aligned(self, align: u64) -> bool {
                is_aligned(self.0, align)
            }
            /// Whether the address is 4 KiB aligned.
            pub const fn is_page_aligned(self) -> bool {
                is_aligned(self.0, PAGE_SIZE)
            }
            /// Rounded down to a multiple of `align` (a power of two).
            pub const fn align_down(self, align: u64) -> Self {
                Self(align_down(self.0, align))
            }
            /// Rounded up to a multiple of `align` (a power of two); `None` on overflow.
            pub const fn align_up(self, align: u64) -> Option<Self> {
                match align_up(self.0, align) {
                    Some(v) => Some(Self(v)),
                    None => None,
                }
            }
            /// `self + bytes`, `None` on overflow.
            pub const fn checked_add(self, bytes: u64) -> Option<Self> {
                match self.0.checked_add(bytes) {
                    Some(v) => Some(Self(v)),
                    None => None,
                }
            }
            /// `self + bytes`; panics on overflow in debug builds.
            #[allow(clippy::should_implement_trait)]
            pub const fn add(self, bytes: u64) -> Self {
                Self(self.0 + bytes)
            }
            /// Byte offset inside a `size`-aligned region (a power of two).
            pub const fn offset_in(self, size: u64) -> u64 {
                self.0 & (size - 1)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($short, ":{:#x}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}

address_type!(
    /// A physical (output) address.
    PhysAddr,
    "pa"
);
address_type!(
    /// An intermediate physical address: the input of stage 2.
    IntermPhysAddr,
    "ipa"
);
address_type!(
    /// A virtual address: the input of a stage-1 regime.
    VirtAddr,
    "va"
);

/// Which kind of input address a regime translates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Stage 1: virtual addresses.
    Virtual,
    /// Stage 2: intermediate physical addresses.
    IntermPhys,
}

/// An address a page table translates: [`VirtAddr`] (stage 1) or [`IntermPhysAddr`] (stage 2).
pub trait InputAddress: Copy + fmt::Debug {
    /// Which address space the type belongs to.
    const KIND: InputKind;
    /// The raw address.
    fn raw(self) -> u64;
    /// Wraps a raw address.
    fn from_raw(raw: u64) -> Self;
}

impl InputAddress for VirtAddr {
    const KIND: InputKind = InputKind::Virtual;
    fn raw(self) -> u64 {
        self.0
    }
    fn from_raw(raw: u64) -> Self {
        Self(raw)
    }
}

impl InputAddress for IntermPhysAddr {
    const KIND: InputKind = InputKind::IntermPhys;
    fn raw(self) -> u64 {
        self.0
    }
    fn from_raw(raw: u64) -> Self {
        Self(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_sizes() {
        assert_eq!(level_size(3), 4096);
        assert_eq!(level_size(2), 2 << 20);
        assert_eq!(level_size(1), 1 << 30);
        assert_eq!(level_size(0), 512 << 30);
    }

    #[test]
    fn alignment_helpers() {
        let a = PhysAddr::new(0x4020_1234);
        assert!(!a.is_page_aligned());
        assert_eq!(a.align_down(PAGE_SIZE).as_u64(), 0x4020_1000);
        assert_eq!(a.align_up(PAGE_SIZE).unwrap().as_u64(), 0x4020_2000);
        assert_eq!(a.offset_in(PAGE_SIZE), 0x234);
        assert!(VirtAddr::new(u64::MAX).align_up(PAGE_SIZE).is_none());
        assert_eq!(format!("{:?}", IntermPhysAddr::new(0x1000)), "ipa:0x1000");
    }
}
