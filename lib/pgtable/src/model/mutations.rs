//! The seeded bugs, each caught by the checker.

use super::harness::Harness;
use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::mutation::Mutation;
use crate::regime::{Regime, VaHalf};

const MIB: u64 = 1 << 20;

/// Runs `ops` on a live EL1 user table with pages and a 2 MiB block mapped; returns the
/// checker's verdict.
fn run(m: Mutation, ops: impl FnOnce(&mut Harness)) -> Result<(), String> {
    let regime = Regime::El1 { asid: 2, half: VaHalf::Lower };
    let mut h = Harness::new(regime, false, false);
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

/// Maps 4 MiB of pages where no table exists yet: a new level-2 table and two level-3 tables
/// filled whole are linked into the live table.
fn map_new_tables(h: &mut Harness) {
    let rw = Attributes::normal(Perms::RW | Perms::USER);
    h.pt.map(&mut h.tlb, VirtAddr::new(0x4000_0000), 4 * MIB, PhysAddr::new(0xb000_0000), rw, Constraints::PAGES_ONLY)
        .unwrap();
}

/// One operation of the mutation tests.
type TestOp = fn(&mut Harness);

/// Every operation of the mutation tests, each correct without a mutation.
const OPS: [(&str, TestOp); 6] = [
    ("split", split),
    ("rw_to_ro", rw_to_ro),
    ("change_output", change_output),
    ("free_table", free_table),
    ("writable_below_summary", writable_below_summary),
    ("map_new_tables", map_new_tables),
];

#[test]
fn unmutated_operations_are_clean() {
    for (name, op) in OPS {
        assert_eq!(run(Mutation::None, op), Ok(()), "{name}");
    }
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
}

#[test]
fn mutation_link_unpublished_table_is_caught() {
    caught(Mutation::LinkUnpublishedTable, map_new_tables, "before its contents were made visible");
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
