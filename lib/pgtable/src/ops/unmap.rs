//! `unmap`: clear a range, splitting blocks at its ends and freeing tables left empty.

use crate::addr::{InputAddress, ENTRIES_PER_TABLE, PAGE_SIZE};
use crate::ctx::Ctx;
use crate::descriptor::Desc;
use crate::frame::FrameAlloc;
use crate::table::{Opts, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{Entry, Visit, WalkFlags};
use crate::Error;

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// TABLE_POST step: unlinks and (after the flush) frees the table of `e` if it is empty.
    pub(crate) fn free_if_empty(&mut self, e: &Entry, start: u64) {
        let child = e.desc.addr();
        if !(0..ENTRIES_PER_TABLE).all(|i| self.read_desc(child, i).is_empty()) {
            return;
        }
        self.write(e.table, e.index, Desc::INVALID);
        if self.live {
            self.gather.add_table(e.off.max(start), e.size());
        }
        self.free_after_flush(child);
    }

    /// `unmap` of a whole level-3 table (the level-2 entry `e` lies inside the range): every
    /// mapping cleared in one loop (whole contiguous groups: no unfold), then the table unlinked
    /// and freed after the flush. The walker does not descend.
    fn unmap_leaf_table(&mut self, e: &Entry, start: u64) {
        let t = e.desc.addr();
        for i in 0..ENTRIES_PER_TABLE {
            let d = self.read_desc(t, i);
            if d.is_mapping(3) {
                self.write(t, i, Desc::INVALID);
                self.record_leaf_change(e.off + i as u64 * PAGE_SIZE, 3, d, Desc::INVALID);
            }
        }
        self.write(e.table, e.index, Desc::INVALID);
        if self.live {
            self.gather.add_table(e.off.max(start), e.size());
        }
        self.free_after_flush(t);
        self.skip_children();
    }
}

impl<A: FrameAlloc> PageTable<A> {
    /// Unmaps `[start, start + size)` (PROT_NONE entries included). Blocks crossing the ends are
    /// split first; contiguous ranges crossing them are unfolded; tables left empty are unlinked
    /// and freed after the TLBI that removes them from the walk caches. Unmapping holes is not
    /// an error.
    ///
    /// # Errors
    /// Range errors ([`Error::Misaligned`], [`Error::OutOfRange`], [`Error::WrongAddressKind`]),
    /// [`Error::OutOfMemory`] (splitting a block across an end; what was unmapped before stays
    /// unmapped and flushed).
    pub fn unmap<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
    ) -> Result<(), Error> {
        let (s, e) = self.offsets(start, size)?;
        self.unmap_offsets(tlb, s, e)
    }

    pub(crate) fn unmap_offsets<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        s: u64,
        e: u64,
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
                    ctx.write(en.table, en.index, Desc::INVALID);
                    ctx.record_leaf_change(en.off, en.level, d, Desc::INVALID);
                }
                Visit::TablePost => ctx.free_if_empty(en, s),
                Visit::TablePre => {
                    if en.level == 2 && en.inside(s, e) {
                        ctx.unmap_leaf_table(en, s);
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
            ctx.free_if_empty(en, s);
            Ok(())
        })
    }
}
