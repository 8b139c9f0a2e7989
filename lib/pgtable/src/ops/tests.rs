//! Functional tests of the operations (no model checker: see `crate::model` for that).

use alloc::string::String;

use crate::addr::{level_size, IntermPhysAddr, PhysAddr, VirtAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, MemType, Perms};
use crate::frame::HeapFrames;
use crate::regime::{Regime, VaHalf};
use crate::tlb::CountingTlb;
use crate::{Arg, Config, Error, PageTable, SplitOpts};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn el2() -> (PageTable<HeapFrames>, CountingTlb) {
    (PageTable::new(Regime::El2, HeapFrames::new()).unwrap(), CountingTlb::default())
}

#[test]
fn el2_identity_map_uses_largest_blocks() {
    let (mut pt, mut tlb) = el2();
    // 0x4000_0000 .. 0x8020_0000 + 4 KiB: one 1 GiB block, one 2 MiB block, one page.
    let start = 0x4000_0000u64;
    let size = GIB + 2 * MIB + PAGE_SIZE;
    pt.map(
        &mut tlb,
        VirtAddr::new(start),
        size,
        PhysAddr::new(start),
        Attributes::normal(Perms::RW),
        Constraints::NONE,
    )
    .unwrap();
    let t = pt.translate(VirtAddr::new(start + 0x1234)).unwrap();
    assert_eq!((t.phys.as_u64(), t.level), (start + 0x1234, 1));
    assert_eq!(pt.translate(VirtAddr::new(start + GIB)).unwrap().level, 2);
    assert_eq!(pt.translate(VirtAddr::new(start + GIB + 2 * MIB)).unwrap().level, 3);
    assert!(pt.translate(VirtAddr::new(start + size)).is_none());
    // Root + L1 + L2 + L3.
    assert_eq!(pt.stats().table_pages, 4);
    // Not live: no maintenance at all.
    assert_eq!(tlb.counters.tlbi_total() + tlb.counters.dsb_total(), 0);
    let r = pt.map(
        &mut tlb,
        VirtAddr::new(start + GIB),
        PAGE_SIZE,
        PhysAddr::new(0),
        Attributes::normal(Perms::RW),
        Constraints::NONE,
    );
    // The error names the entry in the way: the 2 MiB block, its level, its descriptor.
    match r {
        Err(Error::AlreadyMapped { addr, level: 2, found }) => {
            assert_eq!(addr, start + GIB);
            assert!(found.is_valid_leaf(2), "{found:?}");
        }
        other => panic!("{other:?}"),
    }
    let mut s = String::new();
    pt.dump(&mut s).unwrap();
    assert!(s.contains("L1 Normal rw---"), "{s}");
}

#[test]
fn stage2_identity_map_and_root() {
    let mut pt = PageTable::new(Regime::Stage2 { vmid: 1 }, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    assert!(pt.root().is_aligned(2 * PAGE_SIZE), "concatenated root is 8 KiB aligned");
    // Top of the 40-bit IPA space: root index 1023 (second root page).
    let top = (1u64 << 40) - GIB;
    pt.map(
        &mut tlb,
        IntermPhysAddr::new(top),
        GIB,
        PhysAddr::new(top),
        Attributes::normal(Perms::RWX),
        Constraints::NONE,
    )
    .unwrap();
    let t = pt.translate(IntermPhysAddr::new(top + 5)).unwrap();
    assert_eq!((t.phys.as_u64(), t.level, t.attrs.perms), (top + 5, 1, Perms::RWX));
    assert_eq!(pt.stats().table_pages, 2, "a 1 GiB block sits in the root");
    assert_eq!(
        pt.map(
            &mut tlb,
            IntermPhysAddr::new(1 << 40),
            PAGE_SIZE,
            PhysAddr::new(0),
            Attributes::normal(Perms::RW),
            Constraints::NONE
        ),
        Err(Error::OutOfRange { arg: Arg::End, value: (1 << 40) + PAGE_SIZE, limit: 1 << 40 })
    );
}

/// A regime chosen at run time is checked once, at creation, against the table's input address
/// type (operations cannot be given the other kind: `compile_fail` doc-tests on `PageTable`).
#[test]
fn a_regime_of_the_other_address_kind_is_refused_at_creation() {
    let s2_of_vas = PageTable::<HeapFrames, VirtAddr>::new(Regime::Stage2 { vmid: 1 }, HeapFrames::new());
    assert_eq!(s2_of_vas.err(), Some(Error::WrongAddressKind { stage2: true }));
    let el2_of_ipas = PageTable::<HeapFrames, IntermPhysAddr>::new(Regime::El2, HeapFrames::new());
    assert_eq!(el2_of_ipas.err(), Some(Error::WrongAddressKind { stage2: false }));
    let user = Regime::El1 { asid: 3, half: VaHalf::Lower };
    let el1_of_ipas = PageTable::<HeapFrames, IntermPhysAddr>::with_config(user, Config::default(), HeapFrames::new());
    assert_eq!(el1_of_ipas.err(), Some(Error::WrongAddressKind { stage2: false }));
    // The typed constructors build the regime they name.
    assert_eq!(PageTable::stage2(7, HeapFrames::new()).unwrap().regime(), Regime::Stage2 { vmid: 7 });
    assert_eq!(PageTable::el2(HeapFrames::new()).unwrap().regime(), Regime::El2);
    assert_eq!(PageTable::el1(3, VaHalf::Lower, HeapFrames::new()).unwrap().regime(), user);
    assert!(PageTable::<HeapFrames, VirtAddr>::new(user, HeapFrames::new()).is_ok());
}

#[test]
fn kernel_upper_half_and_contiguous() {
    let regime = Regime::El1 { asid: 0, half: VaHalf::Upper };
    let mut pt = PageTable::new(regime, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    let va = 0xffff_8000_0000_0000u64;
    pt.map(
        &mut tlb,
        VirtAddr::new(va),
        128 * 1024,
        PhysAddr::new(0x8_0000_0000),
        Attributes::normal(Perms::RW),
        Constraints::NO_BLOCKS,
    )
    .unwrap();
    let t = pt.translate(VirtAddr::new(va + 0x11000)).unwrap();
    assert!(t.contiguous);
    assert_eq!(t.phys.as_u64(), 0x8_0001_1000);
    assert_eq!(t.attrs.global, None, "upper half is global by default");
    // Unfold and fold back.
    pt.set_live(&mut tlb);
    assert_eq!(pt.unfold(&mut tlb, VirtAddr::new(va), PAGE_SIZE).unwrap(), 1);
    assert!(!pt.translate(VirtAddr::new(va)).unwrap().contiguous);
    assert!(pt.translate(VirtAddr::new(va + 0x10000)).unwrap().contiguous);
    assert_eq!(pt.fold(&mut tlb, VirtAddr::new(va), 128 * 1024).unwrap(), 1);
    assert!(pt.translate(VirtAddr::new(va)).unwrap().contiguous);
    assert_eq!(pt.stats().folds, 1);
}

#[test]
fn protect_splits_at_range_ends_and_unmap_frees_tables() {
    let mut pt = PageTable::with_config(Regime::El2, Config { bbml2: true }, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    pt.map(&mut tlb, VirtAddr::new(0), GIB, PhysAddr::new(0), Attributes::normal(Perms::RW), Constraints::NONE)
        .unwrap();
    pt.set_live(&mut tlb);
    pt.protect(&mut tlb, VirtAddr::new(0x20_3000), PAGE_SIZE, Perms::RO).unwrap();
    let t = pt.translate(VirtAddr::new(0x20_3000)).unwrap();
    assert_eq!((t.level, t.attrs.perms), (3, Perms::RO));
    assert_eq!(pt.translate(VirtAddr::new(0x20_4000)).unwrap().attrs.perms, Perms::RW);
    // The rest of the 1 GiB stays in 2 MiB blocks (contiguous), the split 2 MiB in pages.
    assert_eq!(pt.translate(VirtAddr::new(0x4000_0000 - PAGE_SIZE)).unwrap().level, 2);
    assert_eq!(pt.stats().splits, 2);
    assert_eq!(pt.stats().bbm, 0, "BBML2: no break-before-make");
    let before = pt.stats().table_pages;
    assert_eq!(before, 4);
    pt.unmap(&mut tlb, VirtAddr::new(0), GIB).unwrap();
    assert_eq!(pt.stats().table_pages, 1, "only the root is left");
    assert!(pt.translate(VirtAddr::new(0x20_3000)).is_none());
}

#[test]
fn prot_none_round_trip_is_free() {
    let regime = Regime::El1 { asid: 7, half: VaHalf::Lower };
    let mut pt = PageTable::new(regime, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    let va = VirtAddr::new(0x40_0000);
    let attrs = Attributes { mem: MemType::Normal, perms: Perms::RW | Perms::USER, global: None };
    pt.map(&mut tlb, va, 16 * PAGE_SIZE, PhysAddr::new(0x9000_0000), attrs, Constraints::PAGES_ONLY).unwrap();
    pt.set_live(&mut tlb);
    let c0 = tlb.counters;
    pt.protect(&mut tlb, va, PAGE_SIZE, Perms::NONE).unwrap();
    let c1 = tlb.counters;
    assert_eq!(c1.since(&c0).tlbi_by_kind().collect::<alloc::vec::Vec<_>>(), [("VALE1IS", 1)]);
    let t = pt.translate(va).unwrap();
    assert!(t.attrs.perms.is_none());
    pt.protect(&mut tlb, va, PAGE_SIZE, Perms::RW | Perms::USER).unwrap();
    assert_eq!(tlb.counters.since(&c1).tlbi_total(), 0, "NONE -> RW needs no TLBI");
    assert_eq!(pt.stats().flushes_elided, 1);
    pt.policy_mut().flush_elision = false;
    pt.protect(&mut tlb, va, PAGE_SIZE, Perms::NONE).unwrap();
    let c2 = tlb.counters;
    pt.protect(&mut tlb, va, PAGE_SIZE, Perms::RW | Perms::USER).unwrap();
    assert_eq!(tlb.counters.since(&c2).tlbi_total(), 1, "baseline flushes NONE -> RW");
}

#[test]
fn split_skips_target_level() {
    let mut pt = PageTable::new(Regime::Stage2 { vmid: 3 }, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    pt.map(
        &mut tlb,
        IntermPhysAddr::new(0),
        4 * GIB,
        PhysAddr::new(0),
        Attributes::normal(Perms::RWX),
        Constraints::NONE,
    )
    .unwrap();
    pt.set_live(&mut tlb);
    let n = pt.split(&mut tlb, IntermPhysAddr::new(0), 4 * GIB, 3, false).unwrap();
    assert_eq!(n, 4);
    assert_eq!(pt.stats().walk.at_level(3), 0, "no level-3 visits");
    assert_eq!(pt.translate(IntermPhysAddr::new(0x1234_5000)).unwrap().level, 3);
    // Already split: a second pass visits no level-3 entry and splits nothing.
    pt.reset_stats();
    assert_eq!(pt.split(&mut tlb, IntermPhysAddr::new(0), 4 * GIB, 3, false).unwrap(), 0);
    assert_eq!(pt.stats().walk.at_level(3), 0);
    let baseline = SplitOpts { skip_target_level: false, ..SplitOpts::to(3) };
    pt.split_with(&mut tlb, IntermPhysAddr::new(0), GIB, baseline).unwrap();
    assert_eq!(pt.stats().walk.at_level(3), 512 * 512);
    assert_eq!(level_size(1), GIB);
}

#[test]
fn remap_changes_output_with_bbm() {
    let (mut pt, mut tlb) = el2();
    let attrs = Attributes::normal(Perms::RW);
    pt.map(&mut tlb, VirtAddr::new(0), 2 * MIB, PhysAddr::new(0x4000_0000), attrs, Constraints::NONE).unwrap();
    pt.set_live(&mut tlb);
    pt.remap(&mut tlb, VirtAddr::new(0), 2 * MIB, PhysAddr::new(0x8000_0000), attrs, Constraints::NONE).unwrap();
    assert_eq!(pt.translate(VirtAddr::new(0x10)).unwrap().phys.as_u64(), 0x8000_0010);
    assert_eq!(pt.stats().bbm, 1);
    assert_eq!(tlb.counters.tlbi_by_kind().collect::<alloc::vec::Vec<_>>(), [("VALE2IS", 1)]);
}

#[test]
fn out_of_memory_rolls_back() {
    let mut frames = HeapFrames::new();
    frames.limit = Some(3);
    let mut pt = PageTable::new(Regime::El2, frames).unwrap();
    let mut tlb = CountingTlb::default();
    // Needs root + L1 + L2 + 2 x L3: fails, and leaves nothing behind.
    let r = pt.map(
        &mut tlb,
        VirtAddr::new(0x1f_f000),
        2 * PAGE_SIZE,
        PhysAddr::new(0),
        Attributes::normal(Perms::RW),
        Constraints::NONE,
    );
    // The error names the entry whose table could not be allocated: the level-2 entry at 0.
    assert_eq!(r, Err(Error::OutOfMemory { addr: 0, level: 2 }));
    assert_eq!(alloc::format!("{}", r.unwrap_err()), "out of page-table frames (table below 0x0, level 2)");
    assert!(pt.translate(VirtAddr::new(0x1f_f000)).is_none());
    assert_eq!(pt.stats().table_pages, 1);
    let frames = pt.destroy().unwrap();
    assert_eq!(frames.in_use, 0);
}

#[test]
fn lazy_relaxation_holds_on_the_fast_protect_paths() {
    // The mask path for valid pages and the whole-leaf-table loop must leave the flush decision
    // to record_leaf_change: RO -> RW of user pages stays unflushed under lazy relaxation, a
    // restriction is flushed.
    let regime = Regime::El1 { asid: 7, half: VaHalf::Lower };
    let mut pt = PageTable::new(regime, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    let va = VirtAddr::new(0x40_0000);
    let ro = Attributes::normal(Perms::READ | Perms::USER);
    pt.map(&mut tlb, va, 2 * MIB + PAGE_SIZE, PhysAddr::new(0x9000_0000), ro, Constraints::PAGES_ONLY).unwrap();
    pt.set_live(&mut tlb);
    pt.policy_mut().lazy_relax = true;
    let rw = Perms::RW | Perms::USER;
    let c0 = tlb.counters;
    // A whole level-3 table (the leaf-table loop) and one page of the next (the per-entry mask).
    pt.protect(&mut tlb, va, 2 * MIB + PAGE_SIZE, rw).unwrap();
    assert_eq!(tlb.counters.since(&c0).tlbi_total(), 0, "RO -> RW of user pages is relaxed lazily");
    assert_eq!(pt.stats().lazy_relaxed, 513);
    assert_eq!(pt.translate(VirtAddr::new(0x40_0000 + 2 * MIB)).unwrap().attrs.perms, rw);
    let c1 = tlb.counters;
    pt.protect(&mut tlb, VirtAddr::new(0x40_0000 + 2 * MIB), PAGE_SIZE, Perms::READ | Perms::USER).unwrap();
    assert_eq!(tlb.counters.since(&c1).tlbi_total(), 1, "RW -> RO is flushed");
    let c2 = tlb.counters;
    pt.protect(&mut tlb, va, 2 * MIB, Perms::READ | Perms::USER).unwrap();
    assert!(tlb.counters.since(&c2).tlbi_total() >= 1, "a restriction of a whole table is flushed");
    // Without lazy relaxation the upgrade is flushed too.
    pt.policy_mut().lazy_relax = false;
    let c3 = tlb.counters;
    pt.protect(&mut tlb, va, PAGE_SIZE, rw).unwrap();
    assert_eq!(tlb.counters.since(&c3).tlbi_total(), 1);
}

#[test]
fn permission_mask_equals_decode_and_encode() {
    use super::protect::with_perms;
    use crate::descriptor::{encode_leaf, PermMask};
    let regimes = [
        Regime::El2,
        Regime::El1 { asid: 1, half: VaHalf::Lower },
        Regime::El1 { asid: 0, half: VaHalf::Upper },
        Regime::Stage2 { vmid: 1 },
    ];
    let all: alloc::vec::Vec<Perms> = (0..64u8).map(Perms::from_bits).collect();
    for regime in regimes {
        for mem in [MemType::Normal, MemType::NormalNc, MemType::Device] {
            for &old in &all {
                for level in 1..=3 {
                    for global in [None, Some(true), Some(false)] {
                        let attrs = Attributes { mem, perms: old, global };
                        let Ok(d) = encode_leaf(regime, PhysAddr::new(0x4000_0000), attrs, level, level == 3) else {
                            continue;
                        };
                        // Valid and PROT_NONE leaves alike, to and from every permission set.
                        let d = d.with_sw_bits(crate::descriptor::sw::DIRTY, !0);
                        for &new in &all {
                            let Some(m) = PermMask::new(regime, new) else { continue };
                            let slow = with_perms(regime, level, d, new);
                            match m.apply(regime, level, d) {
                                Some(fast) => {
                                    assert_eq!(Ok(fast), slow, "{regime:?} {mem:?} {old:?} -> {new:?} L{level}")
                                }
                                None => assert!(slow.is_err(), "{regime:?} {mem:?} {old:?} -> {new:?}: mask refused"),
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn write_protect_skips_read_only_subtrees_and_writable_pages_clear_the_summary() {
    let mut pt = PageTable::new(Regime::Stage2 { vmid: 3 }, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    let ipa = IntermPhysAddr::new;
    let rwx = Attributes::normal(Perms::RWX);
    pt.map(&mut tlb, ipa(0), GIB, PhysAddr::new(0), rwx, Constraints::PAGES_ONLY).unwrap();
    pt.set_live(&mut tlb);
    pt.write_protect(&mut tlb, ipa(0), GIB).unwrap();
    assert_eq!(pt.translate(ipa(0x1234_5000)).unwrap().attrs.perms, Perms::RX, "execute kept");
    assert_eq!(pt.stats().walk.at_level(3), 0, "whole leaf tables: no per-entry visits");
    // Already read-only: one level-1 entry, skipped; nothing written, nothing flushed.
    pt.reset_stats();
    let c0 = tlb.counters;
    pt.write_protect(&mut tlb, ipa(0), GIB).unwrap();
    let s = *pt.stats();
    assert_eq!((s.walk.skipped[1], s.walk.total(), s.desc_writes), (1, 1, 0));
    assert_eq!(tlb.counters.since(&c0).tlbi_total(), 0);
    // One page made writable clears the summary on its path only.
    pt.protect(&mut tlb, ipa(0x20_3000), PAGE_SIZE, Perms::RWX).unwrap();
    pt.reset_stats();
    pt.write_protect(&mut tlb, ipa(0), GIB).unwrap();
    let s = *pt.stats();
    assert_eq!(s.walk.skipped[2], 511, "the other level-3 tables are skipped");
    assert_eq!(pt.translate(ipa(0x20_3000)).unwrap().attrs.perms, Perms::RX);
    // Blocks keep their size.
    let mut pt2 = PageTable::new(Regime::Stage2 { vmid: 4 }, HeapFrames::new()).unwrap();
    pt2.map(&mut tlb, ipa(0), GIB, PhysAddr::new(0), rwx, Constraints::NONE).unwrap();
    pt2.write_protect(&mut tlb, ipa(2 * MIB), 4 * MIB).unwrap();
    let t = pt2.translate(ipa(2 * MIB)).unwrap();
    assert_eq!((t.level, t.attrs.perms), (2, Perms::RX));
    assert_eq!(pt2.translate(ipa(0)).unwrap().attrs.perms, Perms::RWX);
}

#[test]
fn whole_leaf_tables_map_and_unmap_in_one_loop() {
    let (mut pt, mut tlb) = el2();
    let rw = Attributes::normal(Perms::RW);
    pt.map(&mut tlb, VirtAddr::new(0x1000), 8 * MIB, PhysAddr::new(0x4000_2000), rw, Constraints::NONE).unwrap();
    // Unaligned output: pages only; the three whole 2 MiB tables are filled without visits.
    assert_eq!(pt.stats().walk.at_level(3), 511 + 1);
    for a in [0x1000u64, 0x20_0000, 0x7f_f000, 0x80_0000] {
        let t = pt.translate(VirtAddr::new(a)).unwrap();
        assert_eq!((t.phys.as_u64(), t.level), (0x4000_1000 + a, 3), "{a:#x}");
    }
    assert!(pt.translate(VirtAddr::new(0x80_1000)).is_none());
    assert_eq!(
        pt.map(&mut tlb, VirtAddr::new(0x40_0000), PAGE_SIZE, PhysAddr::new(0), rw, Constraints::NONE),
        Err(Error::AlreadyMapped {
            addr: 0x40_0000,
            level: 3,
            found: pt.leaf(VirtAddr::new(0x40_0000)).unwrap().desc()
        })
    );
    pt.set_live(&mut tlb);
    pt.reset_stats();
    pt.unmap(&mut tlb, VirtAddr::new(0), 16 * MIB).unwrap();
    assert_eq!(pt.stats().table_pages, 1, "every table freed");
    assert!(pt.translate(VirtAddr::new(0x40_0000)).is_none());
}

#[test]
fn write_protect_protects_crossing_blocks_whole_or_splits_them() {
    use crate::CrossingBlocks;
    let ipa = IntermPhysAddr::new;
    let rwx = Attributes::normal(Perms::RWX);
    for crossing in [CrossingBlocks::Split, CrossingBlocks::ProtectWhole] {
        let mut pt = PageTable::new(Regime::Stage2 { vmid: 5 }, HeapFrames::new()).unwrap();
        let mut tlb = CountingTlb::default();
        pt.map(&mut tlb, ipa(0), 8 * MIB, PhysAddr::new(0), rwx, Constraints::NONE).unwrap();
        pt.set_live(&mut tlb);
        // From the middle of the first 2 MiB block to the middle of the third.
        pt.write_protect_with(&mut tlb, ipa(MIB), 4 * MIB, crossing).unwrap();
        let at = |a: u64| pt.translate(ipa(a)).map(|t| (t.level, t.attrs.perms)).unwrap();
        match crossing {
            CrossingBlocks::Split => {
                assert_eq!(at(0), (3, Perms::RWX), "before the range: split, still writable");
                assert_eq!(at(MIB), (3, Perms::RX));
                assert_eq!(at(5 * MIB - PAGE_SIZE), (3, Perms::RX));
                assert_eq!(at(5 * MIB), (3, Perms::RWX), "after the range: split, still writable");
            }
            CrossingBlocks::ProtectWhole => {
                assert_eq!(at(0), (2, Perms::RX), "the crossing block, read-only whole, not split");
                assert_eq!(at(3 * MIB), (2, Perms::RX));
                assert_eq!(at(5 * MIB), (2, Perms::RX));
                assert_eq!(at(6 * MIB), (2, Perms::RWX), "the block after the range is untouched");
                assert_eq!(pt.stats().splits, 0);
            }
        }
    }
}

/// Frames whose `alloc_filled` hands out pages full of stale descriptors (as a frame cache
/// that does not zero does): every entry must still be written.
#[derive(Default)]
struct StaleFrames(HeapFrames);

// SAFETY: forwards to `HeapFrames`, which upholds the contract; `alloc_filled` writes the whole
// frame (stale pattern first, then `fill_unlinked` over every entry).
unsafe impl crate::FrameAlloc for StaleFrames {
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        self.0.alloc_zeroed(pages)
    }
    fn free(&mut self, pa: PhysAddr, pages: usize) {
        self.0.free(pa, pages)
    }
    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64 {
        self.0.phys_to_ptr(pa)
    }
    fn alloc_filled(&mut self, first: u64, step: u64) -> Option<PhysAddr> {
        let t = self.0.alloc_zeroed(1)?;
        let p = self.0.phys_to_ptr(t);
        for i in 0..crate::addr::ENTRIES_PER_TABLE {
            // SAFETY: `p` is the whole frame just allocated, ours alone.
            unsafe { p.add(i).write(0x0060_0000_dead_b003) };
        }
        // SAFETY: as above; linked nowhere yet.
        unsafe { crate::frame::fill_unlinked(p, first, step) };
        Some(t)
    }
}

#[test]
fn tables_built_whole_write_every_entry_of_an_unzeroed_frame() {
    let ipa = IntermPhysAddr::new;
    let rw = Attributes::normal(Perms::RW);
    let mut pt = PageTable::new(Regime::Stage2 { vmid: 6 }, StaleFrames::default()).unwrap();
    let mut tlb = CountingTlb::default();
    // Two whole level-3 tables by map, two by splitting 2 MiB blocks, 512 by splitting a 1 GiB one.
    pt.map(&mut tlb, ipa(0), 4 * MIB, PhysAddr::new(0x8000_0000), rw, Constraints::PAGES_ONLY).unwrap();
    pt.map(&mut tlb, ipa(4 * MIB), 4 * MIB, PhysAddr::new(0x9000_0000), rw, Constraints::NONE).unwrap();
    pt.map(&mut tlb, ipa(GIB), GIB, PhysAddr::new(0x1_0000_0000), rw, Constraints::NONE).unwrap();
    pt.split(&mut tlb, ipa(4 * MIB), 4 * MIB, 3, false).unwrap();
    pt.split(&mut tlb, ipa(GIB), GIB, 3, false).unwrap();
    let check = |base: u64, len: u64, out: u64| {
        for a in (base..base + len).step_by(PAGE_SIZE as usize) {
            let t = pt.translate(ipa(a)).unwrap_or_else(|| panic!("{a:#x} unmapped"));
            assert_eq!((t.level, t.phys.as_u64(), t.attrs.perms), (3, out + (a - base), Perms::RW), "at {a:#x}");
        }
    };
    check(0, 4 * MIB, 0x8000_0000);
    check(4 * MIB, 4 * MIB, 0x9000_0000);
    check(GIB, GIB, 0x1_0000_0000);
}

/// A new table counts its root pages both as allocated now and as ever allocated; resetting the
/// counters keeps the gauge and clears the rest.
#[test]
fn a_new_table_counts_its_root_pages() {
    for regime in
        [Regime::El2, Regime::El1 { asid: 1, half: VaHalf::Lower }, Regime::El1 { asid: 0, half: VaHalf::Upper }]
    {
        let mut pt: PageTable<HeapFrames> = PageTable::new(regime, HeapFrames::new()).unwrap();
        let pages = regime.root_pages() as u64;
        assert_eq!((pt.stats().table_pages, pt.stats().tables_allocated), (pages, pages), "{regime:?}");
        pt.reset_stats();
        assert_eq!((pt.stats().table_pages, pt.stats().tables_allocated), (pages, 0), "{regime:?}");
    }
}

/// `split(.., contiguous)` passes its choice on: the pages of a split 2 MiB block carry the
/// contiguous bit when asked, and not otherwise.
#[test]
fn split_with_contiguous_sets_the_bit_and_without_does_not() {
    for contiguous in [true, false] {
        let mut pt = PageTable::new(Regime::Stage2 { vmid: 4 }, HeapFrames::new()).unwrap();
        let mut tlb = CountingTlb::default();
        let ipa = IntermPhysAddr::new;
        let attrs = Attributes::normal(Perms::RW);
        pt.map(&mut tlb, ipa(0), 2 * MIB, PhysAddr::new(0), attrs, Constraints::NONE).unwrap();
        pt.set_live(&mut tlb);
        assert_eq!(pt.translate(ipa(0x1000)).unwrap().level, 2);
        pt.split(&mut tlb, ipa(0), 2 * MIB, 3, contiguous).unwrap();
        let t = pt.translate(ipa(0x1000)).unwrap();
        assert_eq!((t.level, t.contiguous), (3, contiguous));
    }
}

/// `unmap_pages_of`'s one-table path unfolds a contiguous group only where the range cuts it:
/// a group the range covers whole is cleared as it is, in a level-3 table that is not the
/// first (its entries' offsets are the table's own plus their index, not minus).
#[test]
fn unmap_pages_of_leaves_a_whole_group_folded_away_from_the_first_table() {
    let regime = Regime::El1 { asid: 3, half: VaHalf::Lower };
    let mut pt = PageTable::new(regime, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    // 2 MiB + 64 KiB .. + 256 KiB: four contiguous groups in the second level-3 table.
    let va = 2 * MIB + 64 * 1024;
    let attrs = Attributes::normal(Perms::RW);
    pt.map(&mut tlb, VirtAddr::new(va), 256 * 1024, PhysAddr::new(0x8000_0000), attrs, Constraints::NO_BLOCKS).unwrap();
    pt.set_live(&mut tlb);
    assert!(pt.translate(VirtAddr::new(va + 64 * 1024)).unwrap().contiguous);
    // The second group exactly: nothing to unfold.
    let mut freed = 0;
    pt.unmap_pages_of(&mut tlb, VirtAddr::new(va + 64 * 1024), 64 * 1024, |_| freed += 1).unwrap();
    assert_eq!((freed, pt.stats().unfolds), (16, 0));
    assert!(pt.translate(VirtAddr::new(va + 64 * 1024)).is_none());
    assert!(pt.translate(VirtAddr::new(va + 128 * 1024)).unwrap().contiguous);
    // Half of the third group: that group, and only it, is unfolded.
    pt.unmap_pages_of(&mut tlb, VirtAddr::new(va + 128 * 1024), 32 * 1024, |_| freed += 1).unwrap();
    assert_eq!((freed, pt.stats().unfolds), (24, 1));
    assert!(!pt.translate(VirtAddr::new(va + 160 * 1024)).unwrap().contiguous);
    assert!(pt.translate(VirtAddr::new(va)).unwrap().contiguous);
}

/// Stage 2's root is two concatenated pages (1024 entries): a protect of one page above 512 GiB
/// of IPA, which takes the direct path to its level-3 table, indexes the root with all ten
/// bits and changes that page alone (not the one 512 GiB below, where a 9-bit index leads).
#[test]
fn a_direct_protect_above_512g_of_ipa_reaches_its_own_entry() {
    let mut pt = PageTable::new(Regime::Stage2 { vmid: 1 }, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    let (low, high) = (0x1000u64, (1u64 << 39) + 0x1000);
    for ipa in [low, high] {
        let a = Attributes::normal(Perms::RW);
        pt.map(&mut tlb, IntermPhysAddr::new(ipa), PAGE_SIZE, PhysAddr::new(ipa), a, Constraints::NONE).unwrap();
    }
    pt.protect(&mut tlb, IntermPhysAddr::new(high), PAGE_SIZE, Perms::RO).unwrap();
    let perms = |ipa: u64| pt.translate(IntermPhysAddr::new(ipa)).map(|t| t.attrs.perms);
    assert_eq!(perms(high), Some(Perms::RO));
    assert_eq!(perms(low), Some(Perms::RW), "the page 512 GiB below changed instead");
}

/// Dirty logging's read-only split makes read-only the pages of the blocks inside its range
/// and nothing else: the block that crosses the range's end is split with its permissions
/// kept (the write-protect that follows takes its part inside), so no page past the end
/// becomes read-only; blocks past the range stay blocks.
#[test]
fn a_read_only_split_protects_nothing_past_its_range() {
    let mut pt = PageTable::new(Regime::Stage2 { vmid: 1 }, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    let a = Attributes::normal(Perms::RW);
    pt.map(&mut tlb, IntermPhysAddr::new(0), 8 * MIB, PhysAddr::new(0), a, Constraints::NONE).unwrap();
    pt.split_with(&mut tlb, IntermPhysAddr::new(0), 3 * MIB, SplitOpts { read_only: true, ..SplitOpts::to(3) })
        .unwrap();
    for page in (0..4 * MIB).step_by(PAGE_SIZE as usize) {
        let t = pt.translate(IntermPhysAddr::new(page)).unwrap();
        assert_eq!(t.level, 3, "{page:#x}");
        assert_eq!(t.attrs.perms.contains(Perms::WRITE), page >= 2 * MIB, "{page:#x}");
    }
    let t = pt.translate(IntermPhysAddr::new(4 * MIB)).unwrap();
    assert_eq!((t.level, t.attrs.perms), (2, Perms::RW));
}
