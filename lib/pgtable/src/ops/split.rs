//! `split`: eager splitting of every block in a range (dirty logging), with SKIP_LEVEL.

use crate::addr::InputAddress;
use crate::frame::FrameAlloc;
use crate::table::PageTable;
use crate::tlb::TlbMaintenance;
use crate::walker::{walk, WalkFlags};
use crate::Error;

impl<A: FrameAlloc> PageTable<A> {
    /// Splits every block overlapping `[start, start + size)` until no leaf is larger than
    /// level `to_level` (2: 2 MiB, 3: 4 KiB); `contiguous` sets the contiguous bit in the new
    /// leaves. Each subtree is built unlinked, then installed with break-before-make, or
    /// directly under BBML2. Entries of `to_level` itself are never visited (SKIP_LEVEL) unless
    /// `Policy::split_skip_target_level` is off. Returns the number of blocks split.
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
        let mut count = 0;
        let mut ctx = self.ctx(tlb);
        let r = walk(&mut ctx, regime, root, s, e, flags, &mut |ctx, en| {
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
