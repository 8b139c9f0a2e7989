//! The per-CPU stress test: tasks preempted and migrated while they add to per-CPU counters.
//!
//! For each mode named in `modes=` (`/`-separated; default `base/window`):
//!
//! * `base`: every CPU on the shared kernel root, adds through TPIDR_EL1 with the preemption
//!   guard (`percpu_tables` switched off for the round);
//! * `window`: every CPU on its own root, adds on the fixed-VA window;
//! * `seeded`: the bug `percpu.seed=` planted (no-guard, window-plain): the sum must come out
//!   wrong, and this program fails.
//!
//! `tasks=N` tasks (default 3 per CPU) all start bound to CPU 0 (their affinity changes and load
//! balancing spread them), and
//! each runs `rounds=R` rounds of `iters=K` adds to a static and to a dynamic per-CPU counter in
//! the kernel, where the tick preempts it (the adds run with IRQs on); every few rounds it
//! changes its affinity to one CPU and back to all, so it migrates. Then the sums over every
//! CPU's copy must be exactly N*R*K, every area's canaries intact, the tick's window check
//! clean, a page the kernel maps after boot read right on every CPU, (tables on) a window page
//! remapped with a TLB shootdown as its invalidation read as the new frame on every CPU, and
//! tasks must have been preempted and migrated. One `percpu_stress` record per mode; exit status 0 only if all held.
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::report::Record;
use abi::syscall::percpu::{self as op, method};
use abi::syscall::ANY_CPU;
use core::sync::atomic::{AtomicU64, Ordering};
use user::sys;

user::entry!(run);

const MAX_TASKS: usize = 48;
static ROUNDS: AtomicU64 = AtomicU64::new(40);
static ITERS: AtomicU64 = AtomicU64::new(2000);
static METHOD: AtomicU64 = AtomicU64::new(0);
static DYN: AtomicU64 = AtomicU64::new(0);
static NCPUS: AtomicU64 = AtomicU64::new(1);
static ERRORS: AtomicU64 = AtomicU64::new(0);
const STATIC_VAR: u64 = 0;

/// `key=N` of the arguments (checked by the kernel against `abi::programs`).
fn arg(args: &str, key: &str) -> Option<u64> {
    abi::programs::uint(args, key)
}

extern "C" fn worker(id: u64) -> ! {
    let (rounds, iters, m) =
        (ROUNDS.load(Ordering::Relaxed), ITERS.load(Ordering::Relaxed), METHOD.load(Ordering::Relaxed));
    let ncpus = NCPUS.load(Ordering::Relaxed);
    let dynv = DYN.load(Ordering::Relaxed);
    for r in 0..rounds {
        for v in [STATIC_VAR, dynv] {
            if sys::percpu(op::ADD_LOOP, v, iters, m) != Ok(iters) {
                ERRORS.fetch_add(1, Ordering::Relaxed);
            }
        }
        match r % 4 {
            1 if ncpus > 1 => {
                let _ = sys::percpu(op::AFFINITY, 1 << ((id + r) % ncpus), 0, 0);
            }
            3 => {
                let _ = sys::percpu(op::AFFINITY, u64::MAX, 0, 0);
            }
            _ => {}
        }
    }
    sys::exit(0)
}

fn run_mode(mode: &str, tasks: u64) -> bool {
    let (tables, m) = match mode {
        "base" => (0, method::BASE),
        "window" => (1, method::WINDOW),
        "seeded" => (1, method::SEEDED),
        _ => {
            user::println!("percpu: unknown mode {mode:?} (base, window, seeded)");
            return false;
        }
    };
    if let Err(e) = sys::percpu(op::SET_TABLES, tables, 0, 0) {
        user::println!("percpu: switching the tables: error {e}");
        return false;
    }
    let Ok(dynv) = sys::percpu(op::ALLOC, 8, 0, 0) else {
        user::println!("percpu: no dynamic per-CPU variable");
        return false;
    };
    DYN.store(dynv, Ordering::Relaxed);
    METHOD.store(m, Ordering::Relaxed);
    for v in [STATIC_VAR, dynv] {
        let _ = sys::percpu(op::RESET, v, 0, 0);
    }
    ERRORS.store(0, Ordering::Relaxed);
    let before = sys::percpu_stats().unwrap_or_default();
    let t0 = user::time::counter();
    let mut tids = [0u64; MAX_TASKS];
    let mut started = 0;
    for (i, t) in tids.iter_mut().enumerate().take(tasks as usize) {
        // All on CPU 0 (bound there until their first affinity change): migration spreads them.
        match user::thread::spawn(worker, i as u64, if NCPUS.load(Ordering::Relaxed) > 1 { 0 } else { ANY_CPU }) {
            Ok(tid) => {
                *t = tid;
                started += 1;
            }
            Err(e) => user::println!("percpu: spawn: error {e}"),
        }
    }
    let mut bad_exits = 0;
    for &t in &tids[..started] {
        let r = sys::wait(t);
        if r != Ok(0) {
            user::println!("percpu: {mode}: task {t}: wait gave {r:?}");
            bad_exits += 1;
        }
    }
    let ns = user::time::ticks_to_ns(user::time::counter() - t0);
    let after = sys::percpu_stats().unwrap_or_default();
    let want = started as u64 * ROUNDS.load(Ordering::Relaxed) * ITERS.load(Ordering::Relaxed);
    let sum_static = sys::percpu(op::SUM, STATIC_VAR, 0, 0).unwrap_or(0);
    let sum_dyn = sys::percpu(op::SUM, dynv, 0, 0).unwrap_or(0);
    let canaries = sys::percpu(op::CHECK, 0, 0, 0).is_ok();
    let online = (1u64 << NCPUS.load(Ordering::Relaxed)) - 1;
    let late = sys::percpu(op::LATE_MAP, 0, 0, 0).unwrap_or(0);
    // A local TLB shootdown by IPI on every CPU: each must answer.
    let shot = sys::percpu(op::SHOOTDOWN, online, 0, 0).unwrap_or(0);
    let shootdowns = sys::percpu_stats().map(|s| s.shootdowns - after.shootdowns).unwrap_or(0);
    // With the tables on: a window page remapped with the shootdown as its TLBI must read as
    // the new frame on every CPU (0: not run, the window is unmapped with the tables off).
    let remap = if tables == 1 { sys::percpu(op::SHOOTDOWN_CHECK, online, 0, 0).unwrap_or(0) } else { 0 };
    let _ = sys::percpu(op::FREE, dynv, 8, 0);
    let lost = (want - sum_static.min(want)) + (want - sum_dyn.min(want));
    let extra = sum_static.saturating_sub(want) + sum_dyn.saturating_sub(want);
    let preempted = after.preemptions - before.preemptions;
    let migrations = (after.pulls - before.pulls) + (after.pushes - before.pushes);
    let mismatches = after.window_mismatches - before.window_mismatches;
    let errors = ERRORS.load(Ordering::Relaxed);
    let mut r = Record::new("percpu_stress");
    r.str("mode", mode)
        .u64("cpus", NCPUS.load(Ordering::Relaxed))
        .u64("tasks", started as u64)
        .u64("adds_each", want)
        .u64("sum_static", sum_static)
        .u64("sum_dynamic", sum_dyn)
        .u64("lost", lost)
        .u64("extra", extra)
        .u64("preempted", preempted)
        .u64("pulls", after.pulls - before.pulls)
        .u64("pushes", after.pushes - before.pushes)
        .u64("window_checks", after.window_checks - before.window_checks)
        .u64("window_mismatches", mismatches)
        .bool("canaries_ok", canaries)
        .hex("late_map_seen", late)
        .u64("shootdowns", shootdowns)
        .hex("remap_seen", remap)
        .u64("call_errors", errors)
        .u64("bad_exits", bad_exits)
        .u64("ms", ns / 1_000_000);
    user::println!("{r}");
    let mut ok = true;
    let mut why = |c: bool, s: &str| {
        if !c {
            user::println!("percpu: {mode}: {s}");
            ok = false;
        }
    };
    why(started as u64 == tasks && bad_exits == 0 && errors == 0, "a task did not start, failed a call or exit 0");
    why(lost == 0 && extra == 0, "the sums are not exact: updates were lost or doubled");
    why(canaries, "a canary of a per-CPU area changed");
    why(mismatches == 0, "the window showed another CPU's area on a tick");
    why(late == online, "a page mapped after boot was not read right on every CPU");
    why(shot == NCPUS.load(Ordering::Relaxed) && shootdowns == shot, "a CPU did not answer the TLB shootdown IPI");
    why(tables == 0 || remap == online, "a CPU read a remapped window page's old frame after the shootdown");
    why(preempted > 0, "no task was preempted inside the kernel");
    why(online == 1 || migrations > 0, "no task migrated");
    ok
}

fn run(args: &str) -> i32 {
    let ncpus = sys::sysctl(user::sysctl::NCPUS, abi::syscall::SYSCTL_GET).unwrap_or(1).max(1);
    NCPUS.store(ncpus, Ordering::Relaxed);
    let tasks = arg(args, "tasks").unwrap_or(3 * ncpus).clamp(1, MAX_TASKS as u64);
    if let Some(r) = arg(args, "rounds") {
        ROUNDS.store(r.max(1), Ordering::Relaxed);
    }
    if let Some(k) = arg(args, "iters") {
        ITERS.store(k.max(1), Ordering::Relaxed);
    }
    let modes = abi::programs::text(args, "modes").unwrap_or("base/window");
    let was = sys::percpu(op::SET_TABLES, 1, 0, 0).unwrap_or(1);
    let mut ok = true;
    for m in modes.split('/') {
        ok &= run_mode(m, tasks);
    }
    let _ = sys::percpu(op::SET_TABLES, was, 0, 0);
    if ok {
        0
    } else {
        1
    }
}
