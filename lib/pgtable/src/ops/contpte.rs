//! contpte: `fold` 16 compatible entries into a contiguous range, `unfold` them back.

use crate::addr::{InputAddress, CONT_ENTRIES};
use crate::ctx::Ctx;
use crate::descriptor::{cont_level, Desc};
use crate::frame::FrameAlloc;
use crate::ops::flip_group;
use crate::table::{Opts, PageTable};
use crate::tlb::Barrier;
use crate::tlb::TlbMaintenance;
use crate::walker::{Entry, WalkFlags};
use crate::Error;

/// One leaf of a table, found once ([`PageTable::leaf`]) and then changed directly, without a
/// walk from the root (as Linux's contpte code holds the `ptep`). It borrows the table: nothing
/// else can change the tables while it lives.
pub struct Leaf<'a, A: FrameAlloc, K: InputAddress = crate::VirtAddr> {
    pt: &'a mut PageTable<A, K>,
    entry: Entry,
}

impl<A: FrameAlloc, K: InputAddress> core::fmt::Debug for Leaf<'_, A, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Leaf").field("level", &self.entry.level).field("desc", &self.entry.desc).finish()
    }
}

impl<A: FrameAlloc, K: InputAddress> Leaf<'_, A, K> {
    /// Level of the leaf (2: 2 MiB block, 3: 4 KiB page; 1 never folds).
    pub fn level(&self) -> usize {
        self.entry.level
    }
    /// The descriptor as it is now.
    pub fn desc(&self) -> Desc {
        Desc(self.pt.frames().read_desc(self.entry.table, self.entry.index))
    }

    /// contpte convert of the group of 16 holding this leaf, folding (`fold`) or unfolding it:
    /// one read of the 16, one flush decision for the group (break-before-make with one TLBI of
    /// the range without BBML2 or with `opts.force_bbm`; under BBML2 a rewrite in place), the
    /// operation's closing barriers. A fold happens only if the 16 are foldable (see
    /// [`PageTable::fold`]). Returns whether the group was converted.
    #[inline]
    pub fn convert_group<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, fold: bool, opts: Opts) -> bool {
        let e = self.entry;
        if !cont_level(e.level) {
            return false;
        }
        let live = self.pt.is_live();
        if !live || (self.pt.config().bbml2 && !opts.force_bbm) {
            // In place, without an operation context: what `Ctx::convert_group` and the gather's
            // finish do for this case (the writes, their accounting, and on a live table
            // `DSB ISHST; ISB` so the new entries are visible before this returns).
            let first = Ctx::<A, T>::group_start(e.index);
            let (frames, stats) = self.pt.frames_and_stats();
            let written = flip_group(frames, e.table, first, e.level, fold);
            if written == 0 {
                return false;
            }
            stats.desc_writes += written;
            if fold {
                stats.folds += 1;
            } else {
                stats.unfolds += 1;
            }
            if live {
                tlb.dsb(Barrier::IshSt);
                tlb.isb();
            }
            return true;
        }
        self.convert_with_break(tlb, fold, opts)
    }

    /// [`convert_group`](Self::convert_group) through an operation context: break-before-make
    /// of the group, its TLBI, the make.
    #[inline(never)]
    fn convert_with_break<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, fold: bool, opts: Opts) -> bool {
        let e = self.entry;
        let mut ctx = self.pt.ctx(tlb, opts);
        let done = ctx.convert_group(&e, fold);
        ctx.finish();
        done
    }
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// The leaf (block or page, PROT_NONE included) mapping `addr`, as a handle for direct
    /// changes ([`Leaf::convert_group`]); `None` where nothing is mapped or `addr` is outside
    /// the regime.
    #[inline]
    pub fn leaf(&mut self, addr: K) -> Option<Leaf<'_, A, K>> {
        let entry = self.find_leaf(addr)?;
        Some(Leaf { pt: self, entry })
    }

    /// Sets the contiguous bit on every aligned group of 16 entries (64 KiB of pages or 32 MiB
    /// of 2 MiB blocks) inside the range whose members all map consecutive output (aligned to
    /// the group) with identical attributes. Each fold is a contpte convert: without BBML2
    /// clear the 16, TLBI the range, write the 16; with BBML2 rewrite the 16 in place, no TLBI.
    /// Returns the number of groups folded.
    ///
    /// # Errors
    /// Range errors (`Misaligned`, `OutOfRange`).
    pub fn fold<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, start: K, size: u64) -> Result<u64, Error> {
        self.fold_with(tlb, start, size, Opts::DEFAULT)
    }

    /// [`fold`](Self::fold) with per-call options (`Opts::FORCE_BBM`: the convert with its
    /// TLBI even under BBML2).
    ///
    /// # Errors
    /// As [`fold`](Self::fold).
    pub fn fold_with<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        opts: Opts,
    ) -> Result<u64, Error> {
        let (s, e) = self.offsets(start, size)?;
        let mut count = 0;
        let r = self.run(tlb, opts, s, e, WalkFlags::LEAF, |ctx, en| {
            let level = en.level;
            if !cont_level(level) || en.index % CONT_ENTRIES != 0 || !Ctx::<A, T>::group_inside(en, s, e) {
                return Ok(());
            }
            if ctx.convert_group(en, true) {
                count += 1;
            }
            Ok(())
        });
        r.map(|()| count)
    }

    /// Clears the contiguous bit of every group with a member in the range (whole groups, even
    /// where they extend past it). Returns the number of groups unfolded.
    ///
    /// # Errors
    /// Range errors (`Misaligned`, `OutOfRange`).
    pub fn unfold<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, start: K, size: u64) -> Result<u64, Error> {
        self.unfold_with(tlb, start, size, Opts::DEFAULT)
    }

    /// [`unfold`](Self::unfold) with per-call options.
    ///
    /// # Errors
    /// As [`unfold`](Self::unfold).
    pub fn unfold_with<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        opts: Opts,
    ) -> Result<u64, Error> {
        let (s, e) = self.offsets(start, size)?;
        let mut count = 0;
        let r = self.run(tlb, opts, s, e, WalkFlags::LEAF, |ctx, en| {
            if en.desc.is_mapping(en.level) && en.desc.is_contiguous() && ctx.convert_group(en, false) {
                count += 1;
            }
            Ok(())
        });
        r.map(|()| count)
    }
}
