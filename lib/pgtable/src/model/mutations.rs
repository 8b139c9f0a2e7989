//! The seeded bugs, each caught by the checker.

use super::harness::Harness;
use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::mutation::Mutation;
use crate::regime::{Regime, VaHalf};
use crate::table::SplitOpts;
use std::format;

const MIB: u64 = 1 << 20;

/// Runs `ops` on a live EL1 user table with pages and a 2 MiB block mapped; returns the
/// checker's verdict.
fn run(m: Mutation, ops: impl FnOnce(&mut Harness)) -> Result<(), String> {
    run_on(m, false, ops)
}

/// [`run`], on a table with BBML2 when `bbml2`.
fn run_on(m: Mutation, bbml2: bool, ops: impl FnOnce(&mut Harness)) -> Result<(), String> {
    let regime = Regime::El1 { asid: 2, half: VaHalf::Lower };
    let mut h = Harness::new(regime, bbml2, false);
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    h.pt.map(&mut h.tlb, VirtAddr::new(0x40_0000), 2 * MIB, PhysAddr::new(0x8000_0000), rw, Constraints::NONE).unwrap();
    h.pt.map(
        &mut h.tlb,
        VirtAddr::new(0x80_0000),
        8 * PAGE_SIZE,
        PhysAddr::new(0x9000_0000),
        rw,
        Constraints::PAGES_ONLY,
    )
    .unwrap();
    h.go_live();
    h.check().expect("clean before the mutation");
    h.mutate(m);
    ops(&mut h);
    h.check()
}

fn split(h: &mut Harness) {
    h.pt.protect(&mut h.tlb, VirtAddr::new(0x40_3000), PAGE_SIZE, Perms::READ | Perms::USER).unwrap();
}
fn rw_to_ro(h: &mut Harness) {
    h.pt.protect(&mut h.tlb, VirtAddr::new(0x80_0000), PAGE_SIZE, Perms::READ | Perms::USER).unwrap();
}
fn change_output(h: &mut Harness) {
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    h.pt.remap(&mut h.tlb, VirtAddr::new(0x80_0000), PAGE_SIZE, PhysAddr::new(0xa000_0000), rw, Constraints::NONE)
        .unwrap();
}
fn free_table(h: &mut Harness) {
    h.pt.unmap(&mut h.tlb, VirtAddr::new(0x80_0000), 8 * PAGE_SIZE).unwrap();
}

/// Write-protects the 2 MiB holding the pages (the level-2 entry gets "no writable below"),
/// then makes one page writable again (which must clear it).
fn writable_below_summary(h: &mut Harness) {
    h.pt.write_protect(&mut h.tlb, VirtAddr::new(0x80_0000), 2 * MIB).unwrap();
    h.pt.protect(&mut h.tlb, VirtAddr::new(0x80_1000), PAGE_SIZE, Perms::RW | Perms::USER).unwrap();
}

/// Write-protects the 2 MiB holding the pages, unmaps one and maps a writable page there again:
/// the one-page map (the page fault's path, into the existing level-3 table) must clear the
/// summary on its way down.
fn map_page_below_summary(h: &mut Harness) {
    h.pt.write_protect(&mut h.tlb, VirtAddr::new(0x80_0000), 2 * MIB).unwrap();
    h.pt.unmap(&mut h.tlb, VirtAddr::new(0x80_1000), PAGE_SIZE).unwrap();
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    h.pt.map(&mut h.tlb, VirtAddr::new(0x80_1000), PAGE_SIZE, PhysAddr::new(0x9000_1000), rw, Constraints::PAGES_ONLY)
        .unwrap();
}

/// Maps 4 MiB of pages where no table exists yet: a new level-2 table and two level-3 tables
/// filled whole are linked into the live table.
fn map_new_tables(h: &mut Harness) {
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    h.pt.map(&mut h.tlb, VirtAddr::new(0x4000_0000), 4 * MIB, PhysAddr::new(0xb000_0000), rw, Constraints::PAGES_ONLY)
        .unwrap();
}

/// Makes the 8 pages read-only: one `protect` inside one level-3 table, whose first page is
/// decided alone and the other 7 are one run of like pages.
fn rw_to_ro_run(h: &mut Harness) {
    h.pt.protect(&mut h.tlb, VirtAddr::new(0x80_0000), 8 * PAGE_SIZE, Perms::READ | Perms::USER).unwrap();
}

/// Makes page 1 of the 8 read-only, then all 8 read-only: page 1 must stay read-only (a run
/// of writable pages may not take it in).
fn ro_among_rw(h: &mut Harness) {
    h.pt.protect(&mut h.tlb, VirtAddr::new(0x80_1000), PAGE_SIZE, Perms::READ | Perms::USER).unwrap();
    rw_to_ro_run(h);
    let t = h.pt.translate(VirtAddr::new(0x80_1000));
    if t.map(|t| t.attrs.perms) != Some(Perms::READ | Perms::USER) {
        h.model.borrow_mut().violations.push(format!("page 1 after protect to read-only: {t:?}"));
    }
}

/// Unmaps 3 of the 8 pages the way a user address space does (`unmap_pages_of`: the direct
/// path into their level-3 table), checking it is told exactly their outputs.
fn unmap_pages_of(h: &mut Harness) {
    let mut seen = std::vec::Vec::new();
    h.pt.unmap_pages_of(&mut h.tlb, VirtAddr::new(0x80_2000), 3 * PAGE_SIZE, |pa| seen.push(pa.as_u64())).unwrap();
    if seen != [0x9000_2000, 0x9000_3000, 0x9000_4000] {
        h.model.borrow_mut().violations.push(format!("unmap_pages_of told {seen:x?}"));
    }
}

/// Maps 8 MiB of 2 MiB blocks and splits them to pages: one run of four blocks.
fn split_block_run(h: &mut Harness) {
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    h.pt.map(&mut h.tlb, VirtAddr::new(0x4000_0000), 8 * MIB, PhysAddr::new(0xc000_0000), rw, Constraints::NONE)
        .unwrap();
    h.pt.split(&mut h.tlb, VirtAddr::new(0x4000_0000), 8 * MIB, 3, false).unwrap();
}

/// Maps a 1 GiB block, then splits it and the 2 MiB block to read-only pages in one call each
/// (the split that write-protects: level-1 blocks through `install_table`, level-2 blocks
/// through the run of blocks).
fn split_read_only(h: &mut Harness) {
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    let gib = VirtAddr::new(0x4000_0000);
    h.pt.map(&mut h.tlb, gib, 1 << 30, PhysAddr::new(0x1_0000_0000), rw, Constraints::NONE).unwrap();
    let opts = SplitOpts { read_only: true, ..SplitOpts::to(3) };
    h.pt.split_with(&mut h.tlb, VirtAddr::new(0x40_0000), 2 * MIB, opts).unwrap();
    h.pt.split_with(&mut h.tlb, gib, 1 << 30, opts).unwrap();
    let t = h.pt.translate(VirtAddr::new(0x4000_5000)).unwrap();
    assert_eq!((t.level, t.attrs.perms), (3, Perms::READ | Perms::USER));
}

/// A page fault's new page next to the 8 pages (`map_fresh_page`, its frame from the
/// model's allocator, which counts it written until an inner-shareable DSB), then the same
/// page again, which must find it occupied.
fn fresh_page(h: &mut Harness) {
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    let va = VirtAddr::new(0x80_8000);
    let first = h.pt.map_fresh_page(&mut h.tlb, va, rw);
    let again = h.pt.map_fresh_page(&mut h.tlb, va, rw);
    let mapped = h.pt.translate(va).map(|t| t.phys);
    if !matches!(first, crate::FreshPage::Mapped(pa) if Some(pa) == mapped) || again != crate::FreshPage::Occupied {
        h.model.borrow_mut().violations.push(format!("map_fresh_page: {first:?}, then {again:?}, maps {mapped:?}"));
    }
}

/// Write-protects the 2 MiB holding the pages, unmaps one and maps a writable fresh page
/// there: the fresh path must leave it to `map` (the "no writable below" summary on its way
/// down is set), which clears the summary.
fn fresh_page_below_summary(h: &mut Harness) {
    h.pt.write_protect(&mut h.tlb, VirtAddr::new(0x80_0000), 2 * MIB).unwrap();
    h.pt.unmap(&mut h.tlb, VirtAddr::new(0x80_1000), PAGE_SIZE).unwrap();
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    let va = VirtAddr::new(0x80_1000);
    if h.pt.map_fresh_page(&mut h.tlb, va, rw) == crate::FreshPage::Declined {
        h.pt.map(&mut h.tlb, va, PAGE_SIZE, PhysAddr::new(0x9000_1000), rw, Constraints::PAGES_ONLY).unwrap();
    }
}

/// One operation of the mutation tests.
type TestOp = fn(&mut Harness);

/// Every operation of the mutation tests, each correct without a mutation.
const OPS: [(&str, TestOp); 14] = [
    ("split", split),
    ("rw_to_ro", rw_to_ro),
    ("change_output", change_output),
    ("free_table", free_table),
    ("writable_below_summary", writable_below_summary),
    ("map_page_below_summary", map_page_below_summary),
    ("map_new_tables", map_new_tables),
    ("rw_to_ro_run", rw_to_ro_run),
    ("ro_among_rw", ro_among_rw),
    ("unmap_pages_of", unmap_pages_of),
    ("split_block_run", split_block_run),
    ("split_read_only", split_read_only),
    ("fresh_page", fresh_page),
    ("fresh_page_below_summary", fresh_page_below_summary),
];

#[test]
fn unmutated_operations_are_clean() {
    for (name, op) in OPS {
        assert_eq!(run(Mutation::None, op), Ok(()), "{name}");
    }
    assert_eq!(run_on(Mutation::None, true, split_read_only), Ok(()), "split_read_only under BBML2");
}

fn caught(m: Mutation, op: fn(&mut Harness), expect: &str) {
    match run(m, op) {
        Ok(()) => panic!("{m:?} was not caught"),
        Err(e) => assert!(e.contains(expect), "{m:?}: unexpected report:\n{e}"),
    }
}

#[test]
fn mutation_skip_bbm_on_split_is_caught() {
    caught(Mutation::SkipBbmOnSplit, split, "break-before-make violated");
}

#[test]
fn mutation_elide_tlbi_rw_to_ro_is_caught() {
    caught(Mutation::ElideTlbiRwToRo, rw_to_ro, "stale TLB entry");
}

#[test]
fn mutation_elide_tlbi_on_output_change_is_caught() {
    caught(Mutation::ElideTlbiOaChange, change_output, "break-before-make violated");
}

#[test]
fn mutation_free_table_before_tlbi_is_caught() {
    caught(Mutation::FreeTableBeforeTlbi, free_table, "walk cache");
}

#[test]
fn mutation_no_dsb_before_tlbi_is_caught() {
    caught(Mutation::NoDsbBeforeTlbi, rw_to_ro, "stale TLB entry");
}

#[test]
fn mutation_keep_no_writable_is_caught() {
    caught(Mutation::KeepNoWritable, writable_below_summary, "stale summary");
    caught(Mutation::KeepNoWritable, map_page_below_summary, "stale summary");
    caught(Mutation::KeepNoWritable, fresh_page_below_summary, "stale summary");
}

#[test]
fn mutation_map_fresh_unpublished_is_caught() {
    caught(Mutation::MapFreshUnpublished, fresh_page, "before its contents were made visible");
}

#[test]
fn mutation_link_unpublished_table_is_caught() {
    caught(Mutation::LinkUnpublishedTable, map_new_tables, "before its contents were made visible");
}

#[test]
fn mutation_protect_run_unflushed_is_caught() {
    caught(Mutation::ProtectRunUnflushed, rw_to_ro_run, "stale TLB entry");
}

#[test]
fn mutation_protect_run_wide_kind_is_caught() {
    caught(Mutation::ProtectRunWideKind, ro_among_rw, "page 1 after protect to read-only");
}

#[test]
fn mutation_unmap_pages_unflushed_is_caught() {
    caught(Mutation::UnmapPagesUnflushed, unmap_pages_of, "stale TLB entry");
}

#[test]
fn mutation_split_run_breaks_first_is_caught() {
    caught(Mutation::SplitRunBreaksFirst, split_block_run, "break-before-make violated");
}

#[test]
fn mutation_split_read_only_unflushed_is_caught() {
    match run_on(Mutation::SplitReadOnlyUnflushed, true, split_read_only) {
        Ok(()) => panic!("SplitReadOnlyUnflushed was not caught"),
        Err(e) => assert!(e.contains("stale TLB entry"), "unexpected report:\n{e}"),
    }
}

#[test]
#[ignore]
fn show_reports() {
    for m in Mutation::ALL {
        for (name, op) in OPS {
            if let Err(e) = run(m, op) {
                println!("{m:?} / {name}:\n  {}", e.replace('\n', "\n  "));
            }
        }
    }
}
