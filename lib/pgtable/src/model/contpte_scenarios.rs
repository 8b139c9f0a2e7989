//! Permission changes of whole contiguous ranges. Under BBML2 `protect` rewrites the 16 members
//! of a fully covered range in place (the range stays contiguous) and the operation's gather
//! flushes once for everything; without BBML2 each range gets break-before-make. The checker
//! accepts exactly that in-place rewrite: the members of a contiguous range may disagree in
//! permissions only under BBML2, only while an operation runs, and nothing else about them may
//! change in place. The raw sequences below drive the model directly to show each rule.

use std::string::String;
use std::vec::Vec;

use super::harness::Harness;
use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, MemType, Perms};
use crate::descriptor::{encode_leaf, Desc};
use crate::mutation::Mutation;
use crate::regime::{Regime, VaHalf};
use crate::tlb::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp};
use crate::walker::WalkFlags;

const REGIME: Regime = Regime::El1 { asid: 0, half: VaHalf::Upper };
/// A vmalloc-style kernel range.
const VA: u64 = 0xffff_0000_4000_0000;
const PA: u64 = 0x8000_0000;
const GROUP: u64 = 16 * PAGE_SIZE;

/// A live kernel table with `groups` folded 64 KiB ranges mapped RW at [`VA`].
fn folded(groups: u64, bbml2: bool, range: bool) -> Harness {
    let mut h = Harness::new(REGIME, bbml2, range);
    let rw = Attributes::normal(Perms::RW);
    h.pt.map(&mut h.tlb, VirtAddr::new(VA), groups * GROUP, PhysAddr::new(PA), rw, Constraints::NO_BLOCKS).unwrap();
    h.go_live();
    h.check().expect("clean after mapping");
    assert!(h.pt.translate(VirtAddr::new(VA)).unwrap().contiguous, "mapped folded");
    h
}

fn tlbis(h: &Harness, since: &crate::tlb::TlbCounters) -> Vec<(&'static str, u64)> {
    h.tlb.counters.since(since).tlbi_by_kind().collect()
}

/// `protect` over N whole folded groups: under BBML2 no break-before-make, the groups stay
/// folded, and the one flush of the operation is what the flush policy makes of the range (one
/// range TLBI with FEAT_TLBIRANGE, else per page, else the whole context past the threshold).
/// Without BBML2 every group gets its own break-before-make.
#[test]
fn protect_over_whole_groups_is_one_flush() {
    // (groups, FEAT_TLBIRANGE, expected TLBIs of the BBML2 in-place change)
    type Case = (u64, bool, &'static [(&'static str, u64)]);
    let cases: [Case; 4] = [
        (8, true, &[("RVAALE1IS", 1)]),
        (8, false, &[("VAALE1IS", 8 * 16)]),
        (40, true, &[("RVAALE1IS", 1)]),
        // 640 pages are past the 512-TLBI threshold: one whole-context invalidation.
        (40, false, &[("VMALLE1IS", 1)]),
    ];
    for (groups, range, want) in cases {
        for bbml2 in [true, false] {
            let mut h = folded(groups, bbml2, range);
            for perms in [Perms::RO, Perms::RW, Perms::RX, Perms::RO] {
                let c0 = h.tlb.counters;
                let bbm0 = h.pt.stats().bbm;
                h.pt.protect(&mut h.tlb, VirtAddr::new(VA), groups * GROUP, perms).unwrap();
                h.check().unwrap_or_else(|e| panic!("{groups} groups, range {range}, bbml2 {bbml2}, {perms:?}:\n{e}"));
                let d = h.tlb.counters.since(&c0);
                let what = format!("{groups} groups, range {range}, bbml2 {bbml2}, {perms:?}: {:?}", tlbis(&h, &c0));
                for g in 0..groups {
                    let t = h.pt.translate(VirtAddr::new(VA + g * GROUP + 5 * PAGE_SIZE)).unwrap();
                    assert!(t.contiguous && t.attrs.perms == perms, "{what}: group {g} {t:?}");
                }
                if bbml2 {
                    assert_eq!(h.pt.stats().bbm, bbm0, "{what}: no break-before-make");
                    assert_eq!(tlbis(&h, &c0), want, "{what}");
                    // One flush: DSB ISHST, the TLBIs, DSB ISH, ISB.
                    assert_eq!(d.dsb_total(), 2, "{what}");
                    assert_eq!(d.isb, 1, "{what}");
                } else {
                    assert_eq!(h.pt.stats().bbm - bbm0, groups, "{what}: one break-before-make per group");
                    assert!(d.tlbi_total() >= groups, "{what}");
                }
            }
        }
    }
}

/// Only the groups fully inside the range are rewritten in place; the partially covered groups at
/// the two ends are unfolded (without TLBI under BBML2) and their covered pages changed; one
/// flush at the end covers it all.
#[test]
fn partially_covered_groups_still_unfold() {
    let mut h = folded(6, true, true);
    let (s, len) = (VA + GROUP + 3 * PAGE_SIZE, 3 * GROUP);
    let c0 = h.tlb.counters;
    h.pt.protect(&mut h.tlb, VirtAddr::new(s), len, Perms::RO).unwrap();
    h.check().unwrap();
    assert_eq!(h.pt.stats().bbm, 0);
    assert_eq!(h.pt.stats().unfolds, 2, "the two end groups");
    assert_eq!(tlbis(&h, &c0), [("RVAALE1IS", 1)]);
    let at = |h: &Harness, off: u64| h.pt.translate(VirtAddr::new(VA + off)).unwrap();
    assert!(at(&h, 0).contiguous && at(&h, 0).attrs.perms == Perms::RW);
    assert!(!at(&h, GROUP).contiguous && at(&h, GROUP + 2 * PAGE_SIZE).attrs.perms == Perms::RW);
    assert_eq!(at(&h, GROUP + 3 * PAGE_SIZE).attrs.perms, Perms::RO);
    assert!(at(&h, 2 * GROUP).contiguous && at(&h, 2 * GROUP).attrs.perms == Perms::RO);
    assert!(at(&h, 3 * GROUP).contiguous && at(&h, 3 * GROUP).attrs.perms == Perms::RO);
    assert!(!at(&h, 4 * GROUP).contiguous && at(&h, 4 * GROUP + 2 * PAGE_SIZE).attrs.perms == Perms::RO);
    assert_eq!(at(&h, 4 * GROUP + 3 * PAGE_SIZE).attrs.perms, Perms::RW);
    assert!(at(&h, 5 * GROUP).contiguous);
}

/// The same in place for a contiguous range of 2 MiB blocks (32 MiB) on a BBML2 linear map.
#[test]
fn whole_contiguous_block_ranges_are_changed_in_place() {
    const MIB: u64 = 1 << 20;
    let mut h = Harness::new(REGIME, true, true);
    let rw = Attributes::normal(Perms::RW);
    let va = 0xffff_8000_4000_0000u64;
    h.pt.map(&mut h.tlb, VirtAddr::new(va), 64 * MIB, PhysAddr::new(0x4000_0000), rw, Constraints::NO_BLOCKS).unwrap();
    h.pt.map(&mut h.tlb, VirtAddr::new(va + 64 * MIB), 64 * MIB, PhysAddr::new(0x4400_0000), rw, Constraints::NONE)
        .unwrap();
    h.go_live();
    let t = h.pt.translate(VirtAddr::new(va + 64 * MIB)).unwrap();
    assert_eq!((t.level, t.contiguous), (2, true));
    let c0 = h.tlb.counters;
    h.pt.protect(&mut h.tlb, VirtAddr::new(va + 64 * MIB), 32 * MIB, Perms::RO).unwrap();
    h.check().unwrap();
    assert_eq!(h.pt.stats().bbm, 0);
    assert_eq!(tlbis(&h, &c0), [("RVAALE1IS", 1)]);
    let t = h.pt.translate(VirtAddr::new(va + 80 * MIB)).unwrap();
    assert_eq!((t.level, t.contiguous, t.attrs.perms), (2, true, Perms::RO));
}

/// Seeded bug: the final flush of an RW -> RO change of a folded group is left out. The stale
/// read-write entries outlive the operation and the checker reports them.
#[test]
fn eliding_the_flush_of_a_folded_group_going_read_only_is_caught() {
    for range in [true, false] {
        let mut h = folded(2, true, range);
        h.mutate(Mutation::ElideTlbiRwToRo);
        let c0 = h.tlb.counters;
        h.pt.protect(&mut h.tlb, VirtAddr::new(VA), 2 * GROUP, Perms::RO).unwrap();
        assert_eq!(h.pt.stats().bbm, 0, "the in-place path ran");
        assert_eq!(h.tlb.counters.since(&c0).tlbi_total(), 0, "the mutation removed the flush");
        match h.check() {
            Ok(()) => panic!("range {range}: eliding the flush was not caught"),
            Err(e) => assert!(e.contains("stale TLB entry") && e.contains("grant only"), "unexpected report:\n{e}"),
        }
    }
}

// ----- the checker's rule, on raw descriptor writes -----

/// (table, index, descriptor) of the 16 members of the first group at [`VA`].
fn members(h: &Harness) -> Vec<(PhysAddr, usize, Desc)> {
    let mut v = Vec::new();
    h.pt.walk(VirtAddr::new(VA), GROUP, WalkFlags::LEAF, |e| {
        v.push((e.table, e.index, e.desc));
        Ok(())
    })
    .unwrap();
    assert_eq!(v.len(), 16);
    v
}

fn leaf(perms: Perms, mem: MemType, pa: u64, cont: bool) -> Desc {
    encode_leaf(REGIME, PhysAddr::new(pa), Attributes { mem, perms, global: None }, 3, cont).unwrap()
}

/// Writes `new(k)` over the first `n` members of the first group directly (as a buggy or
/// correct library would), then flushes the group page by page; returns the checker's verdict.
fn raw_rewrite(bbml2: bool, n: usize, new: impl Fn(usize) -> Desc) -> Result<(), String> {
    let mut h = folded(1, bbml2, false);
    let m = members(&h);
    for (k, &(table, index, _)) in m.iter().enumerate().take(n) {
        h.model.borrow_mut().write(table.as_u64(), index, new(k).0);
    }
    h.tlb.dsb(Barrier::IshSt);
    for k in 0..16 {
        let va = VirtAddr::new(VA + k * PAGE_SIZE);
        h.tlb.tlbi(Tlbi { op: TlbiOp::Vaae1 { va }, leaf_only: true, sh: Shareability::InnerShareable });
    }
    h.tlb.dsb(Barrier::Ish);
    h.tlb.isb();
    h.check()
}

fn page(k: usize) -> u64 {
    PA + k as u64 * PAGE_SIZE
}

fn rejected(r: Result<(), String>, expect: &str) {
    match r {
        Ok(()) => panic!("accepted; expected a report containing {expect:?}"),
        Err(e) => assert!(e.contains(expect), "expected {expect:?}, got:\n{e}"),
    }
}

#[test]
fn checker_accepts_an_in_place_permission_change_of_a_whole_group_under_bbml2() {
    for perms in [Perms::RO, Perms::RX, Perms::RWX] {
        assert_eq!(raw_rewrite(true, 16, |k| leaf(perms, MemType::Normal, page(k), true)), Ok(()), "{perms:?}");
    }
}

#[test]
fn checker_rejects_the_same_without_bbml2() {
    rejected(
        raw_rewrite(false, 16, |k| leaf(Perms::RO, MemType::Normal, page(k), true)),
        "misprogrammed contiguous range",
    );
}

#[test]
fn checker_rejects_a_partially_rewritten_group_at_operation_end() {
    rejected(
        raw_rewrite(true, 9, |k| leaf(Perms::RO, MemType::Normal, page(k), true)),
        "left with members that disagree",
    );
}

#[test]
fn checker_rejects_other_in_place_changes_of_a_group() {
    // Memory type.
    rejected(
        raw_rewrite(true, 16, |k| leaf(Perms::RW, MemType::NormalNc, page(k), true)),
        "misprogrammed contiguous range",
    );
    // Output address (the whole group moved by 64 KiB).
    rejected(
        raw_rewrite(true, 16, |k| leaf(Perms::RW, MemType::Normal, page(k) + GROUP, true)),
        "break-before-make violated",
    );
    // Size: the contiguous bit cleared together with the permission change.
    rejected(
        raw_rewrite(true, 16, |k| leaf(Perms::RO, MemType::Normal, page(k), false)),
        "misprogrammed contiguous range",
    );
    // Access flag.
    rejected(
        raw_rewrite(true, 16, |k| Desc(leaf(Perms::RO, MemType::Normal, page(k), true).0 & !(1 << 10))),
        "misprogrammed contiguous range",
    );
}

/// The direct convert ([`crate::PageTable::leaf`] + [`crate::Leaf::convert_group`]): from the
/// leaf, without a walk; under BBML2 in place without TLBI, with `Opts::FORCE_BBM` (or
/// without BBML2) break-before-make with one TLBI of the group; the checker stays silent.
#[test]
fn direct_convert_from_the_leaf() {
    use crate::Opts;
    for bbml2 in [true, false] {
        for opts in [Opts::DEFAULT, Opts::FORCE_BBM] {
            let mut h = folded(2, bbml2, false);
            let page = VirtAddr::new(VA + GROUP + 5 * PAGE_SIZE);
            h.pt.reset_stats();
            let c0 = h.tlb.counters;
            let mut leaf = h.pt.leaf(page).expect("mapped");
            assert_eq!(leaf.level(), 3);
            assert!(leaf.convert_group(&mut h.tlb, false, opts), "unfolded");
            assert!(!leaf.convert_group(&mut h.tlb, false, opts), "already unfolded");
            h.check().expect("unfold");
            assert!(!h.pt.translate(page).unwrap().contiguous);
            assert!(h.pt.translate(VirtAddr::new(VA)).unwrap().contiguous, "the other group stays");
            let want: &[(&str, u64)] = if bbml2 && !opts.force_bbm { &[] } else { &[("VAALE1IS", 16)] };
            assert_eq!(tlbis(&h, &c0), want, "bbml2 {bbml2} {opts:?}");
            assert_eq!(h.pt.stats().walk.total(), 0, "no walk");
            let c1 = h.tlb.counters;
            assert!(h.pt.leaf(page).unwrap().convert_group(&mut h.tlb, true, opts), "folded back");
            h.check().expect("fold");
            assert!(h.pt.translate(page).unwrap().contiguous);
            assert_eq!(tlbis(&h, &c1), want);
            // A group whose members differ does not fold.
            h.pt.protect(&mut h.tlb, page, PAGE_SIZE, Perms::RO).unwrap();
            assert!(!h.pt.leaf(page).unwrap().convert_group(&mut h.tlb, true, opts));
            h.check().expect("refused fold");
        }
    }
}
