//! `unmap`: clear a range, splitting blocks at its ends and freeing tables left empty.

use crate::addr::{InputAddress, ENTRIES_PER_TABLE};
use crate::descriptor::Desc;
use crate::frame::FrameAlloc;
use crate::table::{Ctx, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{walk, Entry, Visit, WalkFlags};
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
}

impl<A: FrameAlloc> PageTable<A> {
    /// Unmaps `[start, start + size)` (PROT_NONE entries included). Blocks crossing the ends are
    /// split first; contiguous ranges crossing them are unfolded; tables left empty are unlinked
    /// and freed after the TLBI that removes them from the walk caches. Unmapping holes is not
    /// an error.
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
        let (root, regime) = self.root_and_regime();
        let mut ctx = self.ctx(tlb);
        let flags = WalkFlags::LEAF | WalkFlags::TABLE_POST;
        let r = walk(&mut ctx, regime, root, s, e, flags, &mut |ctx, en| {
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
                Visit::TablePre => {}
            }
            Ok(())
        });
        ctx.finish();
        r
    }

    /// Frees the empty tables under `[s, e)`.
    pub(crate) fn prune_offsets<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        s: u64,
        e: u64,
    ) -> Result<(), Error> {
        let (root, regime) = self.root_and_regime();
        let mut ctx = self.ctx(tlb);
        let r = walk(&mut ctx, regime, root, s, e, WalkFlags::TABLE_POST, &mut |ctx, en| {
            ctx.free_if_empty(en, s);
            Ok(())
        });
        ctx.finish();
        r
    }
}
