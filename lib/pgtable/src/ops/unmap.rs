//! `unmap`: clear a range, splitting blocks at its ends and freeing tables left empty.

use crate::addr::{level_size, InputAddress, PhysAddr, ENTRIES_PER_TABLE, PAGE_SIZE};
use crate::ctx::Ctx;
use crate::descriptor::Desc;
use crate::frame::FrameAlloc;
use crate::ops::direct::in_one_leaf_table;
use crate::table::seeded_bug;
use crate::table::{Opts, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{Entry, Visit, WalkFlags};
use crate::Error;

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// TABLE_POST step: unlinks and (after the flush) frees the table of `e` if it is empty.
    /// After an unmap of `[start, end)` (`cleared`) a table entirely inside the range is (every
    /// entry of it was cleared); any other is looked at entry by entry, unless `keep_partial`.
    pub(crate) fn free_if_empty(&mut self, e: &Entry, (start, end): (u64, u64), cleared: bool, keep_partial: bool) {
        let child = e.desc.addr();
        let known_empty = cleared && e.inside(start, end);
        if !known_empty && (keep_partial || !(0..ENTRIES_PER_TABLE).all(|i| self.read_desc(child, i).is_empty())) {
            return;
        }
        self.write(e.table, e.index, Desc::INVALID);
        if self.live {
            self.gather.add_table(e.off.max(start), e.size());
        }
        self.free_after_flush(child);
    }

    /// `unmap` of a whole level-3 table (the level-2 entry `e` lies inside the range): every
    /// mapping cleared in one loop (whole contiguous groups: no unfold; `page` told each page's
    /// output), then the table unlinked and freed after the flush. The walker does not descend.
    fn unmap_leaf_table(&mut self, e: &Entry, start: u64, page: &mut impl FnMut(PhysAddr)) {
        let t = e.desc.addr();
        self.unmap_pages(t, e.off, 0..ENTRIES_PER_TABLE, page);
        self.write(e.table, e.index, Desc::INVALID);
        if self.live {
            self.gather.add_table(e.off.max(start), e.size());
        }
        self.free_after_flush(t);
        self.skip_children();
    }

    /// Clears the mappings among entries `range` of the level-3 table `t` (input offset `off`
    /// at entry 0), telling `page` the output of each (contiguous groups are cleared whole by
    /// the callers: no unfold here).
    #[inline]
    fn unmap_pages(&mut self, t: PhysAddr, off: u64, range: core::ops::Range<usize>, page: &mut impl FnMut(PhysAddr)) {
        for i in range {
            let d = self.read_desc(t, i);
            if d.is_empty() {
                continue;
            }
            if d.is_mapping(3) {
                page(d.addr());
                self.write(t, i, Desc::INVALID);
                if !seeded_bug!(self, UnmapPagesUnflushed) {
                    self.record_leaf_change(off + i as u64 * PAGE_SIZE, 3, d, Desc::INVALID);
                }
            }
        }
    }
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// Unmaps `[start, start + size)` (PROT_NONE entries included). Blocks crossing the ends are
    /// split first; contiguous ranges crossing them are unfolded; tables left empty are unlinked
    /// and freed after the TLBI that removes them from the walk caches. Unmapping holes is not
    /// an error.
    ///
    /// # Errors
    /// Range errors ([`Error::Misaligned`], [`Error::OutOfRange`]),
    /// [`Error::OutOfMemory`] (splitting a block across an end; what was unmapped before stays
    /// unmapped and flushed).
    pub fn unmap<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, start: K, size: u64) -> Result<(), Error> {
        let (s, e) = self.offsets(start, size)?;
        self.unmap_offsets(tlb, s, e)
    }

    pub(crate) fn unmap_offsets<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        s: u64,
        e: u64,
    ) -> Result<(), Error> {
        self.unmap_walk(tlb, s, e, false, &mut |_| {})
    }

    /// [`unmap`](Self::unmap) for an owner of the pages it maps (a user address space): `page`
    /// is told the output address of every 4 KiB page cleared (valid or PROT_NONE; blocks are
    /// split to pages first), before the flush (free them only once this returns: the flush
    /// has completed then). Tables crossing an end of the range are kept even when left empty
    /// (no look at their other entries; Linux's `free_pgtables` keeps them too: the next mapping
    /// there reuses them); the ones entirely inside are freed.
    ///
    /// # Errors
    /// As [`unmap`](Self::unmap).
    pub fn unmap_pages_of<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        mut page: impl FnMut(PhysAddr),
    ) -> Result<(), Error> {
        let (s, e) = self.offsets(start, size)?;
        if s < e && in_one_leaf_table(s, e) && (s, e) != (s & !(level_size(2) - 1), (s | (level_size(2) - 1)) + 1) {
            // Part of one level-3 table: straight there; it stays (partly covered).
            let root = self.root();
            let mut ctx = self.ctx(tlb, Opts::DEFAULT);
            if let Some(path) = ctx.path_to_leaf_table(root, s) {
                let en = path.leaf_table();
                // The walk's pre- and post-visits of the tables on the way change nothing here.
                for p in path.entries() {
                    ctx.count_visit(p.level, Visit::TablePre);
                    ctx.count_visit(p.level, Visit::TablePost);
                }
                let t = en.desc.addr();
                let first = ((s - en.off) / PAGE_SIZE) as usize;
                let last = ((e - en.off) / PAGE_SIZE) as usize;
                ctx.count_visit_n(3, Visit::Leaf, (last - first) as u64);
                // Contiguous groups crossing the ends are unfolded first (as the walk does).
                for i in [first, last - 1] {
                    let d = ctx.read_desc(t, i);
                    let leaf = Entry {
                        table: t,
                        index: i,
                        level: 3,
                        off: en.off + i as u64 * PAGE_SIZE,
                        desc: d,
                        visit: Visit::Leaf,
                    };
                    if d.is_mapping(3) && d.is_contiguous() && !Ctx::<A, T>::group_inside(&leaf, s, e) {
                        ctx.convert_group(&leaf, false);
                    }
                }
                ctx.unmap_pages(t, en.off, first..last, &mut page);
                ctx.finish();
                return Ok(());
            }
        }
        self.unmap_walk(tlb, s, e, true, &mut page)
    }

    /// The walk of `unmap`: tables crossing the ends kept without a look when `keep_partial`.
    fn unmap_walk<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        s: u64,
        e: u64,
        keep_partial: bool,
        page: &mut impl FnMut(PhysAddr),
    ) -> Result<(), Error> {
        let flags = WalkFlags::LEAF | WalkFlags::TABLE_PRE | WalkFlags::TABLE_POST;
        self.run(tlb, Opts::DEFAULT, s, e, flags, |ctx, en| {
            match en.visit {
                Visit::Leaf => {
                    let mut d = en.desc;
                    if !d.is_mapping(en.level) {
                        return Ok(());
                    }
                    if !en.inside(s, e) {
                        return ctx.split_one_level(en);
                    }
                    if d.is_contiguous() && !Ctx::<A, T>::group_inside(en, s, e) {
                        ctx.convert_group(en, false);
                        d = ctx.read_desc(en.table, en.index);
                    }
                    if en.level == 3 {
                        page(d.addr());
                    } else {
                        // A block inside the range: its pages, one by one.
                        let mut pa = d.addr().as_u64();
                        while pa < d.addr().as_u64() + en.size() {
                            page(PhysAddr::new(pa));
                            pa += PAGE_SIZE;
                        }
                    }
                    ctx.write(en.table, en.index, Desc::INVALID);
                    ctx.record_leaf_change(en.off, en.level, d, Desc::INVALID);
                }
                Visit::TablePost => ctx.free_if_empty(en, (s, e), true, keep_partial),
                Visit::TablePre => {
                    if en.level == 2 && en.inside(s, e) {
                        ctx.unmap_leaf_table(en, s, page);
                    }
                }
            }
            Ok(())
        })
    }

    /// Frees the empty tables under `[s, e)`.
    pub(crate) fn prune_offsets<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        s: u64,
        e: u64,
    ) -> Result<(), Error> {
        self.run(tlb, Opts::DEFAULT, s, e, WalkFlags::TABLE_POST, |ctx, en| {
            ctx.free_if_empty(en, (s, e), false, false);
            Ok(())
        })
    }
}
