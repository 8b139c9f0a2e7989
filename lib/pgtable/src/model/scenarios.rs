//! Deterministic operation sequences on live tables, checked after every step.

use super::harness::Harness;
use crate::addr::{InputAddress, IntermPhysAddr, PhysAddr, VirtAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::regime::{Regime, VaHalf};
use crate::SplitOpts;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn ok<K: InputAddress>(h: &mut Harness<K>, what: &str) {
    if let Err(e) = h.check() {
        panic!("after {what}:\n{e}");
    }
}

fn el2_sequence(bbml2: bool, range: bool) {
    let mut h = Harness::new(Regime::El2, bbml2, range);
    let rw = Attributes::normal(Perms::RW);
    let va = |x: u64| VirtAddr::new(x);
    h.pt.map(
        &mut h.tlb,
        va(0x4000_0000),
        GIB + 4 * MIB + 5 * PAGE_SIZE,
        PhysAddr::new(0x4000_0000),
        rw,
        Constraints::NONE,
    )
    .unwrap();
    h.go_live();
    ok(&mut h, "go live");
    h.pt.protect(&mut h.tlb, va(0x4010_3000), 3 * PAGE_SIZE, Perms::RO).unwrap();
    ok(&mut h, "protect inside a 1 GiB block");
    h.pt.protect(&mut h.tlb, va(0x4010_3000), 3 * PAGE_SIZE, Perms::RX).unwrap();
    ok(&mut h, "protect again");
    h.pt.protect(&mut h.tlb, va(0x4000_0000), 64 * MIB, Perms::RO).unwrap();
    ok(&mut h, "protect 64 MiB (contiguous 2 MiB blocks)");
    h.pt.unmap(&mut h.tlb, va(0x4020_0000), 2 * MIB + PAGE_SIZE).unwrap();
    ok(&mut h, "unmap across a block boundary");
    h.pt.map(&mut h.tlb, va(0x4020_0000), 2 * MIB + PAGE_SIZE, PhysAddr::new(0x9000_0000), rw, Constraints::NONE)
        .unwrap();
    ok(&mut h, "map the hole again elsewhere");
    h.pt.remap(&mut h.tlb, va(0x4020_0000), 2 * MIB, PhysAddr::new(0x4020_0000), rw, Constraints::NONE).unwrap();
    ok(&mut h, "remap back");
    h.pt.unmap(&mut h.tlb, va(0), 4 * GIB).unwrap();
    ok(&mut h, "unmap everything");
    assert_eq!(h.pt.stats().table_pages, 1);
}

#[test]
fn el2_without_bbml2() {
    el2_sequence(false, false);
}

#[test]
fn el2_with_bbml2_and_range() {
    el2_sequence(true, true);
}

fn stage2_dirty_logging(bbml2: bool) {
    let mut h = Harness::new(Regime::Stage2 { vmid: 5 }, bbml2, false);
    let ipa = |x: u64| IntermPhysAddr::new(x);
    let rwx = Attributes::normal(Perms::RWX);
    h.pt.map(&mut h.tlb, ipa(0x4000_0000), GIB + 8 * MIB, PhysAddr::new(0x4000_0000), rwx, Constraints::NONE).unwrap();
    h.go_live();
    // Scenario 1: enabling dirty logging write-protects and eagerly splits the memslot.
    h.pt.protect(&mut h.tlb, ipa(0x4000_0000), GIB + 8 * MIB, Perms::RX).unwrap();
    ok(&mut h, "write-protect memslot");
    let n = h.pt.split(&mut h.tlb, ipa(0x4000_0000), GIB + 8 * MIB, 3, false).unwrap();
    assert!(n >= 2);
    ok(&mut h, "eager split");
    assert_eq!(h.pt.stats().walk.at_level(3), 0);
    // A write fault makes one page writable again.
    h.pt.protect(&mut h.tlb, ipa(0x4123_4000), PAGE_SIZE, Perms::RWX).unwrap();
    ok(&mut h, "make one page writable");
    // Scenario 2: clear-dirty-log write-protects only the cleared pages.
    h.pt.protect(&mut h.tlb, ipa(0x4123_4000), PAGE_SIZE, Perms::RX).unwrap();
    ok(&mut h, "clear dirty log");
    h.pt.unmap(&mut h.tlb, ipa(0x4000_0000), GIB + 8 * MIB).unwrap();
    ok(&mut h, "unmap memslot");
    assert_eq!(h.pt.stats().table_pages, 2);
}

#[test]
fn stage2_dirty_logging_bbm() {
    stage2_dirty_logging(false);
}

#[test]
fn stage2_dirty_logging_bbml2() {
    stage2_dirty_logging(true);
}

#[test]
fn kernel_linear_map_bbml2_splits_without_tlbi() {
    let regime = Regime::El1 { asid: 0, half: VaHalf::Upper };
    let mut h = Harness::new(regime, true, true);
    let base = 0xffff_8000_0000_0000u64;
    h.pt.map(
        &mut h.tlb,
        VirtAddr::new(base),
        2 * GIB,
        PhysAddr::new(0x8000_0000),
        Attributes::normal(Perms::RW),
        Constraints::NONE,
    )
    .unwrap();
    h.go_live();
    let before = h.tlb.counters;
    // rodata-style change on part of a block: split only at the range ends.
    h.pt.protect(&mut h.tlb, VirtAddr::new(base + 0x123_4000), 5 * PAGE_SIZE, Perms::RO).unwrap();
    ok(&mut h, "protect part of a 1 GiB block");
    let d = h.tlb.counters.since(&before);
    // Only the permission change itself flushes (5 pages, inside one 64 KiB range: one convert
    // with no TLBI under BBML2, then the leaf flush).
    assert!(d.tlbi_total() <= 2, "{:?}", d.tlbi_by_kind().collect::<Vec<_>>());
    assert_eq!(h.pt.stats().bbm, 0);
    let t = h.pt.translate(VirtAddr::new(base + 0x5000_0000)).unwrap();
    assert_eq!(t.level, 1, "blocks fully outside stay blocks");
    h.pt.protect(&mut h.tlb, VirtAddr::new(base + 0x123_4000), 5 * PAGE_SIZE, Perms::RW).unwrap();
    ok(&mut h, "protect back");
    assert!(h.pt.fold(&mut h.tlb, VirtAddr::new(base), 2 * GIB).unwrap() >= 1);
    ok(&mut h, "fold");
}

#[test]
fn user_space_prot_none_and_contpte() {
    for bbml2 in [false, true] {
        let regime = Regime::El1 { asid: 9, half: VaHalf::Lower };
        let mut h = Harness::new(regime, bbml2, false);
        let user = Attributes::normal(Perms::RW | Perms::USER);
        let va = VirtAddr::new(0x7f00_0000);
        h.pt.map(&mut h.tlb, va, 256 * 1024, PhysAddr::new(0x1_0000_0000), user, Constraints::NO_BLOCKS).unwrap();
        h.go_live();
        let c0 = h.tlb.counters;
        h.pt.protect(&mut h.tlb, va, 64 * 1024, Perms::NONE).unwrap();
        ok(&mut h, "RW -> NONE on a contiguous range");
        let c1 = h.tlb.counters;
        h.pt.protect(&mut h.tlb, va, 64 * 1024, Perms::RW | Perms::USER).unwrap();
        ok(&mut h, "NONE -> RW");
        assert_eq!(h.tlb.counters.since(&c1).tlbi_total(), 0, "NONE -> RW is free");
        assert!(c1.since(&c0).tlbi_total() > 0);
        h.pt.protect(&mut h.tlb, VirtAddr::new(0x7f01_3000), PAGE_SIZE, Perms::READ | Perms::USER).unwrap();
        ok(&mut h, "one page of a contiguous range");
        h.pt.unfold(&mut h.tlb, va, 256 * 1024).unwrap();
        ok(&mut h, "unfold");
        h.pt.fold(&mut h.tlb, va, 256 * 1024).unwrap();
        ok(&mut h, "fold");
        h.pt.unmap(&mut h.tlb, VirtAddr::new(0x7f01_8000), PAGE_SIZE).unwrap();
        ok(&mut h, "unmap one page of a contiguous range");
        h.pt.unmap(&mut h.tlb, va, 256 * 1024).unwrap();
        ok(&mut h, "unmap all");
    }
}

#[test]
fn baseline_policies_are_checked_too() {
    let mut h = Harness::new(Regime::El2, false, false);
    h.pt.policy_mut().flush_elision = false;
    h.pt.policy_mut().split_contiguous = false;
    h.pt.policy_mut().flush.whole_threshold = u64::MAX;
    h.pt.map(&mut h.tlb, VirtAddr::new(0), 8 * MIB, PhysAddr::new(0), Attributes::normal(Perms::RW), Constraints::NONE)
        .unwrap();
    h.go_live();
    let baseline = SplitOpts { skip_target_level: false, ..SplitOpts::to(3) };
    h.pt.split_with(&mut h.tlb, VirtAddr::new(0), 8 * MIB, baseline).unwrap();
    ok(&mut h, "split");
    h.pt.protect(&mut h.tlb, VirtAddr::new(0), 8 * MIB, Perms::NONE).unwrap();
    h.pt.protect(&mut h.tlb, VirtAddr::new(0), 8 * MIB, Perms::RW).unwrap();
    ok(&mut h, "protect");
    h.pt.unmap(&mut h.tlb, VirtAddr::new(0), 8 * MIB).unwrap();
    ok(&mut h, "unmap");
}
