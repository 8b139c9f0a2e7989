//! The per-operation context: what one `PageTable` operation works with (the frames, the TLB
//! maintenance, the gather, the counters, the options of this call), and the one place where an
//! operation is set up, walked and finished ([`PageTable::run`]: one flush at the end).
//!
//! Also the shared steps every operation uses: descriptor writes that the walker and the gather
//! see, the flush-elision decision per changed leaf ([`Ctx::record_leaf_change`]), and
//! break-before-make by name ([`Ctx::break_entries`], then the caller's write is the "make";
//! cf. KVM's `stage2_try_break_pte` / `stage2_make_pte`).

use crate::addr::{level_size, InputAddress, PhysAddr, CONT_ENTRIES, ENTRIES_PER_TABLE};
use crate::descriptor::{cont_size, grants_write, needs_flush, without_write, Desc};
use crate::frame::FrameAlloc;
use crate::gather::{emit_invalidation, FlushRequest, TlbGather};
use crate::regime::Regime;
use crate::table::{free_subtree, seeded_bug, Opts, PageTable, Policy, Stats};
use crate::tlb::{Barrier, TlbMaintenance};
use crate::walker::{walk, Entry, WalkFlags, WalkState, WalkStats};
use crate::Error;

#[cfg(any(test, feature = "seeded-bugs"))]
use crate::mutation::Mutation;

/// What a changed leaf needs ([`Ctx::leaf_decision`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeafDecision {
    /// Nothing (not live, no change, or a seeded bug's elision).
    Nothing,
    /// No maintenance: `needs_flush` says none is needed (counted as elided).
    Elided,
    /// No maintenance: a lazily relaxed user permission upgrade (counted).
    Lazy,
    /// A TLB invalidation of the entry (all ASIDs when it was global).
    Flush {
        /// The old entry was global.
        global: bool,
    },
}

/// The seeded bug in force where the decision is taken (nothing in a target build).
#[cfg(any(test, feature = "seeded-bugs"))]
pub(crate) type SeededBug = Mutation;
/// The seeded bug in force where the decision is taken (nothing in a target build).
#[cfg(not(any(test, feature = "seeded-bugs")))]
pub(crate) type SeededBug = ();

/// [`Ctx::leaf_decision`] for a table of `regime` (`live`, with `policy`), outside an operation
/// context: the one place the flush of a changed leaf is decided.
#[inline(always)]
pub(crate) fn leaf_decision(
    regime: Regime,
    live: bool,
    policy: &Policy,
    #[allow(unused_variables)] bug: SeededBug,
    old: Desc,
    new: Desc,
) -> LeafDecision {
    struct Bug {
        #[cfg(any(test, feature = "seeded-bugs"))]
        mutation: Mutation,
    }
    let _b = Bug {
        #[cfg(any(test, feature = "seeded-bugs"))]
        mutation: bug,
    };
    if !live || old == new {
        return LeafDecision::Nothing;
    }
    let needed = if policy.flush_elision { needs_flush(old, new) } else { true };
    if !needed {
        return LeafDecision::Elided;
    }
    let user_table = matches!(regime, Regime::El1 { half: crate::regime::VaHalf::Lower, .. });
    let relaxation = crate::descriptor::is_user_relaxation(old, new)
        || (seeded_bug!(_b, LazyRelaxAnyPermission) && old.is_valid() && new.is_valid());
    if policy.lazy_relax && user_table && relaxation {
        return LeafDecision::Lazy;
    }
    if seeded_bug!(_b, ElideTlbiRwToRo)
        && old.is_valid()
        && new.is_valid()
        && old.addr() == new.addr()
        && (old.0 ^ new.0) == crate::descriptor::AP_RO
    {
        return LeafDecision::Nothing;
    }
    let global = matches!(regime, Regime::El1 { .. }) && !old.is_not_global();
    LeafDecision::Flush { global }
}

/// Everything one operation works with.
pub(crate) struct Ctx<'a, A: FrameAlloc, T: TlbMaintenance + ?Sized> {
    pub regime: Regime,
    pub live: bool,
    pub policy: Policy,
    /// Whether BBML2 may be relied on in this call: the table's [`crate::Config::bbml2`] unless
    /// the call forces break-before-make ([`Opts::force_bbm`]).
    pub bbml2: bool,
    pub frames: &'a mut A,
    pub tlb: &'a mut T,
    pub stats: &'a mut Stats,
    pub gather: TlbGather,
    /// Set by a callback that handled a subtree itself: the walker does not descend.
    pub skip: bool,
    #[cfg(any(test, feature = "seeded-bugs"))]
    pub mutation: Mutation,
}

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> WalkState for Ctx<'_, A, T> {
    #[inline(always)]
    fn read(&self, table: PhysAddr, index: usize) -> Desc {
        Desc(self.frames.read_desc(table, index))
    }
    #[inline(always)]
    fn walk_stats(&mut self) -> &mut WalkStats {
        &mut self.stats.walk
    }
    #[inline(always)]
    fn writes(&self) -> u64 {
        self.stats.desc_writes
    }
    #[inline(always)]
    fn take_skip(&mut self) -> bool {
        core::mem::take(&mut self.skip)
    }
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// The per-operation context for one call with `opts`.
    pub(crate) fn ctx<'a, T: TlbMaintenance + ?Sized>(&'a mut self, tlb: &'a mut T, opts: Opts) -> Ctx<'a, A, T> {
        let (regime, live, policy, bbml2) = (self.regime(), self.is_live(), *self.policy(), self.config().bbml2);
        #[cfg(any(test, feature = "seeded-bugs"))]
        let mutation = self.mutation;
        #[allow(unused_mut)] // changed only with seeded bugs compiled in
        let mut gather = TlbGather::new();
        #[cfg(any(test, feature = "seeded-bugs"))]
        {
            gather.skip_dsb_before_tlbi = mutation == Mutation::NoDsbBeforeTlbi;
        }
        let (frames, stats) = self.frames_and_stats();
        Ctx {
            regime,
            live,
            policy,
            bbml2: bbml2 && !opts.force_bbm,
            frames,
            tlb,
            stats,
            gather,
            skip: false,
            #[cfg(any(test, feature = "seeded-bugs"))]
            mutation,
        }
    }

    /// One operation: sets up the context, walks input offsets `[s, e)` with `flags` calling
    /// `cb`, then finishes (the one flush of the operation, deferred frees), whether the walk
    /// succeeded or not.
    pub(crate) fn run<T, F>(
        &mut self,
        tlb: &mut T,
        opts: Opts,
        s: u64,
        e: u64,
        flags: WalkFlags,
        mut cb: F,
    ) -> Result<(), Error>
    where
        T: TlbMaintenance + ?Sized,
        F: FnMut(&mut Ctx<'_, A, T>, &Entry) -> Result<(), Error>,
    {
        let (root, regime) = (self.root(), self.regime());
        let mut ctx = self.ctx(tlb, opts);
        let r = walk(&mut ctx, regime, root, s, e, flags, &mut cb);
        ctx.finish();
        r
    }
}

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// Tells the walker not to descend into the entry just visited (the callback handled it).
    pub fn skip_children(&mut self) {
        self.skip = true;
    }

    #[inline(always)]
    pub fn read_desc(&self, table: PhysAddr, index: usize) -> Desc {
        Desc(self.frames.read_desc(table, index))
    }

    #[inline(always)]
    pub fn write(&mut self, table: PhysAddr, index: usize, d: Desc) {
        self.frames.write_desc(table, index, d.0);
        self.stats.desc_writes += 1;
        self.gather.note_write();
    }

    /// A zeroed frame for a table below the entry at input offset `off`, level `level` (named in
    /// the error when there is none).
    pub fn alloc_table(&mut self, off: u64, level: usize) -> Result<PhysAddr, Error> {
        let t = self.frames.alloc_zeroed(1);
        self.count_new_table(t, off, level)
    }

    /// The accounting of a new table frame `t` for the entry at input offset `off`, `level`:
    /// counted when there is one, else `OutOfMemory` naming that entry.
    fn count_new_table(&mut self, t: Option<PhysAddr>, off: u64, level: usize) -> Result<PhysAddr, Error> {
        let addr = self.regime.input_base().wrapping_add(off);
        let t = t.ok_or(Error::OutOfMemory { addr, level })?;
        self.stats.table_pages += 1;
        self.stats.tables_allocated += 1;
        Ok(t)
    }

    /// Before a new table (zeroed, or filled while unreachable) is linked into a live table:
    /// `DSB ISHST`, so a walker on any CPU that follows the new link reads what was written
    /// into the table, never what its frame held before (Linux: `dsb(ishst)` after
    /// `clear_page` of a new table, and before populating the entry of a split). Not live: no
    /// walker can follow the link yet, nothing to do.
    pub fn publish_new_table(&mut self) {
        if self.live && !seeded_bug!(self, LinkUnpublishedTable) {
            self.tlb.dsb(Barrier::IshSt);
        }
    }

    /// A new level-3 table for the entry at input offset `off` (level 2), entry `i` =
    /// `first + i * step`, filled before anything can reach it ([`FrameAlloc::alloc_filled`]).
    pub fn alloc_filled_table(&mut self, off: u64, level: usize, first: u64, step: u64) -> Result<PhysAddr, Error> {
        let t = self.frames.alloc_filled(first, step);
        let t = self.count_new_table(t, off, level)?;
        self.stats.desc_writes += ENTRIES_PER_TABLE as u64;
        Ok(t)
    }

    /// Clears the summary bits `bits` of the table entry `e` (before something may place a
    /// block, or a writable leaf, below it). Only ignored bits change: no TLB maintenance.
    pub fn clear_table_summary(&mut self, e: &Entry, bits: u64) {
        let d = self.read_desc(e.table, e.index);
        if d.is_table(e.level) && d.0 & bits != 0 {
            self.write(e.table, e.index, Desc(d.0 & !bits));
        }
    }

    /// Sets the summary bits `bits` on the table entry `e` (its subtree was just made so).
    pub fn set_table_summary(&mut self, e: &Entry, bits: u64) {
        let d = self.read_desc(e.table, e.index);
        if d.is_table(e.level) && d.0 & bits != bits {
            self.write(e.table, e.index, Desc(d.0 | bits));
        }
    }

    /// Frees a table that was never linked (no maintenance needed).
    pub fn free_unlinked(&mut self, table: PhysAddr, level: usize) {
        free_subtree(self.frames, table, level, ENTRIES_PER_TABLE);
        self.frames.free(table, 1);
        self.stats.table_pages -= 1;
        self.stats.tables_freed += 1;
    }

    /// Frees an unlinked table once the gathered invalidation has completed.
    pub fn free_after_flush(&mut self, table: PhysAddr) {
        self.stats.table_pages -= 1;
        self.stats.tables_freed += 1;
        if self.live && seeded_bug!(self, FreeTableBeforeTlbi) {
            self.frames.free(table, 1);
            return;
        }
        self.gather.defer_free(table, 1);
    }

    /// Whether a stage-1 EL1&0 entry is global.
    pub fn is_global(&self, d: Desc) -> bool {
        matches!(self.regime, Regime::El1 { .. }) && !d.is_not_global()
    }

    /// Records a changed leaf for the gather, applying the flush-elision rule and lazy
    /// relaxation of user pages. Every path that changes a leaf goes through here (the fast
    /// paths included: none may decide the flush itself; a run of like entries asks once,
    /// [`Ctx::leaf_decision`], and applies the answer to each, [`Ctx::record_run`]).
    #[inline]
    pub fn record_leaf_change(&mut self, off: u64, level: usize, old: Desc, new: Desc) {
        let d = self.leaf_decision(old, new);
        self.record_run(d, off, level, 1);
    }

    /// What a live table needs for leaf `old` becoming `new`: the flush-elision rule, lazy
    /// relaxation of user pages (and the seeded bugs that act in the decision). The same for
    /// every entry whose descriptor equals `old` outside the output address and turns into
    /// `new` the same way.
    #[inline]
    pub fn leaf_decision(&self, old: Desc, new: Desc) -> LeafDecision {
        #[cfg(any(test, feature = "seeded-bugs"))]
        let m = self.mutation;
        #[cfg(not(any(test, feature = "seeded-bugs")))]
        let m = ();
        leaf_decision(self.regime, self.live, &self.policy, m, old, new)
    }

    /// Applies `d` to `n` changed leaves of `level` from input offset `off` on (consecutive
    /// entries of one table).
    #[inline(always)]
    pub fn record_run(&mut self, d: LeafDecision, off: u64, level: usize, n: u64) {
        match d {
            LeafDecision::Nothing => {}
            LeafDecision::Elided => self.stats.flushes_elided += n,
            LeafDecision::Lazy => self.stats.lazy_relaxed += n,
            LeafDecision::Flush { global } => self.gather.add_leaves(off, n, level_size(level), global),
        }
    }

    /// Invalidates one entry (or contiguous range) now: `DSB ISHST`, TLBI, `DSB ISH`. The
    /// middle of a break-before-make sequence.
    pub fn flush_now(&mut self, off: u64, size: u64, stride: u64, leaf_only: bool, global: bool) {
        if !self.live {
            return;
        }
        self.stats.bbm += 1;
        if !seeded_bug!(self, NoDsbBeforeTlbi) {
            self.tlb.dsb(Barrier::IshSt);
        }
        let req = FlushRequest { range: off..off + size, stride, leaf_only, global, tables: &[] };
        emit_invalidation(self.regime, &req, &self.policy.flush, self.tlb);
        self.tlb.dsb(Barrier::Ish);
    }

    /// Before a split under BBML2 links tables whose leaves lack the write access of the live
    /// blocks `olds` (entries `first..` of `table` at `level`, input from `off`; a split that
    /// write-protects, [`crate::SplitOpts::read_only`]): the blocks are write-protected in place
    /// and flushed now (`DSB ISHST`, TLBI, `DSB ISH`), so the tables then replace blocks of the
    /// same permissions, the only change BBML2 allows without break-before-make, and no TLB
    /// keeps a writable block over the read-only pages. Without BBML2 the break does both.
    pub fn write_protect_before_split(&mut self, table: PhysAddr, first: usize, level: usize, off: u64, olds: &[Desc]) {
        let (mut any, mut global) = (false, false);
        for (k, &d) in olds.iter().enumerate() {
            if grants_write(self.regime, d) {
                self.write(table, first + k, without_write(self.regime, d));
                any = true;
                global |= self.is_global(d);
            }
        }
        if any && self.live && !seeded_bug!(self, SplitReadOnlyUnflushed) {
            let size = level_size(level);
            let bbm = self.stats.bbm;
            self.flush_now(off, size * olds.len() as u64, size, true, global);
            // Not a break-before-make: the blocks stay mapped.
            self.stats.bbm = bbm;
        }
    }

    /// Break-before-make, the "break": the live entries `first..first + olds.len()` of `table`
    /// (one entry, or the 16 of a contiguous group), currently `olds`, at `level`, covering
    /// input from `off`, are written invalid where valid, then `DSB ISHST`, TLBI of what they
    /// covered, `DSB ISH`: no TLB holds them any more. Returns whether anything was broken (a
    /// live table with a valid entry among them); the caller then writes the new entries (the
    /// "make"). The one place break-before-make is written.
    pub fn break_entries(&mut self, table: PhysAddr, first: usize, level: usize, off: u64, olds: &[Desc]) -> bool {
        if !self.live || !olds.iter().any(|d| d.is_valid()) {
            return false;
        }
        let global = olds.iter().any(|&d| self.is_global(d));
        for (k, d) in olds.iter().enumerate() {
            if d.is_valid() {
                self.write(table, first + k, Desc::INVALID);
            }
        }
        let size = level_size(level);
        self.flush_now(off, size * olds.len() as u64, size, true, global);
        true
    }

    /// Issues the gathered maintenance and frees deferred tables.
    pub fn finish(&mut self) {
        self.gather.finish(self.regime, self.live, &self.policy.flush, self.tlb, self.frames);
    }

    /// Index of the first entry of the contiguous group holding `index`.
    pub fn group_start(index: usize) -> usize {
        index & !(CONT_ENTRIES - 1)
    }

    /// Input offset of the group holding entry `e`.
    pub fn group_off(e: &Entry) -> u64 {
        e.off & !(cont_size(e.level) - 1)
    }
}
