//! `split`: eager splitting of every block in a range (dirty logging), with SKIP_LEVEL.

use crate::addr::InputAddress;
use crate::descriptor::{sw, Desc};
use crate::frame::FrameAlloc;
use crate::table::PageTable;
use crate::tlb::TlbMaintenance;
use crate::walker::{walk, Visit, WalkFlags};
use crate::Error;

impl<A: FrameAlloc> PageTable<A> {
    /// Splits every block overlapping `[start, start + size)` until no leaf is larger than
    /// level `to_level` (2: 2 MiB, 3: 4 KiB); `contiguous` sets the contiguous bit in the new
    /// leaves. Each subtree is built unlinked, then installed with break-before-make, or
    /// directly under BBML2. Entries of `to_level` itself are never visited (SKIP_LEVEL) unless
    /// `Policy::split_skip_target_level` is off. With `Policy::split_summary` (and `to_level`
    /// 3), tables whose summary bit says they hold no block are not descended, and tables this
    /// call split entirely get the bit. Returns the number of blocks split.
    pub fn split<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
        to_level: usize,
        contiguous: bool,
    ) -> Result<u64, Error> {
        if !(2..=3).contains(&to_level) {
            return Err(Error::InvalidLevel);
        }
        let (s, e) = self.offsets(start, size)?;
        let (root, regime) = self.root_and_regime();
        let mut flags = WalkFlags::LEAF;
        if self.policy().split_skip_target_level {
            flags = flags | WalkFlags::skip_level(to_level);
        }
        let summary = self.policy().split_summary && to_level == 3;
        if summary {
            flags = flags | WalkFlags::SKIP_NO_BLOCKS | WalkFlags::TABLE_POST;
        }
        let mut count = 0;
        let mut ctx = self.ctx(tlb);
        let r = walk(&mut ctx, regime, root, s, e, flags, &mut |ctx, en| {
            if en.visit == Visit::TablePost {
                // The whole subtree was inside the range and is split to pages now: record that
                // it holds no block (an ignored bit: no TLB maintenance). Only tables whose
                // children could be blocks (level + 1 < 3) carry the summary.
                let d = ctx.read_desc(en.table, en.index);
                if en.level + 1 < to_level && en.inside(s, e) && !d.is_table_without_blocks(en.level) {
                    ctx.write(en.table, en.index, Desc(d.0 | sw::TABLE_NO_BLOCKS));
                }
                return Ok(());
            }
            if en.level < to_level && en.desc.is_mapping(en.level) {
                ctx.split_entry(en, to_level, contiguous)?;
                count += 1;
            }
            Ok(())
        });
        ctx.finish();
        r.map(|()| count)
    }
}
