//! `test=percpu`: the this_cpu API on every CPU, in both modes, and a late kernel mapping seen
//! by every CPU.
//!
//! * Each mode (the shared root with the baseline ops; the per-CPU roots with the baseline and
//!   the window ops): every CPU at once runs write / read / inc / add / cmpxchg (a failing and
//!   a succeeding one) on a static and a dynamic variable with values of its own, then each
//!   CPU's copy (read through the global mapping) must hold exactly what its own CPU's ops
//!   left: an op that reached another CPU's copy shows there.
//! * A page mapped after boot at a top-level slot no root had ([`late_map`]) must read right on
//!   every CPU (its root got the entry from `tables::sync_roots`).
//! * Every area's canaries.

use super::{base, window, PerCpu};
use crate::work;
use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The two variables the API test uses (offsets), and the failures it found.
static VARS: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];
static FAILS: AtomicU64 = AtomicU64::new(0);
static FIRST_FAIL: spin::Mutex<Option<String>> = spin::Mutex::new(None);
/// Which ops: 0 = baseline, 1 = window, 2 = the mode's (`this_cpu_*`).
static OPS: AtomicUsize = AtomicUsize::new(0);

fn fail(msg: String) {
    FAILS.fetch_add(1, Ordering::Relaxed);
    FIRST_FAIL.lock().get_or_insert(msg);
}

fn expected(cpu: usize) -> u64 {
    let own = 1000 * (cpu as u64 + 1);
    // write own, inc, add 5, cmpxchg(wrong) no-op, cmpxchg(own + 6 -> own + 60).
    own + 60
}

fn api_on_this_cpu(_idx: usize, _n: usize) {
    let cpu = crate::arch::cpu::this_cpu();
    type Ops = (
        fn(PerCpu<u64>) -> u64,
        fn(PerCpu<u64>, u64),
        fn(PerCpu<u64>),
        fn(PerCpu<u64>, u64),
        fn(PerCpu<u64>, u64, u64) -> u64,
    );
    let (read, write, inc, add, cmpxchg): Ops = match OPS.load(Ordering::Relaxed) {
        1 => (window::read, window::write, window::inc, window::add, window::cmpxchg),
        2 => (
            super::this_cpu_read,
            super::this_cpu_write,
            super::this_cpu_inc,
            super::this_cpu_add,
            super::this_cpu_cmpxchg,
        ),
        _ => (base::read, base::write, base::inc, base::add, base::cmpxchg),
    };
    for v in &VARS {
        let v: PerCpu<u64> = PerCpu::at(v.load(Ordering::Relaxed));
        let own = 1000 * (cpu as u64 + 1);
        write(v, own);
        let r = read(v);
        if r != own {
            fail(format!("CPU {cpu}: wrote {own}, read {r} (offset {:#x})", v.offset()));
        }
        inc(v);
        add(v, 5);
        let was = cmpxchg(v, own, 1);
        if was != own + 6 {
            fail(format!("CPU {cpu}: failing cmpxchg saw {was}, want {}", own + 6));
        }
        let was = cmpxchg(v, own + 6, own + 60);
        if was != own + 6 {
            fail(format!("CPU {cpu}: cmpxchg saw {was}, want {}", own + 6));
        }
    }
}

fn install_on_this_cpu(_idx: usize, _n: usize) {
    super::tables::install(crate::arch::cpu::this_cpu(), super::tables_on());
}

/// Runs the test on every CPU `work::run_everywhere` has.
pub fn run() -> Result<(), String> {
    let n = work::cpus();
    let dynamic = super::alloc(8)?;
    VARS[0].store(super::static_counter(5).offset() as usize, Ordering::Relaxed);
    VARS[1].store(dynamic.offset() as usize, Ordering::Relaxed);
    let was_on = super::tables_on();
    let mut report = String::new();
    for (tables, ops) in [(false, 0), (true, 0), (true, 1), (false, 2), (true, 2)] {
        super::TABLES_ON.store(tables, Ordering::Release);
        work::run_everywhere(n, install_on_this_cpu)?;
        OPS.store(ops, Ordering::Relaxed);
        work::run_everywhere(n, api_on_this_cpu)?;
        for v in &VARS {
            let v: PerCpu<u64> = PerCpu::at(v.load(Ordering::Relaxed));
            for c in 0..super::cpus() {
                // SAFETY: every CPU's copy is mapped through its area.
                let got = unsafe { v.on(c).read_volatile() };
                let want = if c < n { expected(c) } else { 0 };
                if got != want && c < n {
                    fail(format!(
                        "tables {tables}, {} ops: CPU {c}'s copy at offset {:#x} holds {got}, want {want}",
                        ["baseline", "window", "this_cpu"][ops],
                        v.offset()
                    ));
                }
                // SAFETY: as above.
                unsafe { v.on(c).write_volatile(0) };
            }
        }
        report += &format!(" {}/{}", if tables { "roots" } else { "shared" }, ["base", "window", "this_cpu"][ops]);
    }
    super::TABLES_ON.store(was_on, Ordering::Release);
    work::run_everywhere(n, install_on_this_cpu)?;
    super::free(dynamic, 8);
    // The late mapping, seen from every CPU on its own root.
    super::TABLES_ON.store(true, Ordering::Release);
    work::run_everywhere(n, install_on_this_cpu)?;
    let seen = super::late_map()?;
    let seen_by = {
        static SEEN: AtomicU64 = AtomicU64::new(0);
        SEEN.store(0, Ordering::Relaxed);
        work::run_everywhere(n, |_, _| {
            if super::late_read() {
                SEEN.fetch_or(1 << crate::arch::cpu::this_cpu(), Ordering::Relaxed);
            }
        })?;
        SEEN.load(Ordering::Relaxed)
    };
    super::TABLES_ON.store(was_on, Ordering::Release);
    work::run_everywhere(n, install_on_this_cpu)?;
    super::check_canaries()?;
    let fails = FAILS.load(Ordering::Relaxed);
    let all = (1u64 << n) - 1;
    let mut r = abi::report::Record::new("percpu_api");
    r.u64("cpus", n as u64)
        .str("modes", report.trim())
        .u64("failures", fails)
        .hex("late_map_seen", seen_by)
        .u64("root_syncs", super::tables::SYNCED.load(Ordering::Relaxed));
    rt::println!("{r}");
    if let Some(f) = FIRST_FAIL.lock().take() {
        return Err(format!("percpu: {fails} failures; first: {f}"));
    }
    let _ = seen;
    if seen_by != all {
        return Err(format!(
            "percpu: a page mapped after boot at {:#x} was read right only by CPUs {seen_by:#x} of {all:#x}",
            super::LATE_VA
        ));
    }
    rt::println!("kernel: percpu: this_cpu ops hit only their own CPU's copy in every mode; the late mapping is seen by all {n} CPUs");
    Ok(())
}
