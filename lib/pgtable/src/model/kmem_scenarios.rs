//! The EL1 kernel's `set_memory_*` sequences ([`crate::kmem::set_memory`]) and contpte
//! converts on live tables, checked by the model after every step: the linear map with BBML2
//! (blocks, contiguous ranges, live splits without TLBI), PTE-only (never split), blocks without
//! BBML2 (splits with break-before-make), and a vmalloc-style contpte range. Random sequences
//! (proptest) are compared with a reference of per-page permissions.

use std::collections::BTreeMap;
use std::string::String;
use std::vec::Vec;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use super::harness::Harness;
use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::kmem::{linear_map_constraints, min_table_pages, set_memory, MemChange, Rodata};
use crate::regime::{Regime, VaHalf};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const LINEAR: u64 = 0xffff_8000_0000_0000;

fn at(h: &Harness, off: u64) -> crate::Translation {
    h.pt.translate(VirtAddr::new(LINEAR + GIB + off)).unwrap()
}

fn ok(h: &mut Harness, what: &str) -> Result<(), String> {
    h.check().map_err(|e| format!("after {what}:\n{e}"))
}

/// A live linear map of `ram` built as the kernel builds it.
fn linear(ram: &[(u64, u64)], bbml2: bool, rodata: Rodata) -> Harness {
    let mut h = Harness::new(Regime::El1 { asid: 0, half: VaHalf::Upper }, bbml2, false);
    let c = linear_map_constraints(bbml2, rodata, true);
    for &(s, e) in ram {
        h.pt.map(&mut h.tlb, VirtAddr::new(LINEAR + s), e - s, PhysAddr::new(s), Attributes::normal(Perms::RW), c)
            .unwrap();
    }
    h.go_live();
    h
}

fn change_of(k: u8) -> MemChange {
    match k % 6 {
        0 => MemChange::Ro,
        1 => MemChange::Rw,
        2 => MemChange::X,
        3 => MemChange::Nx,
        4 => MemChange::Invalid,
        _ => MemChange::Valid(Perms::RW),
    }
}

/// Runs `ops` (page offset, pages, change) on the linear map of `[base, base + span)` and
/// checks the model and a per-page reference after each.
fn run_sequence(
    bbml2: bool,
    rodata: Rodata,
    base: u64,
    span: u64,
    ops: &[(u64, u64, u8)],
) -> Result<(u64, u64), String> {
    let mut h = linear(&[(base, base + span)], bbml2, rodata);
    let pages = span / PAGE_SIZE;
    let mut reference: BTreeMap<u64, Perms> = BTreeMap::new();
    let fold = bbml2;
    for (i, &(at, len, k)) in ops.iter().enumerate() {
        let at = at % pages;
        let len = len.clamp(1, pages - at);
        let c = change_of(k);
        let va = LINEAR + base + at * PAGE_SIZE;
        set_memory(&mut h.pt, &mut h.tlb, VirtAddr::new(va), len * PAGE_SIZE, c, fold)
            .map_err(|e| format!("op {i} {c:?}: {e}"))?;
        ok(&mut h, &format!("op {i}: set_memory {c:?} at page {at} x {len}"))?;
        for p in at..at + len {
            let old = *reference.get(&p).unwrap_or(&Perms::RW);
            reference.insert(p, c.apply(old));
        }
        if !bbml2 && linear_map_constraints(bbml2, rodata, true) == Constraints::PAGES_ONLY && h.pt.stats().splits != 0
        {
            return Err(format!("op {i}: a PTE-only linear map was split"));
        }
    }
    // Every page has the permissions the reference says.
    for (&p, &want) in &reference {
        let t = h.pt.translate(VirtAddr::new(LINEAR + base + p * PAGE_SIZE)).ok_or("page vanished")?;
        if t.attrs.perms != want {
            return Err(format!("page {p}: {:?}, expected {want:?}", t.attrs.perms));
        }
        if t.phys.as_u64() != base + p * PAGE_SIZE {
            return Err(format!("page {p}: output {:#x} moved", t.phys.as_u64()));
        }
    }
    Ok((h.pt.stats().splits, h.pt.stats().table_pages))
}

fn cases() -> u32 {
    std::env::var("PGTABLE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
}

fn ops_strategy(max_page: u64, max_len: u64) -> impl Strategy<Value = Vec<(u64, u64, u8)>> {
    prop::collection::vec((0..max_page, 1..max_len, any::<u8>()), 1..12)
}

fn prop(bbml2: bool, rodata: Rodata, base: u64, span: u64, max_len: u64) {
    let seed = super::props::seed();
    let mut runner = TestRunner::new(super::props::config(cases(), seed));
    let result = runner.run(&ops_strategy(span / PAGE_SIZE, max_len), |ops| {
        run_sequence(bbml2, rodata, base, span, &ops).map(|_| ()).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        super::props::failed(e, seed);
    }
}

#[test]
fn set_memory_on_a_bbml2_linear_map() {
    // 1 GiB + 66 MiB from 1 GiB: a 1 GiB block, contiguous 2 MiB blocks, 2 MiB blocks.
    prop(true, Rodata::Full, GIB, GIB + 66 * MIB, 1200);
}

#[test]
fn set_memory_on_a_pte_only_linear_map_never_splits() {
    prop(false, Rodata::Full, GIB, 6 * MIB, 600);
}

#[test]
fn set_memory_on_blocks_without_bbml2_uses_break_before_make() {
    prop(false, Rodata::On, GIB, 34 * MIB, 600);
}

#[test]
fn range_end_splits_only() {
    // One page in the middle of a 1 GiB block: the path PUD -> contiguous PMDs -> PMD ->
    // contiguous PTEs -> PTE splits exactly two blocks (the 1 GiB and one 2 MiB block); the
    // rest stays as large as it was.
    let base = GIB;
    let mut h = linear(&[(base, base + GIB)], true, Rodata::Full);
    let c0 = h.tlb.counters;
    let va = LINEAR + base + 300 * MIB + 5 * PAGE_SIZE;
    set_memory(&mut h.pt, &mut h.tlb, VirtAddr::new(va), PAGE_SIZE, MemChange::Ro, true).unwrap();
    ok(&mut h, "one page RO").unwrap();
    assert_eq!(h.pt.stats().splits, 2);
    assert_eq!(h.pt.stats().bbm, 0);
    // Only the page's own permission change is flushed (one TLBI; the unfold of its contiguous
    // group needs none under BBML2).
    assert_eq!(h.tlb.counters.since(&c0).tlbi_total(), 1);
    assert_eq!((at(&h, 300 * MIB + 5 * PAGE_SIZE).level, at(&h, 300 * MIB + 5 * PAGE_SIZE).contiguous), (3, false));
    assert_eq!((at(&h, 300 * MIB + 64 * 1024).level, at(&h, 300 * MIB + 64 * 1024).contiguous), (3, true));
    assert_eq!((at(&h, 302 * MIB).level, at(&h, 302 * MIB).contiguous), (2, false));
    assert_eq!((at(&h, 400 * MIB).level, at(&h, 400 * MIB).contiguous), (2, true));
    // A 6 MiB range covering whole blocks: they stay blocks, only the ends split.
    let s0 = h.pt.stats().splits;
    set_memory(&mut h.pt, &mut h.tlb, VirtAddr::new(LINEAR + base + 511 * MIB), 6 * MIB, MemChange::Ro, true).unwrap();
    ok(&mut h, "6 MiB RO").unwrap();
    assert_eq!(at(&h, 513 * MIB).level, 2, "a block fully inside stays a block");
    assert_eq!(h.pt.stats().splits - s0, 2, "two range ends inside two 2 MiB blocks");
    // And back: refolded into contiguous ranges where uniform again.
    set_memory(&mut h.pt, &mut h.tlb, VirtAddr::new(va), PAGE_SIZE, MemChange::Rw, true).unwrap();
    ok(&mut h, "page back to RW and refold").unwrap();
    assert!(at(&h, 300 * MIB + 5 * PAGE_SIZE).contiguous);
}

#[test]
fn the_linear_map_table_limit_is_reached_under_the_model() {
    for bbml2 in [false, true] {
        let ram = [(GIB, GIB + 2 * MIB), (GIB + 24 * MIB, GIB + 64 * MIB)];
        let mut h = Harness::new(Regime::El1 { asid: 0, half: VaHalf::Upper }, bbml2, false);
        let c = linear_map_constraints(bbml2, Rodata::Full, true);
        for (s, e) in ram {
            h.pt.map(&mut h.tlb, VirtAddr::new(LINEAR + s), e - s, PhysAddr::new(s), Attributes::normal(Perms::RW), c)
                .unwrap();
        }
        assert_eq!(h.pt.stats().table_pages, min_table_pages(&ram, bbml2));
    }
}

/// contpte on a vmalloc-style range: one page of a folded range changes (unfold = convert),
/// changes back, and the group is folded again (convert). Under BBML2 the converts issue no
/// TLBI; without, each convert flushes its range.
#[test]
fn contpte_convert_sequences() {
    for bbml2 in [false, true] {
        let mut h = Harness::new(Regime::El1 { asid: 0, half: VaHalf::Upper }, bbml2, true);
        let va = 0xffff_0000_4000_0000u64;
        let len = 16 * 64 * 1024;
        h.pt.map(
            &mut h.tlb,
            VirtAddr::new(va),
            len,
            PhysAddr::new(0x8000_0000),
            Attributes::normal(Perms::RW),
            Constraints::NO_BLOCKS,
        )
        .unwrap();
        h.go_live();
        assert!(h.pt.translate(VirtAddr::new(va)).unwrap().contiguous, "mapped folded");
        for g in 0..16u64 {
            let page = VirtAddr::new(va + g * 64 * 1024 + (g % 16) * PAGE_SIZE);
            set_memory(&mut h.pt, &mut h.tlb, page, PAGE_SIZE, MemChange::Ro, true).unwrap();
            ok(&mut h, "one page RO (unfold)").unwrap();
            assert!(!h.pt.translate(page).unwrap().contiguous);
            let c0 = h.tlb.counters;
            let folds0 = h.pt.stats().folds;
            set_memory(&mut h.pt, &mut h.tlb, page, PAGE_SIZE, MemChange::Rw, true).unwrap();
            ok(&mut h, "page back to RW (refold)").unwrap();
            assert!(h.pt.translate(page).unwrap().contiguous, "refolded");
            assert_eq!(h.pt.stats().folds - folds0, 1);
            let d = h.tlb.counters.since(&c0);
            // RO -> RW is a permission upgrade: one flush of the page; the fold's convert adds
            // one range flush only without BBML2.
            let want = if bbml2 { 1 } else { 2 };
            assert_eq!(d.tlbi_total(), want, "bbml2={bbml2}: {:?}", d.tlbi_by_kind().collect::<Vec<_>>());
        }
        let c0 = h.tlb.counters;
        assert_eq!(h.pt.unfold(&mut h.tlb, VirtAddr::new(va), len).unwrap(), 16);
        ok(&mut h, "unfold all").unwrap();
        assert_eq!(h.pt.fold(&mut h.tlb, VirtAddr::new(va), len).unwrap(), 16);
        ok(&mut h, "fold all").unwrap();
        let d = h.tlb.counters.since(&c0).tlbi_total();
        if bbml2 {
            assert_eq!(d, 0, "converts without TLBI under BBML2");
        } else {
            assert!(d >= 32, "each convert flushes without BBML2: {d}");
        }
    }
}

/// The checks above can fail: a split without break-before-make on blocks without BBML2, and a
/// read-only change without its TLBI, are both caught on a set_memory sequence.
#[test]
fn the_checker_catches_seeded_bugs_in_set_memory() {
    use crate::mutation::Mutation;
    for (m, bbml2) in [(Mutation::SkipBbmOnSplit, false), (Mutation::ElideTlbiRwToRo, true)] {
        let mut h = linear(&[(GIB, 2 * GIB)], bbml2, Rodata::On);
        h.mutate(m);
        // The model TLBs may hold the block (any valid translation may be cached): change one
        // page in its middle.
        let va = VirtAddr::new(LINEAR + GIB + 300 * MIB);
        set_memory(&mut h.pt, &mut h.tlb, va, PAGE_SIZE, MemChange::Ro, bbml2).unwrap();
        assert!(h.check().is_err(), "{m:?} was not caught");
    }
}
