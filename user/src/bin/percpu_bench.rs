//! `cargo xtask bench percpu`: per-CPU data through TPIDR_EL1 with a preemption guard (the
//! baseline, `percpu_tables` off) against the fixed-VA window on per-CPU roots (on), both in
//! one boot, interleaved round by round (the order alternates), `rounds=N` rounds (default 20; 3
//! under `-icount`, where counts are exact).
//!
//! Rows, each in both modes with the window's ratio to the baseline:
//!
//! * `this_cpu_add`, `this_cpu_cmpxchg`: 10,000 ops in the kernel with IRQs masked; per op, the
//!   instructions net of an empty loop of the same length (exact under `--icount`), the time of
//!   the whole loop;
//! * `context switch`: two tasks bound to one CPU yielding to each other, per switch
//!   (instructions of that CPU, both tasks and the kernel);
//! * `counter storm`: 3 tasks per CPU, all started on CPU 0, adding to a per-CPU counter in the
//!   kernel with IRQs on while the tick preempts them and they change CPUs; per add;
//! * `task create/exit + percpu alloc`: a task on the caller's CPU that allocates and frees 64
//!   bytes of dynamic per-CPU memory and exits, started and waited for, 8 in turn; per task;
//! * `syscall workload`: 2 tasks per CPU making 2000 short system calls each (yielding every
//!   50), the kernel counting each call and each switch with `this_cpu_inc`; per call;
//!
//! The multi-task rows (storm, create/exit, workload) are timed by the main task from start to
//! the last wait: under `-icount` their "instructions" are those of the main task's CPU over
//! that span, idle time included, i.e. virtual time, dominated by tick-driven scheduling (load
//! balancing, wake-ups); their wall-time figures are the meaningful ones.
//! * `memory`: page-table pages of the per-CPU roots and windows.
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::report::Record;
use abi::syscall::percpu::{self as op, bench_op, method};
use abi::syscall::ANY_CPU;
use core::sync::atomic::{AtomicU64, Ordering};
use user::stats::{ratio, Summary};
use user::{sys, sysctl, time};

user::entry!(run);

const MAX_ROUNDS: usize = 64;
const OPS: u64 = 10_000;
const YIELDS: u64 = 200;
const STORM_ITERS: u64 = 5000;
const STORM_ROUNDS: u64 = 4;
const CALLS: u64 = 2000;

/// Samples: [row][mode][round] of (ns, insns).
const ROWS: usize = 6;
const NAMES: [&str; ROWS] = [
    "this_cpu_add",
    "this_cpu_cmpxchg",
    "context switch",
    "counter storm",
    "task create/exit + percpu alloc",
    "syscall workload",
];
const UNITS: [&str; ROWS] = ["op", "op", "switch", "add", "task", "call"];
static mut NS: [[[u64; MAX_ROUNDS]; 2]; ROWS] = [[[0; MAX_ROUNDS]; 2]; ROWS];
static mut INSNS: [[[u64; MAX_ROUNDS]; 2]; ROWS] = [[[0; MAX_ROUNDS]; 2]; ROWS];

static NCPUS: AtomicU64 = AtomicU64::new(1);
static DYN: AtomicU64 = AtomicU64::new(0);
static FAILURES: AtomicU64 = AtomicU64::new(0);
/// The context-switch pair's measurement (ticks, insns) by its first task.
static SWITCH_T: AtomicU64 = AtomicU64::new(0);
static SWITCH_I: AtomicU64 = AtomicU64::new(0);
static PMU: AtomicU64 = AtomicU64::new(0);
static METHOD: AtomicU64 = AtomicU64::new(0);

fn check<T>(r: Result<T, i64>) -> Option<T> {
    if r.is_err() {
        FAILURES.fetch_add(1, Ordering::Relaxed);
    }
    r.ok()
}

fn insns() -> u64 {
    if PMU.load(Ordering::Relaxed) == 1 {
        time::instructions()
    } else {
        0
    }
}

/// `which` ops in the kernel: (ticks, insns) of OPS of them minus an empty loop.
fn op_cost(which: u64) -> (u64, u64) {
    let mut w = [0u64; 2];
    let mut e = [0u64; 2];
    check(sys::percpu(op::BENCH_OP, bench_op::EMPTY, OPS, e.as_mut_ptr() as u64));
    check(sys::percpu(op::BENCH_OP, which, OPS, w.as_mut_ptr() as u64));
    // Time: the whole loop (TCG's time for the loop's own instructions is not separable);
    // instructions: net of the empty loop (exact under -icount).
    (time::ticks_to_ns(w[1]), w[0].saturating_sub(e[0]))
}

extern "C" fn yielder(k: u64) -> ! {
    // Both on the last CPU for good (load balancing would otherwise pull one away).
    check(sys::percpu(op::AFFINITY, 1 << (NCPUS.load(Ordering::Relaxed) - 1), 0, 0));
    sys::yield_now();
    let (t0, i0) = (time::counter(), insns());
    for _ in 0..YIELDS {
        sys::yield_now();
    }
    if k == 0 {
        SWITCH_T.store(time::counter() - t0, Ordering::Relaxed);
        SWITCH_I.store(insns().wrapping_sub(i0), Ordering::Relaxed);
    }
    sys::exit(0)
}

extern "C" fn stormer(id: u64) -> ! {
    let ncpus = NCPUS.load(Ordering::Relaxed);
    let m = METHOD.load(Ordering::Relaxed);
    for r in 0..STORM_ROUNDS {
        check(sys::percpu(op::ADD_LOOP, DYN.load(Ordering::Relaxed), STORM_ITERS, m));
        if ncpus > 1 && r % 2 == 0 {
            let _ = sys::percpu(op::AFFINITY, 1 << ((id + r) % ncpus), 0, 0);
        } else {
            let _ = sys::percpu(op::AFFINITY, u64::MAX, 0, 0);
        }
    }
    sys::exit(0)
}

extern "C" fn allocator(_: u64) -> ! {
    if let Some(h) = check(sys::percpu(op::ALLOC, 64, 0, 0)) {
        check(sys::percpu(op::FREE, h, 64, 0));
    }
    sys::exit(0)
}

extern "C" fn caller(_: u64) -> ! {
    for i in 0..CALLS {
        sys::getcpu();
        if i % 50 == 49 {
            sys::yield_now();
        }
    }
    sys::exit(0)
}

/// Starts `n` tasks of `entry` (on `cpu`), waits for all; (ticks, insns of this CPU).
fn run_tasks(entry: extern "C" fn(u64) -> !, n: u64, cpu: impl Fn(u64) -> u64) -> (u64, u64) {
    let mut tids = [0u64; 64];
    let (t0, i0) = (time::counter(), insns());
    for (k, t) in tids.iter_mut().enumerate().take(n as usize) {
        *t = check(user::thread::spawn(entry, k as u64, cpu(k as u64))).unwrap_or(0);
    }
    for &t in &tids[..n as usize] {
        if t != 0 && sys::wait(t) != Ok(0) {
            FAILURES.fetch_add(1, Ordering::Relaxed);
        }
    }
    (time::counter() - t0, insns().wrapping_sub(i0))
}

/// One round of every row in mode `m` (0 base, 1 window); samples per unit.
fn round(m: usize) -> [(u64, u64); ROWS] {
    check(sys::percpu(op::SET_TABLES, m as u64, 0, 0));
    let ncpus = NCPUS.load(Ordering::Relaxed);
    let (add, cmpxchg) = if m == 1 {
        (bench_op::WINDOW_ADD, bench_op::WINDOW_CMPXCHG)
    } else {
        (bench_op::BASE_ADD, bench_op::BASE_CMPXCHG)
    };
    let mut out = [(0, 0); ROWS];
    out[0] = op_cost(add);
    out[1] = op_cost(cmpxchg);
    let pin = ncpus - 1;
    run_tasks(yielder, 2, |_| pin);
    let (t, i) = (SWITCH_T.load(Ordering::Relaxed), SWITCH_I.load(Ordering::Relaxed));
    out[2] = (time::ticks_to_ns(t), i);
    // Under -icount (instructions counted) with several CPUs the rows with tasks that start and end are left
    // out: QEMU 7.2's single-threaded -icount loop stalls for good when one vCPU spins on a lock
    // whose holder issued a broadcast TLBI (seen with tasks exiting and starting on different
    // CPUs: kernel-stack vfree vs vmalloc), and their "instructions" would be the virtual time
    // of cross-CPU wake-ups (an idle vCPU's clock warps to its next timer). Their wall figures
    // are the meaningful ones.
    let icount = PMU.load(Ordering::Relaxed) == 1 && ncpus > 1;
    METHOD.store(if m == 1 { method::WINDOW } else { method::BASE }, Ordering::Relaxed);
    if !icount {
        let n = 3 * ncpus;
        let (t, i) = run_tasks(stormer, n, |_| if ncpus > 1 { 0 } else { ANY_CPU });
        out[3] = (time::ticks_to_ns(t), i);
    }
    let (mut t, mut i) = (0u64, 0u64);
    let here = sys::getcpu();
    if !icount {
        for _ in 0..8 {
            let (dt, di) = run_tasks(allocator, 1, |_| here);
            (t, i) = (t + dt, i.wrapping_add(di));
        }
        out[4] = (time::ticks_to_ns(t), i);
    }
    if !icount {
        let (t, i) = run_tasks(caller, 2 * ncpus, |_| ANY_CPU);
        out[5] = (time::ticks_to_ns(t), i);
    }
    out
}

/// Units each row's sample covers (to report per unit).
fn units(row: usize, ncpus: u64) -> u64 {
    match row {
        0 | 1 => OPS,
        2 => 2 * YIELDS,
        3 => 3 * ncpus * STORM_ROUNDS * STORM_ITERS,
        4 => 8,
        _ => 2 * ncpus * CALLS,
    }
}

fn run(args: &str) -> i32 {
    let ncpus = sys::sysctl(sysctl::NCPUS, abi::syscall::SYSCTL_GET).unwrap_or(1).max(1);
    NCPUS.store(ncpus, Ordering::Relaxed);
    // Instructions are only counted under -icount (QEMU's PMU counts none otherwise, though
    // EL0 may read the counter): there every count is exact and repeatable (and QEMU runs the
    // vCPUs one at a time, slowly), so a few rounds are enough.
    let el0 = sys::sysctl(sysctl::PMU_EL0, abi::syscall::SYSCTL_GET).unwrap_or(0) == 1;
    let mut probe = [0u64; 2];
    check(sys::percpu(op::BENCH_OP, bench_op::EMPTY, OPS, probe.as_mut_ptr() as u64));
    let pmu = (el0 && probe[0] != 0) as u64;
    PMU.store(pmu, Ordering::Relaxed);
    let rounds =
        abi::programs::uint(args, "rounds").map_or(if pmu == 1 { 3 } else { 20 }, |r| r as usize).clamp(1, MAX_ROUNDS);
    let Some(d) = check(sys::percpu(op::ALLOC, 8, 0, 0)) else {
        user::println!("percpu_bench: no dynamic per-CPU variable");
        return 2;
    };
    DYN.store(d, Ordering::Relaxed);
    let was = sys::percpu(op::SET_TABLES, 1, 0, 0).unwrap_or(1);
    user::println!("percpu_bench: {rounds} rounds on {ncpus} CPUs, baseline and window interleaved");
    // SAFETY: this single-threaded part of the program owns the sample arrays.
    let (ns, ins) = unsafe { (&mut *core::ptr::addr_of_mut!(NS), &mut *core::ptr::addr_of_mut!(INSNS)) };
    for r in 0..rounds {
        for k in 0..2 {
            let m = (k + r) % 2;
            let s = round(m);
            for row in 0..ROWS {
                ns[row][m][r] = s[row].0;
                ins[row][m][r] = s[row].1;
            }
        }
    }
    let _ = sys::percpu(op::SET_TABLES, was, 0, 0);
    for row in 0..ROWS {
        if ns[row][0][..rounds].iter().all(|&x| x == 0) {
            continue; // not run (see `round`)
        }
        let u = units(row, ncpus);
        let mut med = [(Summary::default(), Summary::default()); 2];
        for (m, x) in med.iter_mut().enumerate() {
            *x = (Summary::of(&mut ns[row][m][..rounds]), Summary::of(&mut ins[row][m][..rounds]));
        }
        for (m, mode) in ["base", "window"].iter().enumerate() {
            let (s, i) = med[m];
            let (per_ns, per_insns) = (s.median as f64 / u as f64, i.median as f64 / u as f64);
            let mut case = user::io::Text::<64>::new();
            let _ = core::fmt::Write::write_fmt(&mut case, format_args!("{}, {mode}", NAMES[row]));
            let mut rec = Record::new("bench");
            rec.str("bench", "percpu")
                .str("case", case.as_str())
                .str("mode", mode)
                .u64("cpus", ncpus)
                .u64("n", s.n as u64)
                .str("per", UNITS[row])
                .f64("ns_per", per_ns, 3)
                .f64("insns_per", per_insns, 3)
                .u64("median_ns", s.median)
                .u64("p10_ns", s.p10)
                .u64("p90_ns", s.p90)
                .f64("spread", s.spread(), 3)
                .u64("median_insns", i.median)
                .f64("ratio_ns", ratio(s.median, med[0].0.median), 3)
                .f64("ratio_insns", ratio(i.median, med[0].1.median), 3);
            user::io::report(&rec);
        }
    }
    if let Ok(st) = sys::percpu_stats() {
        let mut rec = Record::new("bench");
        rec.str("bench", "percpu")
            .str("case", "memory, window")
            .str("mode", "window")
            .u64("cpus", ncpus)
            .u64("table_pages", st.table_pages)
            .u64("table_bytes", st.table_pages * 4096)
            .f64("table_pages_per_cpu", st.table_pages as f64 / ncpus as f64, 2)
            .u64("area_pages_per_cpu", st.area_pages)
            .u64("root_syncs", st.root_syncs);
        user::io::report(&rec);
    }
    let f = FAILURES.load(Ordering::Relaxed);
    if f > 0 {
        user::println!("percpu_bench: {f} calls failed");
        return 1;
    }
    0
}
