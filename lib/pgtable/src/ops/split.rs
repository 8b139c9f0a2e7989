//! `split`: eager splitting of every block in a range (dirty logging), with SKIP_LEVEL.

use crate::addr::InputAddress;
use crate::descriptor::sw;
use crate::frame::FrameAlloc;
use crate::table::{Opts, PageTable, SplitOpts};
use crate::tlb::TlbMaintenance;
use crate::walker::{Visit, WalkFlags};
use crate::Error;

impl<A: FrameAlloc> PageTable<A> {
    /// Splits every block overlapping `[start, start + size)` until no leaf is larger than
    /// level `to_level` (2: 2 MiB, 3: 4 KiB); `contiguous` sets the contiguous bit in the new
    /// leaves. SKIP_LEVEL on, no summary: [`split_with`](Self::split_with) with
    /// [`SplitOpts::to`]. Returns the number of blocks split.
    ///
    /// # Errors
    /// As [`split_with`](Self::split_with).
    pub fn split<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
        to_level: usize,
        contiguous: bool,
    ) -> Result<u64, Error> {
        self.split_with(tlb, start, size, SplitOpts { contiguous, ..SplitOpts::to(to_level) })
    }

    /// Splits every block overlapping `[start, start + size)` as `opts` says. Each subtree is
    /// built unlinked, then installed with break-before-make, or directly under BBML2 (unless
    /// `opts.force_bbm`). Entries of the target level itself are never visited (SKIP_LEVEL)
    /// unless `opts.skip_target_level` is off. With `opts.summary` (and target level 3),
    /// tables whose summary bit says they hold no block are not descended, and tables this call
    /// split entirely get the bit. Returns the number of blocks split.
    ///
    /// # Errors
    /// `InvalidLevel` (target level not 2 or 3), range errors (`Misaligned`, `OutOfRange`,
    /// `WrongAddressKind`), `OutOfMemory` (blocks split before it stay split).
    pub fn split_with<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
        opts: SplitOpts,
    ) -> Result<u64, Error> {
        let to_level = opts.to_level;
        if !(2..=3).contains(&to_level) {
            return Err(Error::InvalidLevel { level: to_level });
        }
        let (s, e) = self.offsets(start, size)?;
        let mut flags = WalkFlags::LEAF;
        if opts.skip_target_level {
            flags = flags | WalkFlags::skip_level(to_level);
        } else {
            // The baseline visits the target level's entries, but the callback has nothing to do
            // there: the walker loads and counts them without calling it.
            flags = flags | WalkFlags::quiet_level(to_level);
        }
        let summary = opts.summary && to_level == 3;
        if summary {
            flags = flags | WalkFlags::SKIP_NO_BLOCKS | WalkFlags::TABLE_POST;
        }
        let contiguous = opts.contiguous;
        let mut count = 0;
        let r = self.run(tlb, Opts { force_bbm: opts.force_bbm }, s, e, flags, |ctx, en| {
            if en.visit == Visit::TablePost {
                // The whole subtree was inside the range and is split to pages now: record that
                // it holds no block (an ignored bit: no TLB maintenance). Only tables whose
                // children could be blocks (level + 1 < 3) carry the summary.
                if en.level + 1 < to_level && en.inside(s, e) {
                    ctx.set_table_summary(en, sw::TABLE_NO_BLOCKS);
                }
                return Ok(());
            }
            if en.level < to_level && en.desc.is_mapping(en.level) {
                ctx.split_entry(en, to_level, contiguous)?;
                count += 1;
            }
            Ok(())
        });
        r.map(|()| count)
    }
}
