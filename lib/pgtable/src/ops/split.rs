//! `split`: eager splitting of every block in a range (dirty logging), with SKIP_LEVEL.

use crate::addr::{level_size, InputAddress, ENTRIES_PER_TABLE};
use crate::ctx::Ctx;
use crate::descriptor::{sw, without_write, Desc};
use crate::frame::FrameAlloc;
use crate::table::{seeded_bug, Opts, PageTable, SplitOpts};
use crate::tlb::TlbMaintenance;
use crate::walker::{Entry, Visit, WalkFlags};
use crate::Error;

/// Most blocks one break-before-make takes down together ([`Ctx::split_block_run`]): 32 MiB of
/// 2 MiB blocks unmapped at once, for as long as their TLBIs take.
const BLOCK_RUN: usize = 32;

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// Splits to pages the level-2 block of `e` and the level-2 blocks after it in its table
    /// that lie in `[s, e_end)`, up to [`BLOCK_RUN`] (a dirty-logging enable meets a slot made of
    /// blocks): every new level-3 table is filled while unreachable, then one break-before-make
    /// takes the whole run down (invalid, `DSB ISHST`, the run's TLBIs, `DSB ISH`; stage 2 also
    /// `TLBI VMALLE1IS`) and the tables are linked (KVM breaks each block alone: one flush of
    /// each kind per block). Stops at the first entry that is not such a block (a table, a
    /// hole, a contiguous block: the walker visits it) and counts the walker's visits of the
    /// blocks it took. With `read_only`, the new pages lack write access (under BBML2 the blocks
    /// are write-protected and flushed first: [`Ctx::write_protect_before_split`]). Returns how
    /// many blocks it split.
    fn split_block_run(&mut self, e: &Entry, s: u64, e_end: u64, read_only: bool) -> Result<u64, Error> {
        let size = level_size(2);
        // Filled from the front as the run grows; only the first `n` are read (no zeroing of
        // 2 x 256 bytes per run: 0.06 instructions per final PTE of a split).
        let mut olds = [core::mem::MaybeUninit::<Desc>::uninit(); BLOCK_RUN];
        let mut news = [core::mem::MaybeUninit::<Desc>::uninit(); BLOCK_RUN];
        let mut n = 0;
        let mut err = None;
        while n < BLOCK_RUN && e.index + n < ENTRIES_PER_TABLE {
            let off = e.off + n as u64 * size;
            if off + size > e_end || off < s {
                break;
            }
            let d = if n == 0 { e.desc } else { self.read_desc(e.table, e.index + n) };
            if !d.is_mapping(2) || d.is_contiguous() {
                break;
            }
            let block = if read_only { without_write(self.regime, d) } else { d };
            match self.build_subtree(block, 2, off, 3, (false, read_only)) {
                Ok(t) => {
                    olds[n].write(d);
                    news[n].write(self.table_of(t, block, read_only));
                    n += 1;
                }
                Err(x) => {
                    err = Some(x);
                    break;
                }
            }
        }
        // SAFETY: entries `..n` of both were written above (`n` counts them).
        let (olds, news) = unsafe {
            (
                core::slice::from_raw_parts(olds.as_ptr() as *const Desc, n),
                core::slice::from_raw_parts(news.as_ptr() as *const Desc, n),
            )
        };
        if n > 1 {
            self.count_visit_n(2, Visit::Leaf, n as u64 - 1);
        }
        self.stats.splits += n as u64;
        if self.live {
            self.publish_new_table();
            if !(self.bbml2 || seeded_bug!(self, SkipBbmOnSplit)) {
                let broken = if seeded_bug!(self, SplitRunBreaksFirst) { n.min(1) } else { n };
                self.break_entries(e.table, e.index, 2, e.off, &olds[..broken]);
            } else if read_only {
                self.write_protect_before_split(e.table, e.index, 2, e.off, olds);
            }
        }
        for (k, t) in news.iter().enumerate() {
            self.write(e.table, e.index + k, *t);
        }
        match err {
            Some(x) => Err(x),
            None => Ok(n as u64),
        }
    }
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// Splits every block overlapping `[start, start + size)` until no leaf is larger than
    /// level `to_level` (2: 2 MiB, 3: 4 KiB); `contiguous` sets the contiguous bit in the new
    /// leaves. SKIP_LEVEL on, no summary: [`split_with`](Self::split_with) with
    /// [`SplitOpts::to`]. Returns the number of blocks split.
    ///
    /// # Errors
    /// As [`split_with`](Self::split_with).
    pub fn split<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
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
    /// `InvalidLevel` (target level not 2 or 3), range errors (`Misaligned`, `OutOfRange`),
    /// `OutOfMemory` (blocks split before it stay split).
    pub fn split_with<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
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
        let read_only = opts.read_only;
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
                if en.level == 2 && to_level == 3 && !contiguous && !en.desc.is_contiguous() && en.inside(s, e) {
                    count += ctx.split_block_run(en, s, e, read_only)?;
                    return Ok(());
                }
                ctx.split_entry_as(en, to_level, contiguous, read_only && en.inside(s, e))?;
                count += 1;
            }
            Ok(())
        });
        r.map(|()| count)
    }
}
