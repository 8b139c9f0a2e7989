//! contpte: `fold` 16 compatible entries into a contiguous range, `unfold` them back.

use crate::addr::{level_size, InputAddress, CONT_ENTRIES};
use crate::descriptor::{cont_level, cont_size, Desc};
use crate::frame::FrameAlloc;
use crate::table::{Ctx, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{walk, WalkFlags};
use crate::Error;

impl<A: FrameAlloc> PageTable<A> {
    /// Sets the contiguous bit on every aligned group of 16 entries (64 KiB of pages or 32 MiB
    /// of 2 MiB blocks) inside the range whose members all map consecutive output (aligned to
    /// the group) with identical attributes. Each fold is a contpte convert: without BBML2
    /// clear the 16, TLBI the range, write the 16; with BBML2 rewrite the 16 in place, no TLBI.
    /// Returns the number of groups folded.
    pub fn fold<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
    ) -> Result<u64, Error> {
        let (s, e) = self.offsets(start, size)?;
        let (root, regime) = self.root_and_regime();
        let mut count = 0;
        let mut ctx = self.ctx(tlb);
        let r = walk(&mut ctx, regime, root, s, e, WalkFlags::LEAF, &mut |ctx, en| {
            let level = en.level;
            if !cont_level(level) || en.index % CONT_ENTRIES != 0 || !Ctx::<A, T>::group_inside(en, s, e) {
                return Ok(());
            }
            let first = en.desc;
            if !first.is_mapping(level) || first.is_contiguous() || first.addr().as_u64() % cont_size(level) != 0 {
                return Ok(());
            }
            let size = level_size(level);
            let compatible = (1..CONT_ENTRIES).all(|k| {
                let d: Desc = ctx.read_desc(en.table, en.index + k);
                d.is_mapping(level)
                    && !d.is_contiguous()
                    && d.leaf_attr_bits() == first.leaf_attr_bits()
                    && d.addr().as_u64() == first.addr().as_u64() + k as u64 * size
            });
            if compatible && ctx.convert_group(en, true) {
                count += 1;
            }
            Ok(())
        });
        ctx.finish();
        r.map(|()| count)
    }

    /// Clears the contiguous bit of every group with a member in the range (whole groups, even
    /// where they extend past it). Returns the number of groups unfolded.
    pub fn unfold<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
    ) -> Result<u64, Error> {
        let (s, e) = self.offsets(start, size)?;
        let (root, regime) = self.root_and_regime();
        let mut count = 0;
        let mut ctx = self.ctx(tlb);
        let r = walk(&mut ctx, regime, root, s, e, WalkFlags::LEAF, &mut |ctx, en| {
            if en.desc.is_mapping(en.level) && en.desc.is_contiguous() && ctx.convert_group(en, false) {
                count += 1;
            }
            Ok(())
        });
        ctx.finish();
        r.map(|()| count)
    }
}
