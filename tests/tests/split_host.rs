//! The dirty-logging split sequence on the host, through `lib/pgtable`'s public API as the
//! hypervisor drives it (`hypervisor/src/memslot.rs`): a memslot mapped from a pool repeatedly
//! (4 KiB pages, 2 MiB blocks, 1 GiB blocks), write-protected, then split to 4 KiB pages in
//! 1 GiB chunks with the baseline walker and with SKIP_LEVEL3. After the split every page must
//! translate exactly as before (same frame, read-only), now at level 3; SKIP_LEVEL3 must visit
//! no level-3 entry and the baseline every one; both must split the same blocks and leave the
//! same number of table pages. (The model checker inside `lib/pgtable` runs random sequences
//! that include `split`.)

use pgtable::{Attributes, Constraints, CountingTlb, HeapFrames, IntermPhysAddr, PageTable, Perms, PhysAddr};

use abi::PAGE_SIZE as PAGE;
const GIB: u64 = 1 << 30;
const SLOT: u64 = 4 * GIB;
const SLOT_SIZE: u64 = 2 * GIB;
const POOL: u64 = GIB;
const POOL_SIZE: u64 = GIB;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Backing {
    Pages,
    Blocks2M,
    Blocks1G,
}

fn slot(backing: Backing) -> (PageTable<HeapFrames, IntermPhysAddr>, CountingTlb) {
    let mut pt = PageTable::stage2(1, HeapFrames::new()).unwrap();
    let mut tlb = CountingTlb::default();
    pt.set_live(&mut tlb);
    let (cons, piece) = match backing {
        Backing::Pages => (Constraints::PAGES_ONLY, POOL_SIZE),
        // Pieces below 1 GiB never form a 1 GiB block.
        Backing::Blocks2M => (Constraints { no_blocks: false, no_contiguous: true }, POOL_SIZE / 2),
        Backing::Blocks1G => (Constraints { no_blocks: false, no_contiguous: true }, POOL_SIZE),
    };
    let mut o = 0;
    while o < SLOT_SIZE {
        let pa = PhysAddr::new(POOL + o % POOL_SIZE);
        pt.map(&mut tlb, IntermPhysAddr::new(SLOT + o), piece, pa, Attributes::normal(Perms::RW), cons).unwrap();
        o += piece;
    }
    pt.protect(&mut tlb, IntermPhysAddr::new(SLOT), SLOT_SIZE, Perms::RO).unwrap();
    (pt, tlb)
}

/// Every page of the slot maps its pool frame read-only; returns how many were not at level 3.
fn check_pages(pt: &PageTable<HeapFrames, IntermPhysAddr>) -> u64 {
    let mut above = 0;
    let mut o = 0;
    while o < SLOT_SIZE {
        let t = pt.translate(IntermPhysAddr::new(SLOT + o)).unwrap_or_else(|| panic!("{o:#x} unmapped"));
        assert_eq!(t.phys.as_u64(), POOL + o % POOL_SIZE, "page {o:#x}");
        assert_eq!(t.attrs.perms, Perms::RO, "page {o:#x}");
        above += u64::from(t.level != 3);
        o += PAGE;
    }
    above
}

#[test]
fn split_keeps_every_translation_and_skip_level3_never_visits_level3() {
    let pages = SLOT_SIZE / PAGE;
    for (backing, blocks) in [(Backing::Pages, 0), (Backing::Blocks2M, SLOT_SIZE >> 21), (Backing::Blocks1G, 2)] {
        let mut table_pages = Vec::new();
        for skip in [false, true] {
            let (mut pt, mut tlb) = slot(backing);
            let before_blocks = check_pages(&pt);
            assert_eq!(before_blocks, if backing == Backing::Pages { 0 } else { pages }, "{backing:?}");
            pt.reset_stats();
            let mut split = 0;
            let mut a = SLOT;
            while a < SLOT + SLOT_SIZE {
                let opts = pgtable::SplitOpts { skip_target_level: skip, ..pgtable::SplitOpts::to(3) };
                split += pt.split_with(&mut tlb, IntermPhysAddr::new(a), GIB, opts).unwrap();
                a += GIB;
            }
            let s = *pt.stats();
            assert_eq!(split, blocks, "{backing:?} skip {skip}: blocks split");
            assert_eq!(s.splits, blocks);
            let l3 = s.walk.at_level(3);
            assert_eq!(l3, if skip { 0 } else { pages }, "{backing:?} skip {skip}: level-3 visits");
            assert_eq!(check_pages(&pt), 0, "{backing:?} skip {skip}: pages left above level 3");
            table_pages.push(s.table_pages);
            // A second split finds nothing to do and, with SKIP_LEVEL3, still visits no page.
            pt.reset_stats();
            let opts = pgtable::SplitOpts { skip_target_level: skip, ..pgtable::SplitOpts::to(3) };
            assert_eq!(pt.split_with(&mut tlb, IntermPhysAddr::new(SLOT), SLOT_SIZE, opts).unwrap(), 0);
            assert_eq!(pt.stats().walk.at_level(3), if skip { 0 } else { pages });
            // The options went with the calls: a plain split (the fault path's) skips level 3.
            pt.reset_stats();
            assert_eq!(pt.split(&mut tlb, IntermPhysAddr::new(SLOT), SLOT_SIZE, 3, false).unwrap(), 0);
            assert_eq!(pt.stats().walk.at_level(3), 0, "a later split inherits nothing");
        }
        assert_eq!(table_pages[0], table_pages[1], "{backing:?}: same tables either way");
    }
}
