//! TLB gather (cf. Linux `mmu_gather`): changes record what they need, and finishing the gather
//! issues the fewest correct instructions, then frees the tables that were unlinked.
//!
//! Per entry, [`crate::descriptor::needs_flush`] decides whether a change needs maintenance at
//! all. A finished gather with something to flush emits `DSB ISHST` (descriptor writes visible to
//! every walker), the TLBIs (per entry at the smallest recorded stride, a few FEAT_TLBIRANGE
//! range operations, or one whole-ASID/VMID/EL2 operation past the threshold), `DSB ISH`
//! (TLBIs complete everywhere) and `ISB`. Tables are freed only after that.

use alloc::vec::Vec;

use crate::addr::{level_size, IntermPhysAddr, PhysAddr, VirtAddr, PAGE_SIZE};
use crate::frame::FrameAlloc;
use crate::regime::{Regime, VaHalf};
use crate::tlb::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp, TlbiRange};

/// How a finished gather chooses its instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushPolicy {
    /// Use FEAT_TLBIRANGE range operations when the hardware has them.
    pub use_range: bool,
    /// From this many TLBI instructions on, invalidate the whole ASID / VMID / EL2 regime
    /// instead (Linux: `MAX_DVM_OPS`, 512: a range of 512 pages or more without range TLBIs
    /// flushes the whole `mm`).
    pub whole_threshold: u64,
}

impl Default for FlushPolicy {
    fn default() -> Self {
        FlushPolicy { use_range: true, whole_threshold: 512 }
    }
}

/// What a set of page-table changes needs from the TLBs.
#[derive(Debug, Default)]
pub struct TlbGather {
    /// Input-offset range (relative to the regime's base) that needs invalidation.
    start: u64,
    end: u64,
    /// Smallest entry size recorded: the stride of per-entry TLBIs.
    stride: u64,
    /// Whether only leaf entries changed (the `L` forms suffice); false once a table entry was
    /// removed (walk caches must go too).
    leaf_only: bool,
    /// Whether a changed entry was global in an ASID-tagged regime (so a whole-ASID flush is not
    /// enough).
    global: bool,
    /// Removed table entries: (input offset inside the walked range, bytes the entry covered).
    tables: Vec<(u64, u64)>,
    /// Whether any descriptor was written (a live table then needs at least DSB ISHST + ISB).
    written: bool,
    /// Unlinked tables to free once the flush has completed.
    freed: Vec<(PhysAddr, usize)>,
    /// Seeded bug `Mutation::NoDsbBeforeTlbi` (tests and the `seeded-bugs` feature only).
    #[cfg(any(test, feature = "seeded-bugs"))]
    pub(crate) skip_dsb_before_tlbi: bool,
}

impl TlbGather {
    /// An empty gather.
    pub fn new() -> Self {
        TlbGather {
            start: u64::MAX,
            end: 0,
            stride: u64::MAX,
            leaf_only: true,
            global: false,
            tables: Vec::new(),
            written: false,
            freed: Vec::new(),
            #[cfg(any(test, feature = "seeded-bugs"))]
            skip_dsb_before_tlbi: false,
        }
    }

    /// Whether anything needs invalidation.
    pub fn needs_tlbi(&self) -> bool {
        self.start < self.end || !self.tables.is_empty()
    }

    /// Records a descriptor write (for the final barriers).
    pub fn note_write(&mut self) {
        self.written = true;
    }

    /// Records a changed leaf of `size` bytes at input offset `off`.
    #[inline]
    pub fn add_leaf(&mut self, off: u64, size: u64, global: bool) {
        self.add(off, size);
        self.global |= global;
    }

    /// Records `n` changed leaves of `size` bytes each, consecutive from input offset `off`: the
    /// range they cover, at the stride of one of them (not of the range: a per-entry flush must
    /// still reach every leaf).
    #[inline]
    pub fn add_leaves(&mut self, off: u64, n: u64, size: u64, global: bool) {
        self.start = self.start.min(off);
        self.end = self.end.max(off + n * size);
        self.stride = self.stride.min(size);
        self.global |= global;
    }

    /// Records a removed table entry covering `size` bytes; `off` is any input offset inside
    /// that region (preferably one inside the changed range). A non-leaf TLBI at any address the
    /// entry covered removes its walk-cache entries; the leaves below it were recorded one by
    /// one when they were cleared.
    pub fn add_table(&mut self, off: u64, size: u64) {
        self.tables.push((off, size));
        self.leaf_only = false;
    }

    fn add(&mut self, off: u64, size: u64) {
        self.start = self.start.min(off);
        self.end = self.end.max(off + size);
        self.stride = self.stride.min(size);
    }

    /// Defers freeing an unlinked table until the flush has completed.
    pub fn defer_free(&mut self, table: PhysAddr, pages: usize) {
        self.freed.push((table, pages));
    }

    /// Issues what was gathered (if `live`), then frees the deferred tables. Leaves the gather
    /// empty and reusable.
    pub fn finish<T: TlbMaintenance + ?Sized, A: FrameAlloc + ?Sized>(
        &mut self,
        regime: Regime,
        live: bool,
        policy: &FlushPolicy,
        tlb: &mut T,
        frames: &mut A,
    ) {
        if live {
            if self.needs_tlbi() {
                #[cfg(any(test, feature = "seeded-bugs"))]
                let skip_dsb = self.skip_dsb_before_tlbi;
                #[cfg(not(any(test, feature = "seeded-bugs")))]
                let skip_dsb = false;
                if !skip_dsb {
                    tlb.dsb(Barrier::IshSt);
                }
                let req = FlushRequest {
                    range: self.start..self.end,
                    stride: self.stride,
                    leaf_only: self.leaf_only,
                    global: self.global,
                    tables: &self.tables,
                };
                emit_invalidation(regime, &req, policy, tlb);
                tlb.dsb(Barrier::Ish);
                tlb.isb();
            } else if self.written {
                // New entries only: make them visible to the walkers before returning, so the
                // caller's next access does not take a spurious translation fault.
                tlb.dsb(Barrier::IshSt);
                tlb.isb();
            }
        }
        for (table, pages) in self.freed.drain(..) {
            frames.free(table, pages);
        }
        self.tables.clear();
        self.start = u64::MAX;
        self.end = 0;
        self.stride = u64::MAX;
        self.leaf_only = true;
        self.global = false;
        self.written = false;
    }
}

/// A set of entries to invalidate.
#[derive(Clone, Debug)]
pub struct FlushRequest<'a> {
    /// Input offsets (relative to the regime base) of the changed leaves; may be empty.
    pub range: core::ops::Range<u64>,
    /// Smallest leaf size in `range`: the stride of per-entry TLBIs.
    pub stride: u64,
    /// Only leaves changed: the `L` forms suffice.
    pub leaf_only: bool,
    /// Some changed entry was global (EL1&0): per-ASID operations are not enough.
    pub global: bool,
    /// Removed table entries (offset inside, bytes covered), invalidated with non-leaf TLBIs.
    pub tables: &'a [(u64, u64)],
}

/// Emits the TLBIs for `req` without the surrounding barriers: per entry at `stride`, a few
/// FEAT_TLBIRANGE range operations, or one whole-context operation when either would exceed
/// `policy.whole_threshold` instructions. For stage 2 the IPA invalidation is followed by
/// `DSB ISH; TLBI VMALLE1IS` for the VMID (combined stage-1+2 entries are tagged by VA, not IPA).
/// Returns the number of TLBIs emitted.
pub fn emit_invalidation<T: TlbMaintenance + ?Sized>(
    regime: Regime,
    req: &FlushRequest<'_>,
    policy: &FlushPolicy,
    tlb: &mut T,
) -> u64 {
    let sh = Shareability::InnerShareable;
    let leaf_only = req.leaf_only && req.tables.is_empty();
    let global = req.global;
    let has_leaves = req.range.start < req.range.end;
    let stride = req.stride.clamp(PAGE_SIZE, level_size(1));
    let start = if has_leaves { req.range.start & !(stride - 1) } else { 0 };
    let end = if has_leaves { req.range.end } else { 0 };
    let per_entry_ops = (end - start).div_ceil(stride);
    if per_entry_ops == 1 && req.tables.is_empty() && policy.whole_threshold > 1 {
        // One entry (an mprotect or munmap of one page): its TLBI.
        tlb.tlbi(Tlbi { op: single(regime, start, global, regime.input_base()), leaf_only, sh });
        if let Regime::Stage2 { vmid } = regime {
            tlb.dsb(Barrier::Ish);
            tlb.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: Some(vmid) }, leaf_only: false, sh });
            return 2;
        }
        return 1;
    }
    let pages = (end - start).div_ceil(PAGE_SIZE);
    let range_ops =
        if policy.use_range && tlb.features().range && pages > 1 { TlbiRange::count(pages) } else { u64::MAX };
    let use_range = range_ops < per_entry_ops;
    let leaf_ops = per_entry_ops.min(range_ops);
    // A removed table is covered by the leaf operations when its region is hit by one of them.
    let covered = |&(off, size): &(u64, u64)| {
        let inside = off >= start && off < end;
        inside && (use_range || stride <= size)
    };
    let table_ops = req.tables.iter().filter(|t| !covered(t)).count() as u64;
    let base = regime.input_base();
    let mut emitted = 0u64;
    let mut tlbi = |op: TlbiOp, tlb: &mut T| {
        tlb.tlbi(Tlbi { op, leaf_only, sh });
        emitted += 1;
    };

    if leaf_ops + table_ops >= policy.whole_threshold {
        let op = match regime {
            Regime::El2 | Regime::El20 => TlbiOp::Alle2,
            Regime::El1 { asid, half } => {
                if global || half == VaHalf::Upper || !req.tables.is_empty() {
                    TlbiOp::Vmalle1 { vmid: None }
                } else {
                    TlbiOp::Aside1 { asid }
                }
            }
            Regime::Stage2 { vmid } => TlbiOp::Vmalls12e1 { vmid },
        };
        tlbi(op, tlb);
        return emitted;
    }

    let va = |off: u64| VirtAddr::new(base.wrapping_add(off));
    // Walk-cache entries are not tagged global or not: a removed table needs the all-ASID form
    // in an ASID-tagged regime unless every leaf below it was non-global; be conservative.
    let global_ops = global || !req.tables.is_empty();
    let mut series = 0;
    let range_op = |b: u64, r: TlbiRange| match regime {
        Regime::El2 | Regime::El20 => TlbiOp::Rvae2 { base: va(b), range: r },
        Regime::El1 { asid, half } => {
            if global_ops || half == VaHalf::Upper {
                TlbiOp::Rvaae1 { base: va(b), range: r }
            } else {
                TlbiOp::Rvae1 { asid, base: va(b), range: r }
            }
        }
        Regime::Stage2 { vmid } => TlbiOp::Ripas2e1 { vmid, base: IntermPhysAddr::new(b), range: r },
    };
    if use_range && range_ops == 1 {
        // The range is one operation (an mprotect or munmap of 2 MiB: SCALE 1, NUM 7): the
        // operation `decompose` would give, without its walk (`pages` is at least 2 here).
        tlbi(range_op(start, TlbiRange::covering(pages)), tlb);
    } else if use_range {
        let rest = TlbiRange::decompose(pages, |p, r| tlbi(range_op(start + p * PAGE_SIZE, r), tlb));
        if rest != 0 {
            let last = start + (pages - 1) * PAGE_SIZE;
            tlbi(single(regime, last, global_ops, base), tlb);
        }
    } else {
        series = (end - start).div_ceil(stride);
        tlb.tlbi_series(Tlbi { op: single(regime, start, global_ops, base), leaf_only, sh }, stride, series);
    }
    for t in req.tables.iter().filter(|t| !covered(t)) {
        tlbi(single(regime, t.0, global_ops, base), tlb);
    }
    if let Regime::Stage2 { vmid } = regime {
        tlb.dsb(Barrier::Ish);
        tlb.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: Some(vmid) }, leaf_only: false, sh });
        emitted += 1;
    }
    emitted + series
}

fn single(regime: Regime, off: u64, global: bool, base: u64) -> TlbiOp {
    let va = VirtAddr::new(base.wrapping_add(off));
    match regime {
        Regime::El2 | Regime::El20 => TlbiOp::Vae2 { va },
        Regime::El1 { asid, half } => {
            if global || half == VaHalf::Upper {
                TlbiOp::Vaae1 { va }
            } else {
                TlbiOp::Vae1 { asid, va }
            }
        }
        Regime::Stage2 { vmid } => TlbiOp::Ipas2e1 { vmid, ipa: IntermPhysAddr::new(off) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlb::{CountingTlb, TlbFeatures};
    use alloc::string::String;

    fn run(regime: Regime, pages: u64, range: bool, leaf_only: bool) -> CountingTlb {
        let mut tlb = CountingTlb { features: TlbFeatures { range }, ..Default::default() };
        let req = FlushRequest {
            range: 0x1000..0x1000 + pages * PAGE_SIZE,
            stride: PAGE_SIZE,
            leaf_only,
            global: false,
            tables: &[],
        };
        emit_invalidation(regime, &req, &FlushPolicy::default(), &mut tlb);
        tlb
    }

    #[test]
    fn per_page_then_whole_past_threshold() {
        let el1 = Regime::El1 { asid: 3, half: VaHalf::Lower };
        let t = run(el1, 1, false, true);
        assert_eq!(t.counters.tlbi_by_kind().collect::<Vec<_>>(), [("VALE1IS", 1)]);
        let t = run(el1, 511, false, true);
        assert_eq!(t.counters.tlbi_total(), 511);
        let t = run(el1, 512, false, true);
        assert_eq!(t.counters.tlbi_by_kind().collect::<Vec<_>>(), [("ASIDE1IS", 1)], "as Linux's MAX_DVM_OPS");
        let t = run(el1, 513, true, false);
        assert_eq!(t.counters.tlbi_by_kind().collect::<Vec<_>>(), [("VAE1IS", 1), ("RVAE1IS", 1)]);
    }

    /// With range TLBIs, a range one operation covers gets exactly that operation (the one
    /// `decompose` gives), and one it does not gets `decompose`'s operations, the odd page last.
    #[test]
    fn one_range_operation_when_one_covers_the_range() {
        #[derive(Default)]
        struct Ops(Vec<TlbiOp>);
        impl TlbMaintenance for Ops {
            fn tlbi(&mut self, op: Tlbi) {
                self.0.push(op.op);
            }
            fn dsb(&mut self, _: Barrier) {}
            fn isb(&mut self) {}
            fn features(&self) -> TlbFeatures {
                TlbFeatures { range: true }
            }
        }
        let el1 = Regime::El1 { asid: 3, half: VaHalf::Lower };
        let emit = |pages: u64| {
            let mut t = Ops::default();
            let req = FlushRequest {
                range: 0..pages * PAGE_SIZE,
                stride: PAGE_SIZE,
                leaf_only: true,
                global: false,
                tables: &[],
            };
            emit_invalidation(el1, &req, &FlushPolicy::default(), &mut t);
            t.0
        };
        let base = VirtAddr::new(0);
        for pages in [2u64, 64, 512, 1 << 11, 31 << 11] {
            let mut want = Vec::new();
            TlbiRange::decompose(pages, |_, range| want.push(TlbiOp::Rvae1 { asid: 3, base, range }));
            assert_eq!(want.len(), 1);
            assert_eq!(emit(pages), want, "{pages} pages");
        }
        assert_eq!(emit(512), [TlbiOp::Rvae1 { asid: 3, base, range: TlbiRange { scale: 1, num: 7 } }]);
        let r = |scale, num| TlbiRange { scale, num };
        assert_eq!(
            emit(515),
            [
                TlbiOp::Rvae1 { asid: 3, base, range: r(1, 7) },
                TlbiOp::Rvae1 { asid: 3, base: VirtAddr::new(512 * PAGE_SIZE), range: r(0, 0) },
                TlbiOp::Vae1 { asid: 3, va: VirtAddr::new(514 * PAGE_SIZE) },
            ]
        );
    }

    /// Every instruction a TLB-maintenance edge was asked for, in order.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl TlbMaintenance for Recorder {
        fn tlbi(&mut self, op: Tlbi) {
            self.0.push(String::from(op.mnemonic()));
        }
        fn dsb(&mut self, barrier: Barrier) {
            self.0.push(String::from(barrier.mnemonic()));
        }
        fn isb(&mut self) {
            self.0.push(String::from("ISB"));
        }
    }

    fn finish(g: &mut TlbGather, live: bool) -> Vec<String> {
        let mut tlb = Recorder::default();
        g.finish(
            Regime::El1 { asid: 3, half: VaHalf::Lower },
            live,
            &FlushPolicy::default(),
            &mut tlb,
            &mut crate::frame::HeapFrames::new(),
        );
        tlb.0
    }

    /// What a finished gather issues, by what it holds: nothing for nothing; new entries only,
    /// `DSB ISHST` (the walkers see them) and `ISB` (this CPU's next access too); a change to
    /// flush, `DSB ISHST` (the descriptor writes before the TLBI), the TLBI, `DSB ISH` (the TLBI
    /// complete everywhere) and `ISB`; nothing at all for a table that is not live.
    #[test]
    fn a_finished_gather_brackets_its_tlbis_with_the_barriers_they_need() {
        let mut g = TlbGather::new();
        assert!(finish(&mut g, true).is_empty());
        g.note_write();
        assert_eq!(finish(&mut g, true), ["DSB ISHST", "ISB"]);
        g.note_write();
        g.add_leaf(0x1000, PAGE_SIZE, false);
        assert_eq!(finish(&mut g, true), ["DSB ISHST", "VALE1IS", "DSB ISH", "ISB"]);
        g.note_write();
        g.add_leaf(0x1000, PAGE_SIZE, false);
        assert!(finish(&mut g, false).is_empty(), "a table no walker reaches gets no maintenance");
        // The gather is empty again after each finish.
        assert!(finish(&mut g, true).is_empty());
    }

    fn emit(regime: Regime, range: core::ops::Range<u64>, tables: &[(u64, u64)]) -> Vec<String> {
        let mut tlb = Recorder::default();
        let req = FlushRequest { range, stride: PAGE_SIZE, leaf_only: true, global: false, tables };
        emit_invalidation(regime, &req, &FlushPolicy { use_range: false, whole_threshold: 512 }, &mut tlb);
        tlb.0
    }

    /// Stage 2: the combined stage-1+2 entries go after the stage-2 ones are gone everywhere,
    /// with a `DSB ISH` between (else a walk could refill a combined entry from a stale stage-2
    /// one): for one page as for a range.
    #[test]
    fn stage2_drops_combined_entries_only_after_its_ipa_tlbis_completed() {
        let s2 = Regime::Stage2 { vmid: 1 };
        assert_eq!(emit(s2, 0x1000..0x2000, &[]), ["IPAS2LE1IS", "DSB ISH", "VMALLE1IS"]);
        assert_eq!(emit(s2, 0x1000..0x3000, &[]), ["IPAS2LE1IS", "IPAS2LE1IS", "DSB ISH", "VMALLE1IS"]);
    }

    /// A removed table is covered by the leaf TLBIs only when one of them hits its region: one
    /// that begins where the changed range ends needs its own.
    #[test]
    fn a_removed_table_just_past_the_range_gets_its_own_tlbi() {
        let el1 = Regime::El1 { asid: 3, half: VaHalf::Lower };
        let covered = emit(el1, 0x1000..0x3000, &[(0x2000, level_size(2))]);
        assert_eq!(covered, ["VAAE1IS", "VAAE1IS"], "a table under a page of the range: its TLBI is enough");
        let past = emit(el1, 0x1000..0x3000, &[(0x3000, level_size(2))]);
        assert_eq!(past, ["VAAE1IS", "VAAE1IS", "VAAE1IS"], "the table at the range's end");
    }

    #[test]
    fn stage2_adds_vmalle1() {
        let t = run(Regime::Stage2 { vmid: 1 }, 2, false, true);
        assert_eq!(t.counters.tlbi_by_kind().collect::<Vec<_>>(), [("VMALLE1IS", 1), ("IPAS2LE1IS", 2)]);
        assert_eq!(t.counters.dsb_total(), 1);
        let t = run(Regime::Stage2 { vmid: 1 }, 100_000, false, true);
        assert_eq!(t.counters.tlbi_by_kind().collect::<Vec<_>>(), [("VMALLS12E1IS", 1)]);
    }
}
