//! The memslot / dirty-logging / walker / counter hypercalls: every bad argument returns its
//! documented error code (the guest's `test=memslot-errors` checks each one), nothing leaks.

use tests::{boot, config};

#[test]
fn every_bad_memslot_argument_returns_its_error_code() {
    let run = boot(config(|c| {
        c.mem = Some(tests::mem("2G"));
        c.bootargs = "test=memslot-errors hyp.slotpool=64M hyp.pool=16M".into();
    }));
    run.expect_exit(0);
    let hb = run.record("hyp_boot");
    assert_eq!(hb.u64("slotpool_bytes"), Some(64 << 20), "{}", run.dump());
    assert_eq!(hb.u64("frame_pool_bytes"), Some(16 << 20), "{}", run.dump());
    // The count is the number of checks in kernel/src/selftest/memslot.rs::errors (with the
    // 100-page slot's exact bitmap and the overlaps with a full slot table); each one fails the
    // run on a wrong code, so fewer would mean some were skipped.
    run.expect_output("kernel: memslot-errors: 72 checks passed, stage 2 back to");
}

#[test]
fn memslot_calls_without_a_pool_say_no_memory() {
    // No hyp.slotpool: creating a memslot is refused; the call storm then hits the implemented
    // calls with arbitrary arguments and the hypervisor keeps running.
    let run = boot(config(|c| c.bootargs = "test=memslot-nopool,bad-calls".into()));
    run.expect_exit(0);
    assert_eq!(run.record("hyp_boot").u64("slotpool_bytes"), Some(0));
    run.expect_output("kernel: memslot-nopool: every memslot refused with NO_MEMORY");
    run.expect_output("hypervisor still running");
}

#[test]
#[ignore = "--long: exhausting a 192 MiB frame pool takes about a minute under TCG"]
fn long_memslot_errors_with_the_default_pool_of_3g() {
    // As docs/boot-words.md shows it: no hyp.pool, so the pool follows RAM: RAM / 16 in whole
    // 2 MiB blocks, the machine's RAM being the guest's 3 GiB and the hypervisor's share on top
    // (3352 MiB with this slot pool: a 210 MiB pool).
    let run = boot(config(|c| {
        c.mem = Some(tests::mem("3G"));
        c.bootargs = "test=memslot-errors hyp.slotpool=64M".into();
    }));
    run.expect_exit(0);
    let rec = run.record("hyp_boot");
    let field = |f: &str| rec.u64(f).unwrap_or_else(|| panic!("hyp_boot has no {f}: {}", run.dump()));
    let ram = field("guest_ram_bytes") + field("hyp_reserved_bytes") + field("spare_bytes");
    assert_eq!(field("guest_ram_bytes"), 3 << 30, "{}", run.dump());
    assert_eq!(field("frame_pool_bytes"), (ram / 16).next_multiple_of(2 << 20), "{}", run.dump());
    run.expect_output("kernel: memslot-errors: 72 checks passed");
}
