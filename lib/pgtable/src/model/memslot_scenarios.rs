//! The hypervisor's memslot / dirty-logging sequences (`hypervisor/src/memslot.rs`) under the
//! model checker: a memslot mapped from a pool repeatedly (4 KiB pages, 2 MiB blocks, 1 GiB
//! blocks, no contiguous bit), then
//!
//! * scenario 1: write-protect the whole slot, split it in 1 GiB chunks;
//! * scenario 2: per 64-page word, split then write-protect that range;
//!
//! each with the baseline split walker and with SKIP_LEVEL3, with and without BBML2. After
//! every operation the model's rules hold (break-before-make, no stale permission, freed tables
//! unreachable); at the end every page translates to the same frame as before, read-only, at
//! level 3, and SKIP_LEVEL3 visited no level-3 entry.

use super::harness::Harness;
use crate::addr::{IntermPhysAddr, PhysAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::regime::Regime;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const SLOT: u64 = 8 * GIB;
const POOL: u64 = GIB;

fn ok(h: &mut Harness<IntermPhysAddr>, what: &str) {
    if let Err(e) = h.check() {
        panic!("after {what}:\n{e}");
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Backing {
    Pages,
    Blocks2M,
    Blocks1G,
}

/// (slot size, pool size) small enough for the model, with the pool repeated where possible.
fn sizes(b: Backing) -> (u64, u64) {
    match b {
        Backing::Pages => (4 * MIB, 2 * MIB),
        Backing::Blocks2M => (16 * MIB, 8 * MIB),
        Backing::Blocks1G => (GIB, GIB),
    }
}

fn memslot(b: Backing, bbml2: bool, skip: bool) -> Harness<IntermPhysAddr> {
    let mut h = Harness::new(Regime::Stage2 { vmid: 1 }, bbml2, false);
    h.split_opts.skip_target_level = skip;
    h.go_live();
    let (size, pool) = sizes(b);
    let cons = match b {
        Backing::Pages => Constraints::PAGES_ONLY,
        _ => Constraints { no_blocks: false, no_contiguous: true },
    };
    let mut o = 0;
    while o < size {
        let ipa = IntermPhysAddr::new(SLOT + o);
        h.pt.map(&mut h.tlb, ipa, pool, PhysAddr::new(POOL), Attributes::normal(Perms::RW), cons).unwrap();
        o += pool;
    }
    ok(&mut h, "create memslot");
    h
}

fn check_pages(h: &Harness<IntermPhysAddr>, b: Backing) {
    let (size, pool) = sizes(b);
    let mut o = 0;
    while o < size {
        let t = h.pt.translate(IntermPhysAddr::new(SLOT + o)).unwrap();
        assert_eq!(t.phys.as_u64(), POOL + o % pool, "{b:?} page {o:#x}");
        assert_eq!((t.level, t.attrs.perms), (3, Perms::RO), "{b:?} page {o:#x}");
        o += PAGE_SIZE;
    }
}

#[test]
fn scenario1_write_protect_then_split_in_chunks() {
    for b in [Backing::Pages, Backing::Blocks2M, Backing::Blocks1G] {
        for bbml2 in [false, true] {
            for skip in [false, true] {
                let mut h = memslot(b, bbml2, skip);
                let (size, _) = sizes(b);
                h.pt.protect(&mut h.tlb, IntermPhysAddr::new(SLOT), size, Perms::RO).unwrap();
                ok(&mut h, "write-protect");
                h.pt.reset_stats();
                let chunk = size.min(GIB);
                let mut a = 0;
                while a < size {
                    h.pt.split_with(&mut h.tlb, IntermPhysAddr::new(SLOT + a), chunk, h.split_opts).unwrap();
                    ok(&mut h, "split chunk");
                    a += chunk;
                }
                let l3 = h.pt.stats().walk.at_level(3);
                assert_eq!(l3, if skip { 0 } else { size / PAGE_SIZE }, "{b:?} skip {skip}");
                check_pages(&h, b);
                // A write fault makes one page writable again.
                h.pt.protect(&mut h.tlb, IntermPhysAddr::new(SLOT + 5 * PAGE_SIZE), PAGE_SIZE, Perms::RW).unwrap();
                ok(&mut h, "relax one page");
            }
        }
    }
}

#[test]
fn scenario2_split_then_protect_each_64_page_word() {
    for b in [Backing::Pages, Backing::Blocks2M, Backing::Blocks1G] {
        for skip in [false, true] {
            let mut h = memslot(b, false, skip);
            let (size, _) = sizes(b);
            // The 1 GiB case: clear the first 4 MiB only (the first word splits the whole block).
            let cleared = size.min(4 * MIB);
            let word = 64 * PAGE_SIZE;
            let (mut a, mut split_l3) = (0, 0);
            while a < cleared {
                let ipa = IntermPhysAddr::new(SLOT + a);
                let before = h.pt.stats().walk.at_level(3);
                h.pt.split_with(&mut h.tlb, ipa, word, h.split_opts).unwrap();
                split_l3 += h.pt.stats().walk.at_level(3) - before;
                h.pt.protect(&mut h.tlb, ipa, word, Perms::RO).unwrap();
                a += word;
            }
            ok(&mut h, "clear words");
            if cleared == size {
                check_pages(&h, b);
            }
            // Baseline: every cleared page is visited by the split walk (after its block is
            // split, the walker descends into the new table); SKIP_LEVEL3: none.
            assert_eq!(split_l3, if skip { 0 } else { cleared / PAGE_SIZE }, "{b:?} skip {skip}");
        }
    }
}

#[test]
fn summary_bit_skips_split_subtrees_and_map_clears_it() {
    for b in [Backing::Pages, Backing::Blocks2M, Backing::Blocks1G] {
        let mut h = memslot(b, false, true);
        h.split_opts.summary = true;
        let (size, _) = sizes(b);
        let slot = IntermPhysAddr::new(SLOT);
        assert!(size <= GIB);
        h.pt.protect(&mut h.tlb, slot, size, Perms::RO).unwrap();
        // The summary covers a whole level-1 entry: split its whole 1 GiB (the rest is empty).
        h.pt.split_with(&mut h.tlb, slot, GIB, h.split_opts).unwrap();
        ok(&mut h, "first split (marks the level-1 entry)");
        check_pages(&h, b);
        // Already split: the second walk does not descend below level 1 at all.
        h.pt.reset_stats();
        assert_eq!(h.pt.split_with(&mut h.tlb, slot, GIB, h.split_opts).unwrap(), 0);
        let w = h.pt.stats().walk;
        assert_eq!(w.skipped[1], 1, "{b:?}: the level-1 table entry is skipped");
        assert_eq!((w.at_level(2), w.at_level(3)), (0, 0), "{b:?}");
        // A block mapped below the marked entry clears the summary: the next split finds it.
        let hole = IntermPhysAddr::new(SLOT + 2 * MIB);
        h.pt.unmap(&mut h.tlb, hole, 2 * MIB).unwrap();
        let blocks = Constraints { no_blocks: false, no_contiguous: true };
        let (_, pool) = sizes(b);
        let pa = PhysAddr::new(POOL + (2 * MIB) % pool);
        h.pt.map(&mut h.tlb, hole, 2 * MIB, pa, Attributes::normal(Perms::RO), blocks).unwrap();
        ok(&mut h, "map a 2 MiB block below a marked entry");
        assert_eq!(h.pt.translate(hole).unwrap().level, 2);
        assert_eq!(h.pt.split_with(&mut h.tlb, slot, GIB, h.split_opts).unwrap(), 1, "{b:?}: the new block is split");
        ok(&mut h, "split again");
        check_pages(&h, b);
    }
}
