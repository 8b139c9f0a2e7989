//! The TLB-maintenance edge: TLBI operations, barriers, and counters by kind.
//!
//! The library decides *which* operations a change needs (see [`crate::gather`]); an
//! implementation of [`TlbMaintenance`] only executes them: `hw::HwTlb` on the target,
//! [`CountingTlb`] on the host (counts only), and the model checker's recorder in tests.

use crate::addr::{IntermPhysAddr, VirtAddr, PAGE_SIZE};

/// Which observers an operation reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shareability {
    /// This CPU only (TLBI without the IS suffix).
    Local,
    /// Every CPU of the inner-shareable domain (TLBI ...IS).
    InnerShareable,
}

/// A range for the FEAT_TLBIRANGE forms: `(num + 1) << (5 * scale + 1)` pages from `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TlbiRange {
    /// SCALE, 0..=3.
    pub scale: u8,
    /// NUM, 0..=31.
    pub num: u8,
}

impl TlbiRange {
    /// Largest number of 4 KiB pages one range operation covers.
    pub const MAX_PAGES: u64 = 32 << 16;

    /// Pages covered.
    pub const fn pages(self) -> u64 {
        (self.num as u64 + 1) << (5 * self.scale as u64 + 1)
    }
    /// Bytes covered.
    pub const fn bytes(self) -> u64 {
        self.pages() * PAGE_SIZE
    }
    /// How many operations [`TlbiRange::decompose`] splits `pages` into, single pages included,
    /// without walking it: at SCALE 3 one operation per 32 units (or part), at each smaller
    /// SCALE one operation when the 5 bits of units below the larger SCALE are not all zero,
    /// and the odd page last.
    #[inline]
    pub const fn count(pages: u64) -> u64 {
        let top = (pages >> 16).div_ceil(32);
        let mid = ((pages >> 11) & 31 != 0) as u64 + ((pages >> 6) & 31 != 0) as u64;
        top + mid + ((pages >> 1) & 31 != 0) as u64 + (pages & 1)
    }

    /// The one range operation that covers exactly `pages` when [`TlbiRange::decompose`] splits
    /// them into a single operation and no odd page (`count(pages) == 1`, `pages` even), without
    /// walking: its SCALE is the largest whose unit `pages` reaches (at most 3), its NUM the units
    /// less one. The statement of [`TlbiRange::covering`]'s domain, for the tests: the gather
    /// checks the count itself before it calls `covering`.
    #[cfg(test)]
    pub const fn single(pages: u64) -> Option<TlbiRange> {
        if pages < 2 || pages & 1 != 0 || TlbiRange::count(pages) != 1 {
            return None;
        }
        Some(TlbiRange::covering(pages))
    }

    /// The one range operation for a `pages` with `count(pages) == 1` and at least 2 (which makes
    /// it even: an odd count above 1 needs a range and the odd page), without the check
    /// (`single` in the tests states it).
    #[inline(always)]
    pub const fn covering(pages: u64) -> TlbiRange {
        // log2(pages) is at least 1; SCALE s takes units of 2^(5s+1) pages.
        let s = (63 - pages.leading_zeros() as u64 - 1) / 5;
        let scale = if s > 3 { 3 } else { s };
        let num = (pages >> (5 * scale + 1)) - 1;
        TlbiRange { scale: scale as u8, num: num as u8 }
    }

    /// Splits `pages` into range operations (largest scale first) plus a remainder of single
    /// pages (0 or 1, since every range is an even number of pages). Calls `f(offset_pages, range)`.
    pub fn decompose(mut pages: u64, mut f: impl FnMut(u64, TlbiRange)) -> u64 {
        let mut offset = 0;
        let mut scale = 3i32;
        while scale >= 0 && pages >= 2 {
            let unit = 1u64 << (5 * scale as u64 + 1);
            let n = (pages / unit).min(32);
            if n > 0 {
                let r = TlbiRange { scale: scale as u8, num: (n - 1) as u8 };
                f(offset, r);
                offset += r.pages();
                pages -= r.pages();
            } else {
                scale -= 1;
            }
        }
        pages
    }
}

/// A TLBI operation, named after the instruction family it becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlbiOp {
    /// TLBI VAE1 / VALE1: one VA, one ASID (and global entries).
    Vae1 {
        /// ASID.
        asid: u16,
        /// Any address in the page or block.
        va: VirtAddr,
    },
    /// TLBI VAAE1 / VAALE1: one VA, every ASID.
    Vaae1 {
        /// Any address in the page or block.
        va: VirtAddr,
    },
    /// TLBI RVAE1 / RVALE1 (FEAT_TLBIRANGE): a VA range, one ASID.
    Rvae1 {
        /// ASID.
        asid: u16,
        /// First page.
        base: VirtAddr,
        /// Pages covered.
        range: TlbiRange,
    },
    /// TLBI RVAAE1 / RVAALE1 (FEAT_TLBIRANGE): a VA range, every ASID.
    Rvaae1 {
        /// First page.
        base: VirtAddr,
        /// Pages covered.
        range: TlbiRange,
    },
    /// TLBI ASIDE1: every non-global entry of one ASID.
    Aside1 {
        /// ASID.
        asid: u16,
    },
    /// TLBI VMALLE1: every EL1&0 stage-1 entry of a VMID (global and all ASIDs), including the
    /// combined stage-1+2 entries of a guest. `vmid: None` is the issuing EL1's own VMID (the
    /// kernel); `Some` is for EL2 maintaining a guest (VTTBR_EL2 must hold that VMID).
    Vmalle1 {
        /// The guest's VMID, when issued from EL2.
        vmid: Option<u16>,
    },
    /// TLBI VAE2 / VALE2: one VA of the EL2 regime.
    Vae2 {
        /// Any address in the page or block.
        va: VirtAddr,
    },
    /// TLBI RVAE2 / RVALE2 (FEAT_TLBIRANGE): a VA range of the EL2 regime.
    Rvae2 {
        /// First page.
        base: VirtAddr,
        /// Pages covered.
        range: TlbiRange,
    },
    /// TLBI ALLE2: every EL2 entry.
    Alle2,
    /// TLBI IPAS2E1 / IPAS2LE1: stage-2-only entries for one IPA of a VMID (VTTBR_EL2 must hold
    /// it). Combined stage-1+2 entries need a following [`TlbiOp::Vmalle1`].
    Ipas2e1 {
        /// VMID.
        vmid: u16,
        /// Any address in the page or block.
        ipa: IntermPhysAddr,
    },
    /// TLBI RIPAS2E1 / RIPAS2LE1 (FEAT_TLBIRANGE).
    Ripas2e1 {
        /// VMID.
        vmid: u16,
        /// First page.
        base: IntermPhysAddr,
        /// Pages covered.
        range: TlbiRange,
    },
    /// TLBI VMALLS12E1: every stage-1 and stage-2 entry of a VMID.
    Vmalls12e1 {
        /// VMID.
        vmid: u16,
    },
}

/// One TLBI instruction: operation, leaf-only (the `L` forms keep walk caches) and
/// shareability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tlbi {
    /// What to invalidate.
    pub op: TlbiOp,
    /// Only leaf entries (VALE1, IPAS2LE1, ...): cached table walks stay. Ignored by the
    /// whole-context forms.
    pub leaf_only: bool,
    /// Local or inner-shareable.
    pub sh: Shareability,
}

/// Number of distinct TLBI instructions counted by [`TlbCounters`].
pub const TLBI_KINDS: usize = 40;

const TLBI_NAMES: [&str; TLBI_KINDS] = [
    "VAE1",
    "VAE1IS",
    "VALE1",
    "VALE1IS",
    "VAAE1",
    "VAAE1IS",
    "VAALE1",
    "VAALE1IS",
    "RVAE1",
    "RVAE1IS",
    "RVALE1",
    "RVALE1IS",
    "RVAAE1",
    "RVAAE1IS",
    "RVAALE1",
    "RVAALE1IS",
    "ASIDE1",
    "ASIDE1IS",
    "VMALLE1",
    "VMALLE1IS",
    "VAE2",
    "VAE2IS",
    "VALE2",
    "VALE2IS",
    "RVAE2",
    "RVAE2IS",
    "RVALE2",
    "RVALE2IS",
    "ALLE2",
    "ALLE2IS",
    "IPAS2E1",
    "IPAS2E1IS",
    "IPAS2LE1",
    "IPAS2LE1IS",
    "RIPAS2E1",
    "RIPAS2E1IS",
    "RIPAS2LE1",
    "RIPAS2LE1IS",
    "VMALLS12E1",
    "VMALLS12E1IS",
];

impl Tlbi {
    /// Index of the instruction in [`TlbCounters::tlbi`].
    pub const fn kind(&self) -> usize {
        // (family index, whether it has a leaf-only form)
        let (family, has_leaf) = match self.op {
            TlbiOp::Vae1 { .. } => (0, true),
            TlbiOp::Vaae1 { .. } => (2, true),
            TlbiOp::Rvae1 { .. } => (4, true),
            TlbiOp::Rvaae1 { .. } => (6, true),
            TlbiOp::Aside1 { .. } => (8, false),
            TlbiOp::Vmalle1 { .. } => (9, false),
            TlbiOp::Vae2 { .. } => (10, true),
            TlbiOp::Rvae2 { .. } => (12, true),
            TlbiOp::Alle2 => (14, false),
            TlbiOp::Ipas2e1 { .. } => (15, true),
            TlbiOp::Ripas2e1 { .. } => (17, true),
            TlbiOp::Vmalls12e1 { .. } => (19, false),
        };
        let leaf = if has_leaf && self.leaf_only { 1 } else { 0 };
        let is = matches!(self.sh, Shareability::InnerShareable) as usize;
        (family + leaf) * 2 + is
    }
    /// The instruction's mnemonic, e.g. `"VALE1IS"`.
    pub const fn mnemonic(&self) -> &'static str {
        TLBI_NAMES[self.kind()]
    }
    /// Whether this is a whole-context invalidation (ASID, VMID or all).
    pub const fn is_whole_context(&self) -> bool {
        matches!(self.op, TlbiOp::Aside1 { .. } | TlbiOp::Vmalle1 { .. } | TlbiOp::Alle2 | TlbiOp::Vmalls12e1 { .. })
    }
}

/// A DSB (or DMB-free) barrier option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Barrier {
    /// DSB SY: full system, loads and stores.
    Sy,
    /// DSB ISH: inner shareable, loads and stores. Completes prior TLBI ...IS.
    Ish,
    /// DSB ISHST: inner shareable, stores. Makes prior descriptor writes visible to every
    /// walker before a following TLBI.
    IshSt,
    /// DSB NSH: this CPU. Completes prior local TLBIs.
    Nsh,
    /// DSB NSHST: this CPU, stores.
    NshSt,
}

/// Number of barrier kinds counted by [`TlbCounters`].
pub const BARRIER_KINDS: usize = 5;

impl Barrier {
    /// Index in [`TlbCounters::dsb`].
    pub const fn kind(self) -> usize {
        self as usize
    }
    /// Mnemonic, e.g. `"DSB ISHST"`.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Barrier::Sy => "DSB SY",
            Barrier::Ish => "DSB ISH",
            Barrier::IshSt => "DSB ISHST",
            Barrier::Nsh => "DSB NSH",
            Barrier::NshSt => "DSB NSHST",
        }
    }
    /// Whether the barrier reaches every CPU of the inner-shareable domain.
    pub const fn is_inner_shareable(self) -> bool {
        matches!(self, Barrier::Sy | Barrier::Ish | Barrier::IshSt)
    }
    /// Whether the barrier waits for the TLB maintenance before it to complete: only the forms
    /// for loads and stores (`SY`, `ISH`, `NSH`); a store-only `DSB ...ST` orders the stores
    /// (descriptor writes before a TLBI) and completes no TLBI.
    pub const fn completes_maintenance(self) -> bool {
        matches!(self, Barrier::Sy | Barrier::Ish | Barrier::Nsh)
    }
}

/// What a TLB-maintenance implementation can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TlbFeatures {
    /// FEAT_TLBIRANGE: the R... range forms exist.
    pub range: bool,
}

impl Tlbi {
    /// The same invalidation `delta` bytes further on (the address of a by-address form moves;
    /// the whole-context and range forms stay as they are).
    pub fn advanced(self, delta: u64) -> Tlbi {
        use crate::addr::{IntermPhysAddr, VirtAddr};
        let va = |v: VirtAddr| VirtAddr::new(v.as_u64().wrapping_add(delta));
        let op = match self.op {
            TlbiOp::Vae1 { asid, va: v } => TlbiOp::Vae1 { asid, va: va(v) },
            TlbiOp::Vaae1 { va: v } => TlbiOp::Vaae1 { va: va(v) },
            TlbiOp::Vae2 { va: v } => TlbiOp::Vae2 { va: va(v) },
            TlbiOp::Ipas2e1 { vmid, ipa } => {
                TlbiOp::Ipas2e1 { vmid, ipa: IntermPhysAddr::new(ipa.as_u64().wrapping_add(delta)) }
            }
            other => other,
        };
        Tlbi { op, ..self }
    }
}

/// Executes TLB maintenance and barriers.
pub trait TlbMaintenance {
    /// Issues one TLBI.
    fn tlbi(&mut self, op: Tlbi);
    /// Issues `count` TLBIs: `first`, then the same `stride` bytes further on each time (the
    /// per-entry invalidation of a range). The default is one [`TlbMaintenance::tlbi`] each
    /// (what the model records); hardware may issue them from a tighter loop.
    fn tlbi_series(&mut self, first: Tlbi, stride: u64, count: u64) {
        for i in 0..count {
            self.tlbi(first.advanced(i * stride));
        }
    }
    /// Issues a DSB.
    fn dsb(&mut self, barrier: Barrier);
    /// Issues an ISB.
    fn isb(&mut self);
    /// What the hardware supports.
    fn features(&self) -> TlbFeatures {
        TlbFeatures::default()
    }
}

impl<T: TlbMaintenance + ?Sized> TlbMaintenance for &mut T {
    fn tlbi(&mut self, op: Tlbi) {
        (**self).tlbi(op)
    }
    fn tlbi_series(&mut self, first: Tlbi, stride: u64, count: u64) {
        (**self).tlbi_series(first, stride, count)
    }
    fn dsb(&mut self, barrier: Barrier) {
        (**self).dsb(barrier)
    }
    fn isb(&mut self) {
        (**self).isb()
    }
    fn features(&self) -> TlbFeatures {
        (**self).features()
    }
}

/// Counts of maintenance instructions by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbCounters {
    /// TLBIs, indexed by [`Tlbi::kind`].
    pub tlbi: [u64; TLBI_KINDS],
    /// DSBs, indexed by [`Barrier::kind`].
    pub dsb: [u64; BARRIER_KINDS],
    /// ISBs.
    pub isb: u64,
}

impl Default for TlbCounters {
    fn default() -> Self {
        TlbCounters { tlbi: [0; TLBI_KINDS], dsb: [0; BARRIER_KINDS], isb: 0 }
    }
}

impl TlbCounters {
    /// All TLBIs.
    pub fn tlbi_total(&self) -> u64 {
        self.tlbi.iter().sum()
    }
    /// All DSBs.
    pub fn dsb_total(&self) -> u64 {
        self.dsb.iter().sum()
    }
    /// `(mnemonic, count)` of every TLBI kind issued at least once.
    pub fn tlbi_by_kind(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.tlbi.iter().enumerate().filter(|(_, &n)| n != 0).map(|(i, &n)| (TLBI_NAMES[i], n))
    }
    /// `(mnemonic, count)` of every DSB kind issued at least once.
    pub fn dsb_by_kind(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        const ALL: [Barrier; BARRIER_KINDS] = [Barrier::Sy, Barrier::Ish, Barrier::IshSt, Barrier::Nsh, Barrier::NshSt];
        ALL.iter().filter(|b| self.dsb[b.kind()] != 0).map(|b| (b.mnemonic(), self.dsb[b.kind()]))
    }
    /// `self - earlier`, for measuring one phase.
    pub fn since(&self, earlier: &TlbCounters) -> TlbCounters {
        let mut d = *self;
        for (a, b) in d.tlbi.iter_mut().zip(earlier.tlbi.iter()) {
            *a -= b;
        }
        for (a, b) in d.dsb.iter_mut().zip(earlier.dsb.iter()) {
            *a -= b;
        }
        d.isb -= earlier.isb;
        d
    }
    /// Records one TLBI.
    pub fn count_tlbi(&mut self, op: &Tlbi) {
        self.tlbi[op.kind()] += 1;
    }
}

/// A [`TlbMaintenance`] that only counts: for host benchmarks and for tables that are built
/// before they are installed (where nothing reaches a TLB anyway).
#[derive(Clone, Debug, Default)]
pub struct CountingTlb {
    /// What was issued.
    pub counters: TlbCounters,
    /// Features to report.
    pub features: TlbFeatures,
}

impl TlbMaintenance for CountingTlb {
    fn tlbi(&mut self, op: Tlbi) {
        self.counters.count_tlbi(&op);
    }
    fn dsb(&mut self, barrier: Barrier) {
        self.counters.dsb[barrier.kind()] += 1;
    }
    fn isb(&mut self) {
        self.counters.isb += 1;
    }
    fn features(&self) -> TlbFeatures {
        self.features
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_decomposition_covers_exactly() {
        for pages in [0u64, 1, 2, 3, 31, 64, 65, 511, 512, 513, 1 << 20, (1 << 21) + 7] {
            let mut covered = 0;
            let mut next = 0;
            let rest = TlbiRange::decompose(pages, |off, r| {
                assert_eq!(off, next);
                assert!(r.scale <= 3 && r.num <= 31);
                next += r.pages();
                covered += r.pages();
            });
            assert!(rest <= 1);
            assert_eq!(covered + rest, pages);
        }
    }

    fn walked_count(pages: u64) -> u64 {
        let mut n = 0;
        let rest = TlbiRange::decompose(pages, |_, _| n += 1);
        n + rest
    }

    #[test]
    fn range_count_matches_decomposition() {
        // Every count up to four SCALE-3 units, then the edges of each SCALE and of the
        // 32-unit cap at SCALE 3.
        for pages in 0..=(4 << 16) {
            assert_eq!(TlbiRange::count(pages), walked_count(pages), "{pages} pages");
        }
        for scale in 0..4u64 {
            let unit = 1u64 << (5 * scale + 1);
            for k in [1u64, 31, 32, 33, 63, 64, 65, 1 << 10, (1 << 10) + 1] {
                for pages in [k * unit - 1, k * unit, k * unit + 1] {
                    assert_eq!(TlbiRange::count(pages), walked_count(pages), "{pages} pages");
                }
            }
        }
    }

    /// `single` is the one operation `decompose` gives when it gives one and no odd page, and
    /// `None` for every other count: every count up to four SCALE-3 units, then the edges of each
    /// SCALE and of the cap.
    #[test]
    fn single_range_is_the_decomposition_of_one_operation() {
        let check = |pages: u64| {
            let mut ops = Vec::new();
            let rest = TlbiRange::decompose(pages, |off, r| ops.push((off, r)));
            let want = if ops.len() == 1 && rest == 0 { Some(ops[0].1) } else { None };
            assert_eq!(TlbiRange::single(pages), want, "{pages} pages");
            if let Some(r) = want {
                assert_eq!(r.pages(), pages);
            }
        };
        for pages in 0..=(4 << 16) {
            check(pages);
        }
        for scale in 0..4u64 {
            let unit = 1u64 << (5 * scale + 1);
            for k in [1u64, 2, 31, 32, 33, 63, 64, 65, 1 << 10] {
                for pages in [k * unit - 1, k * unit, k * unit + 1] {
                    check(pages);
                }
            }
        }
        assert_eq!(TlbiRange::single(512), Some(TlbiRange { scale: 1, num: 7 }), "an mprotect of 2 MiB");
    }

    #[test]
    fn mnemonics() {
        let t = Tlbi {
            op: TlbiOp::Vae1 { asid: 1, va: VirtAddr::new(0) },
            leaf_only: true,
            sh: Shareability::InnerShareable,
        };
        assert_eq!(t.mnemonic(), "VALE1IS");
        let t = Tlbi { op: TlbiOp::Vmalls12e1 { vmid: 1 }, leaf_only: true, sh: Shareability::Local };
        assert_eq!(t.mnemonic(), "VMALLS12E1");
        let t = Tlbi {
            op: TlbiOp::Ripas2e1 { vmid: 1, base: IntermPhysAddr::new(0), range: TlbiRange { scale: 0, num: 0 } },
            leaf_only: true,
            sh: Shareability::InnerShareable,
        };
        assert_eq!(t.mnemonic(), "RIPAS2LE1IS");
        let mut c = CountingTlb::default();
        c.tlbi(t);
        c.dsb(Barrier::Ish);
        assert_eq!(c.counters.tlbi_by_kind().collect::<Vec<_>>(), [("RIPAS2LE1IS", 1)]);
        assert_eq!(c.counters.dsb_by_kind().collect::<Vec<_>>(), [("DSB ISH", 1)]);
    }
}
