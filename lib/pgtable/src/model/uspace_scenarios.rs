//! User address spaces under the user-space model ([`super::uspace`]): mprotect seen by every
//! CPU running the space, PROT_NONE -> RW without a TLBI, lazy relaxation accepted (and its
//! spurious faults fixed) while an elided restriction is rejected, ASID roll-over with two
//! CPUs, the seeded bugs each caught, and random sequences of map / mprotect / munmap /
//! switch / access over more spaces than ASIDs.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::uspace::{Access, UModel, BASE};
use crate::addr::PAGE_SIZE;
use crate::asid::AsidMutation;
use crate::attrs::Perms;
use crate::mutation::Mutation;

fn va(page: u64) -> u64 {
    BASE + page * PAGE_SIZE
}

fn clean(m: &UModel, what: &str) {
    if let Err(e) = m.verdict() {
        panic!("after {what}:\n{e}");
    }
}

fn tlbis(m: &UModel, s: usize) -> u64 {
    m.spaces[s].h.tlb.counters.tlbi_total()
}

#[test]
fn mprotect_read_only_reaches_every_cpu_running_the_space() {
    let mut m = UModel::new(2, 8, false);
    m.map(0, 0, 0, 8, 0x1_0000_0000);
    m.switch(1, Some(0));
    for c in 0..2 {
        for p in 0..8 {
            assert_eq!(m.access(c, va(p), true), Access::Done);
        }
    }
    m.protect(0, 0, 0, 8, Perms::RO);
    clean(&m, "RW -> RO with both CPUs running the space");
    for c in 0..2 {
        assert_eq!(m.access(c, va(3), true), Access::Denied, "CPU {c} writes after PROT_READ");
        assert_eq!(m.access(c, va(3), false), Access::Done);
    }
    clean(&m, "accesses");
}

#[test]
fn none_to_rw_costs_no_tlbi_and_every_access_succeeds() {
    let mut m = UModel::new(1, 8, false);
    m.map(0, 0, 0, 16, 0x1_0000_0000);
    m.switch(1, Some(0));
    m.protect(0, 0, 0, 16, Perms::NONE);
    for c in 0..2 {
        assert_eq!(m.access(c, va(5), false), Access::Denied, "PROT_NONE");
    }
    let before = tlbis(&m, 0);
    m.protect(0, 0, 0, 16, Perms::RW);
    assert_eq!(tlbis(&m, 0) - before, 0, "NONE -> RW needs no TLBI");
    for c in 0..2 {
        for p in 0..16 {
            assert_eq!(m.access(c, va(p), true), Access::Done);
        }
    }
    clean(&m, "NONE -> RW");
}

#[test]
fn lazy_relaxation_is_accepted_and_its_spurious_faults_are_fixed() {
    let mut m = UModel::new(1, 8, true);
    m.map(0, 0, 0, 8, 0x1_0000_0000);
    m.switch(1, Some(0));
    m.protect(0, 0, 0, 8, Perms::RO);
    for c in 0..2 {
        for p in 0..8 {
            assert_eq!(m.access(c, va(p), false), Access::Done);
        }
    }
    let before = tlbis(&m, 0);
    m.protect(0, 0, 0, 8, Perms::RW);
    assert_eq!(tlbis(&m, 0) - before, 0, "RO -> RW left to lazy relaxation");
    assert_eq!(m.spaces[0].h.pt.stats().lazy_relaxed, 8);
    clean(&m, "lazy RO -> RW (stale read-only entries are fine)");
    for c in 0..2 {
        assert_eq!(m.access(c, va(2), true), Access::Spurious, "CPU {c}: stale RO entry, tables RW");
        assert_eq!(m.access(c, va(2), true), Access::Done, "fixed by the local TLBI");
    }
    assert_eq!(m.spurious, 2);
    // NX -> X is lazy too; X -> NX and RW -> RO are not.
    let before = tlbis(&m, 0);
    m.protect(0, 0, 0, 8, Perms::RW | Perms::USER_EXEC);
    assert_eq!(tlbis(&m, 0) - before, 0);
    m.protect(0, 0, 0, 8, Perms::RO);
    assert!(tlbis(&m, 0) > before, "a restriction is flushed");
    clean(&m, "restrictions after lazy upgrades");
}

#[test]
fn an_elided_restriction_is_caught() {
    let mut m = UModel::new(1, 8, true);
    m.spaces[0].h.mutate(Mutation::LazyRelaxAnyPermission);
    m.map(0, 0, 0, 4, 0x1_0000_0000);
    m.switch(1, Some(0));
    m.protect(0, 0, 0, 4, Perms::RO);
    let e = m.verdict().expect_err("RW -> RO left unflushed must be caught");
    assert!(e.contains("the tables grant only"), "{e}");
}

#[test]
fn a_spurious_fault_fix_without_the_local_tlbi_is_caught() {
    let mut m = UModel::new(1, 8, true);
    m.fix_spurious = false;
    m.map(0, 0, 0, 1, 0x1_0000_0000);
    m.protect(0, 0, 0, 1, Perms::RO);
    assert_eq!(m.access(0, va(0), false), Access::Done);
    m.protect(0, 0, 0, 1, Perms::RW);
    m.access(0, va(0), true);
    let e = m.verdict().expect_err("the stale entry refaults");
    assert!(e.contains("faults again"), "{e}");
}

/// CPU 1 runs spaces 0, 1, 2 in turn (ASIDs 1-3 of a 2-bit allocator), then space 3: roll-over.
fn rollover(m: &mut UModel) {
    for s in 0..3 {
        m.map(1, s, 0, 2, 0x1_0000_0000 * (s as u64 + 1));
        assert_eq!(m.access(1, va(0), true), Access::Done);
    }
    m.switch(1, Some(3));
    m.map(1, 3, 1, 1, 0x9_0000_0000);
}

#[test]
fn asid_rollover_with_two_cpus_is_clean() {
    let mut m = UModel::new(5, 2, false);
    m.switch(0, Some(4));
    rollover(&mut m);
    assert!(m.rollovers >= 1, "{} roll-overs", m.rollovers);
    // The space CPU 0 ran at the roll-over keeps its number; everything still agrees.
    m.protect(0, 4, 0, 1, Perms::RO);
    for s in [0, 1, 2, 3, 0, 4] {
        m.switch(1, Some(s));
    }
    clean(&m, "roll-over");
}

#[test]
fn a_rollover_without_local_flushes_is_caught() {
    let mut m = UModel::new(5, 2, false);
    m.asids.seed_bug(AsidMutation::NoFlushOnRollover);
    rollover(&mut m);
    let e = m.verdict().expect_err("space 3 reuses space 0's ASID over its stale entries");
    assert!(e.contains("read from space 0"), "{e}");
}

#[test]
fn a_rollover_that_forgets_running_asids_is_caught() {
    let mut m = UModel::new(5, 2, false);
    m.asids.seed_bug(AsidMutation::NoReserveActive);
    m.switch(0, Some(4));
    rollover(&mut m);
    let e = m.verdict().expect_err("two CPUs under one ASID");
    assert!(e.contains("under one ASID"), "{e}");
}

#[test]
fn tlb_maintenance_by_a_stale_asid_is_caught() {
    // After a roll-over space 0 runs under a new number; a table still naming the old one
    // flushes nothing the CPUs hold.
    let mut m = UModel::new(5, 2, false);
    rollover(&mut m);
    m.sync_asid = false;
    m.switch(0, Some(2));
    m.switch(0, Some(0));
    m.switch(1, Some(0));
    assert_eq!(m.access(1, va(0), true), Access::Done);
    m.protect(0, 0, 0, 2, Perms::RO);
    assert!(m.verdict().is_err(), "stale writable entry after mprotect");
}

// ---- random sequences ----------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Switch { cpu: usize, space: Option<usize> },
    Map { cpu: usize, space: usize, page: u64, pages: u64 },
    Protect { cpu: usize, space: usize, page: u64, pages: u64, perms: u8 },
    Unmap { cpu: usize, space: usize, page: u64, pages: u64 },
    Access { cpu: usize, page: u64, write: bool },
}

const SPACES: usize = 4;
const PAGES: u64 = 6;

fn op() -> impl Strategy<Value = Op> {
    let cpu = 0..2usize;
    let space = 0..SPACES;
    let page = 0..PAGES;
    let pages = 1..4u64;
    prop_oneof![
        1 => (cpu.clone(), proptest::option::of(space.clone())).prop_map(|(cpu, space)| Op::Switch { cpu, space }),
        2 => (cpu.clone(), space.clone(), page.clone(), pages.clone()).prop_map(|(cpu, space, page, pages)| Op::Map {
            cpu,
            space,
            page,
            pages
        }),
        3 => (cpu.clone(), space.clone(), page.clone(), pages.clone(), 0..4u8)
            .prop_map(|(cpu, space, page, pages, perms)| Op::Protect { cpu, space, page, pages, perms }),
        1 => (cpu.clone(), space, page.clone(), pages).prop_map(|(cpu, space, page, pages)| Op::Unmap {
            cpu,
            space,
            page,
            pages
        }),
        5 => (cpu, page, any::<bool>()).prop_map(|(cpu, page, write)| Op::Access { cpu, page, write }),
    ]
}

fn perms(p: u8) -> Perms {
    [Perms::NONE, Perms::RO, Perms::RW, Perms::RO | Perms::USER_EXEC][p as usize % 4]
}

/// Runs `ops`; `setup` seeds a bug. Returns the model's verdict and, if clean, what the
/// sequence exercised: (roll-overs, spurious faults, lazy relaxations).
fn run(ops: &[Op], lazy: bool, setup: impl Fn(&mut UModel)) -> Result<(u64, u64, u64), String> {
    let mut m = UModel::new(SPACES, 2, lazy);
    setup(&mut m);
    let mut next_pa = 0x1_0000_0000u64;
    for o in ops {
        match *o {
            Op::Switch { cpu, space } => m.switch(cpu, space),
            Op::Map { cpu, space, page, pages } => {
                let pages = pages.min(PAGES - page);
                m.map(cpu, space, page, pages, next_pa);
                next_pa += 0x10_0000;
            }
            Op::Protect { cpu, space, page, pages, perms: p } => {
                m.protect(cpu, space, page, pages.min(PAGES - page), perms(p))
            }
            Op::Unmap { cpu, space, page, pages } => m.unmap(cpu, space, page, pages.min(PAGES - page)),
            Op::Access { cpu, page, write } => {
                m.access(cpu, va(page), write);
            }
        }
        m.verdict()?;
    }
    Ok((m.rollovers, m.spurious, m.spaces.iter().map(|s| s.h.pt.stats().lazy_relaxed).sum::<u64>()))
}

/// A runner configuration with a fixed seed: tests that assert a seeded bug is found or a case
/// is exercised must not depend on the luck of a random seed.
fn fixed_seed(cases: u32) -> Config {
    Config { cases, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(1), ..Config::default() }
}

fn cases() -> u32 {
    let long = std::env::var("PGTABLE_LONG").is_ok_and(|v| v == "1");
    std::env::var("PGTABLE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(if long { 20_000 } else { 300 })
}

#[test]
fn random_sequences_over_more_spaces_than_asids() {
    let seen = std::cell::Cell::new((0u64, 0u64, 0u64));
    for lazy in [false, true] {
        // A fixed seed: the test also asserts what the sequences exercised, which a random
        // seed can miss (spurious faults are rare: one seed in four saw none in 600 sequences).
        let mut runner = TestRunner::new(fixed_seed(cases()));
        runner
            .run(&proptest::collection::vec(op(), 1..120), |ops| {
                let (r, s, l) =
                    run(&ops, lazy, |_| {}).map_err(|e| TestCaseError::fail(format!("lazy {lazy}: {e}")))?;
                let t = seen.get();
                seen.set((t.0 + r, t.1 + s, t.2 + l));
                Ok(())
            })
            .unwrap();
    }
    let (rollovers, spurious, lazy) = seen.get();
    assert!(
        rollovers > 0 && spurious > 0 && lazy > 0,
        "exercised: {rollovers} roll-overs, {spurious} spurious faults, {lazy} lazy relaxations"
    );
}

#[test]
fn random_sequences_catch_every_seeded_bug() {
    type Seed = (&'static str, bool, fn(&mut UModel));
    let seeds: [Seed; 4] = [
        ("no flush on roll-over", false, |m| m.asids.seed_bug(AsidMutation::NoFlushOnRollover)),
        ("no reserved ASIDs", false, |m| m.asids.seed_bug(AsidMutation::NoReserveActive)),
        ("stale ASID in the table", false, |m| m.sync_asid = false),
        ("lazy relaxation of restrictions", true, |m| {
            for s in m.spaces.iter_mut() {
                s.h.mutate(Mutation::LazyRelaxAnyPermission);
            }
        }),
    ];
    for (name, lazy, seed) in seeds {
        let mut runner = TestRunner::new(fixed_seed(2000));
        let found = runner.run(&proptest::collection::vec(op(), 1..80), |ops| {
            run(&ops, lazy, seed).map(|_| ()).map_err(TestCaseError::fail)
        });
        assert!(found.is_err(), "random sequences never caught the seeded bug {name:?}");
    }
}
