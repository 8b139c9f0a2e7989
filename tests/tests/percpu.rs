//! Per-CPU data and per-CPU kernel page tables (`kernel/src/percpu/`): the this_cpu API on every
//! CPU in every mode (`test=percpu`), and the stress program `user/src/bin/percpu.rs`: tasks
//! preempted inside the kernel and migrated while they add to per-CPU counters, on 4 and 8
//! CPUs, baseline and window in one boot. QEMU runs with `-singlestep` (one instruction per
//! translation block): otherwise TCG takes the tick only between blocks and never in the middle
//! of a read-modify-write, and the seeded bugs below could not show. The seeded bugs must make
//! the same checks fail.

use abi::report::ParsedRecord;
use tests::{boot, config, Run};

fn run(smp: u32, bootargs: &str) -> Run {
    boot(config(|c| {
        c.smp = smp;
        c.singlestep = true;
        c.bootargs = bootargs.into();
    }))
}

fn stress<'a>(r: &'a Run, mode: &str) -> &'a ParsedRecord {
    let s = r.records("percpu_stress");
    let m: Vec<_> = s.iter().filter(|x| x.str("mode") == Some(mode)).collect();
    assert_eq!(m.len(), 1, "one percpu_stress record for {mode}\n{}", r.dump());
    m[0]
}

/// The stress record of `mode` shows exact sums, intact canaries, the late mapping on every
/// CPU, tasks preempted and migrated, and (window) the shootdown check: a window page remapped
/// with the shootdown as its TLBI reads as the new frame on every CPU.
fn stress_held(r: &Run, mode: &str, cpus: u64) {
    let s = stress(r, mode);
    let all = (1u64 << cpus) - 1;
    let want = s.u64("adds_each").unwrap();
    assert!(want > 0);
    assert_eq!(s.u64("cpus"), Some(cpus), "{}", r.dump());
    assert_eq!((s.u64("sum_static"), s.u64("sum_dynamic")), (Some(want), Some(want)), "{mode}: sums\n{}", r.dump());
    assert_eq!(s.bool("canaries_ok"), Some(true), "{mode}: canaries");
    assert_eq!(s.u64("window_mismatches"), Some(0), "{mode}: window");
    assert_eq!(s.u64("late_map_seen"), Some(all), "{mode}: late mapping\n{}", r.dump());
    assert_eq!(s.u64("shootdowns"), Some(cpus), "{mode}: every CPU answers a shootdown IPI");
    assert!(s.u64("preempted").unwrap() > 0, "{mode}: no task was preempted in the kernel\n{}", r.dump());
    assert!(s.u64("pulls").unwrap() + s.u64("pushes").unwrap() > 0, "{mode}: no migration\n{}", r.dump());
    if mode == "window" {
        assert!(s.u64("window_checks").unwrap() > 0, "the tick never checked the window\n{}", r.dump());
        assert_eq!(
            s.u64("remap_seen"),
            Some(all),
            "a window page remapped with the shootdown as its TLBI: every CPU reads the new frame\n{}",
            r.dump()
        );
    }
}

fn api_held(r: &Run, cpus: u64) {
    let a = r.record("percpu_api");
    assert_eq!(a.u64("failures"), Some(0), "{}", r.dump());
    assert_eq!(a.u64("cpus"), Some(cpus));
    assert_eq!(a.u64("late_map_seen"), Some((1 << cpus) - 1), "{}", r.dump());
    assert!(a.u64("root_syncs").unwrap() >= cpus, "the late mapping went into every root");
}

#[test]
fn stress_on_4_cpus_baseline_and_window_in_one_boot() {
    let r = run(4, "test=percpu user=percpu:modes=base/window,rounds=6,iters=20000 tick_hz=1000");
    r.expect_exit(0);
    api_held(&r, 4);
    stress_held(&r, "base", 4);
    stress_held(&r, "window", 4);
}

#[test]
fn stress_on_8_cpus_booted_with_the_tables_off() {
    let r = run(8, "percpu_tables=off test=percpu user=percpu:modes=window/base,rounds=4,iters=20000 tick_hz=1000");
    r.expect_exit(0);
    api_held(&r, 8);
    stress_held(&r, "window", 8);
    stress_held(&r, "base", 8);
}

/// Seeded: the baseline's add without its preemption guard. Preempted between its load and its
/// store, a task writes back a stale value: the sums come out short and the program fails.
#[test]
fn seeded_missing_preempt_guard_loses_updates() {
    let r = run(4, "percpu.seed=no-guard user=percpu:modes=seeded,rounds=6,iters=20000 tick_hz=1000");
    r.expect_exit(abi::exit::GUEST_FAILURE as i32);
    let s = stress(&r, "seeded");
    assert!(s.u64("lost").unwrap() > 0, "no update lost\n{}", r.dump());
    r.expect_output("percpu: seeded: the sums are not exact");
}

/// Seeded: a plain load, add and store on the window instead of one atomic op. A task moved
/// between its load and its store writes its old CPU's value into the new CPU's copy: that copy
/// ends short or long depending on which CPU's value was larger, so either way the sums are off
/// (seen both: `"lost":0,"extra":51105` on a loaded machine).
#[test]
fn seeded_plain_rmw_on_the_window_breaks_the_sums() {
    let r = run(4, "percpu.seed=window-plain user=percpu:modes=seeded,rounds=6,iters=20000 tick_hz=1000");
    r.expect_exit(abi::exit::GUEST_FAILURE as i32);
    let s = stress(&r, "seeded");
    let off = s.u64("lost").unwrap() + s.u64("extra").unwrap();
    assert!(off > 0, "no update lost or doubled\n{}", r.dump());
    r.expect_output("percpu: seeded: the sums are not exact");
}

/// Seeded: `sync_roots` forgets CPU 1's root; the page mapped after boot faults there.
#[test]
fn seeded_missing_root_sync_is_seen_by_the_late_mapping_check() {
    let r = run(4, "percpu.seed=no-sync-cpu1 test=percpu");
    r.expect_exit(abi::exit::GUEST_FAILURE as i32);
    r.expect_output("was read right only by CPUs 0xd of 0xf");
}
