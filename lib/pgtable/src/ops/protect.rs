//! `protect`: change the permissions of a range; `write_protect`: remove write access only
//! (dirty logging); `set_software_bits`.

use crate::addr::{InputAddress, PAGE_SIZE};
use crate::attrs::{Attributes, Perms};
use crate::ctx::leaf_decision;
use crate::ctx::{Ctx, LeafDecision};
use crate::descriptor::{
    decode_leaf, encode_leaf, grants_write, sw, validate, without_write, writable_page_test, Desc, PermMask,
    NOT_OUTPUT_BITS, WRITE_BIT,
};
use crate::frame::FrameAlloc;
use crate::gather::{emit_invalidation, FlushRequest};
use crate::ops::direct::{in_one_leaf_table, index_at, path_to_leaf_table, Path};
use crate::regime::Regime;
use crate::table::{seeded_bug, CrossingBlocks, Opts, PageTable};
use crate::tlb::Barrier;
use crate::tlb::TlbMaintenance;
use crate::walker::{Entry, Visit, WalkFlags};
use crate::Error;

/// Software bits a permission change carries over (PROT_NONE follows the new permissions).
const SW_KEEP: u64 = sw::MASK & !sw::PROT_NONE;

/// `old` with new permissions, everything else (output, memory type, nG, contiguous bit,
/// software bits) kept.
pub(crate) fn with_perms(regime: Regime, level: usize, old: Desc, perms: Perms) -> Result<Desc, Error> {
    let attrs = decode_leaf(regime, old).with_perms(perms);
    let new = encode_leaf(regime, old.addr(), attrs, level, old.is_contiguous())?;
    Ok(new.with_sw_bits(SW_KEEP, old.sw_bits()))
}

/// Indices of the entries of the level-3 table below the level-2 table entry `en` that lie in
/// `[s, e)`.
fn leaf_indices(en: &Entry, s: u64, e: u64) -> core::ops::Range<usize> {
    let lo = s.max(en.off);
    let hi = e.min(en.end());
    if lo >= hi {
        return 0..0;
    }
    ((lo - en.off) / PAGE_SIZE) as usize..((hi - en.off).div_ceil(PAGE_SIZE)) as usize
}

/// What one `protect` call sets, resolved once per call.
#[derive(Clone, Copy)]
struct ProtectArgs {
    regime: Regime,
    perms: Perms,
    /// The permission bits as a mask (valid, non-contiguous leaves take this path).
    mask: Option<PermMask>,
    /// Input offsets `[s, e)` of the range.
    s: u64,
    e: u64,
}

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// `protect` of one entry (the walker's callback for leaves, and the slow path of the leaf
    /// table loop).
    #[inline(always)]
    fn protect_entry(&mut self, en: &Entry, p: &ProtectArgs) -> Result<(), Error> {
        let mut d = en.desc;
        let level = en.level;
        if !d.is_mapping(level) {
            return Ok(());
        }
        if !en.inside(p.s, p.e) {
            return self.split_one_level(en);
        }
        if !d.is_contiguous() {
            // A permission-only change of a valid leaf: one mask, no decode, no encode. The
            // flush decision (elision, lazy relaxation of user pages) stays with
            // record_leaf_change, as on every other path.
            if let Some(new) = p.mask.and_then(|m| m.apply(p.regime, level, d)) {
                if new != d {
                    self.write(en.table, en.index, new);
                    self.record_leaf_change(en.off, level, d, new);
                }
                return Ok(());
            }
        }
        let new = with_perms(p.regime, level, d, p.perms)?;
        if new == d {
            return Ok(());
        }
        if d.is_contiguous() {
            if Ctx::<A, T>::group_inside(en, p.s, p.e) {
                let (regime, perms) = (p.regime, p.perms);
                return self.repaint_group(en, |o| with_perms(regime, level, o, perms).unwrap_or(o));
            }
            self.convert_group(en, false);
            d = self.read_desc(en.table, en.index);
        }
        let new = with_perms(p.regime, level, d, p.perms)?;
        self.write(en.table, en.index, new);
        self.record_leaf_change(en.off, level, d, new);
        Ok(())
    }

    /// `protect` of the entries of the level-3 table below the level-2 entry `en` that lie in the
    /// range: one loop over raw descriptors. A valid or PROT_NONE non-contiguous page changes
    /// by the mask, and the change it makes (a bit flip, `old ^ new`) and what the flush
    /// decision says of it ([`Ctx::leaf_decision`]) hold for every following page that is equal
    /// to it outside the output address: those go through [`protect_pages`], a load, a compare,
    /// a flip and a store each, and are recorded as one run. The rest (holes, contiguous pages,
    /// a page of another kind) through [`Self::protect_entry`]. The walker does not descend.
    fn protect_leaf_table(&mut self, en: &Entry, p: &ProtectArgs) -> Result<(), Error> {
        let t = en.desc.addr();
        let range = leaf_indices(en, p.s, p.e);
        // The pages' kind (descriptor bits outside the output address), the flip that changes
        // one, and the flush decision for it.
        let mut run: Option<(u64, u64, u64, LeafDecision)> = None;
        let mut i = range.start;
        while i < range.end {
            if let Some((mask, kind, flip, decision)) = run {
                let j = protect_pages(&mut *self.frames, t, i, range.end, (mask, kind), flip);
                if j > i {
                    let n = (j - i) as u64;
                    if flip != 0 {
                        self.stats.desc_writes += n;
                        self.gather.note_write();
                        if !seeded_bug!(self, ProtectRunUnflushed) {
                            self.record_run(decision, en.off + i as u64 * PAGE_SIZE, 3, n);
                        }
                    }
                    i = j;
                    if i == range.end {
                        break;
                    }
                }
            }
            let d = self.read_desc(t, i);
            let off = en.off + i as u64 * PAGE_SIZE;
            i += 1;
            if d.is_empty() {
                continue;
            }
            if !d.is_contiguous() {
                if let Some(new) = p.mask.and_then(|m| m.apply(p.regime, 3, d)) {
                    let decision = self.leaf_decision(d, new);
                    if i == range.end {
                        // The last page of the range (a one-page protect): no run to start.
                        if new != d {
                            self.write(t, i - 1, new);
                            self.record_run(decision, off, 3, 1);
                        }
                        break;
                    }
                    // This page starts the run (it is of its own kind): the run's loop writes it
                    // and records it with the pages after it.
                    let kind_bits = if seeded_bug!(self, ProtectRunWideKind) {
                        NOT_OUTPUT_BITS & !crate::descriptor::PERM_BITS
                    } else {
                        NOT_OUTPUT_BITS
                    };
                    run = Some((kind_bits, d.0 & kind_bits, d.0 ^ new.0, decision));
                    i -= 1;
                    continue;
                }
            }
            let sub = Entry { table: t, index: i - 1, level: 3, off, desc: d, visit: Visit::Leaf };
            self.protect_entry(&sub, p)?;
        }
        Ok(())
    }

    /// What `protect` does at one entry the walker visits (or that a direct path passes).
    fn protect_visit(&mut self, en: &Entry, p: &ProtectArgs) -> Result<(), Error> {
        let writable = p.perms.contains(Perms::WRITE);
        match en.visit {
            Visit::Leaf => self.protect_entry(en, p),
            Visit::TablePre => {
                if writable && !seeded_bug!(self, KeepNoWritable) {
                    self.clear_table_summary(en, sw::TABLE_NO_WRITABLE);
                }
                if en.level == 2 {
                    self.protect_leaf_table(en, p)?;
                    if !writable && en.inside(p.s, p.e) {
                        self.set_table_summary(en, sw::TABLE_NO_WRITABLE);
                    }
                    self.skip_children();
                }
                Ok(())
            }
            Visit::TablePost => {
                if !writable && en.inside(p.s, p.e) {
                    self.set_table_summary(en, sw::TABLE_NO_WRITABLE);
                }
                Ok(())
            }
        }
    }

    /// Whether no entry of the level-2 table `t` grants write: each is a table with the "no
    /// writable leaf below" summary, or anything else that grants no write (a read-only block,
    /// an empty or PROT_NONE entry). One load and a compare or two per entry.
    fn level2_without_writable(&self, t: crate::addr::PhysAddr) -> bool {
        let regime = self.regime;
        (0..crate::addr::ENTRIES_PER_TABLE).all(|i| {
            let d = self.read_desc(t, i);
            if d.is_table(2) {
                d.is_table_without_writable(2)
            } else {
                !grants_write(regime, d)
            }
        })
    }

    /// `write_protect` of the entries of the level-3 table below the level-2 entry `en` that lie
    /// in `[s, e)`: clears write access in every valid page, one loop over raw descriptors.
    /// Removing write access from a valid page always needs a flush (never elided, never a
    /// relaxation), so the loop records one range for the gather instead of deciding per entry
    /// (per entry only under the seeded bugs that act in that decision). Per writable page: a
    /// load, one masked compare ([`writable_page_test`]), a bit flip and a store; contiguous
    /// pages (rare: a group is protected whole) take the slow path.
    fn write_protect_leaf_table(&mut self, en: &Entry, s: u64, e: u64) -> Result<(), Error> {
        let t = en.desc.addr();
        let regime = self.regime;
        let mut per_entry = seeded_bug!(self, ElideTlbiRwToRo);
        per_entry |= seeded_bug!(self, LazyRelaxAnyPermission);
        let test = writable_page_test(regime);
        let mut acc = PagesWritten::NONE;
        let range = leaf_indices(en, s, e);
        let mut i = range.start;
        while i < range.end {
            if !per_entry {
                i = write_protect_pages(&mut *self.frames, t, i, range.end, test, &mut acc);
                if i == range.end {
                    break;
                }
            }
            // What the tight loop leaves: a valid contiguous page (its group is protected
            // whole or unfolded first), and every page under the seeded bugs.
            let d = self.read_desc(t, i);
            let off = en.off + i as u64 * PAGE_SIZE;
            i += 1;
            if !grants_write(regime, d) {
                continue;
            }
            let sub = Entry { table: t, index: i - 1, level: 3, off, desc: d, visit: Visit::Leaf };
            if d.is_contiguous() {
                if Ctx::<A, T>::group_inside(&sub, s, e) {
                    self.repaint_group(&sub, |o| if o.is_valid() { without_write(regime, o) } else { o })?;
                    continue;
                }
                self.convert_group(&sub, false);
            }
            let d = self.read_desc(t, i - 1);
            let new = without_write(regime, d);
            self.write(t, i - 1, new);
            self.record_leaf_change(off, 3, d, new);
        }
        // The write accounting of `Ctx::write` and the gather entries of `record_leaf_change`,
        // once for the pages of the tight loop: the flush covers the pages the loop went over
        // (more than it wrote where some were read-only already: harmless, and it keeps the
        // loop free of first/last bookkeeping).
        if acc.count != 0 {
            self.stats.desc_writes += acc.count;
            self.gather.note_write();
            if self.live {
                let global = self.is_global(Desc(acc.all));
                self.gather.add_leaf(en.off + range.start as u64 * PAGE_SIZE, PAGE_SIZE, global);
                self.gather.add_leaf(en.off + (range.end - 1) as u64 * PAGE_SIZE, PAGE_SIZE, global);
            }
        }
        Ok(())
    }
}

/// What [`write_protect_pages`] wrote: the AND of every old descriptor (its nG bit is clear iff
/// one of them was global), how many.
#[derive(Clone, Copy)]
struct PagesWritten {
    all: u64,
    count: u64,
}

impl PagesWritten {
    const NONE: PagesWritten = PagesWritten { all: u64::MAX, count: 0 };
}

/// The write-protect's tight loop over entries `i..end` of the level-3 table `t`: clears write
/// access in every valid, non-contiguous page that grants it (`test` from
/// [`writable_page_test`]), skips the ones that do not and invalid entries, and stops at the
/// first valid contiguous page (returns its index, or `end`). No call inside: the running
/// state stays in registers (per written page: a load, a masked compare, a flip, a store).
#[inline(always)]
fn write_protect_pages<A: FrameAlloc + ?Sized>(
    frames: &mut A,
    t: crate::addr::PhysAddr,
    mut i: usize,
    end: usize,
    (select, want): (u64, u64),
    acc: &mut PagesWritten,
) -> usize {
    const VALID_CONT: u64 = 1 | crate::descriptor::CONT_BIT;
    let mut w = *acc;
    while i < end {
        let d = frames.read_desc(t, i);
        if d & select == want {
            frames.write_desc(t, i, d ^ WRITE_BIT);
            w.all &= d;
            w.count += 1;
        } else if d & VALID_CONT == VALID_CONT {
            break;
        }
        i += 1;
    }
    *acc = w;
    i
}

/// The protect's tight loop over entries `i..end` of the level-3 table `t`: every entry whose
/// bits outside the output address are `kind` (`d & mask == kind`, `mask` being
/// `NOT_OUTPUT_BITS`) gets `flip` (nothing written when it is 0); stops at the first other
/// entry and returns its index (or `end`). Per page: a load, a masked compare, a flip and a
/// store.
#[inline(always)]
fn protect_pages<A: FrameAlloc + ?Sized>(
    frames: &mut A,
    t: crate::addr::PhysAddr,
    mut i: usize,
    end: usize,
    (mask, kind): (u64, u64),
    flip: u64,
) -> usize {
    if flip == 0 {
        while i < end && frames.read_desc(t, i) & mask == kind {
            i += 1;
        }
        return i;
    }
    // Whole groups of 16 with paired loads and stores where the allocator allows it (4.3
    // instructions per page), then two at a time while both are alike (the loop control once
    // per two pages), then one.
    if end - i >= crate::raw::GROUP {
        if let Some(base) = frames.direct(t) {
            // SAFETY: `i..end` are entries of the table at `t` (a level-3 table, 512 entries), whose
            // memory `direct` gives for exactly these accesses.
            let stopped = unsafe { crate::raw::flip_groups(base.add(i), base.add(end), kind, mask, flip) };
            i = (stopped as usize - base as usize) / 8;
        }
    }
    while i + 2 <= end {
        let (d0, d1) = (frames.read_desc(t, i), frames.read_desc(t, i + 1));
        if d0 & mask != kind || d1 & mask != kind {
            break;
        }
        frames.write_desc(t, i, d0 ^ flip);
        frames.write_desc(t, i + 1, d1 ^ flip);
        i += 2;
    }
    while i < end {
        let d = frames.read_desc(t, i);
        if d & mask != kind {
            break;
        }
        frames.write_desc(t, i, d ^ flip);
        i += 1;
    }
    i
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// Sets the permissions of every mapping in `[start, start + size)` to `perms`
    /// (`Perms::NONE` makes them PROT_NONE; PROT_NONE -> accessible needs no TLBI). Blocks
    /// crossing the ends are split (live under BBML2, else with break-before-make); contiguous
    /// ranges crossing them are unfolded; a contiguous range entirely inside is rewritten as a
    /// whole and stays contiguous: under BBML2 in place, with one flush for the whole operation
    /// (range TLBI, per page, or whole context past the threshold), else with break-before-make
    /// on the group. Holes are skipped.
    ///
    /// Valid leaves change by a mask of their permission bits; a level-3 table inside the
    /// range is one loop over its descriptors. Tables on the way get their "no writable leaf
    /// below" summary cleared when `perms` writes, set when it does not and the table lies
    /// inside the range.
    ///
    /// # Errors
    /// Range errors (`Misaligned`, `OutOfRange`), `InvalidAttributes`
    /// (`perms` not expressible in the regime, or execute on device memory), `OutOfMemory`
    /// (splitting at the range ends). Entries changed before the error keep their new
    /// permissions, and the TLBs are consistent with the tables.
    pub fn protect<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        perms: Perms,
    ) -> Result<(), Error> {
        self.protect_with(tlb, start, size, perms, Opts::DEFAULT)
    }

    /// [`protect`](Self::protect) with per-call options.
    ///
    /// # Errors
    /// As [`protect`](Self::protect).
    pub fn protect_with<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        perms: Perms,
        opts: Opts,
    ) -> Result<(), Error> {
        let (s, e) = self.offsets(start, size)?;
        let regime = self.regime();
        validate(regime, Attributes::normal(perms))?;
        let p = ProtectArgs { regime, perms, mask: PermMask::new(regime, perms), s, e };
        if s < e && in_one_leaf_table(s, e) {
            // The whole range in one level-3 table: straight there, when tables lead to it,
            // with what the walk's visits would do on the way (the entries above level 2 are
            // never inside such a range: their post-visits change nothing and only count).
            let root = self.root();
            if let Some(path) = path_to_leaf_table(self.frames(), regime.start_level(), root, s) {
                if e - s == PAGE_SIZE {
                    if let Some(r) = self.protect_leaves::<T, true>(tlb, &p, &path) {
                        return r;
                    }
                } else if let Some(r) = self.protect_run(tlb, &p, &path) {
                    return r;
                }
                let mut ctx = self.ctx(tlb, opts);
                let writable = perms.contains(Perms::WRITE);
                for en in path.entries().filter(|en| en.level < 2) {
                    ctx.count_visit(en.level, Visit::TablePre);
                    if writable && !seeded_bug!(ctx, KeepNoWritable) {
                        ctx.clear_table_summary(&en, sw::TABLE_NO_WRITABLE);
                    }
                }
                ctx.count_visit(2, Visit::TablePre);
                let r = ctx.protect_visit(&path.leaf_table(), &p);
                ctx.skip = false;
                for en in path.entries().filter(|en| en.level < 2) {
                    ctx.count_visit(en.level, Visit::TablePost);
                }
                ctx.finish();
                return r;
            }
        }
        let flags = WalkFlags::LEAF | WalkFlags::TABLE_PRE | WalkFlags::TABLE_POST;
        self.run(tlb, opts, s, e, flags, |ctx, en| ctx.protect_visit(en, &p))
    }

    /// `protect` of the pages `[p.s, p.e)` of one level-3 table that exists, without an
    /// operation context, when they are all of one kind: what the walk does for them (the
    /// path's "no writable leaf below" summaries cleared when the new permissions write, set on
    /// the level-3 table's entry when they do not and the range is the whole table; the visits
    /// counted), the pages changed by one flip ([`protect_pages`]: the first page's change,
    /// for every page equal to it outside the output address), the flush decided once by
    /// [`leaf_decision`] (the one place), and on a live table the maintenance a finished gather
    /// issues for the run (`DSB ISHST`, its invalidation, `DSB ISH; ISB`; after writes that
    /// need none, `DSB ISHST; ISB`). `path` leads to the level-3 table.
    ///
    /// `None` before writing anything when the first page is not a non-contiguous page the mask
    /// applies to (or, for one page, an empty entry). `None` too when a later page is of
    /// another kind: the pages before it are changed, counted and flushed here, and the
    /// caller's operation context then does the whole range (where those pages are already
    /// what it would make them: no write, no flush).
    /// `ONE`: the range is one page (inlined in `protect_with`: the common one-page call, no
    /// run to flip).
    #[inline(always)]
    fn protect_leaves<T: TlbMaintenance + ?Sized, const ONE: bool>(
        &mut self,
        tlb: &mut T,
        p: &ProtectArgs,
        path: &Path,
    ) -> Option<Result<(), Error>> {
        let mask = p.mask?;
        let regime = p.regime;
        let start = regime.start_level();
        let s = p.s;
        let pages = if ONE { 1 } else { ((p.e - s) / PAGE_SIZE) as usize };
        let table = path.leaf_table_addr();
        let i = index_at(3, start, s);
        let old = Desc(self.frames().read_desc(table, i));
        let new = if old.is_empty() && pages == 1 {
            old
        } else if old.is_contiguous() || old.is_empty() {
            return None;
        } else {
            mask.apply(regime, 3, old)?
        };
        #[cfg(any(test, feature = "seeded-bugs"))]
        let bug = self.mutation;
        #[cfg(not(any(test, feature = "seeded-bugs")))]
        let bug = ();
        let live = self.is_live();
        let policy = *self.policy();
        let decision = leaf_decision(regime, live, &policy, bug, old, new);
        let writable = p.perms.contains(Perms::WRITE);
        let clear = writable && !seeded_bug!(self, KeepNoWritable);
        let skip_dsb = seeded_bug!(self, NoDsbBeforeTlbi);
        // As the run of `protect_leaf_table` (its seeded bugs act here too; a lone page is
        // recorded as its last page is).
        let kind_bits = if seeded_bug!(self, ProtectRunWideKind) {
            NOT_OUTPUT_BITS & !crate::descriptor::PERM_BITS
        } else {
            NOT_OUTPUT_BITS
        };
        let unflushed = pages > 1 && seeded_bug!(self, ProtectRunUnflushed);
        let (frames, stats) = self.frames_and_stats();
        let end = if pages == 1 {
            if new != old {
                frames.write_desc(table, i, new.0);
            }
            i + 1
        } else {
            protect_pages(&mut *frames, table, i, i + pages, (kind_bits, old.0 & kind_bits), old.0 ^ new.0)
        };
        let done = (end - i) as u64;
        let whole = end == i + pages;
        let mut written = false;
        if whole {
            let mut level = start;
            while level <= 2 {
                stats.walk.visits[level][Visit::TablePre as usize] += 1;
                if level < 2 {
                    stats.walk.visits[level][Visit::TablePost as usize] += 1;
                }
                let (t, d) = path.table_entry(level);
                if clear && d.0 & sw::TABLE_NO_WRITABLE != 0 {
                    frames.write_desc(t, index_at(level, start, s), d.0 & !sw::TABLE_NO_WRITABLE);
                    stats.desc_writes += 1;
                    written = true;
                }
                level += 1;
            }
            if !writable && pages == crate::addr::ENTRIES_PER_TABLE {
                let (t, d) = path.table_entry(2);
                if d.0 & sw::TABLE_NO_WRITABLE == 0 {
                    frames.write_desc(t, index_at(2, start, s), d.0 | sw::TABLE_NO_WRITABLE);
                    stats.desc_writes += 1;
                    written = true;
                }
            }
        }
        let mut flush = None;
        if new != old && done != 0 {
            stats.desc_writes += done;
            written = true;
            if !unflushed {
                match decision {
                    LeafDecision::Nothing => {}
                    LeafDecision::Elided => stats.flushes_elided += done,
                    LeafDecision::Lazy => stats.lazy_relaxed += done,
                    LeafDecision::Flush { global } => flush = Some(global),
                }
            }
        }
        if live {
            if let Some(global) = flush {
                if !skip_dsb {
                    tlb.dsb(Barrier::IshSt);
                }
                let range = s..s + done * PAGE_SIZE;
                let req = FlushRequest { range, stride: PAGE_SIZE, leaf_only: true, global, tables: &[] };
                emit_invalidation(regime, &req, &policy.flush, tlb);
                tlb.dsb(Barrier::Ish);
                tlb.isb();
            } else if written {
                tlb.dsb(Barrier::IshSt);
                tlb.isb();
            }
        }
        whole.then_some(Ok(()))
    }

    /// [`protect_leaves`](Self::protect_leaves) of more than one page, out of line (the flip's
    /// vector registers and the run's state stay out of `protect_with`'s frame).
    #[inline(never)]
    fn protect_run<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        p: &ProtectArgs,
        path: &Path,
    ) -> Option<Result<(), Error>> {
        self.protect_leaves::<T, false>(tlb, p, path)
    }

    /// Removes write access from every mapping in `[start, start + size)`, keeping every other
    /// permission (KVM's `kvm_pgtable_stage2_wrprotect`: stage 2 clears `S2AP[1]`, stage 1 sets
    /// `AP[2]`); the write-protect of dirty logging. Blocks crossing the ends are split one level
    /// (as `protect`); blocks inside stay blocks. Tables whose "no writable leaf below" summary
    /// is set are not descended ([`crate::walker::WalkStats::skipped`] counts them), and every
    /// table inside the range gets the summary: write-protecting an already read-only range
    /// costs O(tables), not O(pages).
    ///
    /// # Errors
    /// Range errors (`Misaligned`, `OutOfRange`), `OutOfMemory` (splitting
    /// at the range ends).
    pub fn write_protect<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, start: K, size: u64) -> Result<(), Error> {
        self.write_protect_with(tlb, start, size, CrossingBlocks::Split)
    }

    /// [`write_protect`](Self::write_protect), with blocks crossing the ends of the range split
    /// or write-protected whole (`crossing`).
    ///
    /// # Errors
    /// As [`write_protect`](Self::write_protect) (`OutOfMemory` only with
    /// [`CrossingBlocks::Split`]).
    pub fn write_protect_with<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        crossing: CrossingBlocks,
    ) -> Result<(), Error> {
        let (s, e) = self.offsets(start, size)?;
        let regime = self.regime();
        let flags = WalkFlags::LEAF | WalkFlags::TABLE_PRE | WalkFlags::TABLE_POST;
        self.run(tlb, Opts::DEFAULT, s, e, flags, |ctx, en| match en.visit {
            Visit::Leaf => {
                let d = en.desc;
                if !grants_write(regime, d) || !d.is_valid_leaf(en.level) {
                    return Ok(());
                }
                if !en.inside(s, e) && crossing == CrossingBlocks::Split {
                    return ctx.split_one_level(en);
                }
                if d.is_contiguous() {
                    if Ctx::<A, T>::group_inside(en, s, e) {
                        return ctx.repaint_group(en, |o| if o.is_valid() { without_write(regime, o) } else { o });
                    }
                    ctx.convert_group(en, false);
                }
                let d = ctx.read_desc(en.table, en.index);
                let new = without_write(regime, d);
                ctx.write(en.table, en.index, new);
                ctx.record_leaf_change(en.off, en.level, d, new);
                Ok(())
            }
            Visit::TablePre => {
                if en.desc.is_table_without_writable(en.level) {
                    ctx.stats.walk.skipped[en.level] += 1;
                    ctx.skip_children();
                } else if en.level == 2 {
                    ctx.write_protect_leaf_table(en, s, e)?;
                    if en.inside(s, e) {
                        ctx.set_table_summary(en, sw::TABLE_NO_WRITABLE);
                    }
                    ctx.skip_children();
                } else if en.level == 1 && en.inside(s, e) && ctx.level2_without_writable(en.desc.addr()) {
                    // Nothing below grants write (a read-only split just built it): summarised
                    // in one loop over its entries instead of a visit of each.
                    ctx.set_table_summary(en, sw::TABLE_NO_WRITABLE);
                    ctx.skip_children();
                }
                Ok(())
            }
            Visit::TablePost => {
                if en.inside(s, e) {
                    ctx.set_table_summary(en, sw::TABLE_NO_WRITABLE);
                }
                Ok(())
            }
        })
    }

    /// Sets the software bits selected by `mask` (of [`sw::DIRTY`], [`sw::WRITABLE`],
    /// [`sw::OWNER`]) to those of `value` in every mapping of the range. The hardware ignores
    /// these bits: no TLB maintenance. Blocks are not split (the bits apply to whole leaves).
    ///
    /// # Errors
    /// [`Error::InvalidAttributes`] (a bit of `mask` outside those three), range errors
    /// ([`Error::Misaligned`], [`Error::OutOfRange`]).
    pub fn set_software_bits<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        mask: u64,
        value: u64,
    ) -> Result<(), Error> {
        if mask & !SW_KEEP != 0 {
            return Err(Error::InvalidAttributes {
                perms: Perms::NONE,
                why: "software bits other than DIRTY, WRITABLE and OWNER are the library's",
            });
        }
        let (s, e) = self.offsets(start, size)?;
        self.run(tlb, Opts::DEFAULT, s, e, WalkFlags::LEAF, |ctx, en| {
            let d = en.desc;
            if d.is_mapping(en.level) {
                let new = d.with_sw_bits(mask, value);
                if new != d {
                    ctx.write(en.table, en.index, new);
                    ctx.record_leaf_change(en.off, en.level, d, new);
                }
            }
            Ok(())
        })
    }
}
