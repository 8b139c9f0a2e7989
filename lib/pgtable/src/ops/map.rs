//! `map`: install a range with the largest leaves the constraints allow.

use crate::addr::{InputAddress, PhysAddr, CONT_ENTRIES, ENTRIES_PER_TABLE, PAGE_SHIFT, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::ctx::{leaf_decision, Ctx, LeafDecision};
use crate::descriptor::{cont_level, cont_size, encode_leaf, sw, validate, Desc};
use crate::frame::FrameAlloc;
use crate::regime::Regime;
use crate::table::{check_output, seeded_bug, Opts, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{Entry, Visit, WalkFlags};
use crate::Error;

/// What a map-like walk installs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MapArgs {
    /// Input offsets `[start, end)`.
    pub start: u64,
    pub end: u64,
    /// Output of `start`.
    pub pa: u64,
    pub constraints: Constraints,
    /// Leaf descriptors with output 0 for levels 1..=3 (encoded once).
    pub templates: [Desc; 4],
}

impl MapArgs {
    pub fn new(
        regime: Regime,
        start: u64,
        end: u64,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<Self, Error> {
        let mut templates = [Desc::INVALID; 4];
        for (level, t) in templates.iter_mut().enumerate().skip(1) {
            *t = encode_leaf(regime, PhysAddr::new(0), attrs, level, false)?;
        }
        Ok(MapArgs { start, end, pa: pa.as_u64(), constraints, templates })
    }

    /// The leaf at `level` mapping `out`.
    pub fn leaf(&self, level: usize, out: u64, cont: bool) -> Desc {
        self.templates[level].with_addr(PhysAddr::new(out)).with_contiguous(cont)
    }

    /// Output address of input offset `off` (inside the range).
    pub fn out(&self, off: u64) -> u64 {
        self.pa + (off - self.start)
    }
}

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// Whether entry `e`, about to map `out`, may carry the contiguous bit: the group's first
    /// entry decides (all 16 empty), later ones follow it (entries are written in order, so the
    /// members before `e` are ours and the ones after it are still empty). Never a mixed group.
    fn group_joinable(&self, e: &Entry, out: u64) -> bool {
        let first = Self::group_start(e.index);
        let k = e.index - first;
        if k == 0 {
            return (0..CONT_ENTRIES).all(|i| self.read_desc(e.table, first + i).is_empty());
        }
        // The head found all 16 empty; the ones after `e` are still untouched.
        let head = self.read_desc(e.table, first);
        head.is_contiguous() && head.is_mapping(e.level) && head.addr().as_u64() + k as u64 * e.size() == out
    }

    /// A new level-3 table for the level-2 entry `e`, its 512 pages mapping `out..out + 2 MiB`
    /// (contiguous where the constraints and the output's alignment allow: every group is then
    /// whole and aligned), filled before anything can reach it.
    fn filled_leaf_table(&mut self, e: &Entry, m: &MapArgs, out: u64) -> Result<PhysAddr, Error> {
        let cont = !m.constraints.no_contiguous && out.is_multiple_of(cont_size(3));
        let t = self.alloc_filled_table(e.off, e.level, m.leaf(3, out, cont).0, PAGE_SIZE)?;
        if self.live {
            // Invalid -> valid: no maintenance, as record_leaf_change would count it.
            self.stats.flushes_elided += ENTRIES_PER_TABLE as u64;
        }
        Ok(t)
    }

    /// For an entry that holds nothing: writes the leaf if one fits here (aligned, allowed by
    /// the constraints, entirely inside the range), else links a new empty table so the walker
    /// descends into it.
    pub(crate) fn map_into_empty(&mut self, e: &Entry, m: &MapArgs) -> Result<(), Error> {
        let level = e.level;
        let size = e.size();
        let leaf_ok = level == 3 || (!m.constraints.no_blocks && Regime::block_level(level));
        if leaf_ok && e.inside(m.start, m.end) && m.out(e.off).is_multiple_of(size) {
            let out = m.out(e.off);
            let cont = !m.constraints.no_contiguous
                && cont_level(level)
                && Self::group_inside(e, m.start, m.end)
                && m.out(Self::group_off(e)).is_multiple_of(cont_size(level))
                && self.group_joinable(e, out);
            let d = m.leaf(level, out, cont);
            self.write(e.table, e.index, d);
            self.record_leaf_change(e.off, level, e.desc, d);
        } else {
            if level == 2 && e.inside(m.start, m.end) {
                // A whole level-3 table of the range: filled while unreachable (plain writes, no
                // maintenance: nothing can have cached it), then linked; not walked.
                let t = self.filled_leaf_table(e, m, m.out(e.off))?;
                self.publish_new_table();
                self.write(e.table, e.index, Desc::table(t));
                self.skip_children();
                return Ok(());
            }
            let t = self.alloc_table(e.off, level)?;
            // A new table for a mapping without blocks holds none: say so in its summary bit
            // (only where its children could be blocks), so a later split need not descend.
            let mut d = Desc::table(t);
            if m.constraints.no_blocks && level + 1 < 3 {
                d = Desc(d.0 | crate::descriptor::sw::TABLE_NO_BLOCKS);
            }
            self.publish_new_table();
            self.write(e.table, e.index, d);
        }
        Ok(())
    }
}

/// The table summary bits a mapping with `attrs` and `constraints` invalidates on the tables
/// above it: "no blocks below" where blocks may be placed, "no writable leaf below" where the
/// mapping writes.
pub(crate) fn summary_bits_to_clear(attrs: Attributes, constraints: Constraints) -> u64 {
    let mut bits = 0;
    if !constraints.no_blocks {
        bits |= sw::TABLE_NO_BLOCKS;
    }
    if attrs.perms.contains(Perms::WRITE) {
        bits |= sw::TABLE_NO_WRITABLE;
    }
    bits
}

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// `bits`, less the "no writable" summary under the seeded bug that forgets to clear it.
    pub(crate) fn summary_to_clear(&self, bits: u64) -> u64 {
        if seeded_bug!(self, KeepNoWritable) {
            bits & !sw::TABLE_NO_WRITABLE
        } else {
            bits
        }
    }
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// `map` of one page whose level-3 table exists (a page fault's demand-zero page): the
    /// leaf encoded once per attributes ([`PageTable::page_template`]), the path from the root
    /// read once, the walk's visits given to its entries (the summary bits cleared where set),
    /// the page written, and, on a live table, `DSB ISHST; ISB` as a finished gather issues for
    /// new entries. No operation context: a new entry over an empty one needs no invalidation
    /// (`leaf_decision` says so, or this returns `None` before writing anything and the walk
    /// does it: flush elision off). `None` also when there is no such table (the walk builds
    /// it).
    fn map_page<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Option<Result<(), Error>> {
        // The path's levels as constants: each level's shift and mask folds into its load.
        match self.regime().start_level() {
            0 => self.map_page_from::<0, T>(tlb, start, pa, attrs, constraints),
            _ => self.map_page_from::<1, T>(tlb, start, pa, attrs, constraints),
        }
    }

    /// [`PageTable::map_page`] of a table whose root is at level `START`.
    #[inline(always)]
    fn map_page_from<const START: usize, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Option<Result<(), Error>> {
        debug_assert_eq!(START, self.regime().start_level());
        let checked = self.offsets(start, PAGE_SIZE).and_then(|(s, _)| {
            check_output(pa, PAGE_SIZE)?;
            Ok((s, self.page_template(attrs)?.with_addr(pa)))
        });
        let (s, leaf) = match checked {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        let mut clear = summary_bits_to_clear(attrs, constraints);
        if seeded_bug!(self, KeepNoWritable) {
            clear &= !sw::TABLE_NO_WRITABLE;
        }
        let regime = self.regime();
        let start_level = START;
        // The path's tables whose summary bits must be cleared, one bit per level: nothing is
        // kept of the path itself (it is walked again in the rare case a bit is set: the first
        // page of a table, after which the summaries stay clear).
        let mut stale = 0u32;
        let mut table = self.root();
        for level in start_level..=2 {
            let shift = crate::addr::level_shift(level);
            let mut index = (s >> shift) as usize;
            if level != start_level {
                index &= ENTRIES_PER_TABLE - 1;
            }
            let d = Desc(self.frames().read_desc(table, index));
            if !d.is_table(level) {
                return None;
            }
            stale |= u32::from(d.0 & clear != 0) << level;
            table = d.addr();
        }
        let i = ((s >> PAGE_SHIFT) as usize) & (ENTRIES_PER_TABLE - 1);
        let old = Desc(self.frames().read_desc(table, i));
        #[cfg(any(test, feature = "seeded-bugs"))]
        let bug = self.mutation;
        #[cfg(not(any(test, feature = "seeded-bugs")))]
        let bug = ();
        let decision = leaf_decision(regime, self.is_live(), self.policy(), bug, old, leaf);
        if !old.is_mapping(3) && matches!(decision, LeafDecision::Flush { .. } | LeafDecision::Lazy) {
            return None;
        }
        let live = self.is_live();
        let root = self.root();
        let (frames, stats) = self.frames_and_stats();
        let mut written = false;
        if clear != 0 {
            for level in start_level..=2 {
                stats.walk.visits[level][Visit::TablePre as usize] += 1;
            }
        }
        if stale != 0 {
            let mut t = root;
            for level in start_level..=2 {
                let mut index = (s >> crate::addr::level_shift(level)) as usize;
                if level != start_level {
                    index &= ENTRIES_PER_TABLE - 1;
                }
                let d = Desc(frames.read_desc(t, index));
                if stale & (1 << level) != 0 {
                    frames.write_desc(t, index, d.0 & !clear);
                    stats.desc_writes += 1;
                    written = true;
                }
                t = d.addr();
            }
        }
        stats.walk.visits[3][Visit::Leaf as usize] += 1;
        let mapped = old.is_mapping(3);
        if !mapped {
            frames.write_desc(table, i, leaf.0);
            stats.desc_writes += 1;
            if decision == LeafDecision::Elided {
                stats.flushes_elided += 1;
            }
            written = true;
        }
        if live && written {
            // New entries only: visible to the walkers before this returns (as a finished
            // gather does), so the faulting access does not fault again.
            tlb.dsb(crate::tlb::Barrier::IshSt);
            tlb.isb();
        }
        if mapped {
            return Some(Err(Error::AlreadyMapped { addr: regime.input_base().wrapping_add(s), level: 3, found: old }));
        }
        Some(Ok(()))
    }

    /// Checks the arguments shared by [`map`](Self::map) and [`remap`](Self::remap) and resolves
    /// them against this table: the range as offsets and the per-entry mapping arguments.
    pub(crate) fn map_args(
        &self,
        start: K,
        size: u64,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(u64, u64, MapArgs), Error> {
        let (s, e) = self.offsets(start, size)?;
        check_output(pa, size)?;
        validate(self.regime(), attrs)?;
        Ok((s, e, MapArgs::new(self.regime(), s, e, pa, attrs, constraints)?))
    }

    /// Maps `[start, start + size)` to `[pa, pa + size)` with `attrs`, using 1 GiB / 2 MiB blocks
    /// and contiguous ranges where alignment and `constraints` allow, 4 KiB pages elsewhere.
    ///
    /// Installing entries over invalid ones needs no TLBI; a live table gets `DSB ISHST; ISB`
    /// at the end so the new entries are visible before this returns.
    ///
    /// # Errors
    /// - [`Error::Misaligned`]: start, size or pa not 4 KiB aligned (which one, and its value);
    /// - [`Error::OutOfRange`]: the input range leaves the regime's space, or the output the
    ///   48-bit space;
    /// - [`Error::InvalidAttributes`]: `attrs` not expressible in the regime (the rule broken);
    /// - [`Error::AlreadyMapped`]: something, even PROT_NONE, is mapped in the range (its
    ///   address, level and descriptor);
    /// - [`Error::OutOfMemory`]: no frame for a table (the entry it was for).
    ///
    /// On error nothing of the range stays mapped.
    pub fn map<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(), Error> {
        if size == PAGE_SIZE {
            if let Some(r) = self.map_page(tlb, start, pa, attrs, constraints) {
                return r;
            }
        }
        self.map_walk(tlb, start, size, pa, attrs, constraints)
    }

    /// [`map`](Self::map) by the walk (out of line: the one-page path above keeps a small
    /// frame).
    #[inline(never)]
    fn map_walk<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(), Error> {
        let (s, e, m) = self.map_args(start, size, pa, attrs, constraints)?;
        let mut reached = s;
        let clear = summary_bits_to_clear(attrs, constraints);
        let flags = if clear == 0 { WalkFlags::LEAF } else { WalkFlags::LEAF | WalkFlags::TABLE_PRE };
        let res = self.run(tlb, Opts::DEFAULT, s, e, flags, |ctx, en| {
            if en.visit == Visit::TablePre {
                ctx.clear_table_summary(en, ctx.summary_to_clear(clear));
                return Ok(());
            }
            reached = reached.max(en.off);
            if en.desc.is_mapping(en.level) {
                let addr = ctx.regime.input_base().wrapping_add(en.off);
                return Err(Error::AlreadyMapped { addr, level: en.level, found: en.desc });
            }
            ctx.map_into_empty(en, &m)
        });
        if let Err(err) = res {
            // Everything below `reached` was empty before and is ours now.
            self.unmap_offsets(tlb, s, reached)?;
            self.prune_offsets(tlb, s, e)?;
            return Err(err);
        }
        Ok(())
    }
}
