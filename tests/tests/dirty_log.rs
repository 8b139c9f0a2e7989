//! Dirty tracking: a guest writes a known random set of pages of a memslot; the dirty bitmap
//! must equal exactly that set, for every backing (4 KiB, 2 MiB, 1 GiB), in both scenarios
//! (enable write-protects and splits eagerly; manual-protect with initially-set, where each
//! clear protects and splits) plus lazy splitting on fault, with 1 and 4 vCPUs writing.
//! `hyp.check-split` makes the hypervisor check every page after each split against the
//! memslot's pool mapping (same frame, read-only, 4 KiB). Each combination runs under one of
//! the three split walkers, every walker meeting every backing and every scenario.

use tests::{boot, config, Run};

const BACKINGS: [&str; 3] = ["4K", "2M", "1G"];
const SCENARIOS: [&str; 3] = ["enable-split", "manual-protect", "enable-lazy"];

fn run_with(smp: u32) -> Run {
    let run = boot(config(|c| {
        c.smp = smp;
        c.mem = Some(tests::mem("3G"));
        c.bootargs = "test=dirty-log hyp.slotpool=1G hyp.check-split".into();
    }));
    run.expect_exit(0);
    run.expect_output("kernel: dirty-log: every bitmap matched exactly");
    run
}

fn check(run: &Run, cpus: u64) {
    let recs = run.records("dirty_log");
    assert_eq!(recs.len(), BACKINGS.len() * SCENARIOS.len(), "{}", run.dump());
    for b in BACKINGS {
        for s in SCENARIOS {
            let r = recs
                .iter()
                .find(|r| r.str("backing") == Some(b) && r.str("scenario") == Some(s))
                .unwrap_or_else(|| panic!("no record for {b} {s}\n{}", run.dump()));
            assert_eq!(r.u64("cpus"), Some(cpus), "{}", run.dump());
            let dirty = r.u64("dirty_pages").unwrap();
            // Two rounds of 300 random picks (duplicates collapse): each dirty page faulted at
            // least once.
            assert!((300..=600).contains(&dirty), "{b} {s}: {dirty} dirty pages\n{}", run.dump());
            assert!(r.u64("faults").unwrap() >= dirty, "{b} {s}: fewer faults than dirty pages");
            // Only the baseline walker visits level 3 (SKIP_LEVEL3 and summary never do); on an
            // already-split slot it visits every page the split walks cover.
            let l3 = r.u64("split_visits_l3").unwrap();
            match (r.str("walker").unwrap(), b, s) {
                ("baseline", "4K", "enable-split") => assert_eq!(l3, 16384, "{b} {s}: every page of 64 MiB"),
                ("baseline", "4K", "manual-protect") => assert_eq!(l3, 3 * 16384, "{b} {s}: three clears"),
                ("baseline", _, _) => {}
                (w, _, _) => assert_eq!(l3, 0, "{b} {s} {w}: level 3 visited"),
            }
            let split = r.u64("blocks_split").unwrap();
            match (b, s) {
                ("4K", _) => assert_eq!(split, 0, "{b} {s}: nothing to split"),
                // Eager: every 2 MiB block of the 64 MiB slot; the 1 GiB block once.
                ("2M", "enable-split") | ("2M", "manual-protect") => assert_eq!(split, 32, "{b} {s}"),
                ("1G", "enable-split") | ("1G", "manual-protect") => assert_eq!(split, 1, "{b} {s}"),
                // Lazy: only blocks that were written to are split; a 1 GiB block is one block.
                ("1G", _) => assert_eq!(split, 1, "{b} {s}: a lazy 1 GiB split splits exactly one block"),
                _ => assert!((1..=32).contains(&split), "{b} {s}: split {split}"),
            }
            // After disabling, only dirty-log write faults happen: each makes its page writable
            // with a TLBI.
            let (late_faults, late_tlbi) = (r.u64("late_faults").unwrap(), r.u64("late_tlbi").unwrap());
            assert!(late_faults > 0, "{b} {s}: no write fault after disable");
            assert!(late_tlbi >= late_faults, "{b} {s}: {late_faults} write faults but {late_tlbi} TLBIs");
        }
    }
}

#[test]
fn dirty_bitmap_is_exact_with_one_vcpu_writing() {
    let run = run_with(1);
    check(&run, 1);
}

#[test]
fn dirty_bitmap_is_exact_with_four_vcpus_writing() {
    let run = run_with(4);
    check(&run, 4);
}
